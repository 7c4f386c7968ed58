// What the PT-Scotch ranks share between their phases (ptscotch_partition.cpp): who a rank is,
// its slice of Scotch's distributed graph, and the balancing pass over it (ptscotch_balance.cpp).
#pragma once

#include <cstdint>
#include <vector>

// clang-format off
#include <mpi.h>
#include <stdio.h>  // scotch.h needs FILE first
#include <ptscotch.h>
// clang-format on

#include "model/tensor.hpp"

namespace degnn::ptscotch {

static_assert(sizeof(SCOTCH_Num) == sizeof(std::int32_t), "Debian's int32 Scotch is assumed");

struct rank_info {
  int rank = 0, ranks = 1;
  bool lead() const { return rank == 0; }
};

// Scotch's distributed graph of this rank's vertices: the symmetrized graph without self loops
// and repeats, as METIS sees it.
struct local_graph {
  std::int64_t first = 0;
  std::vector<SCOTCH_Num> vert;   ///< local CSR offsets, size local vertices + 1
  std::vector<SCOTCH_Num> edges;  ///< global neighbour ids
  std::int64_t vertices() const { return static_cast<std::int64_t>(vert.size()) - 1; }
};

/// The METIS path's balance on owner: train nodes (train_phase) or nodes; see the .cpp.
edge_offset balance(const local_graph& g, const std::vector<node_id>& train, int parts,
                    bool train_phase, const rank_info& me, std::vector<std::int32_t>& owner);

}  // namespace degnn::ptscotch
