// Tests of model/aggregate.hpp and model/layers.hpp: aggregation against naive loops, gradients of
// every layer against central finite differences, dropout, loss and init.
#include "model/layers.hpp"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdio>

#include "model/aggregate.hpp"
#include "tests/model/grad_check.hpp"

using namespace degnn;
using namespace degnn::testing;

namespace {

// Naive mean aggregation in double.
Eigen::MatrixXd naive_mean(const block& b, const Matrix& h) {
  Eigen::MatrixXd out = Eigen::MatrixXd::Zero(b.num_dst(), h.cols());
  for (std::int32_t i = 0; i < b.num_dst(); ++i) {
    const std::int32_t c = b.indptr[i + 1] - b.indptr[i];
    for (std::int32_t e = b.indptr[i]; e < b.indptr[i + 1]; ++e)
      out.row(i) += h.row(b.indices[e]).cast<double>() / c;
  }
  return out;
}

// Naive scatter: grad_src[u] += grad_out[v] / count_v for every edge u -> v.
Eigen::MatrixXd naive_mean_backward(const block& b, const Matrix& g) {
  Eigen::MatrixXd out = Eigen::MatrixXd::Zero(b.num_src(), g.cols());
  for (std::int32_t v = 0; v < b.num_dst(); ++v) {
    const std::int32_t c = b.indptr[v + 1] - b.indptr[v];
    for (std::int32_t e = b.indptr[v]; e < b.indptr[v + 1]; ++e)
      out.row(b.indices[e]) += g.row(v).cast<double>() / c;
  }
  return out;
}

}  // namespace

TEST(MeanAggregation, EqualsANaiveLoopAndGivesZeroRowsWithoutNeighbours) {
  const block b = random_block(40, 90, 6, 1);
  const Matrix h = random_matrix(90, 17, 2);
  Matrix out;
  mean_aggregate(b, h, out);
  ASSERT_EQ(out.rows(), 40);
  const double diff = (out.cast<double>() - naive_mean(b, h)).cwiseAbs().maxCoeff();
  std::printf("mean aggregation max abs diff %.3g\n", diff);
  EXPECT_LT(diff, 1e-5);
  int empty = 0;
  for (std::int32_t i = 0; i < b.num_dst(); ++i)
    if (b.indptr[i + 1] == b.indptr[i]) {
      ++empty;
      EXPECT_EQ(out.row(i).cwiseAbs().maxCoeff(), 0.0f);
    }
  EXPECT_GT(empty, 0) << "the random block should contain a row without neighbours";
}

TEST(MeanAggregation, BackwardEqualsANaiveScatterAndAddsToTheGradient) {
  const block b = random_block(40, 90, 6, 3);
  const Matrix g = random_matrix(40, 13, 4);
  const Matrix start = random_matrix(90, 13, 5);
  Matrix grad_src = start;
  mean_aggregate_backward(b, transpose_block(b), g, grad_src);
  const Eigen::MatrixXd expected = start.cast<double>() + naive_mean_backward(b, g);
  const double diff = (grad_src.cast<double>() - expected).cwiseAbs().maxCoeff();
  std::printf("mean aggregation backward max abs diff %.3g\n", diff);
  EXPECT_LT(diff, 1e-5);
}

TEST(MeanAggregation, BackwardWithoutAccumulateOverwritesAndResizesTheGradient) {
  const block b = random_block(40, 90, 6, 14);
  const Matrix g = random_matrix(40, 13, 15);
  Matrix grad_src = Matrix::Constant(3, 3, 7.0f);  // wrong shape, garbage values
  mean_aggregate_backward(b, transpose_block(b), g, grad_src, /*accumulate=*/false);
  ASSERT_EQ(grad_src.rows(), 90);
  EXPECT_LT((grad_src.cast<double>() - naive_mean_backward(b, g)).cwiseAbs().maxCoeff(), 1e-5);
}

