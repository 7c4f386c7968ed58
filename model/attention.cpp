// Partial softmax attention: the forward per target (OpenMP over targets), the backward per
// edge score (over targets) and per value row (over rows, through the transpose), so every
// result is the same for any thread count.
#include "model/attention.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace degnn {
namespace {

constexpr float kNoEdge = -std::numeric_limits<float>::infinity();

std::int32_t head_count(const attention_edges& e) {
  return static_cast<std::int32_t>(e.score->cols());
}

void check_edges(const attention_edges& e, const Matrix& values, const char* who) {
  if (!e.score || e.indptr.empty())
    throw std::invalid_argument(std::string(who) + ": no scores or no targets");
  const auto edges = static_cast<std::int64_t>(e.src.size());
  const std::int32_t heads = head_count(e);
  if (e.indptr.front() != 0 || e.indptr.back() != edges || e.score->rows() != edges)
    throw std::invalid_argument(std::string(who) + ": indptr, src and score disagree on the edges");
  for (std::size_t i = 1; i < e.indptr.size(); ++i)
    if (e.indptr[i] < e.indptr[i - 1])
      throw std::invalid_argument(std::string(who) + ": indptr decreases at target " +
                                  std::to_string(i - 1));
  if (heads <= 0 || values.cols() % heads != 0)
    throw std::invalid_argument(std::string(who) + ": values are not H*F wide");
  if (e.keep && (e.keep->rows() != edges || e.keep->cols() != heads))
    throw std::invalid_argument(std::string(who) + ": keep is not (num_edges, H)");
  for (std::int32_t u : e.src)
    if (u < 0 || u >= values.rows())
      throw std::invalid_argument(std::string(who) + ": source row " + std::to_string(u) +
                                  " outside the values");
}

}  // namespace

attention_edges edges_of(const std::vector<std::int64_t>& indptr,
                         const std::vector<std::int32_t>& src, const Matrix& score,
                         const Matrix& keep) {
  return {.indptr = indptr, .src = src, .score = &score, .keep = keep.size() > 0 ? &keep : nullptr};
}

attention_partial attend_partial(const attention_edges& e, const Matrix& values) {
  check_edges(e, values, "attend_partial");
  const auto targets = static_cast<Eigen::Index>(e.indptr.size() - 1);
  const std::int32_t heads = head_count(e);
  const Eigen::Index width = values.cols() / heads;
  attention_partial p;
  p.max.setConstant(targets, heads, kNoEdge);
  p.sum.setZero(targets, heads);
  p.value.setZero(targets, values.cols());
  const Matrix& score = *e.score;
#pragma omp parallel for schedule(dynamic, 64)
  for (Eigen::Index i = 0; i < targets; ++i) {
    const std::int64_t begin = e.indptr[i], end = e.indptr[i + 1];
    for (std::int32_t h = 0; h < heads; ++h) {
      float m = kNoEdge;
      for (std::int64_t k = begin; k < end; ++k)
        m = std::max(m, score(k, h));
      if (begin == end) continue;
      float s = 0.0f;
      auto acc = p.value.row(i).segment(h * width, width);
      for (std::int64_t k = begin; k < end; ++k) {
        const float w = std::exp(score(k, h) - m);
        s += w;
        const float weighted = e.keep ? w * (*e.keep)(k, h) : w;
        if (weighted != 0.0f) acc += weighted * values.row(e.src[k]).segment(h * width, width);
      }
      p.max(i, h) = m;
      p.sum(i, h) = s;
    }
  }
  return p;
}

void merge_partials(attention_partial& into, const attention_partial& other) {
  if (into.max.rows() != other.max.rows() || into.max.cols() != other.max.cols() ||
      into.value.cols() != other.value.cols() || into.sum.rows() != into.max.rows() ||
      into.sum.cols() != into.max.cols() || other.sum.rows() != other.max.rows() ||
      other.sum.cols() != other.max.cols() || into.value.rows() != into.max.rows() ||
      other.value.rows() != other.max.rows())
    throw std::invalid_argument("merge_partials: partials of different shapes");
  const Eigen::Index targets = into.max.rows(), heads = into.max.cols();
  const Eigen::Index width = heads > 0 ? into.value.cols() / heads : 0;
#pragma omp parallel for schedule(static)
  for (Eigen::Index i = 0; i < targets; ++i) {
    for (Eigen::Index h = 0; h < heads; ++h) {
      const float mo = other.max(i, h);
      if (mo == kNoEdge) continue;
      const float mi = into.max(i, h);
      auto acc = into.value.row(i).segment(h * width, width);
      const auto add = other.value.row(i).segment(h * width, width);
      if (mi == kNoEdge) {
        into.max(i, h) = mo;
        into.sum(i, h) = other.sum(i, h);
        acc = add;
        continue;
      }
      // Rescale both to the larger maximum: exp of a non-positive number never overflows.
      const float m = std::max(mi, mo);
      const float si = std::exp(mi - m), so = std::exp(mo - m);
      into.max(i, h) = m;
      into.sum(i, h) = into.sum(i, h) * si + other.sum(i, h) * so;
      acc = acc * si + add * so;
    }
  }
}

