// Multi-process tests of forming a cluster through a seed (issue 11 item 1 and 2): real `degnn
// node` processes on 127.0.0.1 join the seed in any start order, get ranks and partitions from
// its view, and train exactly like the in-process cluster on the same partitions. Joiners that
// do not belong are refused without harming the cluster; a cluster that cannot form ends with a
// clear error. Every process is killed and reaped whatever the outcome.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <regex>
#include <sstream>

#include <caf/io/all.hpp>

#include "model/dataset.hpp"
#include "model/partition_store.hpp"
#include "model/partitioner.hpp"
#include "runtime/node/node_actor.hpp"
#include "runtime/train/cluster_trainer.hpp"
#include "tests/integration/node_processes.hpp"
#include "tests/integration/outside_peer.hpp"

using namespace degnn;
using namespace degnn::test;
using namespace std::chrono_literals;

namespace {

// Pubmed in 4 METIS parts and the in-process cluster's run on them, computed once.
class SeedJoin : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new temp_dir("seed-join");
    const dataset d = load_dataset(fs::path(DEGNN_SOURCE_DIR) / "data/pubmed");
    write_partitions(d, partition_graph(d.graph, d.train, 4, partition_method::metis, 1),
                     dir_->path / "parts", "metis", 1, 4);
    train_settings s;
    s.data = (fs::path(DEGNN_SOURCE_DIR) / "data/pubmed").string();
    s.partitions = (dir_->path / "parts").string();
    s.pipeline = "centralized";
    s.parts = 4;
    s.epochs = 1;
    s.batch_size = 16;
    s.fanouts = {5, 10};
    s.model.hidden = 16;
    s.seed = 3;
    s.model.seed = 3;
    s.model.lr = 0.01;
    s.model.dropout = 0.5;
    s.model.weight_decay = 0;
    s.eval_every = 0;
    s.progress = false;
    training_report report("in-process", "", false);
    local_ = new reference;
    const cluster_result r = train_cluster(
        s, d, report, [&](std::uint64_t, double loss) { local_->losses.push_back(loss); });
    local_->bytes = r.traffic.sent.total_bytes();
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete local_;
  }

  // The settings of the reference run, as node options.
  static std::vector<std::string> node_args(std::vector<std::string> extra) {
    std::vector<std::string> a = {
        "--lr",           "0.01", "--dropout",         "0.5", "--weight-decay", "0",
        "--join-timeout", "60",   "--connect-timeout", "30"};
    a.insert(a.end(), extra.begin(), extra.end());
    return small_node_run(dir_->path / "parts", a);
  }
  static fs::path log(const std::string& name) { return dir_->path / (name + ".log"); }

  // node 0's losses and bytes must be the in-process cluster's.
  static void expect_like_one_process(const std::string& log0) {
    const std::string losses = summary_array(log0, "step_losses");
    ASSERT_FALSE(losses.empty()) << log0;
    std::vector<double> remote;
    std::stringstream ls(losses);
    for (std::string item; std::getline(ls, item, ',');)
      remote.push_back(std::stod(item));
    ASSERT_EQ(remote.size(), local_->losses.size()) << log0;
    for (size_t i = 0; i < remote.size(); ++i)
      EXPECT_NEAR(remote[i], local_->losses[i], 1e-6 * std::max(1.0, std::abs(local_->losses[i])))
          << "step " << i;
    EXPECT_EQ(std::stoull(summary_field(log0, R"("bytes":(\d+))")), local_->bytes);
  }

  struct reference {
    std::vector<double> losses;
    std::uint64_t bytes = 0;
  };
  static temp_dir* dir_;
  static reference* local_;
};
temp_dir* SeedJoin::dir_ = nullptr;
SeedJoin::reference* SeedJoin::local_ = nullptr;

}  // namespace

