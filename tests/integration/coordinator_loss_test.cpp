// Losing the coordinator (issue 12): kill -9 of node 0 in the middle of a 3-node run. The other
// nodes stop with a clear error, every node keeps a committed checkpoint in its own folder (no
// shared filesystem), and the cluster started again with --resume on each node's folder finishes
// the run; its losses are those of the in-process cluster resumed from the same checkpoint.
// Every process is killed and reaped whatever the outcome.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "model/commit_record.hpp"
#include "model/dataset.hpp"
#include "model/partition_store.hpp"
#include "model/partitioner.hpp"
#include "runtime/cluster_trainer.hpp"
#include "runtime/single_trainer.hpp"
#include "tests/integration/node_processes.hpp"

using namespace degnn;
using namespace degnn::test;
using namespace std::chrono_literals;

namespace {

std::vector<std::string> node_args(const fs::path& dir, int k, int epochs,
                                   std::vector<std::string> extra) {
  std::vector<std::string> a = {"--lr",
                                "0.01",
                                "--dropout",
                                "0.5",
                                "--weight-decay",
                                "0",
                                "--batch-size",
                                "8",
                                "--epochs",
                                std::to_string(epochs),
                                "--checkpoint-dir",
                                (dir / ("ck-" + std::to_string(k))).string(),
                                "--checkpoint-every",
                                "3",
                                "--join-timeout",
                                "60"};
  a.insert(a.end(), extra.begin(), extra.end());
  return small_node_run(dir / "parts", a);
}

std::vector<double> step_losses(const std::string& log) {
  std::vector<double> out;
  std::stringstream ls(summary_field(log, R"("step_losses":\[([^\]]*)\])"));
  for (std::string item; std::getline(ls, item, ',');)
    out.push_back(std::stod(item));
  return out;
}

}  // namespace

TEST(CoordinatorLoss, AKilledCoordinatorLeavesACommitAndTheClusterResumesFromIt) {
  temp_dir dir("coordinator-loss");
  const fs::path data = fs::path(DEGNN_SOURCE_DIR) / "data/cora";
  const dataset d = load_dataset(data);
  const auto owner = partition_graph(d.graph, d.train, 3, partition_method::metis, 1);
  write_partitions(d, owner, dir.path / "parts", "metis", 1, 3);
  // Steps per epoch with batches of 8: the part with the most training nodes sets it.
  std::vector<std::size_t> train_per_part(3);
  for (node_id v : d.train)
    ++train_per_part[static_cast<size_t>(owner[static_cast<size_t>(v)])];
  const std::uint64_t kStepsPerEpoch = batches_per_epoch(train_per_part, 8);
  auto log = [&](const std::string& name) { return dir.path / (name + ".log"); };
  constexpr int kLongRun = 100000;
  {
    const std::string seed = "127.0.0.1:" + std::to_string(free_port_pair());
    child_process n0(
        node_args(dir.path, 0, kLongRun, {"--is-seed", "--listen", seed, "--nodes", "3"}),
        log("run0"));
    child_process n1(node_args(dir.path, 1, kLongRun, {"--join", seed, "--rank-hint", "1"}),
                     log("run1"));
    child_process n2(node_args(dir.path, 2, kLongRun, {"--join", seed, "--rank-hint", "2"}),
                     log("run2"));
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
  std::uint64_t seed_step = 0;
  for (int k = 0; k < 3; ++k) {
    const committed_checkpoint c =
        load_committed_checkpoint(dir.path / ("ck-" + std::to_string(k)));
    EXPECT_GE(c.record.next_step, 3 * kStepsPerEpoch) << "node " << k;
    if (k == 0) seed_step = c.record.next_step;
  }
  // The reference: the in-process cluster resumed from the seed's commit (the same file under a
  // commit record naming the in-process run), to the end of the next epoch.
  const int epochs = static_cast<int>(seed_step / kStepsPerEpoch) + 1;
  const committed_checkpoint c = load_committed_checkpoint(dir.path / "ck-0");
  fs::create_directories(dir.path / "reference");
  fs::copy_file(c.folder / c.record.file, dir.path / "reference" / c.record.file);
  commit_record r = c.record;
  r.cluster_id = cluster_id_for(d.name, 3);
  write_commit_record(dir.path / "reference", r);
  train_settings s;
  s.data = data.string();
  s.partitions = (dir.path / "parts").string();
  s.pipeline = "centralized";
  s.epochs = epochs;
  s.batch_size = 8;
  s.fanouts = {5, 10};
  s.model.hidden = 16;
  s.model.lr = 0.01f;
  s.model.dropout = 0.5f;
  s.model.weight_decay = 0;
  s.seed = s.model.seed = 3;
  s.eval_every = 0;
  s.progress = false;
  s.resume = (dir.path / "reference").string();
  std::vector<double> expected;
  training_report quiet("reference", "", false);
  train_cluster(s, d, quiet, [&](std::uint64_t, double loss) { expected.push_back(loss); });
  ASSERT_FALSE(expected.empty());

  // The cluster again, each node from its own folder; the seed's commit decides the step.
  const std::string seed = "127.0.0.1:" + std::to_string(free_port_pair());
  auto resume = [&](int k) { return (dir.path / ("ck-" + std::to_string(k))).string(); };
  child_process n0(
      node_args(dir.path, 0, epochs,
                {"--is-seed", "--listen", seed, "--nodes", "3", "--resume", resume(0)}),
      log("again0"));
  child_process n1(node_args(dir.path, 1, epochs, {"--join", seed, "--resume", resume(1)}),
                   log("again1"));
  child_process n2(node_args(dir.path, 2, epochs, {"--join", seed, "--resume", resume(2)}),
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
    EXPECT_EQ(load_committed_checkpoint(resume(k)).record.next_step,
              static_cast<std::uint64_t>(epochs) * kStepsPerEpoch)
        << "node " << k;
}
