// Tests of model/push_plan.hpp against an unfused, single-process reference: the pushes one shard
// of a 4-part Cora gets from three owners are planned at fusion levels 2, 1 and 0, computed, and
// their partial sums and weight gradients compared with computing every neighbour alone.
#include "model/push_plan.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "model/dataset.hpp"
#include "model/gnn_model.hpp"
#include "model/local_cg.hpp"
#include "model/partitioner.hpp"
#include "model/sparse_input.hpp"

using namespace degnn;

namespace {

constexpr int kParts = 4;
constexpr int kShard = 1;
constexpr int kTop = 2;  // 3 layers: the shard computes h^(2) of its nodes
const std::vector<int> kFanouts{5, 4, 3};

struct shard_fixture {
  dataset d;
  std::unique_ptr<partition_book> book;
  graph_partition part;
  std::vector<Matrix> history;  ///< per level 0..kTop-1: a row per global node (features at 0)
  model_config config;

  shard_fixture() {
    d = load_dataset(std::filesystem::path(DEGNN_SOURCE_DIR) / "data" / "cora");
    book = std::make_unique<partition_book>(
        partition_graph(d.graph, d.train, kParts, partition_method::metis, 3), kParts);
    part = extract_partition(d, *book, kShard);
    config = {.kind = model_kind::sage,
              .in_dim = static_cast<std::int32_t>(d.num_features()),
              .hidden = 8,
              .num_classes = d.num_classes,
              .num_layers = 3,
              .dropout = 0.5f};
    // Remote leaves read fixed rows: the features at level 0, a smooth function of the id above.
    history.push_back(d.features);
    Matrix h(d.num_nodes(), config.hidden);
    for (Eigen::Index i = 0; i < h.rows(); ++i)
      for (Eigen::Index j = 0; j < h.cols(); ++j)
        h(i, j) = std::sin(0.37f * static_cast<float>(i) + 0.11f * static_cast<float>(j));
    history.push_back(h);
  }

