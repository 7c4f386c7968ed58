// A GAT layer computed where its rows are (the decentralized push, docs/design.md section 2):
// each shard turns the neighbour rows it holds into attention partials for targets owned
// elsewhere, given the targets' er (a_r . z_v) that comes with the push; the targets' owner
// adds each target's own edge, merges, finishes the layer, and returns what each shard's
// backward needs. Together they compute gat_layer's forward and backward on the whole block.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/attention.hpp"
#include "model/gat_layer.hpp"
#include "model/gnn_model.hpp"

namespace degnn {

/// The layer the push splits: the model's last, which must be a GAT layer (std::invalid_argument
/// otherwise).
gat_layer& pushed_gat_layer(gnn_model& model);

/// What a shard keeps of its part for the backward.
struct gat_push_cache {
  std::vector<std::int64_t> indptr;  ///< targets + 1: target i's edges
  std::vector<std::int32_t> src;     ///< per edge, its row of `rows`
  Matrix rows;                       ///< (n, in) the layer's input rows the shard read
  Matrix z;                          ///< (n, H*F) = rows W
  Matrix score, keep;                ///< (edges, H)
};

/// Shard: the partial of every target over the shard's edges. Target i's neighbours are
/// rows[src[indptr[i] .. indptr[i+1])] (n, in); er (targets, H) comes from the owner;
/// target_ids and row_ids are global ids (the attention dropout's key). attention_seed null:
/// inference, nothing dropped.
attention_partial gat_push_forward(const gat_layer& layer, std::vector<std::int64_t> indptr,
                                   std::vector<std::int32_t> src, Matrix rows, const Matrix& er,
                                   std::span<const node_id> target_ids,
                                   std::span<const node_id> row_ids,
                                   const std::uint64_t* attention_seed, gat_push_cache& cache);

/// Shard backward, from what the owner returns (gat_top_state::merged and heads_out, and the
/// grad_heads of gat_top_backward): adds to layer's grad_weight and grad_attn_l, sets grad_rows
/// (n, in) = d loss / d rows and grad_er (targets, H) = d loss / d er, which goes back to the
/// owner.
void gat_push_backward(gat_layer& layer, const gat_push_cache& cache,
                       const attention_partial& merged, const Matrix& heads_out,
                       const Matrix& grad_heads, Matrix& grad_rows, Matrix& grad_er);

/// A shard's share of the layer's gradient kept apart from its replica: the shard adds the shares
/// of a step's pushes at its gradient phase, in sender order, so that the sum does not depend on
/// the order the owners' returns arrived in.
struct gat_push_gradients {
  Matrix weight, attn_l;  ///< d loss / d the layer's weight and attn_l through these edges
  Matrix rows;            ///< (n, in) d loss / d the rows
  Matrix er;              ///< (targets, H) d loss / d er, for the owner
  /// Adds weight and attn_l to the layer's gradients.
  void add_to(gat_layer& layer) const;
};

/// Whether a merged softmax (from another process) is one these edges can be part of: per target
/// and head, a sum of at least 1 (the largest score's own exp(0)) and a max no lower than any of
/// these edges' scores. The backward divides by the sum and takes exp(score - max), so anything
/// else could make it non-finite.
bool merged_softmax_fits(const gat_push_cache& cache, const attention_partial& merged);

/// gat_push_backward into a gat_push_gradients, leaving the layer as it is.
gat_push_gradients gat_push_backward_apart(const gat_layer& layer, const gat_push_cache& cache,
                                           const attention_partial& merged, const Matrix& heads_out,
                                           const Matrix& grad_heads);

/// The owner's part: the targets' own rows and edges, the merge, the heads.
struct gat_top_state {
  Matrix input;                      ///< (targets, in) the targets' own rows
  Matrix z;                          ///< (targets, H*F)
  Matrix el, er;                     ///< (targets, H)
  std::vector<std::int64_t> indptr;  ///< one self edge per target
  std::vector<std::int32_t> src;
  Matrix score, keep;        ///< (targets, H) of the self edges
  attention_partial merged;  ///< self and every shard's partial
  Matrix heads_out;          ///< (targets, H*F)
};

/// Owner, before the push: z and el, er of the targets' own rows h_self (targets, in); returns
/// er, which every shard holding neighbours of a target needs.
Matrix gat_top_begin(const gat_layer& layer, const Matrix& h_self, gat_top_state& state);

/// Owner, after the shards answered: the self edges' partial (dropout keyed like the layer's),
/// merged with `shards` (every shard's partial merged, or empty when none), finished and combined:
/// out (targets, out_dim) as gat_layer's forward gives it.
Matrix gat_top_finish(const gat_layer& layer, std::span<const node_id> target_ids,
                      const attention_partial* shards, const std::uint64_t* attention_seed,
                      gat_top_state& state);

/// Owner backward, first half: d loss / d heads' outputs (targets, H*F) from grad_out, which
/// the shards get with state.merged and state.heads_out; adds to grad_bias.
Matrix gat_top_backward(gat_layer& layer, const Matrix& grad_out);

/// Owner backward, second half, once every shard's grad_er is summed in shards_grad_er
/// (targets, H): the self edges' part, the targets' er, and grad_h_self (targets, in).
void gat_top_backward_finish(gat_layer& layer, const gat_top_state& state, const Matrix& grad_heads,
                             const Matrix& shards_grad_er, Matrix& grad_h_self);

}  // namespace degnn
