// Tests of model/sparse_input.hpp: compressed rows hold exactly the dense rows, and the first
// layer on them (SAGE with the mean or importance weights, GCN) gives the dense layer's output
// and the dense model's parameter gradients, in training and in layer-wise inference.
#include "model/sparse_input.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <random>

#include "model/csr_graph.hpp"
#include "model/data_error.hpp"
#include "model/feature_transform.hpp"
#include "model/gnn_model.hpp"
#include "model/inference.hpp"
#include "model/layers.hpp"
#include "model/sampler.hpp"
#include "tests/model/grad_check.hpp"
#include "tests/model/temp_dir.hpp"

using namespace degnn;
using degnn::testing::random_graph;

namespace {

/// Bag-of-words-like rows: about `fill` of the entries are small counts, the rest zero; some rows
/// are all zero.
Matrix wordy(Eigen::Index rows, Eigen::Index cols, double fill, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  Matrix x = Matrix::Zero(rows, cols);
  for (Eigen::Index r = 0; r < rows; ++r)
    for (Eigen::Index c = 0; c < cols; ++c)
      if (r % 7 != 3 && u(rng) < fill) x(r, c) = static_cast<float>(1 + rng() % 4);
  return x;
}

void expect_near(const Matrix& a, const Matrix& b, float tol, const char* what) {
  ASSERT_EQ(a.rows(), b.rows()) << what;
  ASSERT_EQ(a.cols(), b.cols()) << what;
  const float scale = std::max(1.0f, b.cwiseAbs().maxCoeff());
  EXPECT_LE((a - b).cwiseAbs().maxCoeff(), tol * scale) << what;
}

TEST(SparseInput, CompressedRowsHoldExactlyTheDenseRowsAndGatherInOrder) {
  const Matrix x = wordy(40, 300, 0.03, 1);
  const sparse_rows s = to_sparse(x);
  EXPECT_EQ(to_dense(s), x);
  EXPECT_EQ(s.m.nonZeros(), (x.array() != 0).count());
  EXPECT_NEAR(density(x), static_cast<double>(s.m.nonZeros()) / 12000.0, 1e-12);
  const std::vector<node_id> ids{5, 3, 3, 39, 0, 10};  // repeats and any order
  const Matrix g = to_dense(gather_rows(s, ids));
  for (size_t r = 0; r < ids.size(); ++r)
    EXPECT_EQ(g.row(static_cast<Eigen::Index>(r)), x.row(ids[r])) << r;
  EXPECT_THROW(gather_rows(s, std::vector<node_id>{40}), std::out_of_range);
  EXPECT_THROW(gather_rows(s, std::vector<node_id>{-1}), std::out_of_range);
  // Row normalisation as --normalize-features row does it on dense rows.
  Matrix dense = x;
  apply_feature_transform("row", dense);
  sparse_rows normalized = s;
  normalize_rows(normalized);
  expect_near(to_dense(normalized), dense, 1e-6f, "row normalisation");
}

void check_model(model_kind kind, bool weighted) {
  const csr_graph g = random_graph(300, 2400, 2);
  const Matrix x = wordy(300, 500, 0.02, 3);
  const sparse_rows xs = to_sparse(x);
  const std::vector<node_id> seeds{3, 7, 11, 20, 31, 42, 50, 58, 99, 150, 201, 299};
  sampled_batch batch = sample_blocks(g, seeds, std::vector<int>{4, 5}, 9, 0);
  if (weighted) {  // importance weights of a locality-biased sample (local_cg.hpp)
    std::mt19937 rng(4);
    batch.blocks[0].edge_weight.resize(batch.blocks[0].indices.size());
    for (float& w : batch.blocks[0].edge_weight)
      w = 0.05f + static_cast<float>(rng() % 100) / 400.0f;
  }
  const auto& inputs = batch.inputs();
  Matrix x_in(static_cast<Eigen::Index>(inputs.size()), x.cols());
  for (size_t r = 0; r < inputs.size(); ++r)
    x_in.row(static_cast<Eigen::Index>(r)) = x.row(inputs[r]);
  const sparse_rows xs_in = gather_rows(xs, inputs);
  model_config config{.kind = kind,
                      .in_dim = 500,
                      .hidden = 16,
                      .num_classes = 4,
                      .num_layers = 2,
                      .dropout = 0.3f};
  config.heads = 4;  // GAT: 4 heads of 4, 2 averaged output heads, attention dropout
  config.output_heads = 2;
  config.attention_dropout = 0.3f;
  gnn_model dense(config, 5), sparse(config, 5);
  for (gnn_model* m : {&dense, &sparse})
    for (Matrix* p : m->parameters())
      if (p->rows() == 1) p->setConstant(0.05f);
  std::vector<std::int32_t> labels;
  for (size_t i = 0; i < seeds.size(); ++i)
    labels.push_back(static_cast<std::int32_t>(i % 4));
  Matrix grad_dense, grad_sparse;
  dense.zero_grad();
  sparse.zero_grad();
  const Matrix ld = dense.forward(batch, x_in, true, 77);
  const Matrix ls = sparse.forward(batch, xs_in, true, 77);
  expect_near(ls, ld, 1e-5f, "logits");
  softmax_cross_entropy(ld, labels, grad_dense);
  softmax_cross_entropy(ls, labels, grad_sparse);
  dense.backward(grad_dense);
  sparse.backward(grad_sparse);
  const auto gd = dense.gradients(), gs = sparse.gradients();
  ASSERT_EQ(gd.size(), gs.size());
  for (size_t i = 0; i < gd.size(); ++i) {
    EXPECT_GT(gd[i]->cwiseAbs().maxCoeff(), 0.0f) << "parameter " << i << " got no gradient";
    expect_near(*gs[i], *gd[i], 1e-5f, ("gradient of parameter " + std::to_string(i)).c_str());
  }
  // The input gets no gradient from a sparse forward.
  Matrix grad_input;
  EXPECT_THROW(sparse.backward(grad_sparse, &grad_input), std::logic_error);
  // Exact layer-wise inference over the whole graph.
  expect_near(layerwise_inference(sparse, g, xs, 64), layerwise_inference(dense, g, x, 64), 1e-5f,
              "layer-wise inference");
}

TEST(SparseInput, RowsFromSeveralSourcesAssembleAndArraysFromPeersAreChecked) {
  const Matrix a = wordy(10, 50, 0.3, 2), b = wordy(6, 50, 0.1, 3);
  const sparse_rows sa = to_sparse(a), sb = to_sparse(b);
  const std::vector<sparse_row_ref> refs{{&sb, 5}, {&sa, 0}, {&sa, 3}, {&sb, 0}, {&sa, 9}};
  const Matrix got = to_dense(assemble_rows(refs, 50));
  EXPECT_EQ(got.row(0), b.row(5));
  EXPECT_EQ(got.row(1), a.row(0));
  EXPECT_EQ(got.row(2), a.row(3));  // an all-zero row (r % 7 == 3)
  EXPECT_EQ(got.row(3), b.row(0));
  EXPECT_EQ(got.row(4), a.row(9));
  EXPECT_THROW(assemble_rows(std::vector<sparse_row_ref>{{&sa, 10}}, 50), std::invalid_argument);
  EXPECT_THROW(assemble_rows(std::vector<sparse_row_ref>{{&sa, 0}}, 49), std::invalid_argument);

  // Arrays as a file or a peer sends them: the round trip is exact, and each way a hostile one
  // can be wrong is refused.
  const auto counts = row_counts(sa);
  const std::vector<std::int32_t> columns(sa.m.innerIndexPtr(),
                                          sa.m.innerIndexPtr() + sa.m.nonZeros());
  const std::vector<float> values(sa.m.valuePtr(), sa.m.valuePtr() + sa.m.nonZeros());
  EXPECT_EQ(to_dense(sparse_from_parts(50, counts, columns, values)), a);
  auto refused = [&](std::vector<std::int32_t> c, std::vector<std::int32_t> col,
                     std::vector<float> v, const char* why) {
    EXPECT_THROW(sparse_from_parts(50, c, col, v), std::invalid_argument) << why;
  };
  ASSERT_GT(counts[0], 1);
  auto bad = columns;
  bad[0] = 50;
  refused(counts, bad, values, "column out of range");
  bad = columns;
  std::swap(bad[0], bad[1]);
  refused(counts, bad, values, "columns out of order");
  bad = columns;
  bad[1] = bad[0];
  refused(counts, bad, values, "a repeated column");
  auto nan = values;
  nan[0] = std::numeric_limits<float>::quiet_NaN();
  refused(counts, columns, nan, "a non-finite value");
  auto more = counts;
  more[0] += 1;
  refused(more, columns, values, "counts that do not add up");
  auto negative = counts;
  negative[0] = -1;
  refused(negative, columns, values, "a negative count");
  refused(counts, columns, std::vector<float>(values.begin(), values.end() - 1),
          "fewer values than columns");
}

TEST(SparseInput, SageOnCompressedRowsGivesTheDenseLogitsAndGradients) {
  check_model(model_kind::sage, false);
}

TEST(SparseInput, SageWithImportanceWeightsGivesTheDenseLogitsAndGradients) {
  check_model(model_kind::sage, true);
}

TEST(SparseInput, GcnOnCompressedRowsGivesTheDenseLogitsAndGradients) {
  check_model(model_kind::gcn, false);
}

TEST(SparseInput, GatOnCompressedRowsGivesTheDenseLogitsAndGradients) {
  check_model(model_kind::gat, false);
}

TEST(SparseInput, MakeFeaturesSparseKeepsTheWidthAndRefusesAWrongShape) {
  dataset d;
  d.graph = random_graph(30, 90, 6);
  d.features = wordy(30, 200, 0.05, 7);
  const Matrix before = d.features;
  make_features_sparse(d);
  ASSERT_TRUE(d.sparse_features);
  EXPECT_EQ(d.num_features(), 200);
  EXPECT_EQ(d.features.rows(), 0);
  EXPECT_EQ(to_dense(*d.sparse_features), before);
  const model_config config{.in_dim = 200, .hidden = 8, .num_classes = 3, .num_layers = 1};
  gnn_model m(config, 1);
  const sampled_batch batch =
      sample_blocks(d.graph, std::vector<node_id>{1, 2}, std::vector<int>{3}, 1, 0);
  const sparse_rows too_few = gather_rows(*d.sparse_features, std::vector<node_id>{1});
  EXPECT_THROW(m.forward(batch, too_few, false, 0), std::invalid_argument);
}

// The cache keeps dense rows; read with sparse_features it gives the same rows, compressed, a chunk
// at a time (5001 rows of 2001 columns: chunks of 2096 rows, the last one of 809 rows not a whole
// number of checksum words).
TEST(SparseInput, ACacheReadIntoCompressedRowsHoldsTheSameRowsAndIsChecked) {
  degnn::testing::temp_dir t("sparse-cache");
  dataset d;
  d.name = "wordy";
  d.graph = random_graph(5001, 9000, 8);
  // A third non-zero: cached as dense rows, which a compressed load reads a chunk at a time
  // (mostly-zero features are cached compressed, DatasetCache.MostlyZero...).
  d.features = wordy(5001, 2001, 0.4, 9);
  d.labels.assign(5001, 1);
  d.num_classes = 2;
  d.train = {0, 1};
  d.valid = {2};
  d.test = {3};
  const auto file = t.path / "c.degnn-cache";
  write_dataset_cache(d, file, 42);
  dataset s;
  ASSERT_TRUE(read_dataset_cache(file, 42, s, true));
  ASSERT_TRUE(s.sparse_features);
  EXPECT_EQ(s.features.rows(), 0);
  EXPECT_EQ(s.num_features(), 2001);
  EXPECT_EQ(to_dense(*s.sparse_features), d.features);
  EXPECT_EQ(s.labels, d.labels);
  // A compressed dataset is cached compressed, and reads back the same rows.
  write_dataset_cache(s, t.path / "other", 42);
  dataset back;
  ASSERT_TRUE(read_dataset_cache(t.path / "other", 42, back, false));
  EXPECT_EQ(back.features, d.features);
  // A damaged feature byte fails the checksum on the compressed path too.
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-(8 + 4 * 4 + 4 * 5001 + 100), std::ios::end);
    f.put('\x7f');
  }
  dataset again;
  EXPECT_THROW(read_dataset_cache(file, 42, again, true), data_error);
}

}  // namespace
