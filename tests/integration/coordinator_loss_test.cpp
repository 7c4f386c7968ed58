// Losing a node (issue 12): kill -9 of node 0 (the coordinator) in the middle of a 3-node run, or
// node 2 crashing at a named step (--crash-after-step). The other nodes stop with a clear error,
// every node keeps a committed checkpoint in its own folder (no shared filesystem), and the
// cluster started again with --resume on each node's folder finishes the run; its losses are
// those of the in-process cluster resumed from the same checkpoint. Every process is killed and
// reaped whatever the outcome.
#include <gtest/gtest.h>

#include <memory>
#include <regex>
#include <sstream>

#include "model/commit_record.hpp"
#include "model/dataset.hpp"
#include "model/partition_store.hpp"
#include "model/partitioner.hpp"
#include "runtime/train/cluster_trainer.hpp"
#include "runtime/train/single_trainer.hpp"
#include "tests/integration/node_processes.hpp"

using namespace degnn;
using namespace degnn::test;
using namespace std::chrono_literals;

namespace {

std::vector<std::string> node_args(const fs::path& dir, int k, int epochs,
                                   std::vector<std::string> extra) {
  return checkpointed_node_run(dir / "parts", dir / ("ck-" + std::to_string(k)), epochs, 3, extra);
}

}  // namespace

// Cora in 3 METIS parts, written once per test.
class NodeLoss : public ::testing::Test {
 protected:
  NodeLoss()
      : dir_("node-loss"),
        data_(fs::path(DEGNN_SOURCE_DIR) / "data/cora"),
        d_(load_dataset(data_)) {
    const auto owner = partition_graph(d_.graph, d_.train, 3, partition_method::metis, 1);
    write_partitions(d_, owner, dir_.path / "parts", "metis", 1, 3);
    // Steps per epoch with batches of 8: the part with the most training nodes sets it.
    std::vector<std::size_t> train_per_part(3);
    for (node_id v : d_.train)
      ++train_per_part[static_cast<size_t>(owner[static_cast<size_t>(v)])];
    steps_per_epoch_ = batches_per_epoch(train_per_part, 8);
  }
  fs::path log(const std::string& name) const { return dir_.path / (name + ".log"); }
  std::string folder(int k) const { return (dir_.path / ("ck-" + std::to_string(k))).string(); }

  // Every node holds a commit of at least `at_least` steps; returns the seed's.
  std::uint64_t expect_commits(std::uint64_t at_least) const {
    std::uint64_t seed_step = 0;
    for (int k = 0; k < 3; ++k) {
      const committed_checkpoint c = load_committed_checkpoint(folder(k));
      EXPECT_GE(c.record.next_step, at_least) << "node " << k;
      if (k == 0) seed_step = c.record.next_step;
    }
    return seed_step;
  }

  // The losses of the in-process cluster resumed from checkpoint c to the end of `epochs`: the
  // same file under a commit record naming the in-process run.
  std::vector<double> reference_losses(const committed_checkpoint& c, int epochs) {
    train_settings s = small_run_reference(data_, dir_.path / "parts", epochs);
    // The same file under a record naming the in-process run (its own settings' run id).
    const fs::path ref = dir_.path / "reference";
    fs::create_directories(ref);
    fs::copy_file(c.folder / c.record.file, ref / c.record.file);
    commit_record r = c.record;
    r.cluster_id =
        checkpoint_run_id_for(s, d_.name, load_partition_book((dir_.path / "parts").string()));
    // The same settings and partitions: the in-process cluster's run is the nodes' run.
    EXPECT_EQ(r.cluster_id, c.record.cluster_id);
    write_commit_record(ref, r);
    s.resume = ref.string();
    std::vector<double> expected;
    training_report quiet("reference", "", false);
    train_cluster(s, d_, quiet, [&](std::uint64_t, double loss) { expected.push_back(loss); });
    EXPECT_FALSE(expected.empty());
    return expected;
  }