  std::vector<Matrix> leaves(const local_cg& cg) const {
    std::vector<Matrix> out(cg.remote_leaves.size());
    for (size_t k = 0; k < out.size(); ++k) {
      out[k].resize(static_cast<Eigen::Index>(cg.remote_leaves[k].size()), history[k].cols());
      for (size_t i = 0; i < cg.remote_leaves[k].size(); ++i)
        out[k].row(static_cast<Eigen::Index>(i)) = history[k].row(cg.remote_leaves[k][i]);
    }
    return out;
  }
};

const shard_fixture& fixture() {
  static const shard_fixture f;
  return f;
}

/// What three owners push to the shard: their seeds' first-hop neighbours owned by the shard
/// (and, from the shard's own part, its seeds' own rows).
struct pushes {
  struct one {
    std::vector<node_id> rows, targets, neighbors;
    std::vector<std::int32_t> counts;
  };
  std::vector<one> by_sender;
  std::vector<push_view> views() const {
    std::vector<push_view> v;
    for (const auto& p : by_sender)
      v.push_back({p.rows, p.targets, p.counts, p.neighbors});
    return v;
  }
};

pushes make_pushes(const shard_fixture& f) {
  pushes out;
  for (int owner = 0; owner < kParts; ++owner) {
    pushes::one p;
    const auto owned = f.book->owned(owner);
    for (size_t i = 0; i < owned.size() && p.targets.size() < 40; i += 7) {
      const node_id seed = owned[i];
      if (owner == kShard) p.rows.push_back(seed);
      std::int32_t n = 0;
      for (node_id u : f.d.graph.in_neighbors(seed)) {
        if (f.book->owner(u) != kShard || n == 6) continue;
        p.neighbors.push_back(u);
        ++n;
      }
      if (n == 0) continue;
      p.targets.push_back(seed);
      p.counts.push_back(n);
    }
    out.by_sender.push_back(std::move(p));
  }
  return out;
}

/// One step's computation at a fusion level: partial sums per push and the model's gradient for
/// fixed partial-sum gradients.
struct step_result {
  std::vector<Matrix> sums, own;
  std::vector<float> gradient;
  std::size_t graphs = 0;
};

step_result compute(const shard_fixture& f, const pushes& ps, fusion_level level,
                    const std::vector<Matrix>& grads, const std::vector<Matrix>& own_grads) {
  gnn_model model(f.config, 11);
  model.zero_grad();
  std::vector<std::int32_t> scratch(static_cast<size_t>(f.d.num_nodes()), -1);
  const auto views = ps.views();
  const push_plan plan = plan_pushes(views, level, scratch);
  EXPECT_TRUE(std::all_of(scratch.begin(), scratch.end(), [](std::int32_t v) { return v == -1; }));
  std::vector<local_cg> graphs;
  std::vector<local_cg_state> states(plan.graphs.size());
  std::vector<Matrix> outs;
  for (size_t g = 0; g < plan.graphs.size(); ++g) {
    graphs.push_back(expand_local(f.part, *f.book, plan.graphs[g], kTop, kFanouts, 5, 9, scratch));
    outs.push_back(forward_local_cg(model, graphs.back(), f.part.features, f.leaves(graphs.back()),
                                    true, 21, states[g]));
  }
  step_result r;
  r.graphs = graphs.size();
  for (size_t p = 0; p < views.size(); ++p) {
    Matrix sums, own;
    gather_partial_sums(plan, p, views[p], outs, f.config.hidden, sums, own);
    r.sums.push_back(sums);
    r.own.push_back(own);
  }
  std::vector<const Matrix*> g_ptr, own_ptr;
  for (size_t p = 0; p < views.size(); ++p) {
    g_ptr.push_back(&grads[p]);
    own_ptr.push_back(&own_grads[p]);
  }
  auto per_graph = scatter_gradients(plan, views, g_ptr, own_ptr, f.config.hidden);
  for (size_t g = 0; g < graphs.size(); ++g)
    backward_local_cg(model, graphs[g], states[g], std::move(per_graph[g]));
  r.gradient = flatten(model.gradients());
  return r;
}

/// The reference: every listed node computed in a graph of its own, sums and gradients added
/// up by hand.
step_result reference(const shard_fixture& f, const pushes& ps, const std::vector<Matrix>& grads,
                      const std::vector<Matrix>& own_grads) {
  gnn_model model(f.config, 11);
  model.zero_grad();
  std::vector<std::int32_t> scratch(static_cast<size_t>(f.d.num_nodes()), -1);
  auto alone = [&](node_id u, const RowVector* grad) -> RowVector {
    const node_id target[] = {u};
    const local_cg cg = expand_local(f.part, *f.book, target, kTop, kFanouts, 5, 9, scratch);
    local_cg_state state;
    const Matrix out = forward_local_cg(model, cg, f.part.features, f.leaves(cg), true, 21, state);
    if (grad) backward_local_cg(model, cg, state, Matrix(*grad));
    return out.row(0);
  };
  step_result r;
  for (size_t p = 0; p < ps.by_sender.size(); ++p) {
    const auto& push = ps.by_sender[p];
    Matrix sums = Matrix::Zero(static_cast<Eigen::Index>(push.targets.size()), f.config.hidden);
    size_t j = 0;
    for (size_t t = 0; t < push.targets.size(); ++t) {
      const RowVector g = grads[p].row(static_cast<Eigen::Index>(t));
      for (std::int32_t k = 0; k < push.counts[t]; ++k, ++j)
        sums.row(static_cast<Eigen::Index>(t)) += alone(push.neighbors[j], &g);
    }
    Matrix own(static_cast<Eigen::Index>(push.rows.size()), f.config.hidden);
    for (size_t i = 0; i < push.rows.size(); ++i) {
      const RowVector g = own_grads[p].row(static_cast<Eigen::Index>(i));
      own.row(static_cast<Eigen::Index>(i)) = alone(push.rows[i], &g);
    }
    r.sums.push_back(sums);
    r.own.push_back(own);
  }
  r.gradient = flatten(model.gradients());
  return r;
}

float max_diff(const Matrix& a, const Matrix& b) {
  EXPECT_EQ(a.rows(), b.rows());
  EXPECT_EQ(a.cols(), b.cols());
  if (a.rows() != b.rows() || a.cols() != b.cols() || a.size() == 0) return 0;
  return (a - b).cwiseAbs().maxCoeff();
}

}  // namespace

TEST(PushPlan, EveryFusionLevelEqualsComputingEachNodeAlone) {
  const auto& f = fixture();
  const pushes ps = make_pushes(f);
  ASSERT_GT(ps.by_sender[0].targets.size(), 3u);
  ASSERT_FALSE(ps.by_sender[kShard].rows.empty());
  std::vector<Matrix> grads, own_grads;
  for (size_t p = 0; p < ps.by_sender.size(); ++p) {
    const auto& push = ps.by_sender[p];
    grads.push_back(
        Matrix::Random(static_cast<Eigen::Index>(push.targets.size()), f.config.hidden));
    own_grads.push_back(
        Matrix::Random(static_cast<Eigen::Index>(push.rows.size()), f.config.hidden));
  }
  const step_result want = reference(f, ps, grads, own_grads);
  std::map<fusion_level, std::size_t> graphs;
  for (auto level : {fusion_level::per_step, fusion_level::per_push, fusion_level::none}) {
    SCOPED_TRACE("fusion level " + std::to_string(static_cast<int>(level)));
    const step_result got = compute(f, ps, level, grads, own_grads);
    graphs[level] = got.graphs;
    float worst = 0;
    for (size_t p = 0; p < want.sums.size(); ++p) {
      worst = std::max(worst, max_diff(got.sums[p], want.sums[p]));
      worst = std::max(worst, max_diff(got.own[p], want.own[p]));
    }
    float worst_grad = 0;
    ASSERT_EQ(got.gradient.size(), want.gradient.size());
    for (size_t i = 0; i < got.gradient.size(); ++i)
      worst_grad = std::max(worst_grad, std::abs(got.gradient[i] - want.gradient[i]));
    std::printf("fusion %d: %zu graphs, max |partial sum diff| %.3g, max |gradient diff| %.3g\n",
                static_cast<int>(level), got.graphs, worst, worst_grad);
    EXPECT_LT(worst, 1e-4f);
    EXPECT_LT(worst_grad, 1e-4f);
  }
  EXPECT_EQ(graphs[fusion_level::per_step], 1u);
  EXPECT_EQ(graphs[fusion_level::per_push], ps.by_sender.size());
  EXPECT_GT(graphs[fusion_level::none], graphs[fusion_level::per_push]);
}

