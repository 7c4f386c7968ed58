// Clusters on compressed feature rows (--sparse-features): both pipelines train the model they
// train on dense rows (the same losses up to float rounding, the same accuracy), and only the
// messages that carry feature rows change, each becoming smaller.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "model/sparse_input.hpp"
#include "runtime/train/cluster_trainer.hpp"
#include "runtime/train/training_report.hpp"
#include "tests/cluster/in_process_cluster.hpp"

namespace degnn {
namespace {

namespace fs = std::filesystem;

train_settings settings(const std::string& pipeline, int layers, const std::string& model) {
  train_settings s;
  s.data = (fs::path(DEGNN_SOURCE_DIR) / "data" / "cora").string();
  s.pipeline = pipeline;
  s.parts = 4;
  s.partition_method = "metis";
  s.model.model = model;
  s.model.num_layers = layers;
  s.model.hidden = 16;
  s.model.dropout = 0.5f;
  s.model.lr = 0.01f;
  s.seed = 5;
  s.model.seed = s.seed;
  s.fanouts.assign(static_cast<size_t>(layers), 5);
  s.batch_size = 8;
  s.epochs = 2;
  s.eval_every = 1;
  s.progress = false;
  s.timeout_s = 30;
  s.history_bits = 8;
  s.staleness = 1;
  return s;
}

struct outcome {
  cluster_result result;
  std::vector<double> losses;
  double test_acc = 0;
};

outcome run(train_settings s, bool sparse) {
  dataset d = testing::cora();
  if (sparse) make_features_sparse(d);
  s.sparse_features = sparse;
  training_report quiet(s.pipeline, "", false);
  outcome o;
  o.result =
      train_cluster(s, d, quiet, [&](std::uint64_t, double loss) { o.losses.push_back(loss); });
  o.test_acc = quiet.test_at_best();
  return o;
}

// Feature pulls and evaluation halo rows carry feature rows in every run (halo rows of the
// higher layers too); embedding rows carry them only when a shard's set-up pass did not bring
// its halo's features, and history rows otherwise.
bool carries_features(wire::kind k) {
  return k == wire::kind::feature_response || k == wire::kind::halo_response;
}

class SparseCluster : public ::testing::TestWithParam<std::tuple<const char*, int, const char*>> {};

TEST_P(SparseCluster, TrainsAsOnDenseRowsAndSendsFewerFeatureBytes) {
  const auto [pipeline, layers, model] = GetParam();
  const train_settings s = settings(pipeline, layers, model);
  const outcome dense = run(s, false), sparse = run(s, true);
  ASSERT_EQ(sparse.losses.size(), dense.losses.size());
  ASSERT_GE(dense.losses.size(), 10u);
  for (size_t i = 0; i < dense.losses.size(); ++i)
    EXPECT_NEAR(sparse.losses[i], dense.losses[i], 1e-4 * std::abs(dense.losses[i]))
        << "step " << i;
  EXPECT_NEAR(sparse.test_acc, dense.test_acc, 0.005);
  EXPECT_TRUE(sparse.result.replicas_identical);
  EXPECT_EQ(sparse.result.traffic.rejected, 0u);
  int feature_kinds = 0;
  for (int k = 1; k < wire::kNumKinds; ++k) {
    const auto kind = static_cast<wire::kind>(k);
    const auto a = dense.result.traffic.sent.bytes[static_cast<size_t>(k)];
    const auto b = sparse.result.traffic.sent.bytes[static_cast<size_t>(k)];
    const auto am = dense.result.traffic.sent.messages[static_cast<size_t>(k)];
    const auto bm = sparse.result.traffic.sent.messages[static_cast<size_t>(k)];
    if (carries_features(kind) && a > 0) {
      ++feature_kinds;
      // Cora's rows are 1.3% non-zero: at 8 bytes a non-zero, well under half the dense bytes.
      EXPECT_LT(b, a / 2) << wire::kind_name(kind);
    } else if (kind == wire::kind::embedding_rows) {
      EXPECT_LE(b, a) << wire::kind_name(kind);
    } else {
      EXPECT_EQ(b, a) << wire::kind_name(kind) << " carries no feature rows";
    }
    // Messages are cut by their estimated size: compressed ones never need more of them.
    EXPECT_LE(bm, am) << wire::kind_name(kind);
  }
  EXPECT_GT(feature_kinds, 0);
}

INSTANTIATE_TEST_SUITE_P(Pipelines, SparseCluster,
                         ::testing::Values(std::make_tuple("centralized", 2, "sage"),
                                           std::make_tuple("centralized", 3, "gcn"),
                                           std::make_tuple("decentralized", 2, "sage"),
                                           std::make_tuple("decentralized", 3, "sage"),
                                           std::make_tuple("decentralized", 3, "gcn")),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "L_" +
                                  std::get<2>(info.param);
                         });

// The level-0 read of an embedding store (a shard's halo refresh when no set-up pass brought the
// features, as after a recovery): the rows asked, compressed, minus those the asker holds.
TEST(SparseCluster, AnEmbeddingStoreServesFeatureRowsCompressed) {
  train_settings s = settings("decentralized", 2, "sage");
  s.sparse_features = true;
  const dataset& d = testing::cora();
  const wire::context ctx{.cluster_id = 41};
  testing::in_process_cluster c(d, s, testing::full_config(s, d), ctx);
  const auto& owned = c.parts[2]->owned;
  wire::embedding_get get{.h = {0, 1}, .layer = 0};
  get.nodes = {owned[0], owned[5], owned[9]};
  get.held = {wire::kNoVersion, 0, wire::kNoVersion};  // the asker holds the second row
  std::string error;
  const auto reply =
      c.ask_store(2, get_atom_v, wire::kind::embedding_get, wire::encode(ctx, get), &error);
  ASSERT_EQ(reply.kind, static_cast<std::uint16_t>(wire::kind::embedding_rows)) << error;
  const auto rows = wire::decode_embedding_rows(ctx, reply.bytes, true);
  ASSERT_TRUE(rows.sparse);
  EXPECT_EQ(rows.nodes, (std::vector<node_id>{owned[0], owned[9]}));
  const Matrix got = to_dense(*rows.sparse);
  EXPECT_EQ(got.row(0), d.features.row(owned[0]));
  EXPECT_EQ(got.row(1), d.features.row(owned[9]));
  // A dense decode of the same bytes is refused, not misread.
  EXPECT_THROW(wire::decode_embedding_rows(ctx, reply.bytes), wire::wire_error);
}

}  // namespace
}  // namespace degnn
