// Tests of model/gnn_model.hpp: whole-model gradients against finite differences (every parameter
// and the input, SAGE and GCN), parameter flattening, gradient accumulation and shape checks.
#include "model/gnn_model.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "model/csr_graph.hpp"
#include "model/sampler.hpp"
#include "tests/model/grad_check.hpp"

using namespace degnn;
using namespace degnn::testing;

namespace {

struct model_case {
  model_kind kind;
  const char* name;
};

void check_model_gradients(model_kind kind, const char* name) {
  const csr_graph g = random_graph(60, 240, 1);
  const std::vector<node_id> seeds{3, 7, 11, 20, 31, 42, 50, 58};
  const std::vector<int> fanouts{3, 4};  // sampled rows exercise the GCN rescaling too
  const sampled_batch batch = sample_blocks(g, seeds, fanouts, 5, 0);
  ASSERT_EQ(batch.blocks.size(), 2u);
  model_config config{
      .kind = kind, .in_dim = 5, .hidden = 6, .num_classes = 3, .num_layers = 2, .dropout = 0.25f};
  config.heads = 2;  // GAT: two concatenated heads of 3, two averaged output heads
  config.output_heads = 2;
  config.attention_dropout = 0.25f;
  config.input_dropout = 0.25f;
  gnn_model model(config, 17);
  // Non-zero biases so their gradients are exercised through ReLU too.
  for (Matrix* p : model.parameters())
    if (p->rows() == 1) *p = random_matrix(1, p->cols(), 70, 0.1f);
  Matrix input = random_matrix(batch.blocks[0].num_src(), 5, 71);
  const std::vector<std::int32_t> labels{0, 1, 2, 1, -1, 0, 2, 2};
  const std::uint64_t dropout_seed = 123;  // the same mask in every evaluation

  model.zero_grad();
  Matrix logits = model.forward(batch, input, true, dropout_seed), grad_logits, grad_input;
  ASSERT_EQ(logits.rows(), 8);
  ASSERT_EQ(logits.cols(), 3);
  softmax_cross_entropy(logits, labels, grad_logits);
  model.backward(grad_logits, &grad_input);

  std::vector<Matrix> grads;
  for (Matrix* gm : model.gradients())
    grads.push_back(*gm);
  const auto loss = [&] {
    Matrix gl;
    return softmax_cross_entropy(model.forward(batch, input, true, dropout_seed), labels, gl);
  };
  // eps 3e-4: a step of 1e-3 already moves some hidden pre-activations across the ReLU kink
  // (the error then shrinks with eps, as a kink's does, not a bug's); 3e-4 stays clear of it
  // here and is still large enough for float round-off (~1e-4 of the gradient scale).
  const float eps = 3e-4f;
  // A parameter whose whole gradient is tiny (GAT's output-layer attn_r, 2e-4 against 0.15
  // elsewhere: a destination's own score term shifts all its edges alike, so only the LeakyReLU's
  // kink makes it count) is compared on the model's scale: float round-off of the loss is
  // absolute, and relative to 2e-4 it reads as 1%.
  double model_scale = 0;
  for (const Matrix& gm : grads)
    model_scale = std::max<double>(model_scale, gm.cwiseAbs().maxCoeff());
  const auto params = model.parameters();
  for (std::size_t p = 0; p < params.size(); ++p) {
    const double own_scale = std::max<double>(grads[p].cwiseAbs().maxCoeff(), 1e-6);
    const double err = max_grad_error(*params[p], grads[p], loss, eps) * own_scale /
                       std::max(own_scale, 0.05 * model_scale);
    std::printf("%s parameter %zu (%ldx%ld) max rel diff %.3g\n", name, p, (long)params[p]->rows(),
                (long)params[p]->cols(), err);
    EXPECT_LT(err, 1e-2) << name << " parameter " << p;
  }
  const double err = max_grad_error(input, grad_input, loss, eps);
  std::printf("%s input max rel diff %.3g\n", name, err);
  EXPECT_LT(err, 1e-2);
}

}  // namespace

