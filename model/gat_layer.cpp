// GAT layer: the projection is one GEMM over every source row, the attention runs on the block's
// edges with each destination's self edge first, through model/attention's partial kernels (the
// decentralized pipeline merges the same partials across shards).
#include "model/gat_layer.hpp"

#include <stdexcept>
#include <string>

#include "model/attention.hpp"
#include "model/hashing.hpp"

namespace degnn {

gat_layer::gat_layer(std::int32_t in_dim, std::int32_t out_dim, std::int32_t heads, bool concat,
                     float attention_dropout, float input_dropout)
    : gnn_layer(in_dim, out_dim),
      heads_(heads),
      head_width_(concat ? (heads > 0 ? out_dim / heads : 0) : out_dim),
      concat_(concat),
      attention_dropout_(attention_dropout),
      input_dropout_(input_dropout) {
  if (heads <= 0) throw std::invalid_argument("gat_layer: heads must be > 0");
  if (concat && out_dim % heads != 0)
    throw std::invalid_argument("gat_layer: " + std::to_string(heads) +
                                " concatenated heads do not divide the width " +
                                std::to_string(out_dim));
  // Written so that NaN fails too.
  if (!(attention_dropout >= 0.0f && attention_dropout < 1.0f) ||
      !(input_dropout >= 0.0f && input_dropout < 1.0f))
    throw std::invalid_argument("gat_layer: attention and input dropout must be in [0, 1)");
  const std::int32_t hf = heads_ * head_width_;
  weight.setZero(in_dim, hf);
  grad_weight.setZero(in_dim, hf);
  attn_l.setZero(heads_, head_width_);
  attn_r.setZero(heads_, head_width_);
  grad_attn_l.setZero(heads_, head_width_);
  grad_attn_r.setZero(heads_, head_width_);
  bias.setZero(1, out_dim);
  grad_bias.setZero(1, out_dim);
}

void gat_layer::init(std::uint64_t seed) {
  glorot_uniform(weight, mix64(seed ^ 1));
  // Each head's attention vector as its own (F, 1) fan, as GAT's reference code initialises it.
  Matrix a(head_width_, 1);
  for (std::int32_t h = 0; h < heads_; ++h) {
    glorot_uniform(a, mix64(seed ^ (16 + 2 * static_cast<std::uint64_t>(h))));
    attn_l.row(h) = a.col(0).transpose();
    glorot_uniform(a, mix64(seed ^ (17 + 2 * static_cast<std::uint64_t>(h))));
    attn_r.row(h) = a.col(0).transpose();
  }
  bias.setZero();
}

void gat_layer::apply_rows(const block& b, const Matrix& h_src, std::span<const node_id> row_of,
                           Matrix& out, layer_cache* cache) const {
  check_input(b, h_src, row_of, "gat_layer");
  const std::int32_t ns = b.num_src();
  attention_cache local;
  attention_cache* c = &local;
  if (cache) {
    // A copied layer_cache (or layer) shares the pointer: give this one its own.
    if (!cache->attention || cache->attention.use_count() > 1)
      cache->attention = std::make_shared<attention_cache>();
    c = cache->attention.get();
  }
  // z (ns, H*F) = input W. A table is read through row_of: the rows are gathered once (the
  // backward needs them for the weight gradient anyway), as are rows to drop entries of.
  const bool drop_input = cache && input_dropout_ > 0.0f;
  if (row_of.empty() && !drop_input) {
    c->z.noalias() = h_src * weight;
    if (cache) c->input = h_src;
  } else {
    if (row_of.empty()) {
      c->input = h_src;
    } else {
      c->input.resize(ns, in_dim_);
      for (std::int32_t u = 0; u < ns; ++u)
        c->input.row(u) = h_src.row(row_of[static_cast<size_t>(u)]);
    }
    if (drop_input)
      dropout_forward_keyed(c->input, input_dropout_, mix64(cache->attention_seed ^ 0x1d7ULL),
                            b.src_nodes, c->input_mask);
    c->z.noalias() = c->input * weight;
  }
  if (!drop_input) c->input_mask.resize(0, 0);
  if (!cache) c->input.resize(0, 0);
  attend(b, *c, cache ? &cache->attention_seed : nullptr, out);
}

void gat_layer::attend(const block& b, attention_cache& c, const std::uint64_t* attention_seed,
                       Matrix& out) const {
  const std::int32_t nd = b.num_dst();
  const Matrix& z = c.z;
  if (z.rows() != b.num_src() || z.cols() != heads_ * head_width_)
    throw std::invalid_argument("gat_layer: the projected rows are not (num_src, H*F)");
  Matrix el, er;
  attention_terms(z, nd, el, er);
  // dst v's edges: itself first (GAT's neighbourhood includes the node), then its sampled
  // neighbours in block order.
  c.indptr.resize(static_cast<size_t>(nd) + 1);
  c.src.resize(static_cast<size_t>(b.num_edges()) + static_cast<size_t>(nd));
  c.indptr[0] = 0;
  for (std::int32_t v = 0; v < nd; ++v) {
    std::int64_t k = static_cast<std::int64_t>(b.indptr[v]) + v;
    c.src[static_cast<size_t>(k++)] = v;
    for (std::int32_t e = b.indptr[v]; e < b.indptr[v + 1]; ++e)
      c.src[static_cast<size_t>(k++)] = b.indices[static_cast<size_t>(e)];
    c.indptr[static_cast<size_t>(v) + 1] = k;
  }
  const std::span<const node_id> ids(b.src_nodes);
  edge_scores(c.indptr, c.src, el, er, ids.first(static_cast<size_t>(nd)), ids, attention_seed,
              c.score, c.keep);
  c.merged = attend_partial(edges_of(c.indptr, c.src, c.score, c.keep), z);
  c.heads_out = finish_attention(c.merged);  // (nd, H*F)
  combine_heads(c.heads_out, out);
  if (!attention_seed) return;
  c.merged.value.resize(0, 0);  // backward needs the max and sum only
}

void gat_layer::attention_terms(const Matrix& z, Eigen::Index er_rows, Matrix& el,
                                Matrix& er) const {
  const std::int32_t F = head_width_, H = heads_;
  el.resize(z.rows(), H);
  er.resize(er_rows, H);
  for (Eigen::Index u = 0; u < z.rows(); ++u)
    for (std::int32_t h = 0; h < H; ++h) {
      el(u, h) = z.row(u).segment(h * F, F).dot(attn_l.row(h));
      if (u < er_rows) er(u, h) = z.row(u).segment(h * F, F).dot(attn_r.row(h));
    }
}

void gat_layer::edge_scores(std::span<const std::int64_t> indptr, std::span<const std::int32_t> src,
                            const Matrix& el, const Matrix& er, std::span<const node_id> dst_ids,
                            std::span<const node_id> src_ids, const std::uint64_t* seed,
                            Matrix& score, Matrix& keep) const {
  const std::int32_t H = heads_;
  const auto targets = static_cast<std::int64_t>(indptr.size()) - 1;
  const auto edges = static_cast<Eigen::Index>(src.size());
  // Checked before any read: in the push the edges come from another process.
  if (targets < 0 || indptr.front() != 0 || indptr.back() != edges || er.rows() != targets ||
      er.cols() != H || el.cols() != H || static_cast<std::int64_t>(dst_ids.size()) != targets ||
      static_cast<Eigen::Index>(src_ids.size()) != el.rows())
    throw std::invalid_argument("gat_layer::edge_scores: edges, scores or ids do not fit");
  for (std::int64_t v = 0; v < targets; ++v)
    if (indptr[static_cast<size_t>(v) + 1] < indptr[static_cast<size_t>(v)])
      throw std::invalid_argument("gat_layer::edge_scores: indptr decreases at target " +
                                  std::to_string(v));
  for (std::int32_t u : src)
    if (u < 0 || u >= el.rows())
      throw std::invalid_argument("gat_layer::edge_scores: source row " + std::to_string(u) +
                                  " outside the rows");
  score.resize(edges, H);
  const bool drop = seed && attention_dropout_ > 0.0f;
  keep.resize(drop ? edges : 0, H);
  const float keep_scale = 1.0f / (1.0f - attention_dropout_);
  const auto drop_below =
      static_cast<std::uint32_t>(static_cast<double>(attention_dropout_) * 16777216.0);
  const std::uint64_t key = drop ? mix64(*seed) : 0;
#pragma omp parallel for schedule(dynamic, 64)
  for (std::int64_t v = 0; v < targets; ++v) {
    const auto dst_id = static_cast<std::uint32_t>(dst_ids[static_cast<size_t>(v)]);
    for (std::int64_t k = indptr[static_cast<size_t>(v)]; k < indptr[static_cast<size_t>(v) + 1];
         ++k) {
      const std::int32_t u = src[static_cast<size_t>(k)];
      for (std::int32_t h = 0; h < H; ++h) {
        const float s = el(u, h) + er(v, h);
        score(k, h) = s > 0.0f ? s : negative_slope * s;
      }
      if (!drop) continue;
      // Keyed by (dst id, src id): the same edge is dropped wherever it is computed.
      const auto src_id = static_cast<std::uint32_t>(src_ids[static_cast<size_t>(u)]);
      const std::uint64_t edge_key =
          mix64(key ^ ((static_cast<std::uint64_t>(dst_id) << 32) | src_id));
      const auto base = static_cast<std::uint32_t>(edge_key ^ (edge_key >> 32));
      for (std::int32_t h = 0; h < H; ++h)
        keep(k, h) = (mix32(base + static_cast<std::uint32_t>(h) * 0x9e3779b9U) >> 8) < drop_below
                         ? 0.0f
                         : keep_scale;
    }
  }
}

void gat_layer::combine_heads(const Matrix& heads_out, Matrix& out) const {
  const std::int32_t F = head_width_, H = heads_;
  if (concat_) {
    out = heads_out;
  } else {
    out = heads_out.middleCols(0, F);
    for (std::int32_t h = 1; h < H; ++h)
      out += heads_out.middleCols(h * F, F);
    out *= 1.0f / static_cast<float>(H);
  }
  out.rowwise() += bias.row(0);
}

Matrix gat_layer::split_gradient(const Matrix& grad_out) {
  const std::int32_t F = head_width_, H = heads_;
  grad_bias += grad_out.colwise().sum();
  if (concat_) return grad_out;
  // The mean hands each head 1/H of the gradient.
  Matrix grad_heads(grad_out.rows(), H * F);
  for (std::int32_t h = 0; h < H; ++h)
    grad_heads.middleCols(h * F, F) = grad_out * (1.0f / static_cast<float>(H));
  return grad_heads;
}

Matrix gat_layer::score_backward(const attention_edges& e, std::span<const std::int64_t> tindptr,
                                 std::span<const std::int64_t> tedge, Matrix grad_score,
                                 const Matrix& z, Matrix& grad_z) {
  const std::int32_t F = head_width_, H = heads_;
  const Matrix& score = *e.score;
  // Through the LeakyReLU (it keeps the sign, so the score's sign tells the slope).
  for (Eigen::Index k = 0; k < grad_score.rows(); ++k)
    for (std::int32_t h = 0; h < H; ++h)
      if (score(k, h) <= 0.0f) grad_score(k, h) *= negative_slope;
  // d loss / d el (rows, H): summed over each row's edges; d loss / d er (targets, H): over each
  // target's edges.
  const Eigen::Index rows = z.rows();
  const auto targets = static_cast<Eigen::Index>(e.indptr.size()) - 1;
  Matrix grad_el = Matrix::Zero(rows, H), grad_er = Matrix::Zero(targets, H);
#pragma omp parallel for schedule(dynamic, 256)
  for (Eigen::Index u = 0; u < rows; ++u)
    for (std::int64_t t = tindptr[u]; t < tindptr[u + 1]; ++t)
      grad_el.row(u) += grad_score.row(tedge[static_cast<size_t>(t)]);
  for (Eigen::Index v = 0; v < targets; ++v)
    for (std::int64_t k = e.indptr[v]; k < e.indptr[v + 1]; ++k)
      grad_er.row(v) += grad_score.row(k);
  for (std::int32_t h = 0; h < H; ++h)
    grad_attn_l.row(h).noalias() += grad_el.col(h).transpose() * z.middleCols(h * F, F);
  for (Eigen::Index u = 0; u < rows; ++u)
    for (std::int32_t h = 0; h < H; ++h)
      grad_z.row(u).segment(h * F, F) += grad_el(u, h) * attn_l.row(h);
  return grad_er;
}

void gat_layer::er_backward(const Matrix& grad_er, Eigen::Ref<const Matrix> z_rows,
                            Eigen::Ref<Matrix> grad_z_rows) {
  const std::int32_t F = head_width_, H = heads_;
  for (std::int32_t h = 0; h < H; ++h)
    grad_attn_r.row(h).noalias() += grad_er.col(h).transpose() * z_rows.middleCols(h * F, F);
  for (Eigen::Index v = 0; v < z_rows.rows(); ++v)
    for (std::int32_t h = 0; h < H; ++h)
      grad_z_rows.row(v).segment(h * F, F) += grad_er(v, h) * attn_r.row(h);
}

Matrix gat_layer::backward_to_z(const attention_cache& c, const Matrix& grad_out) {
  const auto nd = static_cast<std::int32_t>(c.indptr.size()) - 1;
  if (nd < 0 || grad_out.rows() != nd || grad_out.cols() != out_dim_)
    throw std::invalid_argument("gat_layer: grad_out does not fit the forward's destinations");
  const Matrix grad_heads = split_gradient(grad_out);  // (nd, H*F)
  Matrix grad_z;
  const Matrix grad_er = edges_backward(edges_of(c.indptr, c.src, c.score, c.keep), c.z, c.merged,
                                        c.heads_out, grad_heads, grad_z);
  er_backward(grad_er, c.z.topRows(nd), grad_z.topRows(nd));
  return grad_z;
}

Matrix gat_layer::edges_backward(const attention_edges& e, const Matrix& z,
                                 const attention_partial& merged, const Matrix& heads_out,
                                 const Matrix& grad_heads, Matrix& grad_z) {
  std::vector<std::int64_t> tindptr, tedge;
  transpose_attention_edges(e, static_cast<std::int32_t>(z.rows()), tindptr, tedge);
  grad_z = Matrix::Zero(z.rows(), z.cols());
  Matrix grad_score;
  attention_backward(e, z, merged, heads_out, grad_heads, tindptr, tedge, grad_score, grad_z);
  return score_backward(e, tindptr, tedge, std::move(grad_score), z, grad_z);
}

void gat_layer::backward(const block& b, const layer_cache& cache, const Matrix& grad_out,
                         Matrix* grad_src) {
  if (!cache.attention) throw std::logic_error("gat_layer::backward without a training forward");
  const attention_cache& c = *cache.attention;
  if (grad_out.rows() != b.num_dst() || c.z.rows() != b.num_src() ||
      static_cast<std::int64_t>(c.indptr.size()) != b.num_dst() + 1)
    throw std::invalid_argument("gat_layer::backward: grad_out or the cache do not fit the block");
  const Matrix grad_z = backward_to_z(c, grad_out);
  grad_weight.noalias() += c.input.transpose() * grad_z;  // (in, H*F)
  if (!grad_src) return;
  grad_src->noalias() = grad_z * weight.transpose();  // (ns, in)
  if (c.input_mask.size() > 0) dropout_backward(c.input_mask, *grad_src);
}

}  // namespace degnn
