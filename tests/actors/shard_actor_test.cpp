// Tests of the shard actor (actors/shard_actor.hpp): its pure request core against the
// single-process sampler and the global feature matrix, and the actor itself inside a real CAF
// actor system, including the rejection of hostile or misrouted requests.
#include "actors/shard_actor.hpp"

#include <gtest/gtest.h>

#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/dataset.hpp"
#include "model/partitioner.hpp"
#include "model/sampler.hpp"
#include "serialization/traffic.hpp"

namespace degnn {
namespace {

constexpr std::uint64_t kCluster = 0x5eed'c0de'1234'5678ULL;
constexpr int kParts = 4;

// Cora cut into 4 random parts: many remote edges, so each shard sees nodes it does not own.
struct cora_cluster {
  dataset d;
  std::shared_ptr<const partition_book> book;
  std::vector<std::shared_ptr<const graph_partition>> parts;
};

const cora_cluster& cora4() {
  static const cora_cluster c = [] {
    cora_cluster c;
    c.d = load_dataset(std::filesystem::path(DEGNN_SOURCE_DIR) / "data" / "cora");
    auto owner = partition_graph(c.d.graph, c.d.train, kParts, partition_method::random, 7);
    c.book = std::make_shared<partition_book>(std::move(owner), kParts);
    for (int p = 0; p < kParts; ++p)
      c.parts.push_back(std::make_shared<graph_partition>(extract_partition(c.d, *c.book, p)));
    return c;
  }();
  return c;
}

wire::context ctx() {
  return {.cluster_id = kCluster};
}

// Every owned node of part p with at least one in-edge, in steps of `stride` (some high-degree).
std::vector<node_id> owned_sample(int p, size_t stride) {
  const auto& c = cora4();
  std::vector<node_id> out;
  const auto owned = c.book->owned(p);
  for (size_t i = 0; i < owned.size(); i += stride) {
    if (c.d.graph.in_degree(owned[i]) > 0) out.push_back(owned[i]);
  }
  return out;
}

// A node of the graph that part p does not own.
node_id foreign_node(int p) {
  const auto& c = cora4();
  for (node_id g = 0; g < c.d.num_nodes(); ++g)
    if (c.book->owner(g) != p) return g;
  ADD_FAILURE() << "every node belongs to part " << p;
  return 0;
}

wire_message sample_msg(const wire::context& cx, std::vector<node_id> nodes, std::int32_t fanout,
                        std::uint8_t layer = 1, std::uint64_t step = 17, std::uint64_t seed = 99) {
  wire::sample_request req{
      .h = {step, 3}, .layer = layer, .fanout = fanout, .seed = seed, .nodes = std::move(nodes)};
  return {static_cast<std::uint16_t>(wire::kind::sample_request), wire::encode(cx, req)};
}

wire_message feature_msg(const wire::context& cx, std::vector<node_id> nodes) {
  wire::row_request req{.h = {5, 2}, .layer = 0, .nodes = std::move(nodes)};
  return {static_cast<std::uint16_t>(wire::kind::feature_request),
          wire::encode(cx, req, wire::kind::feature_request)};
}

// What the single-process sampler picks for global node g (model/sampler.hpp on the global CSR).
std::vector<node_id> reference_pick(node_id g, std::int32_t fanout, std::uint64_t seed,
                                    std::uint64_t step, std::uint64_t layer) {
  const auto row = cora4().d.graph.in_neighbors(g);
  std::vector<node_id> out(row.size());
  row_rng rng(row_seed(seed, step, layer, g));
  out.resize(static_cast<size_t>(pick_uniform(row, fanout, rng, out.data())));
  return out;
}

void expect_sample_reply_matches_sampler(const wire_message& reply,
                                         const std::vector<node_id>& nodes, std::int32_t fanout,
                                         std::uint64_t seed, std::uint64_t step,
                                         std::uint64_t layer, int part) {
  ASSERT_EQ(reply.kind, static_cast<std::uint16_t>(wire::kind::sample_response));
  const auto res = wire::decode_sample_response(ctx(), reply.bytes);
  EXPECT_EQ(res.h.step, step);
  EXPECT_EQ(res.h.sender, part);
  ASSERT_EQ(res.counts.size(), nodes.size());
  ASSERT_EQ(res.degrees.size(), nodes.size());
  size_t at = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const node_id g = nodes[i];
    EXPECT_EQ(res.degrees[i], cora4().d.graph.in_degree(g)) << "node " << g;
    const auto want = reference_pick(g, fanout, seed, step, layer);
    ASSERT_EQ(static_cast<size_t>(res.counts[i]), want.size()) << "node " << g;
    ASSERT_LE(at + want.size(), res.neighbors.size());
    const std::vector<node_id> got(
        res.neighbors.begin() + static_cast<std::ptrdiff_t>(at),
        res.neighbors.begin() + static_cast<std::ptrdiff_t>(at + want.size()));
    EXPECT_EQ(got, want) << "node " << g;
    at += want.size();
  }
  EXPECT_EQ(at, res.neighbors.size());
}

// -- the pure core --

TEST(ShardRequest, SamplesExactlyTheNeighboursTheSingleProcessSamplerPicks) {
  const auto& c = cora4();
  for (int p = 0; p < kParts; ++p) {
    const auto nodes = owned_sample(p, 3);
    ASSERT_GT(nodes.size(), 50u);
    for (std::int32_t fanout : {1, 3, 10}) {
      const auto reply = serve_shard_request(*c.parts[p], *c.book, ctx(),
                                             sample_msg(ctx(), nodes, fanout, 1, 17, 99));
      expect_sample_reply_matches_sampler(reply, nodes, fanout, 99, 17, 1, p);
    }
  }
}

TEST(ShardRequest, SamplingKeysOnSeedStepAndLayerLikeTheSampler) {
  const auto& c = cora4();
  // High-degree nodes, so different keys must give different picks somewhere.
  std::vector<node_id> nodes;
  for (node_id g : c.book->owned(1))
    if (c.d.graph.in_degree(g) >= 8) nodes.push_back(g);
  ASSERT_GT(nodes.size(), 5u);
  const auto a = serve_shard_request(*c.parts[1], *c.book, ctx(), sample_msg(ctx(), nodes, 2, 0));
  const auto b = serve_shard_request(*c.parts[1], *c.book, ctx(), sample_msg(ctx(), nodes, 2, 1));
  expect_sample_reply_matches_sampler(a, nodes, 2, 99, 17, 0, 1);
  expect_sample_reply_matches_sampler(b, nodes, 2, 99, 17, 1, 1);
  EXPECT_NE(wire::decode_sample_response(ctx(), a.bytes).neighbors,
            wire::decode_sample_response(ctx(), b.bytes).neighbors);
}

TEST(ShardRequest, FanoutMinusOneReturnsTheWholeRowAndFullDegrees) {
  const auto& c = cora4();
  const auto nodes = owned_sample(2, 1);
  const auto reply = serve_shard_request(*c.parts[2], *c.book, ctx(), sample_msg(ctx(), nodes, -1));
  const auto res = wire::decode_sample_response(ctx(), reply.bytes);
  std::vector<node_id> want;
  for (node_id g : nodes) {
    const auto row = c.d.graph.in_neighbors(g);
    want.insert(want.end(), row.begin(), row.end());
  }
  EXPECT_EQ(res.neighbors, want);
  for (size_t i = 0; i < nodes.size(); ++i) {
    EXPECT_EQ(res.counts[i], c.d.graph.in_degree(nodes[i]));
    EXPECT_EQ(res.degrees[i], c.d.graph.in_degree(nodes[i]));
  }
}

TEST(ShardRequest, FeaturePullReturnsTheExactRowsAndDegreesInRequestOrder) {
  const auto& c = cora4();
  for (int p = 0; p < kParts; ++p) {
    auto nodes = owned_sample(p, 5);
    std::reverse(nodes.begin(), nodes.end());  // not the shard's storage order
    const auto reply = serve_shard_request(*c.parts[p], *c.book, ctx(), feature_msg(ctx(), nodes));
    ASSERT_EQ(reply.kind, static_cast<std::uint16_t>(wire::kind::feature_response));
    const auto res = wire::decode_row_block(ctx(), reply.bytes);
    ASSERT_EQ(static_cast<size_t>(res.rows.rows()), nodes.size());
    ASSERT_EQ(res.rows.cols(), c.d.features.cols());
    ASSERT_EQ(res.degrees.size(), nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) {
      const auto r = static_cast<Eigen::Index>(i);
      EXPECT_TRUE(res.rows.row(r) == c.d.features.row(nodes[i])) << "node " << nodes[i];
      EXPECT_EQ(res.degrees[i], c.d.graph.in_degree(nodes[i]));
    }
  }
}

TEST(ShardRequest, RejectsANodeItDoesNotOwn) {
  const auto& c = cora4();
  auto nodes = owned_sample(0, 10);
  nodes.push_back(foreign_node(0));
  EXPECT_THROW(serve_shard_request(*c.parts[0], *c.book, ctx(), sample_msg(ctx(), nodes, 5)),
               wire::wire_error);
  EXPECT_THROW(serve_shard_request(*c.parts[0], *c.book, ctx(), feature_msg(ctx(), nodes)),
               wire::wire_error);
  EXPECT_THROW(
      serve_shard_request(*c.parts[0], *c.book, ctx(), feature_msg(ctx(), {c.d.num_nodes()})),
      wire::wire_error);
  EXPECT_THROW(serve_shard_request(*c.parts[0], *c.book, ctx(), feature_msg(ctx(), {-1})),
               wire::wire_error);
}

TEST(ShardRequest, RejectsARequestNamingANodeTwiceSoAReplyNeverOutgrowsThePartition) {
  // A 400 KB feature request naming one node 100,000 times was answered with 100,000 rows of
  // 1,433 floats (573 MB on Cora): a reply about 1,400 times its request.
  const auto& c = cora4();
  const auto owned = c.book->owned(1);
  std::vector<node_id> repeated(100'000, owned[0]);
  for (auto msg : {feature_msg(ctx(), repeated), sample_msg(ctx(), repeated, 5),
                   feature_msg(ctx(), {owned[0], owned[1], owned[0]})}) {
    try {
      serve_shard_request(*c.parts[1], *c.book, ctx(), msg);
      ADD_FAILURE() << "accepted";
    } catch (const wire::wire_error& e) {
      const std::string what = e.what();
      EXPECT_TRUE(what.find("twice") != std::string::npos ||
                  what.find("more than the") != std::string::npos)
          << what;
    }
  }
  // Every owned node once is the largest request a shard serves.
  const std::vector<node_id> all(owned.begin(), owned.end());
  const auto reply = serve_shard_request(*c.parts[1], *c.book, ctx(), feature_msg(ctx(), all));
  EXPECT_EQ(wire::decode_row_block(ctx(), reply.bytes).rows.rows(),
            static_cast<Eigen::Index>(all.size()));
}

TEST(ShardRequest, RejectsTruncatedForeignClusterAndUnknownKindMessages) {
  const auto& c = cora4();
  const auto nodes = owned_sample(0, 10);
  auto truncated = sample_msg(ctx(), nodes, 5);
  truncated.bytes.resize(truncated.bytes.size() / 2);
  EXPECT_THROW(serve_shard_request(*c.parts[0], *c.book, ctx(), truncated), wire::wire_error);
  const wire::context other{.cluster_id = kCluster + 1};
  EXPECT_THROW(serve_shard_request(*c.parts[0], *c.book, ctx(), sample_msg(other, nodes, 5)),
               wire::wire_error);
  EXPECT_THROW(serve_shard_request(*c.parts[0], *c.book, ctx(), feature_msg(other, nodes)),
               wire::wire_error);
  auto wrong_kind = sample_msg(ctx(), nodes, 5);
  wrong_kind.kind = static_cast<std::uint16_t>(wire::kind::allreduce_chunk);
  EXPECT_THROW(serve_shard_request(*c.parts[0], *c.book, ctx(), wrong_kind), wire::wire_error);
  wrong_kind.kind = 999;
  EXPECT_THROW(serve_shard_request(*c.parts[0], *c.book, ctx(), wrong_kind), wire::wire_error);
  EXPECT_THROW(serve_shard_request(*c.parts[0], *c.book, ctx(), wire_message{}), wire::wire_error);
}

// -- the actor --

class ShardActor : public ::testing::Test {
 protected:
  static constexpr auto kTimeout = std::chrono::seconds(10);
  static constexpr int kPart = 2;

  struct config : caf::actor_system_config {
    config() { add_actor_types(*this); }
  };

  static replica_config model() {
    return {.in_dim = static_cast<std::int32_t>(cora4().d.num_features()),
            .hidden = 8,
            .num_classes = cora4().d.num_classes,
            .num_layers = 2};
  }

  ShardActor()
      : sys_(cfg_),
        self_(sys_),
        shard_(sys_.spawn(shard_behavior, cora4().parts[kPart], cora4().book, model(),
                          worker_settings{}, ctx())) {}

  ~ShardActor() override { self_->send_exit(shard_, caf::exit_reason::user_shutdown); }

  /// The reply, or nullopt with the error text in `error` when the shard answered with an error.
  std::optional<wire_message> ask(const wire_message& m, std::string* error = nullptr) {
    std::optional<wire_message> out;
    bool answered = false;
    // Each kind has its own entry point; a kind no entry point takes goes to one that refuses it.
    auto request = [&] {
      switch (static_cast<wire::kind>(m.kind)) {
        case wire::kind::sample_request:
          return self_->request(shard_, kTimeout, sample_atom_v, m);
        case wire::kind::control:
          return self_->request(shard_, kTimeout, report_atom_v, m);
        default:
          return self_->request(shard_, kTimeout, feature_atom_v, m);
      }
    };
    request().receive(
        [&](wire_message& r) {
          answered = true;
          out = std::move(r);
        },
        [&](caf::error& e) {
          answered = true;
          if (error) *error = sys_.render(e);
        });
    EXPECT_TRUE(answered);
    return out;
  }

  /// The shard's traffic report: bytes per kind, messages per kind, rejected.
  wire::traffic report(std::uint64_t& rejected) {
    wire::control c{.h = {0, 0}, .what = wire::control_kind::result};
    const auto reply =
        ask({static_cast<std::uint16_t>(wire::kind::control), wire::encode(ctx(), c)});
    wire::traffic t;
    if (!reply) {
      ADD_FAILURE() << "no traffic report";
      return t;
    }
    const auto r = wire::decode_control(ctx(), reply->bytes);
    EXPECT_EQ(r.what, wire::control_kind::result);
    EXPECT_EQ(r.h.sender, kPart);
    // Traffic first, then the work counters and the time per stage.
    EXPECT_GE(r.counts.size(), 2u * wire::kNumKinds + 1);
    if (r.counts.size() < 2u * wire::kNumKinds + 1) return t;
    for (int k = 0; k < wire::kNumKinds; ++k) {
      t.bytes[k] = r.counts[k];
      t.messages[k] = r.counts[wire::kNumKinds + k];
    }
    rejected = r.counts[2 * wire::kNumKinds];
    return t;
  }

  void expect_still_serves(const std::vector<node_id>& nodes) {
    const auto reply = ask(sample_msg(ctx(), nodes, 4));
    ASSERT_TRUE(reply.has_value()) << "the shard stopped serving valid requests";
    expect_sample_reply_matches_sampler(*reply, nodes, 4, 99, 17, 1, kPart);
  }

  config cfg_;
  caf::actor_system sys_;
  caf::scoped_actor self_;
  shard_actor shard_;
};

TEST_F(ShardActor, AnswersSamplingAndFeaturePullsAndCountsTheReplyBytes) {
  const auto nodes = owned_sample(kPart, 4);
  const auto s = ask(sample_msg(ctx(), nodes, 10));
  ASSERT_TRUE(s.has_value());
  expect_sample_reply_matches_sampler(*s, nodes, 10, 99, 17, 1, kPart);
  const auto f = ask(feature_msg(ctx(), nodes));
  ASSERT_TRUE(f.has_value());
  const auto rows = wire::decode_row_block(ctx(), f->bytes);
  ASSERT_EQ(static_cast<size_t>(rows.rows.rows()), nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    EXPECT_TRUE(rows.rows.row(static_cast<Eigen::Index>(i)) == cora4().d.features.row(nodes[i]));
  // The replies served from the pure core are byte-identical to the actor's.
  const auto& c = cora4();
  EXPECT_EQ(
      s->bytes,
      serve_shard_request(*c.parts[kPart], *c.book, ctx(), sample_msg(ctx(), nodes, 10)).bytes);

  std::uint64_t rejected = 99;
  const wire::traffic t = report(rejected);
  EXPECT_EQ(rejected, 0u);
  wire::traffic want;
  want.add(wire::kind::sample_response, s->bytes.size());
  want.add(wire::kind::feature_response, f->bytes.size());
  EXPECT_EQ(t, want) << "counted " << t.bytes_json() << ", expected " << want.bytes_json();
}

TEST_F(ShardActor, RejectsBadRequestsWithAnErrorCountsThemAndKeepsServing) {
  const auto nodes = owned_sample(kPart, 6);
  std::vector<wire_message> bad;
  {
    auto n = nodes;
    n.push_back(foreign_node(kPart));
    bad.push_back(sample_msg(ctx(), n, 5));  // a node owned elsewhere
  }
  {
    auto m = sample_msg(ctx(), nodes, 5);
    m.bytes.resize(m.bytes.size() - 9);  // truncated
    bad.push_back(std::move(m));
  }
  bad.push_back(sample_msg({.cluster_id = kCluster ^ 1}, nodes, 5));  // another cluster
  {
    auto m = feature_msg(ctx(), nodes);
    m.kind = static_cast<std::uint16_t>(wire::kind::embedding_get);  // a kind shards do not serve
    bad.push_back(std::move(m));
  }
  {
    auto m = feature_msg(ctx(), nodes);
    m.kind = 4711;  // no kind at all
    bad.push_back(std::move(m));
  }
  {
    wire::control c{.h = {0, 0}, .what = wire::control_kind::result};
    bad.push_back({static_cast<std::uint16_t>(wire::kind::control),
                   wire::encode({.cluster_id = kCluster + 7}, c)});  // a foreign traffic query
  }

  std::uint64_t good_bytes = 0;
  for (size_t i = 0; i < bad.size(); ++i) {
    SCOPED_TRACE("bad request " + std::to_string(i));
    std::string error;
    EXPECT_FALSE(ask(bad[i], &error).has_value());
    EXPECT_NE(error.find("shard 2"), std::string::npos) << error;
    std::uint64_t rejected = 0;
    report(rejected);
    EXPECT_EQ(rejected, i + 1);
    expect_still_serves(nodes);
    good_bytes += serve_shard_request(*cora4().parts[kPart], *cora4().book, ctx(),
                                      sample_msg(ctx(), nodes, 4))
                      .bytes.size();
  }
  std::uint64_t rejected = 0;
  const wire::traffic t = report(rejected);
  EXPECT_EQ(rejected, bad.size());
  // Rejected requests send no reply bytes; only the valid sampling replies are counted.
  wire::traffic want;
  for (size_t i = 0; i < bad.size(); ++i)
    want.add(wire::kind::sample_response, good_bytes / bad.size());
  EXPECT_EQ(t, want) << "counted " << t.bytes_json() << ", expected " << want.bytes_json();
}

}  // namespace

// The mailbox counts of a report: with the scheduler's only thread held by another actor, five
// report requests queue at the shard; the first served sees the four behind it, the last none,
// and every later report keeps the peak.
TEST(ShardMailbox, AReportCountsTheRequestsQueuedBehindItAndKeepsThePeak) {
  struct config : caf::actor_system_config {
    config() {
      add_actor_types(*this);
      set("scheduler.max-threads", 1);
    }
  } cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  const replica_config model{.in_dim = static_cast<std::int32_t>(cora4().d.num_features()),
                             .hidden = 8,
                             .num_classes = cora4().d.num_classes,
                             .num_layers = 2};
  auto shard =
      sys.spawn(shard_behavior, cora4().parts[2], cora4().book, model, worker_settings{}, ctx());
  std::promise<void> started, release;
  auto released = release.get_future().share();
  auto blocker = sys.spawn([&started, released](caf::event_based_actor*) -> caf::behavior {
    return {[&started, released](int) {
      started.set_value();
      released.wait();
    }};
  });
  self->send(blocker, 1);
  started.get_future().wait();  // the only scheduler thread is now busy
  const wire::control c{.h = {0, 0}, .what = wire::control_kind::result};
  const wire_message ask{static_cast<std::uint16_t>(wire::kind::control), wire::encode(ctx(), c)};
  for (int i = 0; i < 5; ++i)
    self->send(shard, report_atom_v, ask);
  release.set_value();
  std::vector<mailbox_counts> seen;
  for (int i = 0; i < 5; ++i) {
    self->receive(
        [&](const wire_message& r) {
          seen.push_back(parse_report(wire::decode_control(ctx(), r.bytes).counts).mailbox);
        },
        caf::after(std::chrono::seconds(10)) >> [&] { ADD_FAILURE() << "no report"; });
  }
  ASSERT_EQ(seen.size(), 5u);
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].now, 4 - i) << i;
    EXPECT_EQ(seen[i].peak, 4u) << i;
  }
  self->send_exit(shard, caf::exit_reason::user_shutdown);
  self->send_exit(blocker, caf::exit_reason::user_shutdown);
}