TEST_F(SeedJoin, FourNodesFormTheClusterInEveryStartOrderAndTrainLikeOneProcess) {
  std::mt19937 rng(7);
  std::vector<std::vector<int>> orders = {{0, 1, 2, 3}, {1, 2, 3, 0}, {2, 0, 3, 1}};
  for (int i = 0; i < 17; ++i) {
    std::vector<int> o = {0, 1, 2, 3};
    std::shuffle(o.begin(), o.end(), rng);
    orders.push_back(o);
  }
  std::vector<double> join_times;
  for (size_t run = 0; run < orders.size(); ++run) {
    const std::uint16_t port = free_port_pair();
    ASSERT_NE(port, 0);
    const std::string seed = "127.0.0.1:" + std::to_string(port);
    std::vector<std::unique_ptr<child_process>> procs(4);
    std::chrono::steady_clock::time_point last_start;
    for (int who : orders[run]) {
      const auto args =
          who == 0 ? node_args({"--is-seed", "--listen", seed}) : node_args({"--join", seed});
      procs[static_cast<size_t>(who)] = std::make_unique<child_process>(
          args, log("order" + std::to_string(run) + "-" + std::to_string(who)));
      last_start = std::chrono::steady_clock::now();
      std::this_thread::sleep_for(std::chrono::milliseconds(10 * who));
    }
    const fs::path log0 = log("order" + std::to_string(run) + "-0");
    ASSERT_TRUE(wait_for(log0, "formed view 1 with 4 nodes", 60s)) << read_file(log0);
    join_times.push_back(seconds_since(last_start));
    const int rc0 = procs[0]->wait(120s);
    ASSERT_EQ(rc0, 0) << read_file(log0);
    for (int k = 1; k < 4; ++k) {
      const fs::path lk = log("order" + std::to_string(run) + "-" + std::to_string(k));
      EXPECT_EQ(procs[static_cast<size_t>(k)]->wait(30s), 0) << read_file(lk);
      EXPECT_TRUE(contains(read_file(lk), "stopped by the coordinator")) << read_file(lk);
    }
    expect_like_one_process(read_file(log0));
  }
  std::sort(join_times.begin(), join_times.end());
  std::printf(
      "%zu runs in different start orders; from the last start to the formed view: "
      "median %.3f s, max %.3f s\n",
      join_times.size(), join_times[join_times.size() / 2], join_times.back());
}

TEST_F(SeedJoin, FewerNodesThanPartitionsFormAtMinAfterTheLastCallAndServeSeveralEach) {
  const std::uint16_t port = free_port_pair();
  const std::string seed = "127.0.0.1:" + std::to_string(port);
  child_process s(node_args({"--is-seed", "--listen", seed, "--nodes", "2:4", "--last-call", "1"}),
                  log("min0"));
  child_process j(node_args({"--join", seed}), log("min1"));
  const int rc0 = s.wait(120s);
  const std::string out0 = read_file(log("min0")), out1 = read_file(log("min1"));
  ASSERT_EQ(rc0, 0) << out0;
  EXPECT_EQ(j.wait(30s), 0) << out1;
  EXPECT_TRUE(contains(out0, "formed view 1 with 2 nodes")) << out0;
  EXPECT_TRUE(contains(out0, "node 0: partition 0,2 (2 nodes")) << out0;
  EXPECT_TRUE(contains(out1, "node 1: partition 1,3 (2 nodes")) << out1;
  expect_like_one_process(out0);
}

TEST_F(SeedJoin, AJoinerWithOtherSettingsIsRefusedAndTheClusterFormsWithoutIt) {
  const std::uint16_t port = free_port_pair();
  const std::string seed = "127.0.0.1:" + std::to_string(port);
  child_process s(node_args({"--is-seed", "--listen", seed, "--nodes", "2"}), log("other0"));
  child_process bad(node_args({"--join", seed, "--lr", "0.02", "--name", "stranger"}),
                    log("other-bad"));
  const int rc_bad = bad.wait(60s);
  const std::string out_bad = read_file(log("other-bad"));
  EXPECT_EQ(rc_bad, 1) << out_bad;
  EXPECT_TRUE(contains(out_bad, "did not take us") &&
              contains(out_bad, "lr is 0.01 on the seed and 0.02 on joiner 'stranger'"))
      << out_bad;
  child_process good(node_args({"--join", seed}), log("other1"));
  const int rc0 = s.wait(120s);
  const std::string out0 = read_file(log("other0"));
  ASSERT_EQ(rc0, 0) << out0;
  EXPECT_EQ(good.wait(30s), 0) << read_file(log("other1"));
  EXPECT_TRUE(contains(out0, "refused a join from")) << out0;
  expect_like_one_process(out0);
}