TEST(MeanAggregation, BackwardIsBitwiseTheSameForAnyThreadCount) {
  const block b = random_block(300, 500, 20, 6);
  const Matrix g = random_matrix(300, 33, 7);
  const block_transpose t = transpose_block(b);
  const int saved = omp_get_max_threads();
  Matrix reference;
  for (int threads : {1, 2, 3, 4}) {
    omp_set_num_threads(threads);
    Matrix grad_src = Matrix::Zero(500, 33);
    mean_aggregate_backward(b, t, g, grad_src);
    if (threads == 1)
      reference = grad_src;
    else
      EXPECT_TRUE(grad_src == reference) << threads << " threads";
  }
  omp_set_num_threads(saved);
}

TEST(MeanAggregation, PartialSumsOfTwoShardsAddUpToTheMean) {
  // Split every row's edges between two "shards" by the parity of the source; each computes its
  // partial sum, the owner adds them and divides by the total count.
  const block b = random_block(50, 120, 8, 8);
  const Matrix h = random_matrix(120, 9, 9);
  block part[2] = {b, b};
  for (block& p : part) {
    p.indices.clear();
    p.indptr.assign(1, 0);
  }
  for (std::int32_t i = 0; i < b.num_dst(); ++i) {
    for (std::int32_t e = b.indptr[i]; e < b.indptr[i + 1]; ++e)
      part[b.indices[e] % 2].indices.push_back(b.indices[e]);
    for (block& p : part)
      p.indptr.push_back(static_cast<std::int32_t>(p.indices.size()));
  }
  Matrix s0, s1, mean;
  sum_aggregate(part[0], h, s0);
  sum_aggregate(part[1], h, s1);
  Matrix total = s0 + s1;
  divide_rows_by_count(total, neighbor_counts(b));
  mean_aggregate(b, h, mean);
  EXPECT_LT((total - mean).cwiseAbs().maxCoeff(), 1e-5f);
}

TEST(GcnNormalization, WithAllNeighboursIsSymmetricNormalisationWithSelfLoops) {
  block b = random_block(20, 50, 5, 10);
  for (std::int32_t v = 0; v < b.num_dst(); ++v)
    b.src_degree[v] = b.indptr[v + 1] - b.indptr[v];
  const edge_weights w = gcn_normalization(b);
  for (std::int32_t v = 0; v < b.num_dst(); ++v) {
    const double dv = b.src_degree[v] + 1.0;
    EXPECT_NEAR(w.self_term[v], 1.0 / dv, 1e-7);
    for (std::int32_t e = b.indptr[v]; e < b.indptr[v + 1]; ++e)
      EXPECT_NEAR(w.edge[e], 1.0 / std::sqrt(dv * (b.src_degree[b.indices[e]] + 1.0)), 1e-7);
  }
}

TEST(GcnNormalization, RescalesTheNeighboursOfASampledRowByDegreeOverCount) {
  block b;
  b.num_dst_nodes = 1;
  b.src_nodes = {7, 8, 9};
  b.indptr = {0, 2};
  b.indices = {1, 2};
  b.src_degree = {6, 3, 0};  // dst has 6 neighbours, 2 were sampled
  const edge_weights w = gcn_normalization(b);
  EXPECT_NEAR(w.self_term[0], 1.0 / 7.0, 1e-7);
  EXPECT_NEAR(w.edge[0], 3.0 / std::sqrt(7.0 * 4.0), 1e-6);
  EXPECT_NEAR(w.edge[1], 3.0 / std::sqrt(7.0 * 1.0), 1e-6);
}

TEST(WeightedAggregation, BackwardIsTheTransposeOfForward) {
  // <A h, g> == <h, A^T g> for the linear map A of the weighted aggregation.
  const block b = random_block(30, 70, 7, 11);
  const edge_weights w = gcn_normalization(b);
  const Matrix h = random_matrix(70, 5, 12), g = random_matrix(30, 5, 13);
  Matrix out, grad_src = Matrix::Zero(70, 5);
  weighted_aggregate(b, w, h, out);
  weighted_aggregate_backward(b, transpose_block(b), w, g, grad_src);
  EXPECT_NEAR(dot(out, g), dot(h, grad_src), 1e-4);
}

