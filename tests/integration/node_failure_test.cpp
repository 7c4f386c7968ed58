// Multi-process tests of how a node cluster fails: every error ends every process in bounded time
// with one line naming the node and the cause (docs/design.md section 9, issue "Hardening"). Real
// `degnn node` processes on 127.0.0.1; each is killed and reaped whatever the test's outcome.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>

#include "model/dataset.hpp"
#include "model/partition_store.hpp"
#include "model/partitioner.hpp"
#include "tests/integration/node_processes.hpp"

using namespace degnn;
using namespace degnn::test;
using namespace std::chrono_literals;

namespace {

// Pubmed in 2 METIS parts, written once for every test here.
class NodeFailure : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new temp_dir("node-failure");
    write_two_metis_parts(fs::path(DEGNN_SOURCE_DIR) / "data/pubmed", dir_->path / "parts");
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  // A cluster file for two nodes on fresh ports; `extra` adds option lines.
  std::string conf(const std::string& name, const std::string& parts,
                   const std::string& extra = "") {
    const std::uint16_t p0 = free_port_pair(), p1 = free_port_pair();
    EXPECT_TRUE(p0 != 0 && p1 != 0 && p0 != p1);
    const fs::path file = dir_->path / (name + ".conf");
    std::ofstream(file) << "[node]\npartitions = \"" << parts << "\"\npeers = \"127.0.0.1:" << p0
                        << ",127.0.0.1:" << p1
                        << "\"\nbatch-size = 8\nfanouts = \"5,10\"\nhidden = 16\nseed = 3\n"
                           "no-progress = true\ntimeout = 120\nconnect-timeout = 20\n"
                        << extra;
    return "--config-file=" + file.string();
  }
  std::string parts() const { return (dir_->path / "parts").string(); }
  fs::path log(const std::string& name) const { return dir_->path / (name + ".log"); }

  static temp_dir* dir_;
};
temp_dir* NodeFailure::dir_ = nullptr;

// The process's error line, for the test log.
std::string error_line(const std::string& out) {
  const auto at = out.rfind("degnn ");
  return at == std::string::npos ? "(none)" : out.substr(at, out.find('\n', at) - at);
}

}  // namespace

TEST_F(NodeFailure, ALostWorkerStopsNode0AtOnceNamingItsPartition) {
  const auto c = conf("killed", parts(), "epochs = 100000\neval-every = 0\n");
  child_process node1({DEGNN_BINARY, "node", c, "--id", "1"}, log("killed1"));
  child_process node0({DEGNN_BINARY, "node", c, "--id", "0"}, log("killed0"));
  ASSERT_TRUE(wait_for(log("killed0"), "epoch   2", 60s)) << read_file(log("killed0"));
  node1.signal(SIGKILL);
  const auto t = std::chrono::steady_clock::now();
  const int rc = node0.wait(30s);  // the request timeout is 120 s
  const std::string out = read_file(log("killed0"));
  std::printf("kill -9 of node 1: node 0 exited %d after %.2f s: %s\n", rc, seconds_since(t),
              error_line(out).c_str());
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(rc, -1) << "node 0 still running 30 s after node 1 died\n" << out;
  EXPECT_TRUE(contains(out, "partition 1's")) << out;
}

TEST_F(NodeFailure, AStoppedWorkerIsDroppedByTheHeartbeat) {
  const auto c =
      conf("stopped", parts(),
           "epochs = 100000\neval-every = 0\nheartbeat-ms = 200\nheartbeat-misses = 10\n");
  child_process node1({DEGNN_BINARY, "node", c, "--id", "1"}, log("stopped1"));
  child_process node0({DEGNN_BINARY, "node", c, "--id", "0"}, log("stopped0"));
  ASSERT_TRUE(wait_for(log("stopped0"), "epoch   2", 60s)) << read_file(log("stopped0"));
  node1.signal(SIGSTOP);  // alive, connection open, silent
  const auto t = std::chrono::steady_clock::now();
  const int rc = node0.wait(30s);
  const std::string out = read_file(log("stopped0"));
  std::printf("SIGSTOP of node 1: node 0 exited %d after %.2f s: %s\n", rc, seconds_since(t),
              error_line(out).c_str());
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(rc, -1) << "node 0 still running 30 s after node 1 stopped\n" << out;
  EXPECT_TRUE(contains(out, "partition 1's")) << out;
  node1.signal(SIGKILL);
}