  // Starts the three nodes again with --resume on their own folders to the end of the epoch after
  // the seed's commit, and compares node 0's losses with the in-process cluster resumed from the
  // same file (under a commit record naming the in-process run).
  void resume_and_compare(std::uint64_t seed_step) {
    const int epochs = static_cast<int>(seed_step / steps_per_epoch_) + 1;
    const std::vector<double> expected =
        reference_losses(load_committed_checkpoint(folder(0)), epochs);

    const std::string seed = "127.0.0.1:" + std::to_string(free_port_pair());
    child_process n0(
        node_args(dir_.path, 0, epochs,
                  {"--is-seed", "--listen", seed, "--nodes", "3", "--resume", folder(0)}),
        log("again0"));
    child_process n1(node_args(dir_.path, 1, epochs, {"--join", seed, "--resume", folder(1)}),
                     log("again1"));
    child_process n2(node_args(dir_.path, 2, epochs, {"--join", seed, "--resume", folder(2)}),
                     log("again2"));
    ASSERT_EQ(n0.wait(120s), 0) << read_file(log("again0"));
    EXPECT_EQ(n1.wait(30s), 0) << read_file(log("again1"));
    EXPECT_EQ(n2.wait(30s), 0) << read_file(log("again2"));
    const std::string out0 = read_file(log("again0"));
    EXPECT_TRUE(contains(out0, "resuming at step " + std::to_string(seed_step))) << out0;
    const std::vector<double> remote = step_losses(out0);
    ASSERT_EQ(remote.size(), expected.size()) << out0;
    for (size_t i = 0; i < remote.size(); ++i)
      EXPECT_NEAR(remote[i], expected[i], 1e-6 * std::max(1.0, std::abs(expected[i])))
          << "step " << i;
    // The finished run committed its end on every node.
    for (int k = 0; k < 3; ++k)
      EXPECT_EQ(load_committed_checkpoint(folder(k)).record.next_step,
                static_cast<std::uint64_t>(epochs) * steps_per_epoch_)
          << "node " << k;
  }

