// Tests of the in-process decentralized (DEGNN) pipeline: computation push, locality-aware
// computation graphs, partial aggregates and historical embeddings, wired by
// runtime/train/cluster_trainer. Compared with the centralized pipeline (one partition: the same
// computation), with exact layer-wise inference (full fanout, exact history: the same forward),
// and by its traffic (which kinds it sends, how many bytes against the centralized pipeline).
#include <gtest/gtest.h>

#include <caf/all.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "actors/batch_actor.hpp"
#include "actors/coordinator.hpp"
#include "actors/shard_actor.hpp"
#include "model/dataset.hpp"
#include "model/inference.hpp"
#include "model/layers.hpp"
#include "model/partition_book.hpp"
#include "model/partition_store.hpp"
#include "model/partitioner.hpp"
#include "model/replica.hpp"
#include "model/sampler.hpp"
#include "runtime/train/cluster_trainer.hpp"
#include "runtime/train/training_report.hpp"
#include "tests/cluster/in_process_cluster.hpp"

namespace degnn {
namespace {

using testing::cora;
using testing::full_config;
using testing::in_process_cluster;

namespace fs = std::filesystem;

train_settings settings(const std::string& pipeline, int parts, int layers) {
  train_settings s;
  s.data = (fs::path(DEGNN_SOURCE_DIR) / "data" / "cora").string();
  s.pipeline = pipeline;
  s.parts = parts;
  s.partition_method = "metis";
  s.model.model = "sage";
  s.model.num_layers = layers;
  s.model.hidden = 16;
  s.model.dropout = 0.5f;
  s.model.lr = 0.01f;
  s.seed = 3;
  s.model.seed = s.seed;
  s.fanouts.assign(static_cast<size_t>(layers), 10);
  s.fanouts[0] = 5;
  s.batch_size = 32;
  s.epochs = 2;
  s.eval_every = 0;
  s.progress = false;
  s.timeout_s = 30;
  s.history_bits = 8;
  s.staleness = 1;
  return s;
}

struct loss_trace {
  std::vector<std::uint64_t> steps;
  std::vector<double> losses;
  step_hook hook() {
    return [this](std::uint64_t step, double loss) {
      steps.push_back(step);
      losses.push_back(loss);
    };
  }
};

cluster_result run(const train_settings& s, loss_trace* trace = nullptr) {
  training_report quiet(s.pipeline, "", false);
  return train_cluster(s, cora(), quiet, trace ? trace->hook() : step_hook{});
}

std::uint64_t bytes_of(const cluster_result& r, wire::kind k) {
  return r.traffic.sent.bytes[static_cast<size_t>(k)];
}

/// Training bytes of all epochs, without the gradient all-reduce.
std::uint64_t training_bytes_without_allreduce(const cluster_result& r) {
  std::uint64_t total = 0;
  for (size_t e = 0; e < r.epoch_bytes.size(); ++e)
    total += r.epoch_bytes[e] - r.epoch_allreduce_bytes[e];
  return total;
}

// -- one partition: nothing remote, no history used; the same computation as centralized --

class OnePartition : public ::testing::TestWithParam<std::tuple<int, const char*>> {};

TEST_P(OnePartition, DecentralizedEqualsCentralizedStepByStep) {
  const auto [layers, model] = GetParam();
  train_settings c = settings("centralized", 1, layers);
  c.model.model = model;
  train_settings dec = c;
  dec.pipeline = "decentralized";
  loss_trace tc, td;
  const cluster_result rc = run(c, &tc);
  const cluster_result rd = run(dec, &td);

  ASSERT_EQ(tc.losses.size(), 10u) << "140 train nodes in batches of 32, 2 epochs";
  ASSERT_EQ(td.steps, tc.steps);
  double max_rel = 0;
  for (size_t i = 0; i < tc.losses.size(); ++i) {
    const double rel =
        std::abs(td.losses[i] - tc.losses[i]) / std::max(1e-12, std::abs(tc.losses[i]));
    max_rel = std::max(max_rel, rel);
    EXPECT_LE(rel, 1e-5) << "step " << tc.steps[i] << ": centralized " << tc.losses[i]
                         << ", decentralized " << td.losses[i];
  }
  // Training moved (the comparison is not between two constants).
  EXPECT_NE(tc.losses.front(), tc.losses.back());

  ASSERT_EQ(rd.parameters.size(), rc.parameters.size());
  ASSERT_FALSE(rc.parameters.empty());
  double max_diff = 0;
  for (size_t i = 0; i < rc.parameters.size(); ++i) {
    max_diff =
        std::max(max_diff, static_cast<double>(std::abs(rd.parameters[i] - rc.parameters[i])));
  }
  std::printf(
      "%s, %d layers: max relative loss difference %.3g over %zu steps, max parameter "
      "difference %.3g over %zu parameters\n",
      model, layers, max_rel, tc.losses.size(), max_diff, rc.parameters.size());
  EXPECT_LE(max_diff, 1e-4);
  // And the parameters moved away from initialisation.
  EXPECT_NE(model_replica(full_config(c, cora())).parameters(), rc.parameters);
  EXPECT_TRUE(rd.replicas_identical);
  EXPECT_EQ(rd.traffic.sent.total_bytes(), 0u) << rd.traffic.sent.bytes_json();
  EXPECT_EQ(rd.traffic.rejected, 0u);
}

INSTANTIATE_TEST_SUITE_P(DecentralizedPipeline, OnePartition,
                         ::testing::Combine(::testing::Values(2, 3),
                                            ::testing::Values("sage", "gcn", "gat")),
                         [](const auto& info) {
                           return std::string(std::get<1>(info.param)) +
                                  std::to_string(std::get<0>(info.param)) + "Layers";
                         });

// -- full fanout, exact history: the decentralized forward is exact inference --

train_settings exact_settings(const std::string& pipeline, int history_bits,
                              const std::string& model) {
  train_settings s = settings(pipeline, 4, 3);
  s.model.model = model;
  s.fanouts = {-1, -1, -1};
  s.model.dropout = 0.0f;
  s.model.attention_dropout = 0.0f;
  s.history_bits = history_bits;
  s.staleness = 1;
  s.batch_size = 32;
  s.epochs = 1;
  s.max_batches = 1;  // only the first step's loss is compared
  return s;
}

/// Mean cross-entropy of exact layer-wise inference with the initial parameters over the seeds
/// of every worker's first step.
double exact_first_step_loss(const train_settings& s) {
  const dataset& d = cora();
  const auto owner = partition_graph(d.graph, d.train, s.parts,
                                     parse_partition_method(s.partition_method), s.seed);
  const partition_book book(owner, s.parts);
  std::vector<node_id> seeds;
  for (int w = 0; w < s.parts; ++w) {
    const graph_partition part = extract_partition(d, book, w);
    std::vector<node_id> train;
    for (node_id l : part.train)
      train.push_back(part.owned[static_cast<size_t>(l)]);
    if (train.empty()) continue;
    const auto batch = make_batches(train, s.batch_size, s.seed, 0)[0];
    seeds.insert(seeds.end(), batch.begin(), batch.end());
  }
  EXPECT_GT(seeds.size(), static_cast<size_t>(s.batch_size)) << "several workers have seeds";
  const model_replica fresh(full_config(s, d));
  const Matrix all = layerwise_inference(fresh.model(), d.graph, d.features);
  Matrix logits(static_cast<Eigen::Index>(seeds.size()), all.cols());
  std::vector<std::int32_t> labels;
  for (size_t i = 0; i < seeds.size(); ++i) {
    logits.row(static_cast<Eigen::Index>(i)) = all.row(seeds[i]);
    labels.push_back(d.labels[static_cast<size_t>(seeds[i])]);
  }
  Matrix grad;
  return softmax_cross_entropy(logits, labels, grad);
}

double first_step_loss(const train_settings& s) {
  loss_trace t;
  const cluster_result r = run(s, &t);
  EXPECT_EQ(r.traffic.rejected, 0u);
  EXPECT_EQ(t.losses.size(), 1u);
  return t.losses.empty() ? -1 : t.losses.front();
}

class ExactHistory : public ::testing::TestWithParam<const char*> {};

TEST_P(ExactHistory, FullFanoutWithExactHistoryEqualsExactInferenceOnFourParts) {
  const std::string model = GetParam();
  const train_settings s = exact_settings("decentralized", 32, model);
  const double want = exact_first_step_loss(s);
  const double got = first_step_loss(s);
  const double quantized = first_step_loss(exact_settings("decentralized", 2, model));
  const double centralized = first_step_loss(exact_settings("centralized", 32, model));
  std::printf(
      "%s first-step loss: exact inference %.9f, decentralized 32-bit history %.9f "
      "(diff %.3g), 2-bit history %.9f (diff %.3g), centralized %.9f (diff %.3g)\n",
      model.c_str(), want, got, std::abs(got - want), quantized, std::abs(quantized - want),
      centralized, std::abs(centralized - want));
  EXPECT_NEAR(got, want, 1e-5 * std::abs(want));
  // Sharp: history that is not exact moves the loss far more than the exact pipelines differ
  // (GCN averages more neighbours than GraphSAGE, so 2-bit history moves it less).
  EXPECT_GT(std::abs(quantized - want), 100 * std::abs(got - want) + 1e-6 * std::abs(want));
  // And the centralized pipeline, with the same settings, computes the same exact forward.
  EXPECT_NEAR(centralized, want, 1e-5 * std::abs(want));
}

INSTANTIATE_TEST_SUITE_P(DecentralizedPipeline, ExactHistory,
                         ::testing::Values("sage", "gcn", "gat"),
                         [](const auto& info) { return std::string(info.param); });

// -- four partitions: traffic --

// GAT pushes attention (docs/design.md section 2): after the computation push, an attention push
// with the targets' er, answered with softmax partials; an attention return, answered with
// d loss / d er. Only the owner's own shard gets a gradient return (the own rows'), so none
// crosses a node. Deterministic, with identical replicas, and moving the parameters.
TEST(DecentralizedPipeline, GatOnFourPartsPushesAttentionDeterministically) {
  train_settings s = settings("decentralized", 4, 3);
  s.model.model = "gat";
  s.model.heads = 4;
  s.fanouts = {10, 10, 10};
  // Parts 0-3 hold 35, 34, 35 and 36 training nodes: each epoch's second step has seeds on
  // part 3 only, so three owners run a GAT step with no seed (empty attention rounds).
  s.batch_size = 35;
  loss_trace trace;
  const cluster_result a = run(s, &trace);
  const cluster_result b = run(s);
  EXPECT_EQ(trace.losses.size(), 4u) << "two steps an epoch";
  EXPECT_TRUE(a.replicas_identical);
  EXPECT_EQ(a.parameters, b.parameters);
  EXPECT_EQ(a.traffic.rejected, 0u);
  EXPECT_NE(model_replica(full_config(s, cora())).parameters(), a.parameters);
  const auto msgs = [&](wire::kind k) { return a.traffic.sent.messages[static_cast<size_t>(k)]; };
  EXPECT_GT(msgs(wire::kind::computation_push), 0u);
  EXPECT_EQ(msgs(wire::kind::attention_push), msgs(wire::kind::computation_push));
  EXPECT_EQ(msgs(wire::kind::attention_partial), msgs(wire::kind::attention_push));
  EXPECT_EQ(msgs(wire::kind::partial_aggregate), msgs(wire::kind::computation_push));
  EXPECT_EQ(msgs(wire::kind::attention_return), 2 * msgs(wire::kind::attention_push))
      << "one each way per push";
  EXPECT_EQ(msgs(wire::kind::gradient_return), 0u);
  for (auto k : {wire::kind::feature_request, wire::kind::sample_request})
    EXPECT_EQ(bytes_of(a, k), 0u) << wire::kind_name(k);
}

TEST(DecentralizedPipeline, FourPartsTrainWithIdenticalReplicasAndDeterministicPushTraffic) {
  train_settings s = settings("decentralized", 4, 3);
  s.fanouts = {10, 10, 10};
  s.batch_size = 64;
  const cluster_result a = run(s);
  const cluster_result b = run(s);

  EXPECT_TRUE(a.replicas_identical);
  EXPECT_TRUE(b.replicas_identical);
  EXPECT_EQ(a.traffic.rejected, 0u);
  ASSERT_EQ(a.epoch_bytes.size(), 2u);
  for (const float v : a.parameters)
    ASSERT_TRUE(std::isfinite(v));
  EXPECT_NE(model_replica(full_config(s, cora())).parameters(), a.parameters)
      << "training did not move the parameters";
  for (auto k :
       {wire::kind::computation_push, wire::kind::partial_aggregate, wire::kind::gradient_return,
        wire::kind::embedding_get, wire::kind::embedding_rows, wire::kind::allreduce_chunk}) {
    EXPECT_GT(bytes_of(a, k), 0u) << wire::kind_name(k);
  }
  // Nothing is pulled the centralized way.
  for (auto k : {wire::kind::feature_request, wire::kind::feature_response,
                 wire::kind::sample_request, wire::kind::sample_response}) {
    EXPECT_EQ(bytes_of(a, k), 0u) << wire::kind_name(k);
  }
  // Every push is answered with one partial aggregate and gets one gradient return.
  const auto msgs = [&](wire::kind k) { return a.traffic.sent.messages[static_cast<size_t>(k)]; };
  EXPECT_EQ(msgs(wire::kind::computation_push), msgs(wire::kind::partial_aggregate));
  EXPECT_EQ(msgs(wire::kind::computation_push), msgs(wire::kind::gradient_return));
  EXPECT_EQ(msgs(wire::kind::embedding_get), msgs(wire::kind::embedding_rows));
  // Same seed, same partitions: the same bytes of every kind, the same parameters.
  EXPECT_EQ(a.traffic.sent, b.traffic.sent)
      << a.traffic.sent.bytes_json() << " vs " << b.traffic.sent.bytes_json();
  EXPECT_EQ(a.epoch_bytes, b.epoch_bytes);
  EXPECT_EQ(a.init_bytes, b.init_bytes);
  EXPECT_GT(a.init_bytes, 0u);
  // Bit for bit: a shard applies the gradients of the pushes it served in sender order and
  // commits history between steps, whatever order the messages arrived in.
  EXPECT_EQ(a.parameters, b.parameters);
}

TEST(DecentralizedPipeline, FusionLevelsComputeTheSameWithLessWork) {
  train_settings s = settings("decentralized", 4, 3);
  s.fanouts = {10, 10, 10};
  s.batch_size = 64;
  s.epochs = 1;
  std::vector<cluster_result> runs;
  std::vector<loss_trace> losses(3);
  for (int fusion : {2, 1, 0}) {
    s.fusion = fusion;
    runs.push_back(run(s, &losses[static_cast<size_t>(2 - fusion)]));
    const auto& w = runs.back().traffic.work;
    std::printf("fusion %d: %llu graphs, %llu kernel calls, %llu nodes, %llu edges\n", fusion,
                static_cast<unsigned long long>(w.graphs),
                static_cast<unsigned long long>(w.kernel_calls),
                static_cast<unsigned long long>(w.nodes), static_cast<unsigned long long>(w.edges));
  }
  const auto& full = runs[0].traffic.work;
  const auto& level1 = runs[1].traffic.work;
  const auto& none = runs[2].traffic.work;
  EXPECT_LT(full.kernel_calls, level1.kernel_calls);
  EXPECT_LT(level1.kernel_calls, none.kernel_calls);
  EXPECT_LT(full.nodes, level1.nodes);
  EXPECT_LT(level1.nodes, none.nodes);
  EXPECT_LT(full.edges, level1.edges);
  EXPECT_LT(level1.edges, none.edges);
  for (size_t r = 1; r < runs.size(); ++r) {
    // The same nodes, the same leaves: the same messages; the values agree to float rounding.
    // Every step's loss agrees closely. Adam divides each gradient entry by its own size, so an
    // entry near zero whose rounding differs can move its parameter by up to the learning rate
    // per step: nearly all parameters agree to 1e-5, none by more than lr times the steps.
    EXPECT_EQ(runs[r].traffic.sent, runs[0].traffic.sent);
    ASSERT_EQ(losses[r].losses.size(), losses[0].losses.size());
    double worst_loss = 0;
    for (size_t i = 0; i < losses[0].losses.size(); ++i)
      worst_loss = std::max(worst_loss, std::abs(losses[r].losses[i] - losses[0].losses[i]) /
                                            std::abs(losses[0].losses[i]));
    ASSERT_EQ(runs[r].parameters.size(), runs[0].parameters.size());
    double max_diff = 0;
    std::size_t apart = 0;
    for (size_t i = 0; i < runs[0].parameters.size(); ++i) {
      const double d = std::abs(runs[r].parameters[i] - runs[0].parameters[i]);
      max_diff = std::max(max_diff, d);
      apart += d > 1e-5;
    }
    std::printf(
        "fusion level %zu against 2: losses within %.3g (relative), parameters within %.3g, "
        "%zu of %zu apart by more than 1e-5\n",
        2 - r, worst_loss, max_diff, apart, runs[0].parameters.size());
    EXPECT_LE(worst_loss, 1e-5) << "fusion level " << 2 - r;
    EXPECT_LE(static_cast<double>(apart), 1e-3 * static_cast<double>(runs[0].parameters.size()))
        << "fusion level " << 2 - r;
    EXPECT_LE(max_diff,
              static_cast<double>(s.model.lr) * static_cast<double>(losses[0].losses.size()))
        << "fusion level " << 2 - r;
  }
}

TEST(DecentralizedPipeline, OverlappingStepsGiveTheSameRunBitForBit) {
  // Step i+1 samples, expands and pulls history while step i is in its all-reduce; its forward
  // waits for the averaged gradient, and a pull sees every commit of the step before.
  train_settings s = settings("decentralized", 4, 3);
  s.fanouts = {10, 10, 10};
  s.batch_size = 16;  // several steps per epoch, so that steps overlap
  s.overlap = true;
  loss_trace overlapped_losses, serial_losses;
  const cluster_result overlapped = run(s, &overlapped_losses);
  s.overlap = false;
  const cluster_result serial = run(s, &serial_losses);
  ASSERT_GT(overlapped_losses.losses.size(), 4u);
  EXPECT_EQ(overlapped_losses.losses, serial_losses.losses);
  EXPECT_EQ(overlapped.parameters, serial.parameters);
  EXPECT_EQ(overlapped.traffic.sent, serial.traffic.sent);
  EXPECT_EQ(overlapped.traffic.work, serial.traffic.work);
  EXPECT_TRUE(overlapped.replicas_identical);
}

TEST(DecentralizedPipeline, RingAndStarAllReducesTrainAlikeAndSendTheSameOtherTraffic) {
  // The ring sums each chunk of the gradient in another order than the star: the same training
  // up to float rounding. Everything but the all-reduce sends the same bytes.
  train_settings s = settings("decentralized", 4, 3);
  s.fanouts = {10, 10, 10};
  s.batch_size = 16;
  loss_trace ring_losses, star_losses;
  const cluster_result ring = run(s, &ring_losses);
  s.allreduce = "star";
  const cluster_result star = run(s, &star_losses);
  EXPECT_TRUE(ring.replicas_identical);
  EXPECT_TRUE(star.replicas_identical);
  EXPECT_EQ(ring.traffic.rejected, 0u);
  for (int k = 0; k < wire::kNumKinds; ++k) {
    const auto kind = static_cast<wire::kind>(k);
    if (kind == wire::kind::allreduce_chunk || kind == wire::kind::control) continue;
    EXPECT_EQ(ring.traffic.sent.bytes[static_cast<size_t>(k)],
              star.traffic.sent.bytes[static_cast<size_t>(k)])
        << wire::kind_name(kind);
  }
  ASSERT_EQ(ring_losses.losses.size(), star_losses.losses.size());
  ASSERT_GT(ring_losses.losses.size(), 4u);
  EXPECT_EQ(ring_losses.losses[0], star_losses.losses[0]) << "the first step precedes any sum";
  double worst = 0;
  for (size_t i = 0; i < ring_losses.losses.size(); ++i)
    worst = std::max(worst, std::abs(ring_losses.losses[i] - star_losses.losses[i]) /
                                std::abs(star_losses.losses[i]));
  std::printf("largest relative loss difference, ring vs star: %.3g over %zu steps\n", worst,
              ring_losses.losses.size());
  EXPECT_LT(worst, 1e-3);
}

TEST(DecentralizedPipeline, TraceFileHoldsEveryWorkersStages) {
  train_settings s = settings("decentralized", 4, 3);
  s.epochs = 1;
  const fs::path trace = fs::temp_directory_path() / "degnn-trace-test.json";
  s.trace = trace.string();
  run(s);
  std::FILE* f = std::fopen(s.trace.c_str(), "r");
  ASSERT_NE(f, nullptr) << "no trace file written";
  std::string json;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;)
    json.append(buf, n);
  std::fclose(f);
  fs::remove(trace);
  ASSERT_EQ(json.rfind("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", 0), 0u);
  EXPECT_EQ(std::count(json.begin(), json.end(), '{'), std::count(json.begin(), json.end(), '}'));
  EXPECT_EQ(std::count(json.begin(), json.end(), '['), std::count(json.begin(), json.end(), ']'));
  // Every partition shows its owner stages and its shard stages; the coordinator its phases.
  for (int p = 0; p < 4; ++p) {
    for (const char* name : {"sample", "push wait", "top layer", "expand", "forward", "backward"}) {
      const std::string event =
          std::string("{\"name\":\"") + name + "\",\"ph\":\"X\",\"pid\":" + std::to_string(p);
      EXPECT_NE(json.find(event), std::string::npos) << event;
    }
  }
  for (const char* name : {"step", "all-reduce"}) {
    const std::string event = std::string("{\"name\":\"") + name + "\",\"ph\":\"X\",\"pid\":4";
    EXPECT_NE(json.find(event), std::string::npos) << event;
  }
}

TEST(DecentralizedPipeline, LargerStalenessPullsFewerHistoryRows) {
  train_settings s = settings("decentralized", 4, 3);
  s.epochs = 1;
  const cluster_result fresh = run(s);
  s.staleness = 4;
  const cluster_result stale = run(s);
  EXPECT_GT(fresh.traffic.work.rows_pulled, 0u);
  EXPECT_LT(stale.traffic.work.rows_pulled, fresh.traffic.work.rows_pulled);
  EXPECT_LT(bytes_of(stale, wire::kind::embedding_rows),
            bytes_of(fresh, wire::kind::embedding_rows));
  EXPECT_EQ(bytes_of(stale, wire::kind::computation_push),
            bytes_of(fresh, wire::kind::computation_push));
}

// -- the history set-up --

/// Halo rows over all partitions of s's in-memory cut of Cora.
std::uint64_t halo_rows(const train_settings& s) {
  const dataset& d = cora();
  const partition_book book(partition_graph(d.graph, d.train, s.parts,
                                            parse_partition_method(s.partition_method), s.seed),
                            s.parts);
  std::uint64_t rows = 0;
  for (int p = 0; p < s.parts; ++p)
    rows += extract_partition(d, book, p).halo.size();
  return rows;
}

TEST(DecentralizedPipeline, HistorySetUpSendsTheHaloFeaturesOnceAndNoHistoryRows) {
  train_settings s = settings("decentralized", 4, 3);
  s.epochs = 1;
  s.max_batches = 2;
  const std::uint64_t halo = halo_rows(s);
  const std::uint64_t features = halo * static_cast<std::uint64_t>(cora().num_features()) * 4;
  ASSERT_GT(halo, 100u);
  // Each halo row's features once (the set-up's one layer), with its id asked and its degree
  // answered; the rest is message framing. The set-up before sent them twice, plus every level.
  loss_trace exact_losses;
  const cluster_result exact = run(s, &exact_losses);
  std::printf("3 layers: %llu halo rows, %llu feature bytes, set-up %llu bytes\n",
              static_cast<unsigned long long>(halo), static_cast<unsigned long long>(features),
              static_cast<unsigned long long>(exact.init_bytes));
  EXPECT_GE(exact.init_bytes, features + 8 * halo);
  EXPECT_LE(exact.init_bytes, features + 8 * halo + 16384);
  // History rows travel only when a step reads them.
  EXPECT_GT(exact.traffic.work.rows_pulled, 0u);
  // At 3 layers the set-up has no hidden layer to quantize: the same run.
  s.history_setup = "quantized";
  loss_trace same_losses;
  const cluster_result same = run(s, &same_losses);
  EXPECT_EQ(same.init_bytes, exact.init_bytes);
  EXPECT_EQ(same_losses.losses, exact_losses.losses);
  // At 2 layers there is no history: the set-up is the halo's features, pulled from the stores
  // (an id asked, a version answered per row).
  train_settings two = settings("decentralized", 4, 2);
  two.epochs = 1;
  two.max_batches = 2;
  const cluster_result r2 = run(two);
  EXPECT_GE(r2.init_bytes, features + 12 * halo);
  EXPECT_LE(r2.init_bytes, features + 12 * halo + 16384);
}

TEST(DecentralizedPipeline, QuantizedSetUpSendsHiddenHaloRowsAtTheHistoryBits) {
  train_settings s = settings("decentralized", 4, 4);
  s.epochs = 1;
  s.max_batches = 2;
  const std::uint64_t halo = halo_rows(s);
  loss_trace exact_losses, quantized_losses;
  const cluster_result exact = run(s, &exact_losses);
  s.history_setup = "quantized";
  const cluster_result quantized = run(s, &quantized_losses);
  // One hidden level (h^(1), the input of the set-up's second layer) per halo row: 16 floats
  // exact against 16 one-byte codes with a float min and scale.
  const auto hidden = static_cast<std::uint64_t>(s.model.hidden);
  const std::uint64_t saved = halo * (hidden * 4 - (hidden + 8));
  std::printf("4 layers: set-up exact %llu bytes, quantized %llu bytes (%llu expected saved)\n",
              static_cast<unsigned long long>(exact.init_bytes),
              static_cast<unsigned long long>(quantized.init_bytes),
              static_cast<unsigned long long>(saved));
  ASSERT_GT(exact.init_bytes, quantized.init_bytes);
  EXPECT_NEAR(static_cast<double>(exact.init_bytes - quantized.init_bytes),
              static_cast<double>(saved), 512.0);
  // The initial history moves by the rounding of its inputs only.
  ASSERT_EQ(quantized_losses.losses.size(), exact_losses.losses.size());
  for (size_t i = 0; i < exact_losses.losses.size(); ++i)
    EXPECT_NEAR(quantized_losses.losses[i], exact_losses.losses[i], 1e-2 * exact_losses.losses[i]);
  EXPECT_EQ(quantized.traffic.rejected, 0u);
}

// A graph whose halo rows from one partition exceed a message's cap (a 10M-node graph's were
// 795 MB, past Cap'n Proto's 512 MiB per Data field) sends them in several messages: the same run.
TEST(DecentralizedPipeline, RowMessagesSplitAtTheCapGiveTheSameRun) {
  // At 2 layers the set-up's features come from the stores, a few chunks out at a time.
  for (const auto& [pipeline, layers] : std::vector<std::pair<std::string, int>>{
           {"centralized", 3}, {"decentralized", 3}, {"decentralized", 2}}) {
    SCOPED_TRACE(pipeline + " " + std::to_string(layers));
    train_settings s = settings(pipeline, 4, layers);
    s.epochs = 1;
    s.max_batches = 2;
    s.eval_every = 1;  // the evaluation's halo rows too
    loss_trace whole_losses, split_losses;
    const cluster_result whole = run(s, &whole_losses);
    s.max_row_payload_bytes = 3 * static_cast<std::size_t>(cora().num_features()) * 4;  // 3 rows
    const cluster_result split = run(s, &split_losses);
    EXPECT_EQ(split_losses.losses, whole_losses.losses);
    EXPECT_EQ(split.parameters, whole.parameters);
    EXPECT_EQ(split.traffic.rejected, 0u);
    const auto msgs = [](const cluster_result& r, wire::kind k) {
      return r.traffic.sent.messages[static_cast<size_t>(k)];
    };
    // At most 3 feature rows per halo response: the first layer's responses alone are more
    // than the halo's rows over 3.
    EXPECT_GE(msgs(split, wire::kind::halo_response), halo_rows(s) / 3);
    EXPECT_GT(msgs(split, wire::kind::halo_response), msgs(whole, wire::kind::halo_response));
    if (pipeline == "centralized") {
      EXPECT_GT(msgs(split, wire::kind::feature_response),
                msgs(whole, wire::kind::feature_response));
    } else {
      EXPECT_GT(split.init_bytes, whole.init_bytes);  // more message framing, same rows
    }
  }
}

class TrafficRatio : public ::testing::TestWithParam<int> {};

TEST_P(TrafficRatio, DecentralizedSendsFarFewerBytesThanCentralized) {
  const int layers = GetParam();
  train_settings c = settings("centralized", 4, layers);
  c.fanouts.assign(static_cast<size_t>(layers), 10);
  c.batch_size = 64;
  train_settings dec = c;
  dec.pipeline = "decentralized";
  const cluster_result rc = run(c);
  const cluster_result rd = run(dec);
  const std::uint64_t cb = training_bytes_without_allreduce(rc);
  const std::uint64_t db = training_bytes_without_allreduce(rd);
  ASSERT_GT(db, 0u);
  const double ratio = static_cast<double>(cb) / static_cast<double>(db);
  std::printf(
      "%d layers, %d epochs: centralized %llu bytes, decentralized %llu bytes without "
      "the all-reduce (ratio %.2f); decentralized history initialisation %llu bytes\n"
      "  centralized %s\n  decentralized %s\n",
      layers, c.epochs, static_cast<unsigned long long>(cb), static_cast<unsigned long long>(db),
      ratio, static_cast<unsigned long long>(rd.init_bytes), rc.traffic.sent.bytes_json().c_str(),
      rd.traffic.sent.bytes_json().c_str());
  EXPECT_TRUE(rc.replicas_identical);
  EXPECT_TRUE(rd.replicas_identical);
  EXPECT_GE(ratio, layers == 2 ? 5.0 : 10.0);
}

INSTANTIATE_TEST_SUITE_P(DecentralizedPipeline, TrafficRatio, ::testing::Values(2, 3),
                         [](const auto& info) { return std::to_string(info.param) + "Layers"; });

// -- one shard serving a push, driven by hand --

// The evaluation runs each layer over ranges of owned nodes: ranges of 100 (7 per part here)
// give bit for bit the losses, parameters and accuracy of one range per part, in both pipelines
// (the decentralized history set-up is that evaluation).
TEST(EvaluationRanges, AreBitForBitOneRangePerPart) {
  for (const char* pipeline : {"centralized", "decentralized"}) {
    train_settings s = settings(pipeline, 4, 3);
    s.eval_every = 1;
    s.evaluation_range = 1 << 30;
    loss_trace whole_trace, ranged_trace;
    training_report whole_report(s.pipeline, "", false);
    const cluster_result whole = train_cluster(s, cora(), whole_report, whole_trace.hook());
    s.evaluation_range = 100;
    training_report ranged_report(s.pipeline, "", false);
    const cluster_result ranged = train_cluster(s, cora(), ranged_report, ranged_trace.hook());
    ASSERT_FALSE(whole_trace.losses.empty()) << pipeline;
    ASSERT_EQ(whole_trace.losses.size(), ranged_trace.losses.size()) << pipeline;
    for (size_t i = 0; i < whole_trace.losses.size(); ++i)
      EXPECT_EQ(std::memcmp(&whole_trace.losses[i], &ranged_trace.losses[i], sizeof(double)), 0)
          << pipeline << " step " << i << ": " << whole_trace.losses[i] << " against "
          << ranged_trace.losses[i];
    ASSERT_EQ(whole.parameters.size(), ranged.parameters.size());
    EXPECT_EQ(std::memcmp(whole.parameters.data(), ranged.parameters.data(),
                          whole.parameters.size() * sizeof(float)),
              0)
        << pipeline;
    EXPECT_GT(whole_report.best_valid(), 0) << pipeline;  // -1 when nothing was evaluated
    EXPECT_EQ(whole_report.best_valid(), ranged_report.best_valid()) << pipeline;
    EXPECT_EQ(whole_report.test_at_best(), ranged_report.test_at_best()) << pipeline;
  }
}

TEST(DecentralizedShard, ServesAPushAndRejectsAGradientReturnOfTheWrongWidth) {
  const dataset& d = cora();
  train_settings s = settings("decentralized", 2, 3);
  s.model.dropout = 0.0f;
  const replica_config rc = full_config(s, d);
  const wire::context ctx{.cluster_id = cluster_id_for(d.name, s.seed)};
  in_process_cluster c(d, s, rc, ctx);
  coordinator coord = c.make_coordinator(ctx, std::chrono::seconds(s.timeout_s));
  coord.init_history(rc.num_layers, 0);

  // Partition 0 pushes two of partition 1's nodes as the neighbours of one of its own.
  const auto& p1 = *c.parts[1];
  ASSERT_GE(p1.num_owned(), 2);
  const node_id seed = c.parts[0]->owned.front();
  const wire::computation_push push{.h = {.step = 7, .sender = 0},
                                    .layer = 2,
                                    .targets = {seed},
                                    .counts = {2},
                                    .neighbors = {p1.owned[0], p1.owned[1]}};
  std::string error;
  auto wrong_layer = push;
  wrong_layer.layer = 1;
  EXPECT_EQ(c.ask_shard(1, push_atom_v, wire::kind::computation_push,
                        wire::encode(ctx, wrong_layer), &error)
                .kind,
            0)
      << "a push for another layer was served";
  EXPECT_NE(error.find("layer"), std::string::npos) << error;
  auto ahead = push;
  ahead.applies = 5;  // weights this replica is far from having
  EXPECT_EQ(
      c.ask_shard(1, push_atom_v, wire::kind::computation_push, wire::encode(ctx, ahead), &error)
          .kind,
      0)
      << "a push naming future weights was held";
  EXPECT_NE(error.find("weights"), std::string::npos) << error;
  auto not_owned = push;
  not_owned.neighbors[1] = seed;  // owned by partition 0
  EXPECT_EQ(c.ask_shard(1, push_atom_v, wire::kind::computation_push, wire::encode(ctx, not_owned),
                        &error)
                .kind,
            0)
      << "a push naming another partition's node was served";

  // A shard computes a step once every part's push is in: partition 1's own (empty) push too.
  const wire::computation_push own{.h = {.step = 7, .sender = 1}, .layer = 2};
  wire_message reply;
  auto first = c.self->request(c.handles.shards[1], std::chrono::seconds(30), push_atom_v,
                               pack(wire::kind::computation_push, wire::encode(ctx, push)));
  const wire_message own_reply =
      c.ask_shard(1, push_atom_v, wire::kind::computation_push, wire::encode(ctx, own));
  first.receive([&](wire_message& r) { reply = std::move(r); },
                [&](caf::error& e) { error = c.sys.render(e); });
  ASSERT_EQ(reply.kind, static_cast<std::uint16_t>(wire::kind::partial_aggregate)) << error;
  ASSERT_EQ(own_reply.kind, static_cast<std::uint16_t>(wire::kind::partial_aggregate));
  const auto sums = wire::decode_partial_aggregate(ctx, reply.bytes);
  ASSERT_EQ(sums.sums.rows(), 1);
  ASSERT_EQ(sums.sums.cols(), s.model.hidden);
  EXPECT_EQ(sums.counts, std::vector<std::int32_t>{2});
  EXPECT_TRUE(sums.sums.allFinite());
  EXPECT_EQ(wire::decode_partial_aggregate(ctx, own_reply.bytes).sums.rows(), 0);
  error.clear();
  EXPECT_EQ(
      c.ask_shard(1, push_atom_v, wire::kind::computation_push, wire::encode(ctx, push), &error)
          .kind,
      0)
      << "a second push from one part for one step was served";
  EXPECT_NE(error.find("second"), std::string::npos) << error;

  // A gradient of the wrong width is refused (not read out of bounds); the right one is taken.
  wire::gradient_return g{.h = {.step = 7, .sender = 0}};
  g.grads = Matrix::Ones(1, s.model.hidden + 3);
  error.clear();
  EXPECT_EQ(
      c.ask_shard(1, grad_ret_atom_v, wire::kind::gradient_return, wire::encode(ctx, g), &error)
          .kind,
      0)
      << "a gradient of the wrong width was accepted";
  EXPECT_NE(error.find("width"), std::string::npos) << error;
  g.grads = Matrix::Ones(2, s.model.hidden);
  EXPECT_EQ(
      c.ask_shard(1, grad_ret_atom_v, wire::kind::gradient_return, wire::encode(ctx, g), &error)
          .kind,
      0)
      << "a gradient with a row per neighbour instead of per target was accepted";
  g.grads = Matrix::Ones(1, s.model.hidden);
  g.grads(0, 0) = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(
      c.ask_shard(1, grad_ret_atom_v, wire::kind::gradient_return, wire::encode(ctx, g), &error)
          .kind,
      0)
      << "a gradient holding NaN was accepted";
  g.grads = Matrix::Ones(1, s.model.hidden);
  const wire_message done =
      c.ask_shard(1, grad_ret_atom_v, wire::kind::gradient_return, wire::encode(ctx, g), &error);
  EXPECT_EQ(done.kind, static_cast<std::uint16_t>(wire::kind::control)) << error;
  const wire::gradient_return own_grad{.h = {.step = 7, .sender = 1}};
  EXPECT_EQ(c.ask_shard(1, grad_ret_atom_v, wire::kind::gradient_return,
                        wire::encode(ctx, own_grad), &error)
                .kind,
            static_cast<std::uint16_t>(wire::kind::control))
      << error;
  // Its backward left a gradient in partition 1's replica.
  const wire::control ask_gradient{.h = {.step = 7, .sender = 0},
                                   .what = wire::control_kind::gradient};
  const wire_message grad =
      c.ask_shard(1, gradient_atom_v, wire::kind::control, wire::encode(ctx, ask_gradient), &error);
  ASSERT_EQ(grad.kind, static_cast<std::uint16_t>(wire::kind::allreduce_chunk)) << error;
  const auto values = wire::decode_allreduce_chunk(ctx, grad.bytes).values;
  EXPECT_TRUE(std::any_of(values.begin(), values.end(), [](float v) { return v != 0.0f; }));
  // The push is consumed: a second return for it is refused.
  EXPECT_EQ(
      c.ask_shard(1, grad_ret_atom_v, wire::kind::gradient_return, wire::encode(ctx, g), &error)
          .kind,
      0);
}

}  // namespace
}  // namespace degnn

