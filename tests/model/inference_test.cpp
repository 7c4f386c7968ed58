// Tests of model/inference.hpp: full-neighbour blocks, layer-wise inference against a dense
// reference on a hand-built graph, agreement with a sampled forward over fanout -1 blocks, and
// accuracy.
#include "model/inference.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "model/sampler.hpp"
#include "tests/model/grad_check.hpp"

using namespace degnn;
using namespace degnn::testing;

namespace {

// 7 nodes, undirected edges, node 6 isolated.
csr_graph hand_graph() {
  const std::vector<node_id> src{0, 0, 1, 2, 3, 4, 1};
  const std::vector<node_id> dst{1, 2, 2, 3, 4, 5, 5};
  return build_in_csr(7, src, dst);
}

Eigen::MatrixXd dense_adjacency(const csr_graph& g) {
  Eigen::MatrixXd a = Eigen::MatrixXd::Zero(g.num_nodes, g.num_nodes);
  for (node_id v = 0; v < g.num_nodes; ++v)
    for (node_id u : g.in_neighbors(v))
      a(v, u) = 1.0;
  return a;
}

Eigen::MatrixXd d(const Matrix& m) {
  return m.cast<double>();
}

Eigen::MatrixXd relu(Eigen::MatrixXd m) {
  return m.cwiseMax(0.0);
}

Eigen::MatrixXd add_bias(Eigen::MatrixXd m, const Matrix& b) {
  m.rowwise() += d(b).row(0);
  return m;
}

}  // namespace

TEST(FullNeighborBlock, PutsDestinationsFirstThenNeighboursInFirstSeenOrder) {
  const csr_graph g = hand_graph();
  std::vector<std::int32_t> scratch(g.num_nodes, -1);
  const std::vector<node_id> dst{2, 5};
  const block b = full_neighbor_block(g, dst, scratch);
  // in-neighbours: 2 <- {0, 1, 3}, 5 <- {1, 4}
  EXPECT_EQ(b.src_nodes, (std::vector<node_id>{2, 5, 0, 1, 3, 4}));
  EXPECT_EQ(b.indptr, (std::vector<std::int32_t>{0, 3, 5}));
  EXPECT_EQ(b.indices, (std::vector<std::int32_t>{2, 3, 4, 3, 5}));
  EXPECT_EQ(b.src_degree, (std::vector<std::int32_t>{3, 2, 2, 3, 2, 2}));
  EXPECT_EQ(scratch, std::vector<std::int32_t>(7, -1));
}

TEST(LayerwiseInference, SageOnAHandBuiltGraphEqualsADenseReference) {
  const csr_graph g = hand_graph();
  const Matrix x = random_matrix(7, 4, 1);
  gnn_model model({.kind = model_kind::sage, .in_dim = 4, .hidden = 5, .num_classes = 3});
  for (Matrix* p : model.parameters())
    if (p->rows() == 1) *p = random_matrix(1, p->cols(), 2, 0.3f);
  auto& l0 = static_cast<sage_layer&>(model.layer(0));
  auto& l1 = static_cast<sage_layer&>(model.layer(1));
  // A_mean: row v averages v's in-neighbours (zero row for the isolated node).
  Eigen::MatrixXd a = dense_adjacency(g);
  for (Eigen::Index v = 0; v < a.rows(); ++v)
    if (a.row(v).sum() > 0) a.row(v) /= a.row(v).sum();
  const Eigen::MatrixXd h1 =
      relu(add_bias(d(x) * d(l0.w_self) + a * d(x) * d(l0.w_neigh), l0.bias));
  const Eigen::MatrixXd expected = add_bias(h1 * d(l1.w_self) + a * h1 * d(l1.w_neigh), l1.bias);
  for (node_id batch : {1, 3, 100}) {
    const Matrix logits = layerwise_inference(model, g, x, batch);
    const double diff = (d(logits) - expected).cwiseAbs().maxCoeff();
    std::printf("sage inference (ranges of %d) max abs diff %.3g\n", batch, diff);
    EXPECT_LT(diff, 1e-5);
  }
}

TEST(LayerwiseInference, GcnOnAHandBuiltGraphEqualsADenseReference) {
  const csr_graph g = hand_graph();
  const Matrix x = random_matrix(7, 4, 3);
  gnn_model model({.kind = model_kind::gcn, .in_dim = 4, .hidden = 5, .num_classes = 3});
  for (Matrix* p : model.parameters())
    if (p->rows() == 1) *p = random_matrix(1, p->cols(), 4, 0.3f);
  auto& l0 = static_cast<gcn_layer&>(model.layer(0));
  auto& l1 = static_cast<gcn_layer&>(model.layer(1));
  // A_hat = D^-1/2 (A + I) D^-1/2, D = degree + 1.
  Eigen::MatrixXd a = dense_adjacency(g) + Eigen::MatrixXd::Identity(7, 7);
  const Eigen::VectorXd inv_sqrt = a.rowwise().sum().cwiseSqrt().cwiseInverse();
  a = inv_sqrt.asDiagonal() * a * inv_sqrt.asDiagonal();
  const Eigen::MatrixXd h1 = relu(add_bias(a * d(x) * d(l0.weight), l0.bias));
  const Eigen::MatrixXd expected = add_bias(a * h1 * d(l1.weight), l1.bias);
  const Matrix logits = layerwise_inference(model, g, x, 2);
  const double diff = (d(logits) - expected).cwiseAbs().maxCoeff();
  std::printf("gcn inference max abs diff %.3g\n", diff);
  EXPECT_LT(diff, 1e-5);
}

TEST(LayerwiseInference, EqualsASampledForwardWithAllNeighbours) {
  const csr_graph g = random_graph(300, 1500, 5);
  const Matrix x = random_matrix(300, 8, 6);
  const std::vector<node_id> seeds{0, 17, 42, 99, 123, 200, 299};
  const std::vector<int> all{-1, -1};
  const sampled_batch batch = sample_blocks(g, seeds, all, 1, 0);
  Matrix input(batch.inputs().size(), 8);
  for (std::size_t k = 0; k < batch.inputs().size(); ++k)
    input.row(k) = x.row(batch.inputs()[k]);
  for (model_kind kind : {model_kind::sage, model_kind::gcn}) {
    gnn_model model({.kind = kind, .in_dim = 8, .hidden = 16, .num_classes = 4}, 9);
    const Matrix sampled = model.forward(batch, input, false, 0);
    const Matrix full = layerwise_inference(model, g, x, 64);
    double diff = 0;
    for (std::size_t s = 0; s < seeds.size(); ++s)
      diff = std::max<double>(diff, (sampled.row(s) - full.row(seeds[s])).cwiseAbs().maxCoeff());
    std::printf("%s sampled(-1,-1) vs layer-wise max abs diff %.3g\n",
                kind == model_kind::sage ? "sage" : "gcn", diff);
    EXPECT_LT(diff, 1e-5);
  }
}

TEST(Accuracy, CountsArgmaxMatchesOnTheGivenNodesOnly) {
  Matrix logits(4, 3);
  logits << 1, 0, 0,  //
      0, 2, 1,        //
      0, 0, 5,        //
      3, 1, 0;
  const std::vector<std::int32_t> labels{0, 2, 2, 1};
  EXPECT_DOUBLE_EQ(accuracy(logits, labels, std::vector<node_id>{0, 1, 2, 3}), 0.5);
  EXPECT_DOUBLE_EQ(accuracy(logits, labels, std::vector<node_id>{0, 2}), 1.0);
  EXPECT_DOUBLE_EQ(accuracy(logits, labels, std::vector<node_id>{}), 0.0);
}
