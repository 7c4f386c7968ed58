// Tests of model/attention.hpp: the partial softmax aggregation against a plain softmax written
// here, the log-sum-exp merge of partials split across holders against the whole, and the
// backward (per holder) against the whole backward and against finite differences.
#include "model/attention.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "tests/model/grad_check.hpp"

using namespace degnn;
using namespace degnn::testing;

namespace {

constexpr int kHeads = 3, kWidth = 4;

/// Random edges: target i has 0..6 edges to random rows of `sources`.
struct edge_set {
  std::vector<std::int64_t> indptr{0};
  std::vector<std::int32_t> src;
  Matrix score, keep;
  attention_edges view(bool with_keep = false) const {
    return {.indptr = indptr, .src = src, .score = &score, .keep = with_keep ? &keep : nullptr};
  }
};

edge_set random_edges(int targets, int sources, std::uint32_t seed, float score_scale = 2.0f) {
  std::mt19937 rng(seed);
  edge_set e;
  for (int i = 0; i < targets; ++i) {
    const int k = static_cast<int>(rng() % 7);
    for (int j = 0; j < k; ++j)
      e.src.push_back(static_cast<std::int32_t>(rng() % sources));
    e.indptr.push_back(static_cast<std::int64_t>(e.src.size()));
  }
  e.score = random_matrix(static_cast<Eigen::Index>(e.src.size()), kHeads, seed + 1, score_scale);
  e.keep.resize(e.score.rows(), kHeads);
  for (Eigen::Index k = 0; k < e.keep.size(); ++k)
    e.keep.data()[k] = rng() % 3 == 0 ? 0.0f : 1.5f;
  return e;
}

/// The plain softmax in double: out[i, h] = sum_k softmax(score[., h])_k keep_k v[src_k, h].
Eigen::MatrixXd plain_attention(const edge_set& e, const Matrix& v, bool with_keep) {
  const int targets = static_cast<int>(e.indptr.size()) - 1;
  Eigen::MatrixXd out = Eigen::MatrixXd::Zero(targets, v.cols());
  for (int i = 0; i < targets; ++i)
    for (int h = 0; h < kHeads; ++h) {
      double total = 0;
      for (auto k = e.indptr[i]; k < e.indptr[i + 1]; ++k)
        total += std::exp(static_cast<double>(e.score(k, h)));
      for (auto k = e.indptr[i]; k < e.indptr[i + 1]; ++k) {
        double a = std::exp(static_cast<double>(e.score(k, h))) / total;
        if (with_keep) a *= e.keep(k, h);
        out.row(i).segment(h * kWidth, kWidth) +=
            a * v.row(e.src[k]).segment(h * kWidth, kWidth).cast<double>();
      }
    }
  return out;
}

/// Holder j's share of e: the edges whose holder[k] == j, per target in order.
edge_set share(const edge_set& e, const std::vector<int>& holder, int j) {
  edge_set s;
  std::vector<Eigen::Index> rows;
  for (std::size_t i = 0; i + 1 < e.indptr.size(); ++i) {
    for (auto k = e.indptr[i]; k < e.indptr[i + 1]; ++k)
      if (holder[static_cast<size_t>(k)] == j) {
        s.src.push_back(e.src[static_cast<size_t>(k)]);
        rows.push_back(k);
      }
    s.indptr.push_back(static_cast<std::int64_t>(s.src.size()));
  }
  s.score.resize(static_cast<Eigen::Index>(rows.size()), kHeads);
  s.keep.resize(static_cast<Eigen::Index>(rows.size()), kHeads);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    s.score.row(static_cast<Eigen::Index>(r)) = e.score.row(rows[r]);
    s.keep.row(static_cast<Eigen::Index>(r)) = e.keep.row(rows[r]);
  }
  return s;
}

}  // namespace

TEST(Attention, PartialOfAllEdgesFinishesToThePlainSoftmax) {
  const edge_set e = random_edges(40, 25, 1);
  const Matrix v = random_matrix(25, kHeads * kWidth, 2);
  for (bool keep : {false, true}) {
    const Matrix out = finish_attention(attend_partial(e.view(keep), v));
    const Eigen::MatrixXd want = plain_attention(e, v, keep);
    EXPECT_LT((out.cast<double>() - want).cwiseAbs().maxCoeff(), 1e-5) << "keep " << keep;
  }
  // A target without edges gets zeros, not NaN.
  const Matrix out = finish_attention(attend_partial(e.view(), v));
  for (std::size_t i = 0; i + 1 < e.indptr.size(); ++i)
    if (e.indptr[i] == e.indptr[i + 1]) {
      EXPECT_EQ(out.row(static_cast<Eigen::Index>(i)).norm(), 0.0f);
    }
}

TEST(Attention, MergedPartialsOfAnySplitEqualTheWholeSoftmax) {
  const edge_set e = random_edges(60, 30, 3);
  const Matrix v = random_matrix(30, kHeads * kWidth, 4);
  const Matrix whole = finish_attention(attend_partial(e.view(true), v));
  std::mt19937 rng(5);
  for (int holders : {1, 2, 4, 7}) {
    std::vector<int> holder(e.src.size());
    for (auto& h : holder)
      h = static_cast<int>(rng() % holders);
    attention_partial merged = attend_partial(share(e, holder, 0).view(true), v);
    for (int j = 1; j < holders; ++j)
      merge_partials(merged, attend_partial(share(e, holder, j).view(true), v));
    const Matrix out = finish_attention(merged);
    EXPECT_LT((out - whole).cwiseAbs().maxCoeff(), 1e-5f) << holders << " holders";
  }
}

