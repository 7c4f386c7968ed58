// Tests of the in-process centralized (DistDGL-style) pipeline: the actors of actors/ wired into
// a cluster by runtime/train/cluster_trainer, compared with the single-process trainer, with exact
// byte accounting, replica agreement and distributed layer-wise evaluation.
#include <gtest/gtest.h>

#include <caf/all.hpp>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "actors/batch_actor.hpp"
#include "actors/coordinator.hpp"
#include "actors/shard_actor.hpp"
#include "model/dataset.hpp"
#include "model/inference.hpp"
#include "model/partitioner.hpp"
#include "model/replica.hpp"
#include "model/ring_reduction.hpp"
#include "model/sampler.hpp"
#include "runtime/train/cluster_trainer.hpp"
#include "runtime/train/single_trainer.hpp"
#include "tests/cluster/in_process_cluster.hpp"

namespace degnn {
namespace {

using testing::cora;
using testing::full_config;
using testing::in_process_cluster;

namespace fs = std::filesystem;

// Small and quick, but with dropout and several steps per epoch so that any divergence in
// batching, sampling, dropout seeds or the optimiser shows up.
train_settings small_settings(int parts, const std::string& method = "metis") {
  train_settings s;
  s.data = (fs::path(DEGNN_SOURCE_DIR) / "data" / "cora").string();
  s.pipeline = "centralized";
  s.parts = parts;
  s.partition_method = method;
  s.model.model = "sage";
  s.model.num_layers = 2;
  s.model.hidden = 16;
  s.model.dropout = 0.5f;
  s.model.lr = 0.01f;
  s.seed = 3;
  s.model.seed = s.seed;
  s.fanouts = {5, 10};
  s.batch_size = 32;
  s.epochs = 2;
  s.eval_every = 1;
  s.progress = false;
  s.timeout_s = 30;
  return s;
}

/// A file name under the temp directory, removed when the object goes.
struct temp_file {
  fs::path path;
  explicit temp_file(const std::string& stem)
      : path(fs::temp_directory_path() /
             (stem + "-" + std::to_string(::getpid()) + "-" +
              std::to_string(reinterpret_cast<std::uintptr_t>(this)) + ".jsonl")) {
    fs::remove(path);
  }
  ~temp_file() {
    std::error_code ec;
    fs::remove(path, ec);
  }
};

std::string last_line(const fs::path& file) {
  std::ifstream in(file);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

double json_number(const std::string& line, const std::string& key) {
  const std::string pat = "\"" + key + "\":";
  const auto at = line.find(pat);
  if (at == std::string::npos) {
    ADD_FAILURE() << key << " missing from metrics line " << line;
    return -1;
  }
  return std::strtod(line.c_str() + at + pat.size(), nullptr);
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

// -- the traffic the batch actors must send, recomputed with the single-process sampler --

/// Bytes and messages of sample_request/response and feature_request/response that the training
/// steps of `s` send, computed without actors: the same batches, the same picks (the shard's
/// sampling is keyed like the sampler's), grouped per remote owner as the batch actor does.
wire::traffic expected_sampling_traffic(const train_settings& s, const dataset& d,
                                        const partition_book& book, const wire::context& ctx) {
  const int parts = book.num_parts();
  std::vector<std::vector<node_id>> train(static_cast<size_t>(parts));
  for (node_id g : d.train)
    train[static_cast<size_t>(book.owner(g))].push_back(g);  // d.train is ascending
  std::vector<std::size_t> sizes;
  for (const auto& t : train)
    sizes.push_back(t.size());
  const std::uint64_t nb = batches_per_epoch(sizes, s.batch_size);
  const std::int64_t features = d.features.cols();
  neighbor_sampler sampler(d.graph);
  wire::traffic t;
  for (int epoch = 0; epoch < s.epochs; ++epoch) {
    for (int p = 0; p < parts; ++p) {
      if (train[static_cast<size_t>(p)].empty()) continue;
      const auto batches = make_batches(train[static_cast<size_t>(p)], s.batch_size, s.seed,
                                        static_cast<std::uint64_t>(epoch));
      for (std::uint64_t i = 0; i < nb; ++i) {
        const std::uint64_t step = static_cast<std::uint64_t>(epoch) * nb + i;
        const sampled_batch batch =
            sampler.sample(batches[i % batches.size()], s.fanouts, s.seed, step);
        const size_t layers = s.fanouts.size();
        for (size_t hop = 0; hop < layers; ++hop) {
          const block& b = batch.blocks[layers - 1 - hop];
          std::vector<std::vector<node_id>> nodes(static_cast<size_t>(parts));
          std::vector<std::vector<std::int32_t>> counts(static_cast<size_t>(parts));
          for (std::int32_t r = 0; r < b.num_dst(); ++r) {
            const node_id g = b.src_nodes[static_cast<size_t>(r)];
            const int owner = book.owner(g);
            if (owner == p) continue;
            nodes[static_cast<size_t>(owner)].push_back(g);
            counts[static_cast<size_t>(owner)].push_back(b.indptr[r + 1] - b.indptr[r]);
          }
          for (int o = 0; o < parts; ++o) {
            if (nodes[static_cast<size_t>(o)].empty()) continue;
            wire::sample_request req{.h = {step, p},
                                     .layer = static_cast<std::uint8_t>(hop),
                                     .fanout = s.fanouts[hop],
                                     .seed = s.seed,
                                     .nodes = nodes[static_cast<size_t>(o)]};
            t.add(wire::kind::sample_request, wire::encode(ctx, req).size());
            wire::sample_response res{.h = {step, o}};
            res.counts = counts[static_cast<size_t>(o)];
            std::int64_t total = 0;
            for (auto c : res.counts)
              total += c;
            res.neighbors.assign(static_cast<size_t>(total), 0);
            res.degrees.assign(res.counts.size(), 0);
            t.add(wire::kind::sample_response, wire::encode(ctx, res).size());
          }
        }
        std::vector<std::vector<node_id>> pulls(static_cast<size_t>(parts));
        for (node_id g : batch.inputs())
          if (book.owner(g) != p) pulls[static_cast<size_t>(book.owner(g))].push_back(g);
        for (int o = 0; o < parts; ++o) {
          const auto& n = pulls[static_cast<size_t>(o)];
          if (n.empty()) continue;
          wire::row_request req{.h = {step, p}, .layer = 0, .nodes = n};
          t.add(wire::kind::feature_request,
                wire::encode(ctx, req, wire::kind::feature_request).size());
          wire::row_block res{.h = {step, o}};
          res.rows = Matrix::Zero(static_cast<Eigen::Index>(n.size()), features);
          res.degrees.assign(n.size(), 0);
          t.add(wire::kind::feature_response,
                wire::encode(ctx, res, wire::kind::feature_response).size());
        }
      }
    }
  }
  return t;
}

std::uint64_t steps_of(const train_settings& s, const dataset& d, const partition_book& book) {
  std::vector<std::size_t> sizes(static_cast<size_t>(book.num_parts()), 0);
  for (node_id g : d.train)
    ++sizes[static_cast<size_t>(book.owner(g))];
  return batches_per_epoch(sizes, s.batch_size) * static_cast<std::uint64_t>(s.epochs);
}

// -- 1 partition: the same computation as the single-process trainer --

class CentralizedOnePartition : public ::testing::TestWithParam<const char*> {};

// GraphSAGE, and GAT (attention and its dropout on the batch owner, the evaluation's layer-wise
// pass on the shard) alike.
TEST_P(CentralizedOnePartition, MatchesTheSingleProcessTrainerStepByStep) {
  const dataset& d = cora();
  train_settings s = small_settings(1);
  s.model.model = GetParam();
  s.model.heads = 4;
  s.model.output_heads = 2;
  s.model.input_dropout = 0.2f;
  loss_trace single, cluster;
  training_report quiet_a("single", "", false), quiet_b("cluster", "", false);
  const std::vector<float> p_single = train_single(s, d, quiet_a, single.hook());
  const cluster_result r = train_cluster(s, d, quiet_b, cluster.hook());

  ASSERT_EQ(single.losses.size(), 10u) << "140 train nodes in batches of 32, 2 epochs";
  ASSERT_EQ(cluster.steps, single.steps);
  double max_rel = 0;
  for (size_t i = 0; i < single.losses.size(); ++i) {
    const double rel = std::abs(cluster.losses[i] - single.losses[i]) /
                       std::max(1e-12, std::abs(single.losses[i]));
    max_rel = std::max(max_rel, rel);
    EXPECT_LE(rel, 1e-6) << "step " << single.steps[i] << ": single " << single.losses[i]
                         << ", cluster " << cluster.losses[i];
  }
  std::printf("max relative loss difference %.3g over %zu steps\n", max_rel, single.losses.size());
  // Training moved: the losses are not all one value.
  EXPECT_NE(single.losses.front(), single.losses.back());

  ASSERT_EQ(r.parameters.size(), p_single.size());
  double max_diff = 0;
  for (size_t i = 0; i < p_single.size(); ++i)
    max_diff = std::max(max_diff, static_cast<double>(std::abs(r.parameters[i] - p_single[i])));
  std::printf("max parameter difference %.3g over %zu parameters\n", max_diff, p_single.size());
  EXPECT_LE(max_diff, 1e-5);
  EXPECT_TRUE(r.replicas_identical);
  EXPECT_EQ(r.traffic.sent.total_bytes(), 0u) << r.traffic.sent.bytes_json();
  EXPECT_EQ(r.traffic.rejected, 0u);
  for (auto b : r.epoch_bytes)
    EXPECT_EQ(b, 0u);
  // The cluster's evaluation (per shard, layer by layer) gives the single process's accuracies.
  EXPECT_EQ(quiet_b.best_valid(), quiet_a.best_valid());
  EXPECT_EQ(quiet_b.test_at_best(), quiet_a.test_at_best());
}

INSTANTIATE_TEST_SUITE_P(CentralizedPipeline, CentralizedOnePartition,
                         ::testing::Values("sage", "gat"));

// GAT on 4 parts: every replica the same after training, and the accuracy of a GAT.
TEST(CentralizedPipeline, GatOnFourPartitionsTrainsIdenticalReplicasToItsBand) {
  const dataset& d = cora();
  train_settings s = small_settings(4);
  s.model.model = "gat";
  s.model.hidden = 64;
  s.model.heads = 8;
  s.model.dropout = 0.6f;
  s.model.weight_decay = 0.01f;
  s.model.lr = 0.005f;
  s.fanouts = {-1, -1};
  s.batch_size = 16;  // 4 workers x 16: the single process's batch of 64
  s.epochs = 30;
  training_report quiet("gat-4", "", false);
  const cluster_result r = train_cluster(s, d, quiet, {});
  EXPECT_TRUE(r.replicas_identical);
  EXPECT_EQ(r.traffic.rejected, 0u);
  std::printf("GAT on 4 parts: test accuracy %.4f at best validation %.4f\n", quiet.test_at_best(),
              quiet.best_valid());
  EXPECT_GE(quiet.test_at_best(), 0.78);
}

// -- 4 partitions --

class FourPartitions : public ::testing::TestWithParam<const char*> {};

TEST_P(FourPartitions, TrainsWithIdenticalReplicasAndExactDeterministicTraffic) {
  const dataset& d = cora();
  const train_settings s = small_settings(4, GetParam());
  training_report quiet_a("a", "", false), quiet_b("b", "", false);
  const cluster_result a = train_cluster(s, d, quiet_a);
  const cluster_result b = train_cluster(s, d, quiet_b);

  EXPECT_TRUE(a.replicas_identical);
  EXPECT_TRUE(b.replicas_identical);
  EXPECT_EQ(a.traffic.rejected, 0u);
  ASSERT_EQ(a.epoch_bytes.size(), 2u);
  for (auto k :
       {wire::kind::sample_request, wire::kind::sample_response, wire::kind::feature_request,
        wire::kind::feature_response, wire::kind::allreduce_chunk, wire::kind::control,
        wire::kind::halo_request, wire::kind::halo_response}) {
    EXPECT_GT(a.traffic.sent.bytes[static_cast<size_t>(k)], 0u) << wire::kind_name(k);
  }
  // Same seed, same partitions: the same bytes of every kind, the same per-epoch totals.
  EXPECT_EQ(a.traffic.sent, b.traffic.sent)
      << a.traffic.sent.bytes_json() << " vs " << b.traffic.sent.bytes_json();
  EXPECT_EQ(a.epoch_bytes, b.epoch_bytes);
  EXPECT_EQ(a.parameters, b.parameters);

  // Exact: the sampling and feature traffic is what the batches must send, recomputed here.
  const auto owner = partition_graph(d.graph, d.train, s.parts,
                                     parse_partition_method(s.partition_method), s.seed);
  const partition_book book(owner, s.parts);
  const wire::context ctx{.cluster_id = cluster_id_for(d.name, s.seed)};
  const wire::traffic want = expected_sampling_traffic(s, d, book, ctx);
  for (auto k : {wire::kind::sample_request, wire::kind::sample_response,
                 wire::kind::feature_request, wire::kind::feature_response}) {
    const auto i = static_cast<size_t>(k);
    EXPECT_EQ(a.traffic.sent.bytes[i], want.bytes[i]) << wire::kind_name(k);
    EXPECT_EQ(a.traffic.sent.messages[i], want.messages[i]) << wire::kind_name(k);
  }
  // Exact: the all-reduce. Ring (the default): per step each of the 4 workers sends the next one
  // 2(P-1) chunks of a quarter of the gradient, each acknowledged by a control, and the 3 remote
  // workers send the coordinator their step's loss counts; per epoch each remote one sends its
  // parameters for the agreement check (one float per parameter).
  const std::uint64_t steps = steps_of(s, d, book);
  const std::uint64_t workers = static_cast<std::uint64_t>(s.parts), remote = workers - 1;
  const std::uint64_t ring_messages = workers * 2 * (workers - 1);
  const auto params = model_replica(full_config(s, d)).parameters().size();
  auto encoded_chunk = [&](std::size_t values, std::uint32_t round) -> std::uint64_t {
    wire::allreduce_chunk c{.h = {1, 1}, .round = round, .loss = 1.0, .seeds = 1};
    c.values.assign(values, 0.0f);
    return wire::encode(ctx, c).size();
  };
  std::uint64_t ring_bytes = 0;  // one step's chunks
  for (int w = 0; w < s.parts; ++w) {
    const ring_reduction layout(w, s.parts, std::vector<float>(params), 1);
    for (std::uint32_t k = 0; k < layout.rounds(); ++k) {
      const auto b = layout.chunk(layout.sent_chunk(k));
      ring_bytes += encoded_chunk(b.end - b.begin, k);
    }
  }
  const std::uint64_t chunk_bytes = encoded_chunk(params, 1), counts_bytes = encoded_chunk(0, 0);
  const auto ar = static_cast<size_t>(wire::kind::allreduce_chunk);
  EXPECT_EQ(a.traffic.sent.messages[ar], steps * (ring_messages + remote) + remote * s.epochs);
  EXPECT_EQ(a.traffic.sent.bytes[ar],
            steps * (ring_bytes + remote * counts_bytes) + remote * s.epochs * chunk_bytes);
  // Control: per step the step order and the ring's acknowledgements; per epoch the parameters
  // request; per evaluated layer the order and the reply.
  const auto ctl = static_cast<size_t>(wire::kind::control);
  EXPECT_EQ(
      a.traffic.sent.messages[ctl],
      remote * (steps + s.epochs + 2 * s.epochs * s.model.num_layers) + steps * ring_messages);

  // Star: each remote worker sends its whole gradient to the coordinator and gets the average
  // back (acknowledged by a control). The same payload in all, but all of it through one node.
  train_settings star_settings = s;
  star_settings.allreduce = "star";
  training_report quiet_c("c", "", false);
  const cluster_result star = train_cluster(star_settings, d, quiet_c);
  EXPECT_TRUE(star.replicas_identical);
  EXPECT_EQ(star.traffic.sent.messages[ar], remote * (2 * steps + s.epochs));
  EXPECT_EQ(star.traffic.sent.bytes[ar], star.traffic.sent.messages[ar] * chunk_bytes);
  EXPECT_EQ(star.traffic.sent.messages[ctl],
            remote * (2 * steps + s.epochs + 2 * s.epochs * s.model.num_layers));
  for (auto k : {wire::kind::sample_request, wire::kind::sample_response,
                 wire::kind::feature_request, wire::kind::feature_response}) {
    const auto i = static_cast<size_t>(k);
    EXPECT_EQ(star.traffic.sent.bytes[i], a.traffic.sent.bytes[i]) << wire::kind_name(k);
  }
  std::printf("all-reduce bytes per step: ring %llu in %llu messages, star %llu in %llu\n",
              static_cast<unsigned long long>(ring_bytes + remote * counts_bytes),
              static_cast<unsigned long long>(ring_messages + remote),
              static_cast<unsigned long long>(2 * remote * chunk_bytes),
              static_cast<unsigned long long>(2 * remote));
  // Halo traffic: one reply per request.
  EXPECT_EQ(a.traffic.sent.messages[static_cast<size_t>(wire::kind::halo_request)],
            a.traffic.sent.messages[static_cast<size_t>(wire::kind::halo_response)]);
}

INSTANTIATE_TEST_SUITE_P(CentralizedPipeline, FourPartitions, ::testing::Values("metis", "random"),
                         [](const auto& info) { return std::string(info.param); });

void expect_all_equal(const std::vector<std::vector<float>>& params, const std::string& when) {
  ASSERT_FALSE(params.empty());
  for (size_t p = 1; p < params.size(); ++p)
    EXPECT_TRUE(params[p] == params[0]) << "replica " << p << " differs from replica 0 " << when;
}

TEST(CentralizedCluster, AllReplicasHoldIdenticalParametersAfterEveryStep) {
  const dataset& d = cora();
  const train_settings s = small_settings(4, "metis");
  const replica_config rc = full_config(s, d);
  const wire::context ctx{.cluster_id = cluster_id_for(d.name, s.seed)};
  in_process_cluster c(d, s, rc, ctx);
  coordinator coord = c.make_coordinator(ctx, std::chrono::seconds(s.timeout_s));

  std::vector<std::size_t> sizes;
  for (const auto& part : c.parts)
    sizes.push_back(part->train.size());
  const std::uint64_t nb = batches_per_epoch(sizes, s.batch_size);
  ASSERT_GE(nb, 2u);
  auto before = coord.parameters(0);
  expect_all_equal(before, "before training");
  for (std::uint32_t epoch = 0; epoch < 2; ++epoch) {
    for (std::uint64_t i = 0; i < nb; ++i) {
      const std::uint64_t step = epoch * nb + i;
      const step_result r = coord.step(epoch, i, step);
      EXPECT_GT(r.seeds, 0u);
      EXPECT_LE(r.correct, r.seeds);
      EXPECT_TRUE(std::isfinite(r.loss_sum));
      auto after = coord.parameters(step + 1);
      expect_all_equal(after, "after step " + std::to_string(step));
      EXPECT_NE(after[0], before[0]) << "step " << step << " did not change the parameters";
      before = std::move(after);
    }
  }
  EXPECT_EQ(coord.traffic().rejected, 0u);
}

// Ring (the default) and star: one step through the coordinator applies, on every replica, the
// average of the workers' gradients, summed in the order each all-reduce sums them.
TEST(CentralizedCluster, AStepAppliesTheAverageOfTheWorkersGradients) {
  const dataset& d = cora();
  const train_settings s = small_settings(4, "random");
  const replica_config rc = full_config(s, d);
  const wire::context ctx{.cluster_id = cluster_id_for(d.name, s.seed)};
  for (bool ring : {true, false}) {
    SCOPED_TRACE(ring ? "ring" : "star");
    in_process_cluster c(d, s, rc, ctx);
    coordinator coord = c.make_coordinator(ctx, std::chrono::seconds(s.timeout_s));
    coord.set_ring(ring);
    const step_result r = coord.step(0, 0, 0);
    const auto got = coord.parameters(1);

    // Reference without actors: every worker's first batch, sampled on the global graph, trained
    // on a fresh replica; the gradients averaged; one optimiser step on another fresh replica.
    std::vector<std::vector<float>> grads;
    double loss_sum = 0;
    std::uint64_t seeds = 0;
    for (const auto& part : c.parts) {
      std::vector<node_id> train;
      for (node_id l : part->train)
        train.push_back(part->owned[static_cast<size_t>(l)]);
      ASSERT_FALSE(train.empty());
      const auto batches = make_batches(train, s.batch_size, s.seed, 0);
      const sampled_batch batch = sample_blocks(d.graph, batches[0], s.fanouts, s.seed, 0);
      Matrix x(static_cast<Eigen::Index>(batch.inputs().size()), d.features.cols());
      for (size_t i = 0; i < batch.inputs().size(); ++i)
        x.row(static_cast<Eigen::Index>(i)) = d.features.row(batch.inputs()[i]);
      std::vector<std::int32_t> labels;
      for (node_id g : batches[0])
        labels.push_back(d.labels[static_cast<size_t>(g)]);
      model_replica worker(rc);
      const step_stats st = worker.train_step(batch, x, labels, mix64(s.seed ^ mix64(0)));
      loss_sum += st.loss_sum;
      seeds += st.seeds;
      grads.push_back(worker.gradient());
    }
    const int p = static_cast<int>(grads.size());
    const std::size_t n = grads[0].size();
    // The star adds the workers in partition order; the ring adds chunk c's values from worker
    // c on around the ring (chunk c: the c-th of p nearly equal slices).
    std::vector<float> sum(n);
    for (int chunk = 0; chunk < p; ++chunk) {
      const auto c = static_cast<std::size_t>(chunk), q = static_cast<std::size_t>(p);
      const std::size_t begin = c * (n / q) + std::min(c, n % q);
      const std::size_t end = (c + 1) * (n / q) + std::min(c + 1, n % q);
      const int first = ring ? chunk : 0;
      for (std::size_t i = begin; i < end; ++i) {
        float v = grads[static_cast<size_t>(first)][i];
        for (int k = 1; k < p; ++k)
          v = v + grads[static_cast<size_t>((first + k) % p)][i];
        sum[i] = v * (1.0f / static_cast<float>(p));
      }
    }
    model_replica reference(rc);
    reference.apply_gradient(sum);
    const auto want = reference.parameters();

    EXPECT_EQ(r.seeds, seeds);
    EXPECT_NEAR(r.loss_sum, loss_sum, 1e-6 * std::abs(loss_sum));
    ASSERT_EQ(got.size(), 4u);
    ASSERT_EQ(got[0].size(), want.size());
    double max_diff = 0;
    for (size_t i = 0; i < want.size(); ++i)
      max_diff = std::max(max_diff, static_cast<double>(std::abs(got[0][i] - want[i])));
    std::printf("%s: max parameter difference to the reference step %.3g\n", ring ? "ring" : "star",
                max_diff);
    EXPECT_LE(max_diff, 1e-6);
    expect_all_equal(got, "after the step");
  }
}

// A ring chunk is taken only from the previous worker, once per round, for a step not reduced
// yet, and only so many ahead of their round; anything else is refused, naming why.
TEST(CentralizedCluster, ABatchActorRefusesRingChunksItMustNotTake) {
  const dataset& d = cora();
  const train_settings s = small_settings(4, "random");
  const replica_config rc = full_config(s, d);
  const wire::context ctx{.cluster_id = cluster_id_for(d.name, s.seed)};
  in_process_cluster c(d, s, rc, ctx);
  coordinator coord = c.make_coordinator(ctx, std::chrono::seconds(s.timeout_s));
  coord.step(0, 0, 0);  // step 0 is reduced everywhere
  auto offer = [&](std::uint64_t step, int sender, std::uint32_t round, std::string* error) {
    const wire::allreduce_chunk chunk{
        .h = {step, sender}, .round = round, .values = std::vector<float>(3, 1.0f), .seeds = 1};
    return c.ask_batcher(1, ring_atom_v, wire::kind::allreduce_chunk, wire::encode(ctx, chunk),
                         error);
  };
  const auto control = static_cast<std::uint16_t>(wire::kind::control);
  std::string error;
  EXPECT_EQ(offer(5, 3, 0, &error).kind, 0);
  EXPECT_NE(error.find("only partition 0 sends"), std::string::npos) << error;
  EXPECT_EQ(offer(5, 0, 6, &error).kind, 0);
  EXPECT_NE(error.find("round 6 of 6"), std::string::npos) << error;
  EXPECT_EQ(offer(0, 0, 0, &error).kind, 0);
  EXPECT_NE(error.find("came after it was taken"), std::string::npos) << error;
  // Early chunks wait (and are acknowledged) until two steps' rounds are held.
  EXPECT_EQ(offer(5, 0, 0, &error).kind, control) << error;
  EXPECT_EQ(offer(5, 0, 0, &error).kind, 0);
  EXPECT_NE(error.find("came twice"), std::string::npos) << error;
  for (std::uint32_t k = 1; k < 12; ++k)
    EXPECT_EQ(offer(5 + k / 6, 0, k % 6, &error).kind, control) << error;
  EXPECT_EQ(offer(7, 0, 0, &error).kind, 0);
  EXPECT_NE(error.find("too many"), std::string::npos) << error;
}

// -- distributed layer-wise evaluation --

TEST(CentralizedPipeline, DistributedEvaluationEqualsSingleProcessLayerwiseInference) {
  const dataset& d = cora();
  for (const char* method : {"metis", "random"}) {
    SCOPED_TRACE(method);
    train_settings s = small_settings(4, method);
    temp_file metrics("degnn-eval-metrics");
    cluster_result r;
    {
      training_report report("eval", metrics.path.string(), false);
      r = train_cluster(s, d, report);
    }
    const std::string line = last_line(metrics.path);
    ASSERT_FALSE(line.empty()) << "no metrics written to " << metrics.path;
    EXPECT_EQ(json_number(line, "epoch"), s.epochs);
    EXPECT_NE(line.find("\"evaluated\":true"), std::string::npos) << line;

    model_replica replica(full_config(s, d));
    replica.set_parameters(r.parameters);
    const Matrix logits = layerwise_inference(replica.model(), d.graph, d.features);
    const double train = accuracy(logits, d.labels, d.train);
    const double valid = accuracy(logits, d.labels, d.valid);
    const double test = accuracy(logits, d.labels, d.test);
    std::printf("%s: single-process layer-wise train %.4f valid %.4f test %.4f\n", method, train,
                valid, test);
    // Printed with 6 decimals; the splits have at most 1000 nodes, so this is count equality.
    EXPECT_NEAR(json_number(line, "eval_train_acc"), train, 1e-6) << line;
    EXPECT_NEAR(json_number(line, "valid_acc"), valid, 1e-6) << line;
    EXPECT_NEAR(json_number(line, "test_acc"), test, 1e-6) << line;
    // Trained, not a constant classifier that any evaluation would agree on.
    EXPECT_GT(valid, 0.3);
    EXPECT_GT(json_number(line, "eval_bytes"), 0);
  }
}

}  // namespace
}  // namespace degnn