TEST_F(SeedJoin, AJoinerThatDiesBeforeTheViewIsForgotten) {
  const std::uint16_t port = free_port_pair();
  const std::string seed = "127.0.0.1:" + std::to_string(port);
  child_process s(node_args({"--is-seed", "--listen", seed, "--nodes", "3"}), log("dies0"));
  {
    child_process doomed(node_args({"--join", seed, "--name", "doomed"}), log("dies-x"));
    ASSERT_TRUE(wait_for(log("dies0"), "joined (2 nodes)", 60s)) << read_file(log("dies0"));
    doomed.signal(SIGKILL);
    EXPECT_NE(doomed.wait(10s), -1);
  }
  ASSERT_TRUE(wait_for(log("dies0"), "went away before the cluster formed", 30s))
      << read_file(log("dies0"));
  child_process a(node_args({"--join", seed}), log("dies1"));
  child_process b(node_args({"--join", seed}), log("dies2"));
  const int rc0 = s.wait(120s);
  const std::string out0 = read_file(log("dies0"));
  ASSERT_EQ(rc0, 0) << out0;
  EXPECT_EQ(a.wait(30s), 0) << read_file(log("dies1"));
  EXPECT_EQ(b.wait(30s), 0) << read_file(log("dies2"));
  EXPECT_TRUE(contains(out0, "formed view 1 with 3 nodes")) << out0;
  EXPECT_FALSE(contains(out0, "=doomed")) << out0;
}

TEST_F(SeedJoin, AClusterThatCannotFormEndsEveryNodeWithAClearError) {
  const std::uint16_t port = free_port_pair();
  const std::string seed = "127.0.0.1:" + std::to_string(port);
  child_process s(node_args({"--is-seed", "--listen", seed, "--nodes", "3", "--join-timeout", "2"}),
                  log("short0"));
  child_process j(node_args({"--join", seed, "--join-timeout", "2"}), log("short1"));
  const int rc0 = s.wait(30s), rc1 = j.wait(30s);
  const std::string out0 = read_file(log("short0")), out1 = read_file(log("short1"));
  EXPECT_EQ(rc0, 1) << out0;
  EXPECT_TRUE(contains(out0, "the cluster did not form before --join-timeout")) << out0;
  EXPECT_EQ(rc1, 1) << out1;
  EXPECT_TRUE(contains(out1, "did not take us")) << out1;
  // A node that finds no seed at all says so as well.
  child_process lonely(
      node_args({"--join", "127.0.0.1:" + std::to_string(free_port_pair()), "--join-timeout", "1"}),
      log("lonely"));
  EXPECT_EQ(lonely.wait(30s), 1) << read_file(log("lonely"));
  EXPECT_TRUE(contains(read_file(log("lonely")), "cannot reach the seed at 127.0.0.1:"))
      << read_file(log("lonely"));
}