namespace degnn {
namespace {

// -- the coordinator actor: status at any time, a failure stops it with one error --

TEST(Coordinator, AnswersStatusWhileAStepRunsAndCountsTheSteps) {
  const dataset& d = cora();
  const train_settings s = settings("decentralized", 4, 3);
  const replica_config rc = full_config(s, d);
  const wire::context ctx{.cluster_id = cluster_id_for(d.name, s.seed)};
  in_process_cluster c(d, s, rc, ctx);
  coordinator coord = c.make_coordinator(ctx, std::chrono::seconds(s.timeout_s));
  EXPECT_EQ(coord.status().phase(), coordinator_phase::idle);
  coord.init_history(rc.num_layers, 0);
  // Two steps queued at once: status answers while they run, in the order they were sent.
  auto first = c.self->request(coord.handle(), std::chrono::seconds(30), run_step_atom_v,
                               std::uint32_t{0}, std::uint64_t{0}, std::uint64_t{0}, true);
  auto second = c.self->request(coord.handle(), std::chrono::seconds(30), run_step_atom_v,
                                std::uint32_t{0}, std::uint64_t{1}, std::uint64_t{1}, true);
  const coordinator_status busy = coord.status();
  EXPECT_NE(busy.phase(), coordinator_phase::failed);
  EXPECT_LE(busy.steps_done, 2u);
  int answered = 0;
  for (auto* h : {&first, &second}) {
    h->receive([&](step_result& r) { answered += r.seeds > 0; },
               [&](caf::error& e) { ADD_FAILURE() << c.sys.render(e); });
  }
  EXPECT_EQ(answered, 2);
  coord.finish_steps();
  const coordinator_status done = coord.status();
  EXPECT_EQ(done.phase(), coordinator_phase::idle);
  EXPECT_EQ(done.steps_done, 2u);
  EXPECT_EQ(done.applies, 2u);
  EXPECT_EQ(done.step, 1u);
  EXPECT_GT(done.last_loss, 0.0);
  EXPECT_TRUE(done.error.empty());
}

TEST(Coordinator, ALostShardFailsTheStepAndEveryLaterCommandWithOneError) {
  const dataset& d = cora();
  train_settings s = settings("decentralized", 4, 2);
  s.timeout_s = 5;
  const replica_config rc = full_config(s, d);
  const wire::context ctx{.cluster_id = cluster_id_for(d.name, s.seed)};
  in_process_cluster c(d, s, rc, ctx);
  coordinator coord = c.make_coordinator(ctx, std::chrono::seconds(s.timeout_s));
  coord.init_history(rc.num_layers, 0);
  c.self->send_exit(c.handles.shards[2], caf::exit_reason::kill);
  std::string first_error;
  try {
    coord.step_decentralized(0, 0, 0);
    ADD_FAILURE() << "a step with a dead shard succeeded";
  } catch (const std::runtime_error& e) {
    first_error = e.what();
  }
  // Noticed at once, naming partition 2: through the coordinator's monitor ("partition 2's shard
  // is gone") or, when that races with it, through the failed push of partition 2's batch actor.
  EXPECT_NE(first_error.find("partition 2"), std::string::npos) << first_error;
  const coordinator_status st = coord.status();
  EXPECT_EQ(st.phase(), coordinator_phase::failed);
  EXPECT_FALSE(st.error.empty());
  try {
    coord.evaluate(rc.num_layers, 1);
    ADD_FAILURE() << "a failed coordinator evaluated";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(st.error), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace degnn
