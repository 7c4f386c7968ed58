// The fixture of the console tests (console_test.cpp: the commands, TLS, the terminal;
// console_faults_test.cpp: the fault commands and recoveries): a live cluster of node processes
// on Pubmed (2 nodes on 2 partitions, or 3 on 3) and `degnn console` run against it.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/transport/cluster_certificates.hpp"
#include "tests/integration/node_processes.hpp"

namespace degnn::test {

using namespace std::chrono_literals;

// Long enough for a few training steps: under ThreadSanitizer a step takes 5-15 times as long
// as in the plain build (a sanitized run once made no step in 500 ms).
#ifdef DEGNN_SANITIZED
constexpr auto kFewSteps = 3s;
#else
constexpr auto kFewSteps = 500ms;
#endif

class Console : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new temp_dir("console");
    write_two_metis_parts(fs::path(DEGNN_SOURCE_DIR) / "data/pubmed", dir_->path / "parts");
    const dataset pubmed = load_dataset(fs::path(DEGNN_SOURCE_DIR) / "data/pubmed");
    write_partitions(pubmed,
                     partition_graph(pubmed.graph, pubmed.train, 3, partition_method::metis, 1),
                     dir_->path / "parts3", "metis", 1, 3);
    make_cluster_certificates(dir_->path / "certs", 2, 1, 2);
  }
  static void TearDownTestSuite() { delete dir_; }

  // A 2-node cluster that trains until the test ends (3 nodes on 3 partitions when `third` has
  // node 2's options); returns node 0's address.
  std::string start_cluster(const std::string& name, const std::vector<std::string>& tls0,
                            const std::vector<std::string>& tls1,
                            const std::vector<std::string>& third = {}) {
    const fs::path parts = dir_->path / (third.empty() ? "parts" : "parts3");
    const std::string seed = "127.0.0.1:" + std::to_string(free_port_pair());
    auto a0 = std::vector<std::string>{"--is-seed", "--listen",     seed, "--epochs",
                                       "100000",    "--eval-every", "5"};
    a0.insert(a0.end(), tls0.begin(), tls0.end());
    auto a1 = std::vector<std::string>{"--join",       seed, "--epochs",    "100000",
                                       "--eval-every", "5",  "--rank-hint", "1"};
    a1.insert(a1.end(), tls1.begin(), tls1.end());
    nodes_.push_back(std::make_unique<child_process>(small_node_run(parts, a0), log(name + "0")));
    nodes_.push_back(std::make_unique<child_process>(small_node_run(parts, a1), log(name + "1")));
    if (!third.empty()) {
      auto a2 = std::vector<std::string>{"--join",       seed, "--epochs",    "100000",
                                         "--eval-every", "5",  "--rank-hint", "2"};
      a2.insert(a2.end(), third.begin(), third.end());
      nodes_.push_back(std::make_unique<child_process>(small_node_run(parts, a2), log(name + "2")));
    }
    EXPECT_TRUE(wait_for(log(name + "0"), "epoch   6", 90s)) << read_file(log(name + "0"));
    return seed;
  }
  // Node k's options in a cluster that recovers inside the run and lets the console kill:
  // --allow-faults --recover adopt, its checkpoints in `ck`/k.
  static std::vector<std::string> recovering_node(const fs::path& ck, int k) {
    return {"--allow-faults", "--recover", "adopt", "--checkpoint-dir",
            (ck / std::to_string(k)).string()};
  }
  // Runs `degnn console ARGS` (through sh when stdin is given); returns exit code and output.
  std::pair<int, std::string> console(const std::vector<std::string>& args,
                                      const std::string& stdin_text = "") {
    const fs::path out = log("console-" + std::to_string(++runs_));
    std::vector<std::string> cmd = {DEGNN_BINARY, "console"};
    cmd.insert(cmd.end(), args.begin(), args.end());
    if (!stdin_text.empty()) {
      std::string line =
          "printf '" + stdin_text + "' | '" + std::string(DEGNN_BINARY) + "' console";
      for (const auto& a : args)
        line += " '" + a + "'";
      cmd = {"/bin/sh", "-c", line};
    }
    child_process c(cmd, out);
    const int rc = c.wait(30s);
    return {rc, read_file(out)};
  }
  static fs::path log(const std::string& name) { return dir_->path / (name + ".log"); }
  std::vector<std::unique_ptr<child_process>> nodes_;
  int runs_ = 0;
  inline static temp_dir* dir_ = nullptr;
};

}  // namespace degnn::test