TEST_F(NodeFailure, SettingsThatMustAgreeAreComparedAtTheGreeting) {
  const auto c = conf("lr", parts(), "epochs = 1\n");
  child_process node1({DEGNN_BINARY, "node", c, "--id", "1", "--lr", "0.02"}, log("lr1"));
  child_process node0({DEGNN_BINARY, "node", c, "--id", "0"}, log("lr0"));
  const int rc1 = node1.wait(30s), rc0 = node0.wait(30s);
  const std::string out0 = read_file(log("lr0")), out1 = read_file(log("lr1"));
  EXPECT_NE(rc1, 0) << out1;
  EXPECT_NE(rc1, -1) << out1;
  EXPECT_NE(rc0, 0) << out0;
  EXPECT_NE(rc0, -1) << out0;
  const std::string why =
      "settings that must agree differ: lr is 0.005 on node 0 and 0.02 on node 1";
  EXPECT_TRUE(contains(out1, "node 1: greeting node 0 failed") && contains(out1, why)) << out1;
  EXPECT_TRUE(contains(out0, "node 0: refused node 1") && contains(out0, why)) << out0;
  std::printf("node 1: %s\nnode 0: %s\n", error_line(out1).c_str(), error_line(out0).c_str());
}

TEST_F(NodeFailure, Node0NeedsNoOtherPartitionsFile) {
  // Node 0 used to read every partition file after its actors started, for the training-set
  // sizes: without part-1's file it raised an error outside the code that stops them and hung in
  // the actor system's destructor. Each node now reports its own size when it is ready.
  const fs::path partial = dir_->path / "only-part-0";
  fs::copy(parts(), partial, fs::copy_options::recursive);
  fs::remove_all(partial / "part-1");
  const auto c = conf("own-files", parts(), "epochs = 1\n");
  child_process node1({DEGNN_BINARY, "node", c, "--id", "1"}, log("own-files1"));
  child_process node0({DEGNN_BINARY, "node", c, "--id", "0", "--partitions", partial.string()},
                      log("own-files0"));
  const int rc0 = node0.wait(60s), rc1 = node1.wait(20s);
  EXPECT_EQ(rc0, 0) << read_file(log("own-files0"));
  EXPECT_EQ(rc1, 0) << read_file(log("own-files1"));
}

TEST_F(NodeFailure, AMissingPartitionFileEndsBothNodesNamingTheFile) {
  const fs::path partial = dir_->path / "partial";
  fs::copy(parts(), partial, fs::copy_options::recursive);
  fs::remove_all(partial / "part-1");
  const auto c = conf("missing", partial.string(), "epochs = 1\nconnect-timeout = 5\n");
  child_process node1({DEGNN_BINARY, "node", c, "--id", "1"}, log("missing1"));
  child_process node0({DEGNN_BINARY, "node", c, "--id", "0"}, log("missing0"));
  const int rc1 = node1.wait(20s), rc0 = node0.wait(30s);
  const std::string out0 = read_file(log("missing0")), out1 = read_file(log("missing1"));
  EXPECT_EQ(rc1, 1) << out1;
  EXPECT_TRUE(contains(out1, "part-1")) << out1;
  EXPECT_EQ(rc0, 1) << out0;
  EXPECT_TRUE(contains(out0, "node 0: node 1 never connected")) << out0;
}

TEST_F(NodeFailure, BadOptionsAreRefusedBeforeTheClusterForms) {
  const auto c = conf("options", parts(), "epochs = 1\n");
  struct bad_case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<bad_case> cases = {
      {{"--peers", "127.0.0.1:24811abc,127.0.0.1:24812"}, "bad port in '127.0.0.1:24811abc'"},
      {{"--metrics", (dir_->path / "no-such-folder" / "m.json").string()}, "--metrics: folder"},
      {{"--resume", (dir_->path / "x.ckpt").string()},
       "cluster resumes from a --checkpoint-dir folder, and this is none"},
      {{"--checkpoint-every", "5"}, "--checkpoint-every needs --checkpoint-dir"},
      {{"--data", "data/pubmed"}, "--data is not used by a node"},
      {{"--peers", "192.0.2.1:24811,127.0.0.1:24812"},
       "192.0.2.1 is not a loopback address, and nodes do not authenticate each other yet"},
  };
  for (const auto& bad : cases) {
    std::vector<std::string> args = {DEGNN_BINARY, "node", c, "--id", "0"};
    args.insert(args.end(), bad.args.begin(), bad.args.end());
    child_process node(args, log("options"));
    const int rc = node.wait(10s);
    const std::string out = read_file(log("options"));
    EXPECT_NE(rc, 0) << bad.args[0] << ": " << out;
    EXPECT_NE(rc, -1) << bad.args[0] << ": still running\n" << out;
    EXPECT_TRUE(contains(out, bad.message)) << out;
  }
}

TEST_F(NodeFailure, AMetricsLineThatCannotBeWrittenIsAnError) {
  // /dev/full accepts the open and fails every write with ENOSPC, as a full disk does.
  child_process train(
      {DEGNN_BINARY, "train", "--data", (fs::path(DEGNN_SOURCE_DIR) / "data/cora").string(),
       "--epochs", "1", "--no-progress", "--metrics", "/dev/full"},
      log("full"));
  const int rc = train.wait(120s);
  const std::string out = read_file(log("full"));
  EXPECT_EQ(rc, 1) << out;
  EXPECT_TRUE(contains(out, "/dev/full: cannot write the metrics line of epoch 1")) << out;
  std::printf("%s\n", error_line(out).c_str());
}