TEST(PushPlan, PlacesAPushsRowsBeforeItsNeighboursAndSharedNodesOnce) {
  const node_id rows[] = {5, 9};
  const node_id targets[] = {100, 101};
  const std::int32_t counts[] = {2, 2};
  const node_id neighbors[] = {9, 7, 7, 3};
  const push_view v[] = {{rows, targets, counts, neighbors}, {{}, targets, counts, neighbors}};
  std::vector<std::int32_t> scratch(16, -1);
  const push_plan fused = plan_pushes(v, fusion_level::per_step, scratch);
  ASSERT_EQ(fused.graphs.size(), 1u);
  EXPECT_EQ(fused.graphs[0], (std::vector<node_id>{5, 9, 7, 3}));
  EXPECT_EQ(fused.row_at[0], (std::vector<graph_row>{{0, 0}, {0, 1}}));
  EXPECT_EQ(fused.neighbor_at[1], (std::vector<graph_row>{{0, 1}, {0, 2}, {0, 2}, {0, 3}}));
  const push_plan none = plan_pushes(v, fusion_level::none, scratch);
  // Two asked rows, then one graph per target with neighbours, per push.
  EXPECT_EQ(none.graphs.size(), 2u + 2u + 2u);
  EXPECT_EQ(none.graphs[2], (std::vector<node_id>{9, 7}));
  for (std::int32_t s : scratch)
    EXPECT_EQ(s, -1);
}

TEST(LocalCg, ForwardAndBackwardOnCompressedFeaturesEqualTheDenseOnes) {
  const auto& f = fixture();
  std::vector<node_id> targets;
  for (node_id l = 0; l < f.part.num_owned() && targets.size() < 40; l += 3)
    targets.push_back(f.part.owned[static_cast<size_t>(l)]);
  std::vector<std::int32_t> scratch(static_cast<size_t>(f.d.num_nodes()), -1);
  const local_cg cg = expand_local(f.part, *f.book, targets, kTop, kFanouts, 5, 9, scratch);
  ASSERT_FALSE(cg.remote_leaves[0].empty()) << "the test needs remote leaves at level 0";
  const auto leaves = f.leaves(cg);
  const sparse_rows local = to_sparse(f.part.features);
  const sparse_rows leaf_features = to_sparse(leaves[0]);
  Matrix grad(static_cast<Eigen::Index>(targets.size()), f.config.hidden);
  for (Eigen::Index i = 0; i < grad.size(); ++i)
    grad.data()[i] = std::cos(0.3f * static_cast<float>(i));
  for (const bool gcn : {false, true}) {
    model_config config = f.config;
    if (gcn) config.kind = model_kind::gcn;
    gnn_model dense_model(config, 11), sparse_model(config, 11);
    dense_model.zero_grad();
    sparse_model.zero_grad();
    local_cg_state ds, ss;
    std::vector<Matrix> dense_pre, sparse_pre;
    const Matrix dense_out =
        forward_local_cg(dense_model, cg, f.part.features, leaves, true, 21, ds, &dense_pre);
    auto history_only = leaves;
    history_only[0] = Matrix();  // level 0 is read from leaf_features only
    const Matrix sparse_out = forward_local_cg(sparse_model, cg, local, leaf_features, history_only,
                                               true, 21, ss, &sparse_pre);
    EXPECT_LE(max_diff(sparse_out, dense_out), 1e-5f) << (gcn ? "gcn" : "sage");
    ASSERT_EQ(sparse_pre.size(), dense_pre.size());
    for (size_t k = 0; k < dense_pre.size(); ++k)
      EXPECT_LE(max_diff(sparse_pre[k], dense_pre[k]), 1e-5f) << "history level " << k + 1;
    backward_local_cg(dense_model, cg, ds, grad);
    backward_local_cg(sparse_model, cg, ss, grad);
    const auto dg = flatten(dense_model.gradients()), sg = flatten(sparse_model.gradients());
    ASSERT_EQ(dg.size(), sg.size());
    float worst = 0, scale = 1e-6f;
    for (size_t i = 0; i < dg.size(); ++i) {
      worst = std::max(worst, std::abs(dg[i] - sg[i]));
      scale = std::max(scale, std::abs(dg[i]));
    }
    EXPECT_LE(worst, 1e-5f * scale) << (gcn ? "gcn" : "sage") << " gradients";
    EXPECT_GT(scale, 1e-3f) << "the gradient must not be trivially zero";
  }
  // Targets at level 0 are refused on compressed rows.
  local_cg top0 = cg;
  top0.top_level = 0;
  local_cg_state s0;
  gnn_model model(f.config, 11);
  EXPECT_THROW(forward_local_cg(model, top0, local, leaf_features, leaves, true, 21, s0),
               std::invalid_argument);
}
