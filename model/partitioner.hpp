// Assigns every node of a graph to one of P partitions (its "owner"): METIS k-way with a node and a
// train-node balance constraint, as DistDGL does, or a seeded balanced random deal as the baseline.
// Also measures a partitioning: edge cut, halo sizes and balance.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "model/csr_graph.hpp"
#include "model/tensor.hpp"

namespace degnn {

enum class partition_method {
  metis,   ///< METIS_PartGraphKway on the symmetrized graph, then a rebalancing pass
  random,  ///< seeded permutation dealt round-robin, train and other nodes separately
};

/// "metis" / "random".
std::string_view to_string(partition_method m);
/// Inverse of to_string; throws std::invalid_argument naming the accepted values.
partition_method parse_partition_method(std::string_view name);

/// Balance target of both constraints: no part holds more than max(ceil(mean * 1.05), ceil(mean))
/// nodes, nor more than that many train nodes (mean over all parts).
inline constexpr double partition_balance_tolerance = 0.05;
std::int64_t partition_balance_limit(std::int64_t total, int parts);

/// Returns owner[v] in [0, parts) for every node v of g (size g.num_nodes).
/// g may be directed and may hold self loops: METIS sees the symmetrized graph without them.
/// train_nodes (ids < g.num_nodes, duplicates ignored) form the second balance constraint.
/// Deterministic for (g, train_nodes, parts, m, seed). METIS keeps a process-wide random state,
/// so do not run two METIS partitionings concurrently in one process.
/// Throws std::invalid_argument when parts < 1, parts > g.num_nodes or a train id is out of range.
std::vector<std::int32_t> partition_graph(const csr_graph& g, std::span<const node_id> train_nodes,
                                          int parts, partition_method m, std::uint64_t seed);

/// The balancing pass partition_graph runs after METIS, exposed for other owner vectors: moves
/// nodes from the heaviest to the lightest part (train counts first, then node counts, preferring
/// nodes with the most neighbours in the target part) until both counts of every part are within
/// partition_balance_limit, and no part is empty. Throws std::invalid_argument on bad arguments.
void rebalance_partition(const csr_graph& g, std::span<const node_id> train_nodes,
                         std::vector<std::int32_t>& owner, int parts);

/// Figures of merit of an owner vector over g.
struct partition_quality {
  int num_parts = 0;
  edge_offset num_edges = 0;
  edge_offset cut_edges = 0;   ///< CSR edges whose source and destination have different owners
  double cut_fraction = 0;     ///< cut_edges / num_edges (0 for an edgeless graph)
  std::vector<node_id> nodes;  ///< per part: owned nodes
  std::vector<node_id> train_nodes;  ///< per part: owned train nodes
  std::vector<node_id> halo;         ///< per part: distinct remote in-neighbours of owned nodes
  double node_imbalance = 0;         ///< max(nodes) / mean(nodes); 1 is perfect
  double train_imbalance = 0;  ///< max(train_nodes) / mean(train_nodes); 1 when no train nodes
};

/// cut_fraction and the two imbalances of q from its counts (for figures counted elsewhere, such
/// as by the ranks of a distributed partitioning).
void set_quality_ratios(partition_quality& q);

/// Throws std::invalid_argument when owner has the wrong size or an entry outside [0, parts).
partition_quality evaluate_partition(const csr_graph& g, std::span<const node_id> train_nodes,
                                     std::span<const std::int32_t> owner, int parts);

}  // namespace degnn