// Per stage, the median and 95th percentile (nearest rank) of its time in each of the last
// kRecentSteps steps; older steps drop out, steps logged out of order land in their own slot.
TEST(StageLog, RecentSpreadIsTheMedianAndP95OfTheLastSteps) {
  stage_log log;
  EXPECT_EQ(log.recent_spread()[0], 0u);
  const auto n = stage_log::kRecentSteps;
  // Steps 0 .. n + 49: step i samples for i + 1 us (in two spans), expands only on even steps.
  for (std::uint64_t i = 0; i < n + 50; ++i) {
    log.add(stage::sample, i, 1000, 1000 + static_cast<std::int64_t>(i));
    if (i % 2 == 0) log.add(stage::expand, i, 0, 7);
  }
  for (std::uint64_t i = 0; i < n + 50; ++i)  // the second span of each, after the others
    log.add(stage::sample, i, 0, 1);
  // Kept: steps 50 .. n + 49 with i + 1 us each; ranks ceil(0.5 n) and ceil(0.95 n).
  const auto spread = log.recent_spread();
  const auto at = [](stage s, int which) { return 2 * static_cast<size_t>(s) + which; };
  EXPECT_EQ(spread[at(stage::sample, 0)], 50 + (n + 1) / 2);
  EXPECT_EQ(spread[at(stage::sample, 1)], 50 + (95 * n + 99) / 100);
  // Half the kept steps have no expansion: the median is 7 or 0, the 95th percentile 7.
  EXPECT_EQ(spread[at(stage::expand, 1)], 7u);
  EXPECT_EQ(spread[at(stage::forward, 1)], 0u);
  EXPECT_EQ(log.total_us()[static_cast<size_t>(stage::sample)], (n + 50) * (n + 49) / 2 + (n + 50));
  // The report carries them after the stage totals.
  const auto counts =
      wire::decode_control(ctx(), counters_report(0, ctx(), {}, 0, {}, nullptr, &log).bytes).counts;
  EXPECT_EQ(parse_report(counts).stage_spread_us, spread);
}

