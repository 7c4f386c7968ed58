// Aggregation kernels: one gather skeleton per direction, parallel over output rows. Forward
// walks the block's dst rows; backward walks src rows through the transpose, so every output row
// is written by one thread and summed in a fixed (edge id) order: deterministic for any thread
// count, no atomics, no per-thread copies of grad_src.
#include "model/aggregate.hpp"

#include <cassert>
#include <cmath>

namespace degnn {
namespace {

// o[0..f) += w * x[0..f)
inline void axpy(float* __restrict o, const float* __restrict x, float w, Eigen::Index f) {
#pragma omp simd
  for (Eigen::Index k = 0; k < f; ++k)
    o[k] += w * x[k];
}

inline void add(float* __restrict o, const float* __restrict x, Eigen::Index f) {
#pragma omp simd
  for (Eigen::Index k = 0; k < f; ++k)
    o[k] += x[k];
}

// Forward skeleton. edge_w: per-edge weights or nullptr (weight 1); row_scale: per-dst factor
// applied after the sum or nullptr; self_w: per-dst weight of src row i or nullptr; row_of:
// src row u is h_src's row row_of[u] (or u when nullptr).
void gather_rows(const block& b, const Matrix& h_src, Matrix& out, const float* edge_w,
                 const float* row_scale, const float* self_w, const node_id* row_of = nullptr) {
  assert(row_of || h_src.rows() == b.num_src());
  const Eigen::Index f = h_src.cols();
  const std::int32_t n = b.num_dst();
  out.resize(n, f);
  const float* h = h_src.data();
#pragma omp parallel for schedule(dynamic, 64)
  for (std::int32_t i = 0; i < n; ++i) {
    float* o = out.data() + static_cast<Eigen::Index>(i) * f;
    std::fill(o, o + f, 0.0f);
    const std::int32_t begin = b.indptr[i], end = b.indptr[i + 1];
    auto row = [&](std::int32_t u) {
      return h + static_cast<Eigen::Index>(row_of ? row_of[u] : u) * f;
    };
    if (edge_w) {
      for (std::int32_t e = begin; e < end; ++e)
        axpy(o, row(b.indices[e]), edge_w[e], f);
    } else {
      for (std::int32_t e = begin; e < end; ++e)
        add(o, row(b.indices[e]), f);
    }
    if (row_scale) {
      const float s = row_scale[i];
#pragma omp simd
      for (Eigen::Index k = 0; k < f; ++k)
        o[k] *= s;
    }
    if (self_w) axpy(o, row(i), self_w[i], f);
  }
}

// Backward skeleton: grad_src.row(u) += sum over out-edges e = u -> v of w(e) grad_out.row(v),
// with w(e) = edge_w[e] (or 1) times row_scale[v] (or 1); plus self_w[u] grad_out.row(u).
// accumulate == false: grad_src is resized and overwritten, zeroing each row inside the
// parallel loop (one pass over memory instead of a serial setZero plus the scatter).
void scatter_rows(const block& b, const block_transpose& t, const Matrix& grad_out,
                  Matrix& grad_src, const float* edge_w, const float* row_scale,
                  const float* self_w, bool accumulate) {
  assert(grad_out.rows() == b.num_dst());
  if (!accumulate) grad_src.resize(b.num_src(), grad_out.cols());
  assert(grad_src.rows() == b.num_src() && grad_src.cols() == grad_out.cols());
  assert(static_cast<std::int32_t>(t.indptr.size()) == b.num_src() + 1);
  const Eigen::Index f = grad_out.cols();
  const std::int32_t n = b.num_src();
  const float* g = grad_out.data();
#pragma omp parallel for schedule(dynamic, 256)
  for (std::int32_t u = 0; u < n; ++u) {
    float* o = grad_src.data() + static_cast<Eigen::Index>(u) * f;
    if (!accumulate) std::fill(o, o + f, 0.0f);
    for (std::int64_t k = t.indptr[u]; k < t.indptr[u + 1]; ++k) {
      const std::int32_t v = t.dst[k];
      float w = edge_w ? edge_w[t.edge[k]] : 1.0f;
      if (row_scale) w *= row_scale[v];
      axpy(o, g + static_cast<Eigen::Index>(v) * f, w, f);
    }
    if (self_w && u < b.num_dst()) axpy(o, g + static_cast<Eigen::Index>(u) * f, self_w[u], f);
  }
}

// 1/count per dst row, 0 for rows without neighbours (their mean is defined as zero).
std::vector<float> inverse_counts(const block& b) {
  std::vector<float> s(b.num_dst());
  for (std::int32_t i = 0; i < b.num_dst(); ++i) {
    const std::int32_t c = b.indptr[i + 1] - b.indptr[i];
    s[i] = c > 0 ? 1.0f / static_cast<float>(c) : 0.0f;
  }
  return s;
}

}  // namespace

block_transpose transpose_block(const block& b) {
  const std::int32_t n = b.num_src();
  block_transpose t;
  t.indptr.assign(static_cast<size_t>(n) + 1, 0);
  for (std::int32_t u : b.indices)
    ++t.indptr[u + 1];
  for (std::int32_t u = 0; u < n; ++u)
    t.indptr[u + 1] += t.indptr[u];
  t.dst.resize(b.indices.size());
  t.edge.resize(b.indices.size());
  std::vector<std::int64_t> next(t.indptr.begin(), t.indptr.end() - 1);
  // Walking dst rows in order keeps each src's edge list sorted by edge id.
  for (std::int32_t v = 0; v < b.num_dst(); ++v) {
    for (std::int32_t e = b.indptr[v]; e < b.indptr[v + 1]; ++e) {
      const std::int64_t k = next[b.indices[e]]++;
      t.dst[k] = v;
      t.edge[k] = e;
    }
  }
  return t;
}

std::vector<float> neighbor_counts(const block& b) {
  std::vector<float> c(b.num_dst());
  for (std::int32_t i = 0; i < b.num_dst(); ++i)
    c[i] = static_cast<float>(b.indptr[i + 1] - b.indptr[i]);
  return c;
}

edge_weights gcn_normalization(const block& b) {
  assert(static_cast<std::int32_t>(b.src_degree.size()) == b.num_src());
  edge_weights w;
  w.edge.resize(b.indices.size());
  w.self_term.resize(b.num_dst());
  std::vector<double> inv_sqrt(b.num_src());
  for (std::int32_t u = 0; u < b.num_src(); ++u)
    inv_sqrt[u] = 1.0 / std::sqrt(static_cast<double>(b.src_degree[u]) + 1.0);
  for (std::int32_t v = 0; v < b.num_dst(); ++v) {
    const std::int32_t count = b.indptr[v + 1] - b.indptr[v];
    const std::int32_t degree = b.src_degree[v];
    // Sampled row: each kept neighbour stands for degree/count of them.
    const double unbias = (count > 0 && count < degree) ? static_cast<double>(degree) / count : 1.0;
    for (std::int32_t e = b.indptr[v]; e < b.indptr[v + 1]; ++e)
      w.edge[e] = static_cast<float>(unbias * inv_sqrt[v] * inv_sqrt[b.indices[e]]);
    w.self_term[v] = static_cast<float>(inv_sqrt[v] * inv_sqrt[v]);
  }
  return w;
}

void sum_aggregate(const block& b, const Matrix& h_src, Matrix& out) {
  gather_rows(b, h_src, out, nullptr, nullptr, nullptr);
}

void sum_aggregate_backward(const block& b, const block_transpose& t, const Matrix& grad_out,
                            Matrix& grad_src, bool accumulate) {
  scatter_rows(b, t, grad_out, grad_src, nullptr, nullptr, nullptr, accumulate);
}

void mean_aggregate(const block& b, const Matrix& h_src, Matrix& out,
                    std::span<const node_id> row_of) {
  const std::vector<float> s = inverse_counts(b);
  gather_rows(b, h_src, out, nullptr, s.data(), nullptr, row_of.empty() ? nullptr : row_of.data());
}

void mean_aggregate_backward(const block& b, const block_transpose& t, const Matrix& grad_out,
                             Matrix& grad_src, bool accumulate) {
  const std::vector<float> s = inverse_counts(b);
  scatter_rows(b, t, grad_out, grad_src, nullptr, s.data(), nullptr, accumulate);
}

void divide_rows_by_count(Matrix& m, std::span<const float> counts) {
  assert(static_cast<Eigen::Index>(counts.size()) == m.rows());
#pragma omp parallel for schedule(static)
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    m.row(i) *= counts[i] > 0 ? 1.0f / counts[i] : 0.0f;
}

void weighted_aggregate(const block& b, const edge_weights& w, const Matrix& h_src, Matrix& out,
                        std::span<const node_id> row_of) {
  assert(w.edge.size() == b.indices.size());
  gather_rows(b, h_src, out, w.edge.data(), nullptr,
              w.self_term.empty() ? nullptr : w.self_term.data(),
              row_of.empty() ? nullptr : row_of.data());
}

void weighted_aggregate_backward(const block& b, const block_transpose& t, const edge_weights& w,
                                 const Matrix& grad_out, Matrix& grad_src, bool accumulate) {
  assert(w.edge.size() == b.indices.size());
  scatter_rows(b, t, grad_out, grad_src, w.edge.data(), nullptr,
               w.self_term.empty() ? nullptr : w.self_term.data(), accumulate);
}

}  // namespace degnn