Matrix finish_attention(const attention_partial& merged) {
  const Eigen::Index targets = merged.max.rows(), heads = merged.max.cols();
  const Eigen::Index width = heads > 0 ? merged.value.cols() / heads : 0;
  Matrix out = Matrix::Zero(targets, merged.value.cols());
  for (Eigen::Index i = 0; i < targets; ++i)
    for (Eigen::Index h = 0; h < heads; ++h)
      if (merged.sum(i, h) > 0.0f)
        out.row(i).segment(h * width, width) =
            merged.value.row(i).segment(h * width, width) / merged.sum(i, h);
  return out;
}

void transpose_attention_edges(const attention_edges& e, std::int32_t num_src,
                               std::vector<std::int64_t>& tindptr,
                               std::vector<std::int64_t>& tedge) {
  tindptr.assign(static_cast<size_t>(num_src) + 1, 0);
  for (std::int32_t u : e.src)
    ++tindptr[static_cast<size_t>(u) + 1];
  for (std::int32_t u = 0; u < num_src; ++u)
    tindptr[u + 1] += tindptr[u];
  tedge.resize(e.src.size());
  std::vector<std::int64_t> next(tindptr.begin(), tindptr.end() - 1);
  for (std::size_t k = 0; k < e.src.size(); ++k)
    tedge[static_cast<size_t>(next[e.src[k]]++)] = static_cast<std::int64_t>(k);
}

void attention_backward(const attention_edges& e, const Matrix& values,
                        const attention_partial& merged, const Matrix& out, const Matrix& grad_out,
                        std::span<const std::int64_t> tindptr, std::span<const std::int64_t> tedge,
                        Matrix& grad_score, Matrix& grad_values) {
  check_edges(e, values, "attention_backward");
  const auto targets = static_cast<Eigen::Index>(e.indptr.size() - 1);
  const std::int32_t heads = head_count(e);
  const Eigen::Index width = values.cols() / heads;
  if (merged.max.rows() != targets || merged.max.cols() != heads || merged.sum.rows() != targets ||
      merged.sum.cols() != heads || out.rows() != targets || grad_out.rows() != targets ||
      grad_out.cols() != values.cols() || out.cols() != values.cols())
    throw std::invalid_argument("attention_backward: merged, out or grad_out do not fit the edges");
  if (grad_values.rows() != values.rows() || grad_values.cols() != values.cols() ||
      static_cast<Eigen::Index>(tindptr.size()) != values.rows() + 1 ||
      tedge.size() != e.src.size())
    throw std::invalid_argument("attention_backward: grad_values or the transpose do not fit");
  const Matrix& score = *e.score;
  // alpha_k = exp(score_k - M) / S of the merged softmax; with a_k = keep_k g.v_k,
  // d loss / d score_k = alpha_k (a_k - sum_j alpha_j a_j) and sum_j alpha_j a_j = g.out.
  grad_score.resize(score.rows(), heads);
#pragma omp parallel for schedule(dynamic, 64)
  for (Eigen::Index i = 0; i < targets; ++i) {
    for (std::int32_t h = 0; h < heads; ++h) {
      const auto g = grad_out.row(i).segment(h * width, width);
      const float centre = g.dot(out.row(i).segment(h * width, width));
      const float m = merged.max(i, h), inv_s = 1.0f / merged.sum(i, h);
      for (std::int64_t k = e.indptr[i]; k < e.indptr[i + 1]; ++k) {
        const float alpha = std::exp(score(k, h) - m) * inv_s;
        float a = g.dot(values.row(e.src[k]).segment(h * width, width));
        if (e.keep) a *= (*e.keep)(k, h);
        grad_score(k, h) = alpha * (a - centre);
      }
    }
  }
  // Target of each edge, for the gather per value row.
  std::vector<std::int32_t> target_of(e.src.size());
  for (Eigen::Index i = 0; i < targets; ++i)
    for (std::int64_t k = e.indptr[i]; k < e.indptr[i + 1]; ++k)
      target_of[static_cast<size_t>(k)] = static_cast<std::int32_t>(i);
#pragma omp parallel for schedule(dynamic, 64)
  for (Eigen::Index u = 0; u < values.rows(); ++u) {
    for (std::int64_t t = tindptr[u]; t < tindptr[u + 1]; ++t) {
      const std::int64_t k = tedge[static_cast<size_t>(t)];
      const std::int32_t i = target_of[static_cast<size_t>(k)];
      for (std::int32_t h = 0; h < heads; ++h) {
        float w = std::exp(score(k, h) - merged.max(i, h)) * (1.0f / merged.sum(i, h));
        if (e.keep) w *= (*e.keep)(k, h);
        if (w != 0.0f)
          grad_values.row(u).segment(h * width, width) +=
              w * grad_out.row(i).segment(h * width, width);
      }
    }
  }
}

}  // namespace degnn
