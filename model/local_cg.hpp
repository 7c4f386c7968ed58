// Locality-aware computation graphs (LAMP, docs/design.md section 1): a shard expands the nodes it
// owns from its own in-edges only; a neighbour owned elsewhere stays a leaf whose value at that
// level is its historical embedding (level 0: its features). Forward and backward over such a
// graph, and the batch owner's top layer fed by partial neighbour sums.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/block.hpp"
#include "model/gnn_model.hpp"
#include "model/layers.hpp"
#include "model/partition_book.hpp"
#include "model/partition_store.hpp"
#include "model/sampler.hpp"

namespace degnn {

/// Levels: level k holds h^(k) (level 0 = input features); model layer k maps level k to k+1.
struct local_cg {
  int top_level = 0;                  ///< level of the targets
  std::vector<node_id> targets;       ///< owned nodes whose h^(top_level) is wanted, distinct
  std::vector<node_id> target_local;  ///< their local ids
  /// blocks[k] computes model layer k: dst = the owned nodes of level k+1, src = level k.
  std::vector<block> blocks;
  /// Per level k < top_level, per src row of blocks[k]: >= 0 is the row of blocks[k-1]'s output
  /// (or, at level 0, the owned node's local id); < 0 is -(1 + i) for remote_leaves[k][i].
  std::vector<std::vector<std::int32_t>> src_from;
  /// Per level k < top_level: global ids of the remote leaves, in row order.
  std::vector<std::vector<node_id>> remote_leaves;
};

/// Expands `targets` (all owned by part) down to level 0. fanouts are all L fanouts, seed-first;
/// level k nodes are sampled with fanouts[L - k] and the sampler's key (seed, step, L - k, node),
/// so a node's picks are those of the centralized pipeline. scratch: size >= num nodes, all -1.
/// local_bias < 1 samples a node with local and remote neighbours in two strata, the remote one
/// getting local_bias times its proportional share of the fanout (at least one pick); the
/// blocks then carry importance weights (block::edge_weight) that keep the mean unbiased.
local_cg expand_local(const graph_partition& part, const partition_book& book,
                      std::span<const node_id> targets, int top_level, std::span<const int> fanouts,
                      std::uint64_t seed, std::uint64_t step, std::vector<std::int32_t>& scratch,
                      double local_bias = 1.0);

/// The stratified pick behind local_bias: appends the picks of one node (remote neighbours are
/// those not owned by `part`) to `picks` and their importance weights to `weights`; returns the
/// number picked. fanout < 0 takes every neighbour.
std::int32_t pick_locality_biased(std::span<const node_id> neighbors, const partition_book& book,
                                  int part, int fanout, double local_bias, row_rng& rng,
                                  std::vector<node_id>& picks, std::vector<float>& weights);

/// What forward keeps for backward.
struct local_cg_state {
  std::vector<Matrix> outputs;  ///< per block: output after ReLU and dropout
  std::vector<Matrix> masks;    ///< per block: dropout mask (empty when not training)
  std::vector<layer_cache> caches;
  /// The first layer's cache when it ran on compressed feature rows (caches[0] is then unused).
  std::shared_ptr<sparse_layer_cache> sparse_first;
};

/// Rows of the targets at top_level (after ReLU and dropout, as the next layer consumes them).
/// leaves[k]: (remote_leaves[k].size(), width of level k) rows for level k's remote leaves —
/// features at level 0, historical embeddings (after ReLU, before dropout) above.
/// pre_dropout, when non-null, receives per block its output after ReLU and before dropout
/// (the values to write back as history). leaves is taken by value: its history rows get their
/// dropout in place (pass a temporary, and no row is copied for it).
Matrix forward_local_cg(const gnn_model& model, const local_cg& cg,
                        Eigen::Ref<const Matrix> local_features, std::vector<Matrix> leaves,
                        bool training, std::uint64_t dropout_seed, local_cg_state& state,
                        std::vector<Matrix>* pre_dropout = nullptr);

/// forward_local_cg on compressed feature rows (model/sparse_input.hpp): level 0's owned rows
/// come from local_features and its remote leaves' from leaf_features (in remote_leaves[0]
/// order); leaves[0] is not read. Throws std::invalid_argument when top_level is 0 (the targets'
/// own feature rows are not computed, and are not kept dense).
Matrix forward_local_cg(const gnn_model& model, const local_cg& cg,
                        const sparse_rows& local_features, const sparse_rows& leaf_features,
                        std::vector<Matrix> leaves, bool training, std::uint64_t dropout_seed,
                        local_cg_state& state, std::vector<Matrix>* pre_dropout = nullptr);

/// Accumulates the weight gradients of the local layers for grad_top = d loss / d output of
/// forward_local_cg (targets rows). Remote leaves are constants and get no gradient.
void backward_local_cg(gnn_model& model, const local_cg& cg, const local_cg_state& state,
                       Matrix grad_top);

/// The batch owner's last layer from self rows and one aggregate row per seed: seed i's only
/// "neighbour" is a virtual row holding agg_i (none when counts[i] is 0). GraphSAGE: logits
/// (B, C) = h_self W_self + agg W_neigh + b with agg_i the neighbour mean. GCN: the layer's
/// normalisation over that virtual block with degrees[i] the seed's full in-degree (see
/// model_replica::train_top_layer for the agg_i that gives the GCN of the sampled neighbours).
struct top_layer_state {
  block virtual_block;  ///< seed i's only "neighbour" is a virtual row holding agg_i
  layer_cache cache;
};
Matrix top_forward(const gnn_model& model, std::span<const node_id> seeds, const Matrix& h_self,
                   const Matrix& agg, std::span<const std::int32_t> counts, top_layer_state& state,
                   std::span<const std::int32_t> degrees = {});
/// Accumulates the last layer's weight gradients; returns d loss / d h_self and d loss / d agg.
void top_backward(gnn_model& model, const top_layer_state& state, const Matrix& grad_logits,
                  Matrix& grad_self, Matrix& grad_agg);

}  // namespace degnn
