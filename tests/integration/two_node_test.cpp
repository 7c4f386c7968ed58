// Multi-process test: two real `degnn node` processes on 127.0.0.1 train one epoch of Pubmed with
// 2 partitions; the losses and byte counters must equal the in-process cluster's for the same
// seed and partitions. Processes are always stopped, files always removed.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "model/dataset.hpp"
#include "model/partition_store.hpp"
#include "model/partitioner.hpp"
#include "runtime/train/cluster_trainer.hpp"
#include "tests/integration/node_processes.hpp"

using namespace degnn;
namespace fs = std::filesystem;
using namespace degnn::test;

TEST(TwoNodeCluster, TrainsLikeTheInProcessClusterWithEqualByteCounts) {
  temp_dir tmp("two-node");
  const dataset d = load_dataset(fs::path(DEGNN_SOURCE_DIR) / "data/pubmed");
  const auto owner = partition_graph(d.graph, d.train, 2, partition_method::metis, 1);
  write_partitions(d, owner, tmp.path / "parts", "metis", 1, 2);

  const std::uint16_t p0 = free_port_pair(), p1 = free_port_pair();
  ASSERT_NE(p0, 0);
  ASSERT_NE(p1, 0);
  ASSERT_NE(p0, p1);
  std::ofstream(tmp.path / "cluster.conf")
      << "[node]\npartitions = \"" << (tmp.path / "parts").string()
      << "\"\npeers = \"127.0.0.1:" << p0 << ",127.0.0.1:" << p1
      << "\"\nepochs = 1\nbatch-size = 8\nfanouts = \"5,10\"\nhidden = 32\n"
         "seed = 3\nno-progress = true\ntimeout = 30\nconnect-timeout = 30\n"
         // The in-process run below takes replica_config's optimiser settings.
         "lr = 0.01\ndropout = 0.5\nweight-decay = 0\n";
  const std::string conf = "--config-file=" + (tmp.path / "cluster.conf").string();
  child_process node1({DEGNN_BINARY, "node", conf, "--id", "1"}, tmp.path / "node1.log");
  child_process node0({DEGNN_BINARY, "node", conf, "--id", "0"}, tmp.path / "node0.log");
  ASSERT_TRUE(node0.started() && node1.started());
  const int rc0 = node0.wait(std::chrono::seconds(120));
  const int rc1 = node1.wait(std::chrono::seconds(30));
  const std::string log0 = read_file(tmp.path / "node0.log");
  ASSERT_EQ(rc0, 0) << log0;
  ASSERT_EQ(rc1, 0) << read_file(tmp.path / "node1.log");

  std::smatch m;
  ASSERT_TRUE(std::regex_search(log0, m, std::regex(R"(\{"node_summary".*\})"))) << log0;
  const std::string summary = m.str();
  std::smatch bytes_m, kinds_m;
  const std::string losses = summary_array(summary, "step_losses");
  ASSERT_FALSE(losses.empty()) << summary;
  ASSERT_TRUE(std::regex_search(summary, bytes_m, std::regex(R"("bytes":(\d+))")));
  ASSERT_TRUE(std::regex_search(summary, kinds_m, std::regex(R"("bytes_by_kind":(\{[^}]*\}))")));
  std::vector<double> remote_losses;
  std::stringstream ls(losses);
  for (std::string item; std::getline(ls, item, ',');)
    remote_losses.push_back(std::stod(item));

  // The same run in one process, from the same partition files.
  train_settings s;
  s.data = (fs::path(DEGNN_SOURCE_DIR) / "data/pubmed").string();
  s.partitions = (tmp.path / "parts").string();
  s.pipeline = "centralized";
  s.parts = 2;
  s.epochs = 1;
  s.batch_size = 8;
  s.fanouts = {5, 10};
  s.model.hidden = 32;
  s.seed = 3;
  s.model.seed = 3;
  s.progress = false;
  training_report report("in-process", "", false);
  std::vector<double> local_losses;
  const cluster_result local = train_cluster(
      s, d, report, [&](std::uint64_t, double loss) { local_losses.push_back(loss); });

  ASSERT_EQ(remote_losses.size(), local_losses.size());
  ASSERT_GE(local_losses.size(), 3u);
  for (size_t i = 0; i < local_losses.size(); ++i) {
    EXPECT_NEAR(remote_losses[i], local_losses[i], 1e-6 * std::max(1.0, std::abs(local_losses[i])))
        << "step " << i;
  }
  EXPECT_EQ(std::stoull(bytes_m[1].str()), local.traffic.sent.total_bytes());
  EXPECT_EQ(kinds_m[1].str(), local.traffic.sent.bytes_json());
  EXPECT_GT(local.traffic.sent.bytes[static_cast<int>(wire::kind::sample_request)], 0u);
  EXPECT_GT(local.traffic.sent.bytes[static_cast<int>(wire::kind::feature_response)], 0u);
  std::printf("two processes: %zu steps, %s bytes %s\n", remote_losses.size(),
              bytes_m[1].str().c_str(), kinds_m[1].str().c_str());
}