TEST(SageLayer, GradientsOfEveryParameterAndTheInputMatchFiniteDifferences) {
  const block b = random_block(12, 30, 5, 20);
  sage_layer layer(7, 4);
  layer.init(3);
  layer.bias = random_matrix(1, 4, 21);
  Matrix h = random_matrix(30, 7, 22);
  const Matrix r = random_matrix(12, 4, 23);  // loss = sum(out .* r), so grad_out = r
  Matrix out, grad_src;
  layer.forward(b, h, out, true);
  layer.backward(b, r, &grad_src);
  const auto loss = [&] {
    Matrix o;
    layer.apply(b, h, o, nullptr);
    return dot(o, r);
  };
  const char* names[] = {"W_self", "W_neigh", "b"};
  for (int p = 0; p < 3; ++p) {
    const double err = max_grad_error(*layer.parameters()[p], *layer.gradients()[p], loss, 1e-2f);
    std::printf("sage %s max rel diff %.3g\n", names[p], err);
    EXPECT_LT(err, 1e-3) << names[p];
  }
  const double err = max_grad_error(h, grad_src, loss, 1e-2f);
  std::printf("sage input max rel diff %.3g\n", err);
  EXPECT_LT(err, 1e-3);
}

TEST(SageLayer, ImportanceWeightsOfOneOverCountGiveTheMeanAndWeightedGradientsMatch) {
  block b = random_block(12, 30, 5, 20);
  sage_layer layer(7, 4);
  layer.init(5);
  const Matrix h = random_matrix(30, 7, 24);
  Matrix plain, weighted;
  layer.apply(b, h, plain, nullptr);
  b.edge_weight.resize(static_cast<size_t>(b.num_edges()));
  for (std::int32_t i = 0; i < b.num_dst(); ++i) {
    for (std::int32_t e = b.indptr[i]; e < b.indptr[i + 1]; ++e)
      b.edge_weight[static_cast<size_t>(e)] =
          1.0f / static_cast<float>(b.indptr[i + 1] - b.indptr[i]);
  }
  layer.apply(b, h, weighted, nullptr);
  EXPECT_LT((plain - weighted).cwiseAbs().maxCoeff(), 1e-5);
  // Arbitrary weights: gradients against finite differences.
  const Matrix w = random_matrix(1, static_cast<Eigen::Index>(b.num_edges()), 25);
  for (size_t e = 0; e < b.edge_weight.size(); ++e)
    b.edge_weight[e] = 0.5f + std::abs(w(0, static_cast<Eigen::Index>(e)));
  Matrix x = h;
  const Matrix r = random_matrix(12, 4, 26);
  Matrix out, grad_src;
  layer.forward(b, x, out, true);
  layer.backward(b, r, &grad_src);
  const auto loss = [&] {
    Matrix o;
    layer.apply(b, x, o, nullptr);
    return dot(o, r);
  };
  EXPECT_LT(max_grad_error(*layer.parameters()[1], *layer.gradients()[1], loss, 1e-2f), 1e-3);
  EXPECT_LT(max_grad_error(x, grad_src, loss, 1e-2f), 1e-3);
}

TEST(GcnLayer, GradientsOfEveryParameterAndTheInputMatchFiniteDifferences) {
  const block b = random_block(12, 30, 5, 30);
  gcn_layer layer(6, 5);
  layer.init(4);
  layer.bias = random_matrix(1, 5, 31);
  Matrix h = random_matrix(30, 6, 32);
  const Matrix r = random_matrix(12, 5, 33);
  Matrix out, grad_src;
  layer.forward(b, h, out, true);
  layer.backward(b, r, &grad_src);
  const auto loss = [&] {
    Matrix o;
    layer.apply(b, h, o, nullptr);
    return dot(o, r);
  };
  const char* names[] = {"W", "b"};
  for (int p = 0; p < 2; ++p) {
    const double err = max_grad_error(*layer.parameters()[p], *layer.gradients()[p], loss, 1e-2f);
    std::printf("gcn %s max rel diff %.3g\n", names[p], err);
    EXPECT_LT(err, 1e-3) << names[p];
  }
  const double err = max_grad_error(h, grad_src, loss, 1e-2f);
  std::printf("gcn input max rel diff %.3g\n", err);
  EXPECT_LT(err, 1e-3);
}