TEST(Attention, OneHolderWithEveryLargeScoreMergesWithoutOverflowOrLoss) {
  // Scores around 80 on holder 0 and around -80 on holder 1: exp(80) overflows float unless each
  // partial is taken relative to its own maximum, and the small ones must not vanish into NaN.
  edge_set e = random_edges(30, 20, 6);
  std::vector<int> holder(e.src.size());
  for (std::size_t k = 0; k < holder.size(); ++k) {
    holder[k] = static_cast<int>(k % 2);
    for (int h = 0; h < kHeads; ++h)
      e.score(static_cast<Eigen::Index>(k), h) += holder[k] == 0 ? 80.0f : -80.0f;
  }
  const Matrix v = random_matrix(20, kHeads * kWidth, 7);
  for (int first : {0, 1}) {
    attention_partial merged = attend_partial(share(e, holder, first).view(), v);
    merge_partials(merged, attend_partial(share(e, holder, 1 - first).view(), v));
    const Matrix out = finish_attention(merged);
    ASSERT_TRUE(out.allFinite());
    EXPECT_LT((out.cast<double>() - plain_attention(e, v, false)).cwiseAbs().maxCoeff(), 1e-5);
  }
}

TEST(Attention, EachHoldersBackwardIsItsShareOfTheWholeBackward) {
  const edge_set e = random_edges(50, 30, 8);
  const Matrix v = random_matrix(30, kHeads * kWidth, 9);
  const Matrix g = random_matrix(50, kHeads * kWidth, 10);
  std::vector<std::int64_t> tindptr, tedge;
  const attention_partial whole = attend_partial(e.view(true), v);
  const Matrix out = finish_attention(whole);
  Matrix whole_score, whole_values = Matrix::Zero(30, kHeads * kWidth);
  transpose_attention_edges(e.view(true), 30, tindptr, tedge);
  attention_backward(e.view(true), v, whole, out, g, tindptr, tedge, whole_score, whole_values);

  std::vector<int> holder(e.src.size());
  for (std::size_t k = 0; k < holder.size(); ++k)
    holder[k] = static_cast<int>((k * 7) % 3);
  Matrix summed_values = Matrix::Zero(30, kHeads * kWidth);
  for (int j = 0; j < 3; ++j) {
    const edge_set s = share(e, holder, j);
    transpose_attention_edges(s.view(true), 30, tindptr, tedge);
    Matrix score_grad;
    attention_backward(s.view(true), v, whole, out, g, tindptr, tedge, score_grad, summed_values);
    Eigen::Index r = 0;
    for (std::size_t k = 0; k < holder.size(); ++k)
      if (holder[k] == j) {
        EXPECT_LT((score_grad.row(r) - whole_score.row(static_cast<Eigen::Index>(k)))
                      .cwiseAbs()
                      .maxCoeff(),
                  1e-6f);
        ++r;
      }
  }
  EXPECT_LT((summed_values - whole_values).cwiseAbs().maxCoeff(), 1e-5f);
}

TEST(Attention, BackwardMatchesFiniteDifferencesOfScoresAndValues) {
  edge_set e = random_edges(20, 12, 11);
  Matrix v = random_matrix(12, kHeads * kWidth, 12);
  const Matrix r = random_matrix(20, kHeads * kWidth, 13);  // loss = sum(out .* r)
  const attention_partial p = attend_partial(e.view(true), v);
  const Matrix out = finish_attention(p);
  std::vector<std::int64_t> tindptr, tedge;
  transpose_attention_edges(e.view(true), 12, tindptr, tedge);
  Matrix grad_score, grad_values = Matrix::Zero(12, kHeads * kWidth);
  attention_backward(e.view(true), v, p, out, r, tindptr, tedge, grad_score, grad_values);
  const auto loss = [&] { return dot(finish_attention(attend_partial(e.view(true), v)), r); };
  EXPECT_LT(max_grad_error(e.score, grad_score, loss, 1e-2f), 2e-3);
  EXPECT_LT(max_grad_error(v, grad_values, loss, 1e-2f), 2e-3);
}

TEST(Attention, MismatchedEdgesAreRefused) {
  edge_set e = random_edges(5, 4, 14);
  const Matrix v = random_matrix(4, kHeads * kWidth, 15);
  e.src.push_back(9);  // one edge more than indptr and score say
  EXPECT_THROW(attend_partial(e.view(), v), std::invalid_argument);
  e.src.pop_back();
  const Matrix narrow = random_matrix(4, kHeads * kWidth - 1, 16);
  EXPECT_THROW(attend_partial(e.view(), narrow), std::invalid_argument);
  attention_partial a = attend_partial(e.view(), v);
  attention_partial b = attend_partial(random_edges(6, 4, 17).view(), v);
  EXPECT_THROW(merge_partials(a, b), std::invalid_argument);
}
