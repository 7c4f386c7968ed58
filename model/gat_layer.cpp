// GAT layer: the projection is one GEMM over every source row, the attention runs on the block's
// edges with each destination's self edge first, through model/attention's partial kernels (the
// decentralized pipeline merges the same partials across shards).
#include "model/gat_layer.hpp"

#include <stdexcept>
#include <string>

#include "model/attention.hpp"
#include "model/hashing.hpp"

namespace degnn {

struct attention_cache {
  Matrix input;                      ///< (num_src, in): the rows the forward read, dropped
  Matrix input_mask;                 ///< (num_src, in) input dropout factors, or empty
  Matrix z;                          ///< (num_src, H*F)
  std::vector<std::int64_t> indptr;  ///< num_dst + 1: dst v's edges, its self edge first
  std::vector<std::int32_t> src;     ///< source row of every edge
  Matrix score;                      ///< (edges, H) after the LeakyReLU
  Matrix keep;                       ///< (edges, H) attention dropout factors, or empty
  attention_partial merged;          ///< max and sum of every dst's softmax
  Matrix heads_out;                  ///< (num_dst, H*F) before the heads are combined
};

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
  if (attention_dropout < 0.0f || attention_dropout >= 1.0f || input_dropout < 0.0f ||
      input_dropout >= 1.0f)
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
  const std::int32_t ns = b.num_src(), nd = b.num_dst();
  const std::int32_t F = head_width_, H = heads_;
  attention_cache local;
  attention_cache* c = &local;
  if (cache) {
    if (!cache->attention) cache->attention = std::make_shared<attention_cache>();
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
  const Matrix& z = c->z;
  Matrix el(ns, H), er(nd, H);
  for (std::int32_t u = 0; u < ns; ++u)
    for (std::int32_t h = 0; h < H; ++h) {
      el(u, h) = z.row(u).segment(h * F, F).dot(attn_l.row(h));
      if (u < nd) er(u, h) = z.row(u).segment(h * F, F).dot(attn_r.row(h));
    }
  // dst v's edges: itself first (GAT's neighbourhood includes the node), then its sampled
  // neighbours in block order.
  c->indptr.resize(static_cast<size_t>(nd) + 1);
  c->src.resize(static_cast<size_t>(b.num_edges()) + static_cast<size_t>(nd));
  c->indptr[0] = 0;
  for (std::int32_t v = 0; v < nd; ++v) {
    std::int64_t k = b.indptr[v] + v;
    c->src[static_cast<size_t>(k++)] = v;
    for (std::int32_t e = b.indptr[v]; e < b.indptr[v + 1]; ++e)
      c->src[static_cast<size_t>(k++)] = b.indices[static_cast<size_t>(e)];
    c->indptr[static_cast<size_t>(v) + 1] = k;
  }
  const auto edges = static_cast<Eigen::Index>(c->src.size());
  c->score.resize(edges, H);
  const bool drop = cache && attention_dropout_ > 0.0f;
  c->keep.resize(drop ? edges : 0, H);
  const float keep_scale = 1.0f / (1.0f - attention_dropout_);
  const auto drop_below =
      static_cast<std::uint32_t>(static_cast<double>(attention_dropout_) * 16777216.0);
  const std::uint64_t key = cache ? mix64(cache->attention_seed) : 0;
#pragma omp parallel for schedule(dynamic, 64)
  for (std::int32_t v = 0; v < nd; ++v) {
    const auto dst_id = static_cast<std::uint32_t>(b.src_nodes[static_cast<size_t>(v)]);
    for (std::int64_t k = c->indptr[v]; k < c->indptr[v + 1]; ++k) {
      const std::int32_t u = c->src[static_cast<size_t>(k)];
      for (std::int32_t h = 0; h < H; ++h) {
        const float s = el(u, h) + er(v, h);
        c->score(k, h) = s > 0.0f ? s : negative_slope * s;
      }
      if (!drop) continue;
      // Keyed by (dst id, src id): the same edge is dropped wherever it is computed.
      const auto src_id = static_cast<std::uint32_t>(b.src_nodes[static_cast<size_t>(u)]);
      const std::uint64_t edge_key =
          mix64(key ^ ((static_cast<std::uint64_t>(dst_id) << 32) | src_id));
      const auto base = static_cast<std::uint32_t>(edge_key ^ (edge_key >> 32));
      for (std::int32_t h = 0; h < H; ++h)
        c->keep(k, h) =
            (mix32(base + static_cast<std::uint32_t>(h) * 0x9e3779b9U) >> 8) < drop_below
                ? 0.0f
                : keep_scale;
    }
  }
  const attention_edges e{
      .indptr = c->indptr, .src = c->src, .score = &c->score, .keep = drop ? &c->keep : nullptr};
  c->merged = attend_partial(e, z);
  c->heads_out = finish_attention(c->merged);  // (nd, H*F)
  if (concat_) {
    out = c->heads_out;
  } else {
    out = c->heads_out.middleCols(0, F);
    for (std::int32_t h = 1; h < H; ++h)
      out += c->heads_out.middleCols(h * F, F);
    out *= 1.0f / static_cast<float>(H);
  }
  out.rowwise() += bias.row(0);
  if (!cache) return;
  c->merged.value.resize(0, 0);  // backward needs the max and sum only
}

void gat_layer::backward(const block& b, const layer_cache& cache, const Matrix& grad_out,
                         Matrix* grad_src) {
  if (!cache.attention) throw std::logic_error("gat_layer::backward without a training forward");
  const attention_cache& c = *cache.attention;
  const std::int32_t ns = b.num_src(), nd = b.num_dst();
  const std::int32_t F = head_width_, H = heads_;
  if (grad_out.rows() != nd || grad_out.cols() != out_dim_ || c.z.rows() != ns)
    throw std::invalid_argument("gat_layer::backward: grad_out or the cache do not fit the block");
  grad_bias += grad_out.colwise().sum();
  // d loss / d heads_out (nd, H*F): the mean hands each head 1/H of the gradient.
  Matrix grad_heads;
  if (concat_) {
    grad_heads = grad_out;
  } else {
    grad_heads.resize(nd, H * F);
    for (std::int32_t h = 0; h < H; ++h)
      grad_heads.middleCols(h * F, F) = grad_out * (1.0f / static_cast<float>(H));
  }
  const attention_edges e{.indptr = c.indptr,
                          .src = c.src,
                          .score = &c.score,
                          .keep = c.keep.size() > 0 ? &c.keep : nullptr};
  std::vector<std::int64_t> tindptr, tedge;
  transpose_attention_edges(e, ns, tindptr, tedge);
  Matrix grad_z = Matrix::Zero(ns, H * F);
  Matrix grad_score;
  attention_backward(e, c.z, c.merged, c.heads_out, grad_heads, tindptr, tedge, grad_score, grad_z);
  // Through the LeakyReLU (it keeps the sign, so the score's sign tells the slope).
  for (Eigen::Index k = 0; k < grad_score.rows(); ++k)
    for (std::int32_t h = 0; h < H; ++h)
      if (c.score(k, h) <= 0.0f) grad_score(k, h) *= negative_slope;
  // d loss / d el (ns, H): summed over each source's edges; d loss / d er (nd, H): over each
  // destination's edges.
  Matrix grad_el = Matrix::Zero(ns, H), grad_er = Matrix::Zero(nd, H);
#pragma omp parallel for schedule(dynamic, 256)
  for (std::int32_t u = 0; u < ns; ++u)
    for (std::int64_t t = tindptr[u]; t < tindptr[u + 1]; ++t)
      grad_el.row(u) += grad_score.row(tedge[static_cast<size_t>(t)]);
  for (std::int32_t v = 0; v < nd; ++v)
    for (std::int64_t k = c.indptr[v]; k < c.indptr[v + 1]; ++k)
      grad_er.row(v) += grad_score.row(k);
  for (std::int32_t h = 0; h < H; ++h) {
    grad_attn_l.row(h).noalias() += grad_el.col(h).transpose() * c.z.middleCols(h * F, F);
    grad_attn_r.row(h).noalias() +=
        grad_er.col(h).transpose() * c.z.topRows(nd).middleCols(h * F, F);
  }
  for (std::int32_t u = 0; u < ns; ++u)
    for (std::int32_t h = 0; h < H; ++h) {
      grad_z.row(u).segment(h * F, F) += grad_el(u, h) * attn_l.row(h);
      if (u < nd) grad_z.row(u).segment(h * F, F) += grad_er(u, h) * attn_r.row(h);
    }
  grad_weight.noalias() += c.input.transpose() * grad_z;  // (in, H*F)
  if (!grad_src) return;
  grad_src->noalias() = grad_z * weight.transpose();  // (ns, in)
  if (c.input_mask.size() > 0) dropout_backward(c.input_mask, *grad_src);
}

}  // namespace degnn