  // Node 2 crashes in the last epoch; node 0 finds it lost and makes view 2: with --recover
  // adopt node 1 takes over partition 2, with replace a fourth process that joins through the
  // seed once node 0 waits for it does. Every node rolls back to the last checkpoint every node
  // wrote (an epoch end: checkpoints at epoch ends only) and the run goes on to its end without
  // a restart. The steps after it are redone exactly: node 0's losses equal those of the
  // in-process cluster trained to that epoch end and resumed from its checkpoint there.
  void recover_and_compare(const std::string& how, const std::string& pipeline) {
    const int epochs = 5;
    const std::uint64_t commit = 4 * steps_per_epoch_;
    const std::uint64_t crash_after = commit + 2;  // 3 steps into the last epoch
    const std::vector<std::string> all = {"--recover", how,          "--checkpoint-every",
                                          "0",         "--pipeline", pipeline};
    std::string out0, out1, heir;
    {
      auto nodes = start_long_run({"--crash-after-step", std::to_string(crash_after)}, epochs, all);
      child_process &n0 = *nodes[0], &n1 = *nodes[1], &n2 = *nodes[2];
      EXPECT_EQ(n2.wait(120s), 137) << read_file(log("run2"));
      std::unique_ptr<child_process> n3;
      if (how == "replace") {
        ASSERT_TRUE(wait_for(log("run0"), "waiting up to", 60s)) << read_file(log("run0"));
        std::vector<std::string> a = {"--join", seed_};
        a.insert(a.end(), all.begin(), all.end());
        n3 = std::make_unique<child_process>(node_args(dir_.path, 3, epochs, a), log("run3"));
      }
      const int rc0 = n0.wait(120s), rc1 = n1.wait(30s);
      out0 = read_file(log("run0"));
      out1 = read_file(log("run1"));
      ASSERT_EQ(rc0, 0) << out0 << out1;
      EXPECT_EQ(rc1, 0) << out1;
      if (n3) {
        EXPECT_EQ(n3->wait(30s), 0) << read_file(log("run3"));
        heir = read_file(log("run3"));
      }
    }
    EXPECT_TRUE(contains(out0, "lost node 2 at step")) << out0;
    if (how == "adopt") {
      EXPECT_TRUE(contains(out0, "partition 2 (node 2) to node 1")) << out0;
      EXPECT_TRUE(contains(out1, "view 2: serving partition 1,2")) << out1;
    } else {
      EXPECT_TRUE(contains(out0, "node 2 replaced by")) << out0;
      EXPECT_TRUE(contains(heir, "replacing a lost node in view 2")) << heir;
      EXPECT_TRUE(contains(heir, "partition 2 (3 nodes, view 2)")) << heir;
    }
    EXPECT_EQ(summary_field(out0, R"("recoveries":(\d+))"), "1") << out0;
    EXPECT_EQ(summary_field(out0, R"("replicas_identical":(\w+))"), "true") << out0;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(out0, m, std::regex(R"(rolls back to step (\d+))"))) << out0;
    // The last epoch end whose checkpoint every node wrote: the one before the crash, or, on a
    // loaded machine where that write was still under way, the one before it.
    const std::uint64_t back_to = std::stoull(m[1].str());
    EXPECT_TRUE(back_to == commit || back_to + steps_per_epoch_ == commit) << out0;
    ASSERT_EQ(back_to % steps_per_epoch_, 0u) << out0;
    // The reference: the in-process cluster trained from scratch to that epoch end (its own
    // checkpoint there, which it keeps as its last), then resumed from it to the run's end.
    const std::vector<double> remote = step_losses(out0);
    const fs::path ref = dir_.path / "reference-run";
    train_settings s = small_run_reference(data_, dir_.path / "parts",
                                           static_cast<int>(back_to / steps_per_epoch_));
    s.pipeline = pipeline;
    s.checkpoint_dir = ref.string();
    std::vector<double> before, expected;
    training_report quiet("reference", "", false);
    train_cluster(s, d_, quiet, [&](std::uint64_t, double loss) { before.push_back(loss); });
    s.epochs = epochs;
    s.checkpoint_dir.clear();
    s.resume = ref.string();
    train_cluster(s, d_, quiet, [&](std::uint64_t, double loss) { expected.push_back(loss); });
    ASSERT_EQ(before.size(), back_to);
    ASSERT_EQ(remote.size(), back_to + expected.size()) << out0;
    auto near = [](double a, double b) {
      return std::abs(a - b) <= 1e-6 * std::max(1.0, std::abs(b));
    };
    for (size_t i = 0; i < remote.size(); ++i)
      EXPECT_TRUE(near(remote[i], i < back_to ? before[i] : expected[i - back_to]))
          << "step " << i << ": " << remote[i];
    // The run's end is committed for every partition where it is served now.
    const auto end = static_cast<std::uint64_t>(epochs) * steps_per_epoch_;
    EXPECT_EQ(load_committed_checkpoint(folder(0)).record.next_step, end);
    EXPECT_EQ(
        read_commit_record(replica_checkpoint_dir(folder(how == "adopt" ? 1 : 3), 2))->next_step,
        end);
  }

  // Node 0 (the seed) and nodes 1 and 2 of a long run, logging to run0..run2; `extra2` goes to
  // node 2.
  // `all` goes to every node, `epochs` ends the run.
  std::vector<std::unique_ptr<child_process>> start_long_run(
      const std::vector<std::string>& extra2, int epochs = kLongRun,
      const std::vector<std::string>& all = {}) {
    const std::string seed = seed_ = "127.0.0.1:" + std::to_string(free_port_pair());
    std::vector<std::unique_ptr<child_process>> n;
    std::vector<std::string> a0 = {"--is-seed", "--listen", seed, "--nodes", "3"};
    a0.insert(a0.end(), all.begin(), all.end());
    n.push_back(std::make_unique<child_process>(node_args(dir_.path, 0, epochs, a0), log("run0")));
    for (int k = 1; k < 3; ++k) {
      std::vector<std::string> a = {"--join", seed, "--rank-hint", std::to_string(k)};
      a.insert(a.end(), all.begin(), all.end());
      if (k == 2) a.insert(a.end(), extra2.begin(), extra2.end());
      n.push_back(std::make_unique<child_process>(node_args(dir_.path, k, epochs, a),
                                                  log("run" + std::to_string(k))));
    }
    return n;
  }

  temp_dir dir_;
  fs::path data_;
  dataset d_;
  std::uint64_t steps_per_epoch_ = 0;
  std::string seed_;  ///< the last long run's seed address
  static constexpr int kLongRun = 100000;
};

TEST_F(NodeLoss, AKilledCoordinatorLeavesACommitAndTheClusterResumesFromIt) {
  {
    auto nodes = start_long_run({});
    child_process &n0 = *nodes[0], &n1 = *nodes[1], &n2 = *nodes[2];
    ASSERT_TRUE(wait_for(log("run0"), "epoch   4", 120s)) << read_file(log("run0"));
    std::this_thread::sleep_for(150ms);  // into a later epoch, between its checkpoints or in one
    n0.signal(SIGKILL);
    const auto t = std::chrono::steady_clock::now();
    const int rc1 = n1.wait(30s), rc2 = n2.wait(30s);
    std::printf("kill -9 of node 0: nodes 1 and 2 stopped after %.2f s\n", seconds_since(t));
    EXPECT_EQ(rc1, 1) << read_file(log("run1"));
    EXPECT_EQ(rc2, 1) << read_file(log("run2"));
    EXPECT_TRUE(contains(read_file(log("run1")), "lost the coordinator")) << read_file(log("run1"));
    n0.wait(10s);
  }
  // Every node committed at least the epoch ends it saw (3 epochs and more, before the kill).
  resume_and_compare(expect_commits(3 * steps_per_epoch_));
}

