// Partitioning with PT-Scotch over MPI (`mpirun -n R degnn partition --method ptscotch`): each rank
// reads 1/R of the edge array, the ranks build Scotch's distributed graph and cut it, balance the
// train nodes and the nodes as the METIS path does, and rank r writes parts r, r+R, ...: no
// process ever holds the whole graph.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "model/partitioner.hpp"

namespace degnn {

struct ptscotch_settings {
  std::filesystem::path data;  ///< a dataset in the NumPy layout (float32 node_feat.npy)
  std::filesystem::path out;
  int parts = 2;
  std::uint64_t seed = 1;
  /// Scotch's strategy flags: "quality" (SCOTCH_STRATQUALITY), "default", "speed" or
  /// "scalability" (less memory, a larger cut).
  std::string strategy = "quality";
};

/// What rank 0 reports of a run (the other ranks get an empty `quality`).
struct ptscotch_report {
  int rank = 0, ranks = 1;
  std::string dataset;
  node_id num_nodes = 0;
  partition_quality quality;  ///< of the written parts (in-edges as the parts store them)
  edge_offset moved_train = 0, moved_other = 0;  ///< nodes the balancing pass moved
  double read_s = 0, partition_s = 0, balance_s = 0, write_s = 0;
  std::vector<double> peak_rss_mib;  ///< per rank
};

/// True when this build has PT-Scotch and MPI (else run_ptscotch_partition throws saying so).
bool ptscotch_available();

/// Runs this rank's share; every rank of the MPI job calls it (it starts and ends MPI). Throws
/// config_error or data_error on bad input; an error on one rank ends the whole job (MPI_Abort)
/// after printing it, so no rank waits forever for a dead peer.
ptscotch_report run_ptscotch_partition(const ptscotch_settings& s);

}  // namespace degnn