TEST(ReluAndDropout, GradientsWithAFixedMaskMatchFiniteDifferences) {
  Matrix x = random_matrix(20, 9, 40);
  // Keep entries away from the ReLU kink so a finite step never crosses it.
  for (Eigen::Index k = 0; k < x.size(); ++k)
    if (std::abs(x.data()[k]) < 0.05f) x.data()[k] = 0.3f;
  const Matrix r = random_matrix(20, 9, 41);
  const std::uint64_t seed = 99;
  const auto run = [&](const Matrix& in, Matrix& mask) {
    Matrix y = in;
    relu_forward(y);
    dropout_forward(y, 0.4f, seed, mask);
    return y;
  };
  Matrix mask;
  const Matrix y = run(x, mask);
  Matrix grad = r;
  dropout_backward(mask, grad);
  relu_backward(y, grad);  // y is zero where ReLU was off or the entry was dropped
  const auto loss = [&] {
    Matrix m;
    return dot(run(x, m), r);
  };
  const double err = max_grad_error(x, grad, loss, 1e-2f);
  std::printf("relu+dropout input max rel diff %.3g\n", err);
  EXPECT_LT(err, 1e-3);
}

TEST(Dropout, KeepsAboutOneMinusPScalesKeptEntriesAndReplaysFromItsSeed) {
  Matrix x = Matrix::Ones(200, 100);
  Matrix mask, mask2;
  Matrix y = x;
  dropout_forward(y, 0.3f, 5, mask);
  const double kept = (mask.array() > 0).cast<double>().mean();
  EXPECT_NEAR(kept, 0.7, 0.01);
  EXPECT_NEAR(y.cast<double>().mean(), 1.0, 0.02);  // inverted dropout keeps the expectation
  EXPECT_TRUE(((y.array() == 0) || (y.array() - 1.0f / 0.7f).abs() < 1e-6f).all());
  Matrix y2 = x;
  omp_set_num_threads(1);
  dropout_forward(y2, 0.3f, 5, mask2);
  omp_set_num_threads(omp_get_num_procs());
  EXPECT_TRUE(mask == mask2);
  Matrix y3 = x, mask3;
  dropout_forward(y3, 0.3f, 6, mask3);
  EXPECT_FALSE(mask == mask3);
  Matrix z = x, mask0;
  dropout_forward(z, 0.0f, 5, mask0);
  EXPECT_TRUE(z == x);
}

// The keyed mask: entry (r, c) follows from (seed, key of row r, c) only, keeps 1-p of the
// entries, and neighbouring entries (next column, next key, next seed) agree only by chance.
TEST(Dropout, KeyedMasksFollowTheRowKeyAndLookIndependent) {
  const int rows = 1000, cols = 128;
  std::vector<node_id> keys(static_cast<size_t>(rows));
  for (int r = 0; r < rows; ++r)
    keys[static_cast<size_t>(r)] = 1000 + r;
  Matrix x = Matrix::Ones(rows, cols), mask;
  dropout_forward_keyed(x, 0.5f, 9, keys, mask);
  EXPECT_NEAR((mask.array() > 0).cast<double>().mean(), 0.5, 0.01);
  EXPECT_NEAR(x.cast<double>().mean(), 1.0, 0.02);
  auto agree = [](const Matrix& a, const Matrix& b) {
    return ((a.array() > 0) == (b.array() > 0)).cast<double>().mean();
  };
  // Next column, next row key, next seed: each agrees half the time.
  EXPECT_NEAR(agree(mask.leftCols(cols - 1), mask.rightCols(cols - 1)), 0.5, 0.01);
  EXPECT_NEAR(agree(mask.topRows(rows - 1), mask.bottomRows(rows - 1)), 0.5, 0.01);
  Matrix y = Matrix::Ones(rows, cols), other_seed;
  dropout_forward_keyed(y, 0.5f, 10, keys, other_seed);
  EXPECT_NEAR(agree(mask, other_seed), 0.5, 0.01);
  // Rows in another order with their keys get the same entries.
  std::vector<node_id> reversed(keys.rbegin(), keys.rend());
  Matrix z = Matrix::Ones(rows, cols), mask_reversed;
  dropout_forward_keyed(z, 0.5f, 9, reversed, mask_reversed);
  EXPECT_TRUE(mask_reversed.colwise().reverse() == mask);
  // At p = 0.1 a tenth is dropped.
  Matrix w = Matrix::Ones(rows, cols), mask_tenth;
  dropout_forward_keyed(w, 0.1f, 9, keys, mask_tenth);
  EXPECT_NEAR((mask_tenth.array() == 0).cast<double>().mean(), 0.1, 0.005);
}