TEST_F(SeedJoin, NodesWithEmptyFoldersGetTheirPartitionsFromTheSeedAndTrainLikeOneProcess) {
  const std::uint16_t port = free_port_pair();
  const std::string seed = "127.0.0.1:" + std::to_string(port);
  child_process s(node_args({"--is-seed", "--listen", seed}), log("stream0"));
  std::vector<std::unique_ptr<child_process>> joiners;
  for (int k = 1; k < 4; ++k) {
    auto args = node_args({"--join", seed, "--rank-hint", std::to_string(k)});
    // Their own, empty folders instead of the seed's.
    *(std::find(args.begin(), args.end(), "--partitions") + 1) =
        (dir_->path / ("empty-" + std::to_string(k))).string();
    joiners.push_back(std::make_unique<child_process>(args, log("stream" + std::to_string(k))));
  }
  const int rc0 = s.wait(120s);
  const std::string out0 = read_file(log("stream0"));
  ASSERT_EQ(rc0, 0) << out0;
  for (int k = 1; k < 4; ++k) {
    const std::string out = read_file(log("stream" + std::to_string(k)));
    EXPECT_EQ(joiners[static_cast<size_t>(k - 1)]->wait(30s), 0) << out;
    EXPECT_TRUE(contains(out, "fetched part-" + std::to_string(k) + "/partition.bin")) << out;
    const fs::path mine = dir_->path / ("empty-" + std::to_string(k));
    EXPECT_EQ(read_file(mine / ("part-" + std::to_string(k)) / "partition.bin"),
              read_file(dir_->path / "parts" / ("part-" + std::to_string(k)) / "partition.bin"));
    EXPECT_FALSE(fs::exists(mine / "part-0")) << "only its own partition is fetched";
  }
  expect_like_one_process(out0);
  // Started again, the same nodes download nothing.
  child_process again(node_args({"--is-seed", "--listen", seed}), log("again0"));
  std::vector<std::unique_ptr<child_process>> rejoiners;
  for (int k = 1; k < 4; ++k) {
    auto args = node_args({"--join", seed, "--rank-hint", std::to_string(k)});
    *(std::find(args.begin(), args.end(), "--partitions") + 1) =
        (dir_->path / ("empty-" + std::to_string(k))).string();
    rejoiners.push_back(std::make_unique<child_process>(args, log("again" + std::to_string(k))));
  }
  ASSERT_EQ(again.wait(120s), 0) << read_file(log("again0"));
  for (int k = 1; k < 4; ++k) {
    const std::string out = read_file(log("again" + std::to_string(k)));
    EXPECT_EQ(rejoiners[static_cast<size_t>(k - 1)]->wait(30s), 0) << out;
    EXPECT_FALSE(contains(out, "fetched")) << out;
  }
}

TEST_F(SeedJoin, APausedOrKilledMemberIsReportedByEveryOtherNodeWithinTheBound) {
  // Heartbeats every 200 ms, a connection silent for 10 of them (2 s) is dropped.
  for (const std::string how : {"SIGSTOP", "SIGKILL"}) {
    const std::uint16_t port = free_port_pair();
    const std::string seed = "127.0.0.1:" + std::to_string(port);
    const std::vector<std::string> beat = {"--epochs",           "100000", "--heartbeat-ms", "200",
                                           "--heartbeat-misses", "10",     "--nodes",        "3"};
    auto args = [&](std::vector<std::string> a) {
      a.insert(a.end(), beat.begin(), beat.end());
      return node_args(a);  // the later --epochs wins: run until the fault
    };
    child_process s(args({"--is-seed", "--listen", seed}), log(how + "0"));
    child_process a(args({"--join", seed, "--rank-hint", "1"}), log(how + "1"));
    child_process b(args({"--join", seed, "--rank-hint", "2", "--name", "victim"}), log(how + "2"));
    ASSERT_TRUE(wait_for(log(how + "0"), "epoch   2", 90s)) << read_file(log(how + "0"));
    b.signal(how == "SIGSTOP" ? SIGSTOP : SIGKILL);
    const auto t = std::chrono::steady_clock::now();
    const int rc0 = s.wait(30s);
    const double t0 = seconds_since(t);
    const int rc1 = a.wait(30s);
    const double t1 = seconds_since(t);
    const std::string out0 = read_file(log(how + "0")), out1 = read_file(log(how + "1"));
    std::printf("%s of node 2 (of 3): node 0 stopped after %.2f s, node 1 after %.2f s\n",
                how.c_str(), t0, t1);
    EXPECT_EQ(rc0, 1) << out0;
    EXPECT_TRUE(contains(out0, "[partition 2 is node 2, victim at 127.0.0.1:")) << out0;
    EXPECT_EQ(rc1, 1) << out1;
    // Node 0 stopped the run and said why, so node 1 does not take its loss for one to fail
    // over from.
    EXPECT_TRUE(
        contains(out1, "the coordinator (node 0) stopped: node 0: peer failed: partition 2"))
        << out1;
    EXPECT_LT(t1, how == "SIGSTOP" ? 10.0 : 5.0);
    b.signal(SIGKILL);
  }
}