// A report's layout is told by its length; any other length is refused.
TEST(ShardMailbox, ReportLayoutsParseBackAndOthersAreRefused) {
  wire::traffic t;
  t.bytes[3] = 11;
  t.messages[3] = 2;
  compute_counters work;
  work.graphs = 7;
  stage_log stages;
  const auto worker = wire::decode_control(
      ctx(), counters_report(1, ctx(), t, 5, {.now = 3, .peak = 9}, &work, &stages).bytes);
  const parsed_report w = parse_report(worker.counts);
  ASSERT_TRUE(w.work.has_value());
  EXPECT_EQ(w.work->graphs, 7u);
  EXPECT_EQ(w.mailbox.now, 3u);
  EXPECT_EQ(w.mailbox.peak, 9u);
  EXPECT_EQ(w.rejected, 5u);
  EXPECT_EQ(w.sent, t);
  const auto store =
      wire::decode_control(ctx(), counters_report(1, ctx(), t, 0, {.now = 0, .peak = 2}).bytes);
  const parsed_report s = parse_report(store.counts);
  EXPECT_FALSE(s.work.has_value());
  EXPECT_EQ(s.mailbox.peak, 2u);
  auto short_one = store.counts;
  short_one.pop_back();
  EXPECT_THROW(parse_report(short_one), std::invalid_argument);
}

}  // namespace degnn
