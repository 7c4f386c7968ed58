// The fault policy across processes (issue 12): three node processes on loopback read a [faults]
// section (5% of the messages between nodes damaged, 5% duplicated, 5% held back up to 20 ms and
// so overtaken by later ones, delegated across the network); every receiver refuses what
// it must, every node says what it injected, and node 0's losses are those of the fault-free
// in-process cluster on the same partitions. Every process is killed and reaped whatever happens.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "model/dataset.hpp"
#include "model/partition_store.hpp"
#include "model/partitioner.hpp"
#include "runtime/train/cluster_trainer.hpp"
#include "tests/integration/node_processes.hpp"

using namespace degnn;
using namespace degnn::test;
using namespace std::chrono_literals;

TEST(FaultPolicy, NodesUnderAFaultsSectionRefuseWhatTheyMustAndTrainAsWithoutFaults) {
  temp_dir dir("fault-policy");
  const fs::path data = fs::path(DEGNN_SOURCE_DIR) / "data/cora";
  const dataset d = load_dataset(data);
  write_partitions(d, partition_graph(d.graph, d.train, 3, partition_method::metis, 1),
                   dir.path / "parts", "metis", 1, 3);
  std::ofstream(dir.path / "faults.conf")
      << "[faults]\nseed = 7\ncorrupt = 0.05\nduplicate = 0.05\ndelay = 0.05\ndelay-ms = 20\n";
  std::string peers;
  for (int k = 0; k < 3; ++k)
    peers += (k ? "," : "") + std::string("127.0.0.1:") + std::to_string(free_port_pair());
  std::vector<std::unique_ptr<child_process>> nodes;
  auto log = [&](int k) { return dir.path / ("node" + std::to_string(k) + ".log"); };
  for (int k = 0; k < 3; ++k) {
    nodes.push_back(std::make_unique<child_process>(
        small_node_run(
            dir.path / "parts",
            {"--config-file", (dir.path / "faults.conf").string(), "--peers", peers, "--id",
             std::to_string(k), "--epochs", "2", "--batch-size", "8", "--lr", "0.01", "--dropout",
             "0.5", "--weight-decay", "0", "--connect-timeout", "30"}),
        log(k)));
  }
  for (int k = 0; k < 3; ++k)
    ASSERT_EQ(nodes[static_cast<size_t>(k)]->wait(120s), 0) << read_file(log(k));
  const std::string out0 = read_file(log(0));
  for (int k = 0; k < 3; ++k)
    EXPECT_TRUE(contains(read_file(log(k)), "faults injected on this process's sends (seed 7)"))
        << read_file(log(k));
  EXPECT_GT(std::stoull(summary_field(out0, R"("rejected":(\d+))")), 0u) << out0;
  std::uint64_t delayed = 0;
  for (int k = 0; k < 3; ++k)
    delayed += std::stoull(summary_field(read_file(log(k)), R"(, (\d+) delayed)"));
  EXPECT_GT(delayed, 0u);

  const train_settings s = small_run_reference(data, dir.path / "parts", 2);
  std::vector<double> expected;
  training_report quiet("reference", "", false);
  train_cluster(s, d, quiet, [&](std::uint64_t, double loss) { expected.push_back(loss); });
  std::vector<double> remote;
  std::stringstream ls(summary_array(out0, "step_losses"));
  for (std::string item; std::getline(ls, item, ',');)
    remote.push_back(std::stod(item));
  ASSERT_EQ(remote.size(), expected.size()) << out0;
  for (size_t i = 0; i < remote.size(); ++i)
    EXPECT_NEAR(remote[i], expected[i], 1e-6 * std::max(1.0, std::abs(expected[i])))
        << "step " << i;
}