// A pause shorter than the connection time-out (60 s by default) is not a loss, but node 0 says
// it: a member silent for 3 s, once, and again when it answers; node 0's own pause when it runs
// again. The run goes on through both.
TEST_F(SeedJoin, APauseShorterThanTheTimeOutIsLoggedByNode0AndTheRunGoesOn) {
  const std::string seed = "127.0.0.1:" + std::to_string(free_port_pair());
  child_process s(node_args({"--is-seed", "--listen", seed, "--nodes", "2", "--epochs", "100000"}),
                  log("pause0"));
  child_process j(node_args({"--join", seed, "--epochs", "100000"}), log("pause1"));
  ASSERT_TRUE(wait_for(log("pause0"), "epoch   2", 90s)) << read_file(log("pause0"));
  j.signal(SIGSTOP);
  std::this_thread::sleep_for(5s);
  j.signal(SIGCONT);
  EXPECT_TRUE(wait_for(log("pause0"), "node 1 answers again after", 20s))
      << read_file(log("pause0"));
  const std::string out = read_file(log("pause0"));
  EXPECT_TRUE(contains(out, "node 1 has not answered for ")) << out;  // 3.0 s, later when busy
  s.signal(SIGSTOP);
  std::this_thread::sleep_for(5s);
  s.signal(SIGCONT);
  EXPECT_TRUE(wait_for(log("pause0"), "this node did not run for", 20s))
      << read_file(log("pause0"));
  // Both still train: node 0 finishes further epochs after both pauses.
  const auto epochs = [&] {
    const std::string o = read_file(log("pause0"));
    int n = 0;
    for (size_t at = o.find("\nepoch "); at != std::string::npos; at = o.find("\nepoch ", at + 1))
      ++n;
    return n;
  };
  const int before = epochs();
  bool more = false;
  for (int i = 0; i < 600 && !more; ++i) {  // 60 s at most
    more = epochs() > before;
    if (!more) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(more) << read_file(log("pause0"));
  EXPECT_EQ(s.wait(10ms), -1) << read_file(log("pause0"));
  EXPECT_EQ(j.wait(10ms), -1) << read_file(log("pause1"));
  // Node 0's own pause is not blamed on node 1 (its silence was node 0's). Not asserted under a
  // sanitizer: there node 1 may take longer than 3 s to answer once node 0 runs again (a TSan
  // run logged it silent for 5.1 s then; the plain build answers within the second).
  const std::string all = read_file(log("pause0"));
#ifndef DEGNN_SANITIZED
  EXPECT_EQ(all.find("has not answered"), all.rfind("has not answered")) << all;
#endif
  std::stringstream lines(all);
  for (std::string line; std::getline(lines, line);)
    if (contains(line, "answer") || contains(line, "did not run"))
      std::printf("%s\n", line.c_str());
}

TEST_F(SeedJoin, AStrangerCannotStopGreetOrConfigureAMemberOfAJoinedCluster) {
  const std::string seed = "127.0.0.1:" + std::to_string(free_port_pair());
  child_process s(node_args({"--is-seed", "--listen", seed, "--nodes", "2", "--epochs", "100000"}),
                  log("stranger0"));
  child_process j(node_args({"--join", seed, "--epochs", "100000"}), log("stranger1"));
  ASSERT_TRUE(wait_for(log("stranger0"), "epoch   2", 90s)) << read_file(log("stranger0"));
  std::smatch m;
  const std::string out1 = read_file(log("stranger1"));
  ASSERT_TRUE(std::regex_search(
      out1, m, std::regex(R"(node 1: partition .* listening on 127\.0\.0\.1:(\d+))")))
      << out1;
  outside_peer stranger;
  auto& [cfg, sys, self] = stranger;
  auto node = stranger.node_at(static_cast<std::uint16_t>(std::stoi(m[1].str())));
  ASSERT_TRUE(node) << sys.render(node.error());
  std::vector<std::string> refusals;
  // `ok` only names the reply type a taken message would get.
  auto expect_refused = [&](auto&& request, auto ok) {
    request.receive([&](decltype(ok)) { ADD_FAILURE() << "a stranger's message was taken"; },
                    [&](caf::error& e) { refusals.push_back(sys.render(e)); });
  };
  expect_refused(self->request(*node, 10s, bye_atom_v, std::string("guess"), std::string()),
                 bool{});
  expect_refused(
      self->request(*node, 10s, greet_atom_v,
                    node_greeting{0, {}, caf::actor_cast<caf::strong_actor_ptr>(self), ""}),
      std::int32_t{});
  expect_refused(self->request(*node, 10s, serve_atom_v, node_role{}, std::string("guess")),
                 bool{});
  expect_refused(self->request(*node, 10s, view_atom_v, peer_view{}, std::string("guess")), bool{});
  // The recovery messages: a new view (which would roll the node back), and what only this
  // node's own process may ask.
  wire::membership_view forged;
  forged.id = 2;
  forged.members = {{0, "127.0.0.1", 1, "a", {0}}, {1, "127.0.0.1", 2, "b", {1}}};
  expect_refused(self->request(*node, 10s, recover_atom_v, wire::encode(wire::context{}, forged),
                               std::string("guess")),
                 bool{});
  expect_refused(self->request(*node, 10s, recovery_atom_v, std::string("guess")),
                 std::vector<char>{});
  expect_refused(self->request(*node, 10s, gone_atom_v, std::string("guess")),
                 std::vector<std::int32_t>{});
  // The seed: no replacement is awaited, and no checkpoint is given to a stranger.
  auto seed_node = stranger.node_at(static_cast<std::uint16_t>(std::stoi(seed.substr(10))));
  ASSERT_TRUE(seed_node) << sys.render(seed_node.error());
  expect_refused(self->request(*seed_node, 10s, replace_atom_v, std::vector<std::string>{},
                               std::string("guess")),
                 std::vector<char>{});
  expect_refused(self->request(*seed_node, 10s, offer_atom_v, std::string("part-0/ckpt-1.bin"),
                               std::string("guess")),
                 bool{});
  expect_refused(
      self->request(*seed_node, 10s, chunk_atom_v,
                    wire::encode(wire::context{},
                                 wire::file_chunk_request{"checkpoint/part-0/ckpt-1.bin", 0, 16})),
      std::vector<char>{});
  ASSERT_EQ(refusals.size(), 10u);
  EXPECT_TRUE(contains(refusals[0], "bye is taken from the coordinator only")) << refusals[0];
  EXPECT_TRUE(contains(refusals[1], "without this view's secret")) << refusals[1];
  EXPECT_TRUE(contains(refusals[4], "a new view is taken from the coordinator only"))
      << refusals[4];
  EXPECT_TRUE(contains(refusals[7], "asked outside the seed's process")) << refusals[7];
  EXPECT_TRUE(contains(refusals[9], "checkpoint/part-0/ckpt-1.bin")) << refusals[9];
  // Training goes on: node 0 reaches a later epoch and both nodes are still running.
  const std::string seen = read_file(log("stranger0"));
  const auto last = seen.rfind("epoch ");
  const int epoch_then = std::stoi(seen.substr(last + 6, 4));
  ASSERT_TRUE(wait_for(log("stranger0"),
                       "epoch " +
                           std::string(epoch_then + 3 < 10    ? "  "
                                       : epoch_then + 3 < 100 ? " "
                                                              : "") +
                           std::to_string(epoch_then + 3),
                       60s))
      << read_file(log("stranger0"));
  EXPECT_EQ(j.wait(10ms), -1) << read_file(log("stranger1"));
  EXPECT_EQ(s.wait(10ms), -1);
}
