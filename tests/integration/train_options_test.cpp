// The degnn train command refuses every option the run would ignore, naming it, and takes what a
// partition set records (its dataset folder, its number of parts) instead of a guess.
#include <gtest/gtest.h>

#include "tests/integration/node_processes.hpp"

using namespace degnn::test;
using namespace std::chrono_literals;

namespace {

struct outcome {
  int rc;
  std::string out;
};

outcome run_degnn(const temp_dir& dir, std::vector<std::string> args) {
  args.insert(args.begin(), DEGNN_BINARY);
  const fs::path log = dir.path / "run.log";
  child_process p(args, log);
  const int rc = p.wait(120s);
  return {rc, read_file(log)};
}

const std::string cora = (fs::path(DEGNN_SOURCE_DIR) / "data/cora").string();

}  // namespace

TEST(TrainOptions, AnOptionTheRunWouldIgnoreIsAnErrorNamingIt) {
  temp_dir dir("train-options");
  const auto parts = (dir.path / "cora-2").string();
  ASSERT_EQ(run_degnn(dir, {"partition", "--data", cora, "--parts", "2", "--out", parts}).rc, 0);
  struct bad_case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<bad_case> cases = {
      {{"--data", cora, "--history-bits", "4"},
       "--history-bits applies to the decentralized pipeline only (this run's pipeline is single)"},
      {{"--data", cora, "--parts", "2", "--staleness", "2"},
       "--staleness applies to the decentralized pipeline only (this run's pipeline is "
       "centralized)"},
      {{"--data", cora, "--compare-with", "centralized"},
       "--compare-with applies to clusters only"},
      {{"--data", cora, "--trace", (dir.path / "t.json").string()},
       "--trace applies to clusters only"},
      {{"--partitions", parts, "--parts", "4"}, "--parts 4 but " + parts + " has 2 parts"},
      {{"--partitions", parts, "--partition-method", "random"},
       "--partition-method is not used with --partitions"},
  };
  for (const auto& bad : cases) {
    std::vector<std::string> args = {"train", "--epochs", "1", "--no-progress"};
    args.insert(args.end(), bad.args.begin(), bad.args.end());
    const outcome r = run_degnn(dir, args);
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.out.find(bad.message), std::string::npos) << r.out;
  }
}

TEST(TrainOptions, APartitionSetNamesItsDatasetFolder) {
  temp_dir dir("train-partitions");
  const auto parts = (dir.path / "cora-2").string();
  ASSERT_EQ(run_degnn(dir, {"partition", "--data", cora, "--parts", "2", "--out", parts}).rc, 0);
  // No --data: the set's folder is used (it used to fall back to data/pubmed and fail).
  const outcome r = run_degnn(dir, {"train", "--partitions", parts, "--epochs", "1",
                                    "--no-progress", "--batch-size", "64"});
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("cora: 2708 nodes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("centralized pipeline, 2 part(s)"), std::string::npos) << r.out;
}
