// CG fusion on a shard (docs/design.md sections 1 and 5): which sub-graphs compute the nodes that a
// step's computation pushes name, where each push's rows sit in them, and the two moves between
// pushes and sub-graphs: gathering each target's partial neighbour sum from the sub-graphs'
// outputs, and scattering the gradients of those sums back onto the sub-graphs' targets.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "model/tensor.hpp"

namespace degnn {

/// One push as the receiving shard reads it (every node listed is owned by that shard).
struct push_view {
  std::span<const node_id> rows;         ///< nodes whose own row is wanted (the owner's seeds)
  std::span<const node_id> targets;      ///< the owner's seeds with neighbours here
  std::span<const std::int32_t> counts;  ///< per target: how many of `neighbors` are its
  std::span<const node_id> neighbors;    ///< concatenated per target
  /// Empty, or per entry of neighbors the factor its row enters the sum with (GCN: 1/sqrt of
  /// the neighbour's degree + 1); the gradient goes back with the same factor.
  std::span<const float> neighbor_scale = {};
};

/// Fusion levels: 0 one sub-graph per target (and per asked row), 1 one per push (nodes shared by
/// its targets computed once), 2 one for all pushes of a step.
enum class fusion_level : int { none = 0, per_push = 1, per_step = 2 };

/// A row of a sub-graph's targets: (sub-graph, row).
using graph_row = std::pair<std::int32_t, std::int32_t>;

struct push_plan {
  /// Per sub-graph: the owned nodes it computes (its targets), distinct, in first-use order
  /// (a push's rows before its neighbours, as the centralized batch orders seeds first).
  std::vector<std::vector<node_id>> graphs;
  /// Per push, per listed neighbour and per asked row: where its value is computed.
  std::vector<std::vector<graph_row>> neighbor_at, row_at;
};

/// Plans the sub-graphs of one step's pushes (in sender order). scratch: one entry per global
/// node, all -1; left all -1.
push_plan plan_pushes(std::span<const push_view> pushes, fusion_level level,
                      std::vector<std::int32_t>& scratch);

/// The answer to push p: sums (targets, width) of its targets' neighbours' rows (each times its
/// neighbor_scale, if any) and own_rows
/// (rows, width), read from outs[g] (sub-graph g's target rows).
void gather_partial_sums(const push_plan& plan, std::size_t p, const push_view& push,
                         const std::vector<Matrix>& outs, Eigen::Index width, Matrix& sums,
                         Matrix& own_rows);

/// The own rows (rows, width) push p asked for, in its order (gather_partial_sums's own_rows).
Matrix gather_own_rows(const push_plan& plan, std::size_t p, const std::vector<Matrix>& outs,
                       Eigen::Index width);

/// GAT's alternative to gather_partial_sums: the row (neighbors, width) of every listed
/// neighbour of push p, in the push's order (an attention partial weighs each one apart).
Matrix gather_neighbor_rows(const push_plan& plan, std::size_t p, const push_view& push,
                            const std::vector<Matrix>& outs, Eigen::Index width);

/// Per sub-graph, the gradient of its target rows: the sum over pushes (in push order) of each
/// target's partial-sum gradient (grads[p], (targets, width)) onto every neighbour it summed, and
/// of own_grads[p] ((rows, width), or empty) onto the asked rows. per_neighbor (GAT): grads[p]
/// is (neighbors, width) instead, each listed neighbour's own gradient.
std::vector<Matrix> scatter_gradients(const push_plan& plan, std::span<const push_view> pushes,
                                      std::span<const Matrix* const> grads,
                                      std::span<const Matrix* const> own_grads, Eigen::Index width,
                                      bool per_neighbor = false);

}  // namespace degnn