TEST(SoftmaxCrossEntropy, GradientMatchesFiniteDifferencesAndIgnoresUnlabelledRows) {
  Matrix logits = random_matrix(8, 5, 50, 3.0f);
  const std::vector<std::int32_t> labels{0, 4, -1, 2, 2, -1, 1, 3};
  Matrix grad;
  const double loss0 = softmax_cross_entropy(logits, labels, grad);
  EXPECT_GT(loss0, 0.0);
  EXPECT_EQ(grad.row(2).cwiseAbs().maxCoeff(), 0.0f);
  EXPECT_EQ(grad.row(5).cwiseAbs().maxCoeff(), 0.0f);
  const auto loss = [&] {
    Matrix g;
    return softmax_cross_entropy(logits, labels, g);
  };
  const double err = max_grad_error(logits, grad, loss, 1e-3f);
  std::printf("softmax-CE logits max rel diff %.3g\n", err);
  EXPECT_LT(err, 2e-3);
  // Hand value: uniform logits give log(C) per labelled row.
  Matrix flat = Matrix::Zero(3, 4);
  EXPECT_NEAR(softmax_cross_entropy(flat, std::vector<std::int32_t>{1, -1, 3}, grad), std::log(4.0),
              1e-9);
  EXPECT_NEAR(grad(0, 1), (0.25 - 1.0) / 2, 1e-7);
}

TEST(SoftmaxCrossEntropy, StaysFiniteForHugeLogits) {
  Matrix logits(1, 3);
  logits << 1000.0f, -1000.0f, 0.0f;
  Matrix grad;
  const double loss = softmax_cross_entropy(logits, std::vector<std::int32_t>{1}, grad);
  EXPECT_NEAR(loss, 2000.0, 1e-3);
  EXPECT_TRUE(grad.allFinite());
}

TEST(GlorotUniform, StaysWithinItsBoundAndReplaysFromItsSeed) {
  Matrix a(64, 32), b(64, 32), c(64, 32);
  glorot_uniform(a, 1);
  glorot_uniform(b, 1);
  glorot_uniform(c, 2);
  const float bound = std::sqrt(6.0f / 96.0f);
  EXPECT_LE(a.cwiseAbs().maxCoeff(), bound);
  EXPECT_GT(a.cwiseAbs().maxCoeff(), 0.9f * bound);
  EXPECT_NEAR(a.mean(), 0.0f, 0.02f);
  EXPECT_TRUE(a == b);
  EXPECT_FALSE(a == c);
}

TEST(DenseLayer, BackwardMatchesFiniteDifferences) {
  Matrix x = random_matrix(10, 6, 60), w = random_matrix(6, 3, 61), b = random_matrix(1, 3, 62);
  const Matrix r = random_matrix(10, 3, 63);
  Matrix out, gw = Matrix::Zero(6, 3), gb = Matrix::Zero(1, 3), gx;
  dense_forward(x, w, &b, out);
  dense_backward(x, w, r, gw, &gb, &gx);
  const auto loss = [&] {
    Matrix o;
    dense_forward(x, w, &b, o);
    return dot(o, r);
  };
  EXPECT_LT(max_grad_error(w, gw, loss, 1e-2f), 1e-3);
  EXPECT_LT(max_grad_error(b, gb, loss, 1e-2f), 1e-3);
  EXPECT_LT(max_grad_error(x, gx, loss, 1e-2f), 1e-3);
}

TEST(GemmBlocking, IsPinnedSoFloatBitsDoNotDependOnTheMachinesCaches) {
  // model/layers.cpp fixes what Eigen would read from CPUID (the golden runs differed between
  // 32 KiB and 48 KiB L1 machines before).
  EXPECT_EQ(Eigen::l1CacheSize(), 48 * 1024);
  EXPECT_EQ(Eigen::l2CacheSize(), 2 * 1024 * 1024);
  EXPECT_EQ(Eigen::l3CacheSize(), 32 * 1024 * 1024);
}