TEST_F(NodeLoss, AWorkerCrashedAtANamedStepLeavesACommitAndTheClusterResumesFromIt) {
  const std::uint64_t crash_after = 3 * steps_per_epoch_ + 2;  // mid-epoch
  {
    auto nodes = start_long_run({"--crash-after-step", std::to_string(crash_after)});
    child_process &n0 = *nodes[0], &n1 = *nodes[1], &n2 = *nodes[2];
    EXPECT_EQ(n2.wait(120s), 137) << read_file(log("run2"));
    EXPECT_TRUE(
        contains(read_file(log("run2")), "crashing before step " + std::to_string(crash_after + 1)))
        << read_file(log("run2"));
    const int rc0 = n0.wait(30s), rc1 = n1.wait(30s);
    const std::string out0 = read_file(log("run0"));
    EXPECT_EQ(rc0, 1) << out0;
    EXPECT_EQ(rc1, 1) << read_file(log("run1"));
    EXPECT_TRUE(contains(out0, "[partition 2 is node 2")) << out0;
  }
  // The last commit before the crash: the checkpoint every 3 steps at or before it.
  const std::uint64_t seed_step = expect_commits(3 * steps_per_epoch_);
  EXPECT_LE(seed_step, crash_after + 1);
  resume_and_compare(seed_step);
}

TEST_F(NodeLoss, AWorkerCrashedAtANamedStepIsAdoptedByASurvivorAndTheRunGoesOn) {
  recover_and_compare("adopt", "centralized");
}

TEST_F(NodeLoss, AWorkerCrashedAtANamedStepIsAdoptedInTheDecentralizedPipelineToo) {
  recover_and_compare("adopt", "decentralized");
}

TEST_F(NodeLoss, AWorkerCrashedAtANamedStepIsReplacedByANodeThatJoinsThroughTheSeed) {
  recover_and_compare("replace", "decentralized");
}

// A static cluster stopped during a commit: node 2 never wrote the last record, so the nodes'
// newest commits differ. Restarted with --resume the cluster refuses to form and says which
// --resume-step every node holds; restarted with it, the cluster finishes from that step.
TEST_F(NodeLoss, StaticNodesWhoseLastCommitsDifferResumeFromTheStepTheErrorNames) {
  std::vector<std::string> peers_list;
  for (int k = 0; k < 3; ++k)
    peers_list.push_back("127.0.0.1:" + std::to_string(free_port_pair()));
  const std::string peers = peers_list[0] + "," + peers_list[1] + "," + peers_list[2];
  auto run_all = [&](const std::string& name, int epochs, std::vector<std::string> extra) {
    std::vector<std::unique_ptr<child_process>> n;
    for (int k = 0; k < 3; ++k) {
      std::vector<std::string> a = {"--peers",           peers, "--id", std::to_string(k),
                                    "--connect-timeout", "20"};
      a.insert(a.end(), extra.begin(), extra.end());
      if (!extra.empty()) a.insert(a.end(), {"--resume", folder(k)});
      n.push_back(std::make_unique<child_process>(node_args(dir_.path, k, epochs, a),
                                                  log(name + std::to_string(k))));
    }
    std::vector<int> rc;
    for (auto& p : n)
      rc.push_back(p->wait(120s));
    return rc;
  };
  ASSERT_EQ(run_all("first", 1, {}), (std::vector<int>{0, 0, 0})) << read_file(log("first0"));
  const std::uint64_t last = load_committed_checkpoint(folder(2)).record.next_step;
  ASSERT_EQ(last, steps_per_epoch_);
  // Node 2 as if it stopped before writing the last record: it points at the commit before.
  const fs::path node2 = replica_checkpoint_dir(folder(2), 2);
  std::uint64_t before = 0;
  for (const auto& e : fs::directory_iterator(node2)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("ckpt-", 0) == 0 && name != checkpoint_file_name(last))
      before = std::stoull(name.substr(5));
  }
  ASSERT_GT(before, 0u);
  // The record it would have: written elsewhere (writing it here would prune the newer file).
  commit_record older = *read_commit_record(node2);
  const committed_checkpoint file = load_checkpoint_of_step(folder(2), before);
  older.next_step = before;
  older.file = file.record.file;
  older.size = file.record.size;
  older.crc = file.record.crc;
  const fs::path scratch = dir_.path / "scratch";
  fs::create_directories(scratch);
  write_commit_record(scratch, older);
  fs::copy_file(scratch / "COMMIT", node2 / "COMMIT", fs::copy_options::overwrite_existing);
  ASSERT_EQ(load_committed_checkpoint(folder(2)).record.next_step, before);

  const std::vector<int> refused = run_all("mixed", 2, {"--connect-timeout", "10"});
  std::string all_logs;
  for (int k = 0; k < 3; ++k)
    all_logs += read_file(log("mixed" + std::to_string(k)));
  EXPECT_NE(refused, (std::vector<int>{0, 0, 0})) << all_logs;
  EXPECT_TRUE(contains(all_logs, "--resume-step " + std::to_string(last))) << all_logs;
  std::smatch hint;
  if (std::regex_search(all_logs, hint, std::regex(".*--resume-step.*")))
    std::printf("refused: %s\n", hint.str().c_str());

  EXPECT_EQ(run_all("agreed", 2, {"--resume-step", std::to_string(last)}),
            (std::vector<int>{0, 0, 0}))
      << read_file(log("agreed0"));
  EXPECT_TRUE(contains(read_file(log("agreed2")), "resuming at step " + std::to_string(last)))
      << read_file(log("agreed2"));
  for (int k = 0; k < 3; ++k)
    EXPECT_EQ(load_committed_checkpoint(folder(k)).record.next_step, 2 * steps_per_epoch_);
}

