// The piecewise GAT layer: the same arithmetic as gat_layer (its public pieces), split between
// the shards that hold the neighbours and the targets' owner.
#include "model/gat_push.hpp"

#include <stdexcept>
#include <string>

namespace degnn {

gat_layer& pushed_gat_layer(gnn_model& model) {
  auto* layer = dynamic_cast<gat_layer*>(&model.layer(model.num_layers() - 1));
  if (!layer) throw std::invalid_argument("the model's last layer is not a GAT layer");
  return *layer;
}

attention_partial gat_push_forward(const gat_layer& layer, std::vector<std::int64_t> indptr,
                                   std::vector<std::int32_t> src, Matrix rows, const Matrix& er,
                                   std::span<const node_id> target_ids,
                                   std::span<const node_id> row_ids,
                                   const std::uint64_t* attention_seed, gat_push_cache& cache) {
  const auto targets = static_cast<Eigen::Index>(indptr.size()) - 1;
  if (targets < 0 || er.rows() != targets || er.cols() != layer.heads() ||
      static_cast<Eigen::Index>(target_ids.size()) != targets)
    throw std::invalid_argument("gat_push_forward: er or the target ids do not fit the targets");
  if (rows.cols() != layer.in_dim() || static_cast<Eigen::Index>(row_ids.size()) != rows.rows())
    throw std::invalid_argument("gat_push_forward: rows are not (ids, in_dim)");
  if (attention_seed && layer.input_dropout() > 0.0f)
    throw std::invalid_argument(
        "gat_push_forward: input dropout is not split (only a model's first layer has it, and "
        "the push runs its last)");
  cache.indptr = std::move(indptr);
  cache.src = std::move(src);
  cache.rows = std::move(rows);
  cache.z.noalias() = cache.rows * layer.weight;
  Matrix el, unused_er;
  layer.attention_terms(cache.z, 0, el, unused_er);
  layer.edge_scores(cache.indptr, cache.src, el, er, target_ids, row_ids, attention_seed,
                    cache.score, cache.keep);
  return attend_partial(edges_of(cache.indptr, cache.src, cache.score, cache.keep), cache.z);
}

void gat_push_backward(gat_layer& layer, const gat_push_cache& cache,
                       const attention_partial& merged, const Matrix& heads_out,
                       const Matrix& grad_heads, Matrix& grad_rows, Matrix& grad_er) {
  Matrix grad_z;
  grad_er = layer.edges_backward(edges_of(cache.indptr, cache.src, cache.score, cache.keep),
                                 cache.z, merged, heads_out, grad_heads, grad_z);
  layer.grad_weight.noalias() += cache.rows.transpose() * grad_z;  // (in, H*F)
  grad_rows.noalias() = grad_z * layer.weight.transpose();         // (n, in)
}

bool merged_softmax_fits(const gat_push_cache& cache, const attention_partial& merged) {
  const auto targets = static_cast<Eigen::Index>(cache.indptr.size()) - 1;
  const Eigen::Index heads = cache.score.cols();
  if (targets < 0 || merged.max.rows() != targets || merged.sum.rows() != targets ||
      (targets > 0 && (merged.max.cols() != heads || merged.sum.cols() != heads)))
    return false;
  if (targets > 0 && !(merged.sum.array() >= 1.0f).all()) return false;  // NaN fails too
  for (Eigen::Index t = 0; t < targets; ++t) {
    for (auto k = cache.indptr[static_cast<size_t>(t)];
         k < cache.indptr[static_cast<size_t>(t) + 1]; ++k) {
      if (!(merged.max.row(t).array() >= cache.score.row(static_cast<Eigen::Index>(k)).array())
               .all())
        return false;
    }
  }
  return true;
}

gat_push_gradients gat_push_backward_apart(const gat_layer& layer, const gat_push_cache& cache,
                                           const attention_partial& merged, const Matrix& heads_out,
                                           const Matrix& grad_heads) {
  gat_layer scratch = layer;  // the weights and shapes; its gradients start at zero
  scratch.grad_weight.setZero();
  scratch.grad_attn_l.setZero();
  gat_push_gradients out;
  gat_push_backward(scratch, cache, merged, heads_out, grad_heads, out.rows, out.er);
  out.weight = std::move(scratch.grad_weight);
  out.attn_l = std::move(scratch.grad_attn_l);
  return out;
}

void gat_push_gradients::add_to(gat_layer& layer) const {
  layer.grad_weight += weight;
  layer.grad_attn_l += attn_l;
}

Matrix gat_top_begin(const gat_layer& layer, const Matrix& h_self, gat_top_state& state) {
  if (h_self.cols() != layer.in_dim())
    throw std::invalid_argument("gat_top_begin: the targets' rows are not in_dim wide");
  if (layer.input_dropout() > 0.0f)
    throw std::invalid_argument(
        "gat_top_begin: input dropout is not split (only a model's first layer has it, and the "
        "push runs its last)");
  state.input = h_self;
  state.z.noalias() = state.input * layer.weight;
  layer.attention_terms(state.z, state.z.rows(), state.el, state.er);
  return state.er;
}

Matrix gat_top_finish(const gat_layer& layer, std::span<const node_id> target_ids,
                      const attention_partial* shards, const std::uint64_t* attention_seed,
                      gat_top_state& state) {
  const Eigen::Index targets = state.z.rows();
  if (static_cast<Eigen::Index>(target_ids.size()) != targets)
    throw std::invalid_argument("gat_top_finish: one id per target expected");
  state.indptr.resize(static_cast<size_t>(targets) + 1);
  state.src.resize(static_cast<size_t>(targets));
  for (Eigen::Index v = 0; v <= targets; ++v)
    state.indptr[static_cast<size_t>(v)] = v;
  for (Eigen::Index v = 0; v < targets; ++v)
    state.src[static_cast<size_t>(v)] = static_cast<std::int32_t>(v);
  layer.edge_scores(state.indptr, state.src, state.el, state.er, target_ids, target_ids,
                    attention_seed, state.score, state.keep);
  state.merged =
      attend_partial(edges_of(state.indptr, state.src, state.score, state.keep), state.z);
  if (shards) merge_partials(state.merged, *shards);
  state.heads_out = finish_attention(state.merged);
  Matrix out;
  layer.combine_heads(state.heads_out, out);
  state.merged.value.resize(0, 0);  // the backward needs the max and sum only
  return out;
}

Matrix gat_top_backward(gat_layer& layer, const Matrix& grad_out) {
  if (grad_out.cols() != layer.out_dim())
    throw std::invalid_argument("gat_top_backward: the gradient is not out_dim wide");
  return layer.split_gradient(grad_out);
}

void gat_top_backward_finish(gat_layer& layer, const gat_top_state& state, const Matrix& grad_heads,
                             const Matrix& shards_grad_er, Matrix& grad_h_self) {
  if (shards_grad_er.rows() != state.z.rows() || shards_grad_er.cols() != layer.heads())
    throw std::invalid_argument("gat_top_backward_finish: the shards' grad_er is not (targets, H)");
  Matrix grad_z;
  Matrix grad_er = layer.edges_backward(edges_of(state.indptr, state.src, state.score, state.keep),
                                        state.z, state.merged, state.heads_out, grad_heads, grad_z);
  grad_er += shards_grad_er;
  layer.er_backward(grad_er, state.z, grad_z);
  layer.grad_weight.noalias() += state.input.transpose() * grad_z;
  grad_h_self.noalias() = grad_z * layer.weight.transpose();
}

}  // namespace degnn