TEST(GnnModel, TwoLayerSageGradientsMatchFiniteDifferencesForEveryParameterAndTheInput) {
  check_model_gradients(model_kind::sage, "sage");
}

TEST(GnnModel, TwoLayerGcnGradientsMatchFiniteDifferencesForEveryParameterAndTheInput) {
  check_model_gradients(model_kind::gcn, "gcn");
}

TEST(GnnModel, TwoLayerGatGradientsMatchFiniteDifferencesForEveryParameterAndTheInput) {
  check_model_gradients(model_kind::gat, "gat");
}

TEST(GnnModel, BackwardAccumulatesUntilZeroGrad) {
  const csr_graph g = random_graph(40, 150, 2);
  const std::vector<node_id> seeds{1, 2, 3};
  const std::vector<int> fanouts{2, 2};
  const sampled_batch batch = sample_blocks(g, seeds, fanouts, 1, 0);
  gnn_model model({.in_dim = 4, .hidden = 5, .num_classes = 2, .num_layers = 2, .dropout = 0});
  const Matrix input = random_matrix(batch.blocks[0].num_src(), 4, 3);
  const Matrix grad = random_matrix(3, 2, 4);
  model.forward(batch, input, true, 0);
  model.backward(grad);
  const std::vector<float> once = flatten(model.gradients());
  model.forward(batch, input, true, 0);
  model.backward(grad);
  const std::vector<float> twice = flatten(model.gradients());
  for (std::size_t k = 0; k < once.size(); ++k)
    EXPECT_NEAR(twice[k], 2 * once[k], 1e-5f);
  model.zero_grad();
  for (float x : flatten(model.gradients()))
    EXPECT_EQ(x, 0.0f);
}

TEST(GnnModel, EvaluationIgnoresDropoutAndTrainingAppliesIt) {
  const csr_graph g = random_graph(40, 150, 5);
  const std::vector<node_id> seeds{4, 5, 6, 7};
  const std::vector<int> fanouts{-1, -1};
  const sampled_batch batch = sample_blocks(g, seeds, fanouts, 1, 0);
  gnn_model model({.in_dim = 4, .hidden = 16, .num_classes = 3, .num_layers = 2, .dropout = 0.5});
  const Matrix input = random_matrix(batch.blocks[0].num_src(), 4, 6);
  const Matrix a = model.forward(batch, input, false, 1);
  const Matrix b = model.forward(batch, input, false, 2);
  EXPECT_TRUE(a == b);
  const Matrix c = model.forward(batch, input, true, 1);
  const Matrix d = model.forward(batch, input, true, 1);
  const Matrix e = model.forward(batch, input, true, 2);
  EXPECT_TRUE(c == d);
  EXPECT_FALSE(c == e);
}

TEST(GnnModel, ThreeLayersHaveTheRightShapes) {
  gnn_model model(
      {.kind = model_kind::gcn, .in_dim = 7, .hidden = 9, .num_classes = 4, .num_layers = 3});
  ASSERT_EQ(model.num_layers(), 3);
  EXPECT_EQ(model.layer(0).in_dim(), 7);
  EXPECT_EQ(model.layer(1).in_dim(), 9);
  EXPECT_EQ(model.layer(2).out_dim(), 4);
  EXPECT_EQ(model.num_parameters(), std::size_t{7 * 9 + 9 + 9 * 9 + 9 + 9 * 4 + 4});
}

TEST(GnnModel, FlattenAndUnflattenRoundTripTheParameters) {
  gnn_model a({.in_dim = 6, .hidden = 8, .num_classes = 3}, 1);
  gnn_model b({.in_dim = 6, .hidden = 8, .num_classes = 3}, 2);
  const std::vector<float> flat = flatten(a.parameters());
  EXPECT_EQ(flat.size(), a.num_parameters());
  EXPECT_NE(flat, flatten(b.parameters()));
  unflatten(flat, b.parameters());
  EXPECT_EQ(flat, flatten(b.parameters()));
  EXPECT_THROW(unflatten(std::vector<float>(3), b.parameters()), std::invalid_argument);
}