// A joiner whose copy of the commit is damaged (one flipped byte) restores it from the seed's
// copy at --resume and the run goes on as the in-process cluster resumed from that commit.
TEST_F(NodeLoss, AJoinersDamagedCopyIsRestoredFromTheSeedsAtResume) {
  {
    auto nodes = start_long_run({}, 3);
    for (int k = 0; k < 3; ++k)
      ASSERT_EQ(nodes[static_cast<size_t>(k)]->wait(120s), 0)
          << read_file(log("run" + std::to_string(k)));
  }
  const std::uint64_t seed_step = expect_commits(3 * steps_per_epoch_);
  const committed_checkpoint c = load_committed_checkpoint(folder(2));
  flip_a_byte(c.folder / c.record.file);
  resume_and_compare(seed_step);
  const std::string out2 = read_file(log("again2"));
  EXPECT_TRUE(contains(out2,
                       "size or CRC-32 differs from its commit record (damaged file); "
                       "restoring it from the seed's copy"))
      << out2;
  EXPECT_TRUE(contains(out2, "restored " + c.record.file + " from the seed at")) << out2;
}

// The seed's own (only) copy damaged: it cannot resume, and says so to every joiner, which stops
// at once naming the file instead of waiting for --join-timeout.
TEST_F(NodeLoss, ASeedThatCannotResumeTellsEveryJoinerAtOnce) {
  {
    auto nodes = start_long_run({}, 3);
    for (int k = 0; k < 3; ++k)
      ASSERT_EQ(nodes[static_cast<size_t>(k)]->wait(120s), 0)
          << read_file(log("run" + std::to_string(k)));
  }
  const committed_checkpoint c = load_committed_checkpoint(folder(0));
  const fs::path damaged = c.folder / c.record.file;
  flip_a_byte(damaged);
  const std::string seed = "127.0.0.1:" + std::to_string(free_port_pair());
  child_process n0(
      node_args(dir_.path, 0, 5,
                {"--is-seed", "--listen", seed, "--nodes", "3", "--resume", folder(0)}),
      log("again0"));
  const auto t = std::chrono::steady_clock::now();
  child_process n1(node_args(dir_.path, 1, 5, {"--join", seed, "--resume", folder(1)}),
                   log("again1"));
  child_process n2(node_args(dir_.path, 2, 5, {"--join", seed, "--resume", folder(2)}),
                   log("again2"));
  EXPECT_EQ(n1.wait(30s), 1) << read_file(log("again1"));
  EXPECT_EQ(n2.wait(30s), 1) << read_file(log("again2"));
  const double joiners = seconds_since(t);
  EXPECT_EQ(n0.wait(30s), 1) << read_file(log("again0"));
  std::printf("a damaged seed copy: the joiners stopped after %.2f s, the seed after %.2f s\n",
              joiners, seconds_since(t));
  EXPECT_LT(joiners, 10.0);
  for (int k = 0; k < 3; ++k) {
    const std::string o = read_file(log("again" + std::to_string(k)));
    EXPECT_TRUE(contains(o, damaged.string() + ": size or CRC-32 differs")) << o;
  }
  EXPECT_TRUE(contains(read_file(log("again1")), "the seed cannot resume the run"));
}