TEST(GnnModel, RejectsABatchWithTheWrongNumberOfBlocksOrInputRows) {
  const csr_graph g = random_graph(30, 100, 7);
  const std::vector<node_id> seeds{1, 2};
  const std::vector<int> one{2}, two{2, 2};
  gnn_model model({.in_dim = 3, .hidden = 4, .num_classes = 2, .num_layers = 2});
  const sampled_batch b1 = sample_blocks(g, seeds, one, 1, 0);
  EXPECT_THROW(model.forward(b1, Matrix::Zero(b1.blocks[0].num_src(), 3), false, 0),
               std::invalid_argument);
  const sampled_batch b2 = sample_blocks(g, seeds, two, 1, 0);
  EXPECT_THROW(model.forward(b2, Matrix::Zero(b2.blocks[0].num_src() + 1, 3), false, 0),
               std::invalid_argument);
  EXPECT_THROW(model.backward(Matrix::Zero(2, 2)), std::logic_error);
}

// The whole feature matrix as input (feature_table): the first layer reads the rows its block
// names in place; logits and every gradient equal those of the gathered rows bit for bit, for
// SAGE (mean and importance-weighted) and GCN, and a row outside the table is refused.
TEST(GnnModel, AFeatureTableGivesTheGatheredRowsResultsBitForBit) {
  const csr_graph g = random_graph(300, 2400, 9);
  const Matrix features = random_matrix(300, 24, 10);
  const std::vector<node_id> seeds{3, 7, 11, 20, 31, 42, 50, 58, 99, 150, 151, 299};
  const std::vector<std::int32_t> labels{0, 1, 2, 1, -1, 0, 2, 2, 1, 0, 1, 2};
  for (const model_kind kind : {model_kind::sage, model_kind::gcn}) {
    for (const bool weighted : {false, true}) {
      if (weighted && kind == model_kind::gcn) continue;
      sampled_batch batch = sample_blocks(g, seeds, std::vector<int>{5, 4, 3}, 5, 0);
      if (weighted) {
        // Importance weights on the first block, as a locality-biased expansion makes them.
        auto& b0 = batch.blocks[0];
        b0.edge_weight.resize(b0.indices.size());
        for (size_t e = 0; e < b0.edge_weight.size(); ++e)
          b0.edge_weight[e] = 0.05f + 0.01f * static_cast<float>(e % 17);
      }
      const auto& inputs = batch.blocks[0].src_nodes;
      Matrix gathered(static_cast<Eigen::Index>(inputs.size()), features.cols());
      for (size_t i = 0; i < inputs.size(); ++i)
        gathered.row(static_cast<Eigen::Index>(i)) = features.row(inputs[i]);
      const model_config config{.kind = kind,
                                .in_dim = 24,
                                .hidden = 16,
                                .num_classes = 3,
                                .num_layers = 3,
                                .dropout = 0.5f};
      gnn_model a(config, 17), b(config, 17);
      Matrix grad_a, grad_b;
      a.zero_grad();
      b.zero_grad();
      const Matrix la = a.forward(batch, gathered, true, 77);
      const Matrix lb = b.forward(batch, feature_table{&features}, true, 77);
      EXPECT_TRUE(la == lb) << "logits, kind " << static_cast<int>(kind) << " weighted "
                            << weighted;
      softmax_cross_entropy(la, labels, grad_a);
      softmax_cross_entropy(lb, labels, grad_b);
      a.backward(grad_a);
      b.backward(grad_b);
      EXPECT_EQ(flatten(a.gradients()), flatten(b.gradients())) << "gradients";
      EXPECT_THROW(b.backward(grad_b, &grad_a), std::logic_error) << "no input gradient";
    }
  }
  // A table without a row the block names.
  const sampled_batch batch = sample_blocks(g, seeds, std::vector<int>{5, 4, 3}, 5, 0);
  gnn_model m({.in_dim = 24, .hidden = 8, .num_classes = 3, .num_layers = 3, .dropout = 0});
  const Matrix short_table = features.topRows(100);
  EXPECT_THROW(m.forward(batch, feature_table{&short_table}, false, 0), std::invalid_argument);
}
