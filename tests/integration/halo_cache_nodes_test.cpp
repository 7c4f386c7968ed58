// Node processes with a bounded halo cache (--halo-cache-mb): unlike the in-process cluster,
// whose shards read their halo's feature rows where the owners hold them, each node here keeps
// copies, so the rows a step pulls for itself (dense or compressed) are what it computes with.
// The run must train as the one that keeps every halo row, step loss for step loss.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/integration/node_processes.hpp"

using namespace degnn::test;

namespace {

// Node 0's closing summary (the JSON line it prints when the run ends).
nlohmann::json node_summary(const std::string& out) {
  const auto at = out.find("{\"node_summary\"");
  if (at == std::string::npos) return {};
  return nlohmann::json::parse(out.substr(at, out.find('\n', at) - at));
}

nlohmann::json run(const temp_dir& dir, bool sparse, const std::string& cache_mb) {
  std::vector<std::string> args = {
      DEGNN_BINARY,   "launch",
      "--local",      "4",
      "--data",       (fs::path(DEGNN_SOURCE_DIR) / "data/cora").string(),
      "--pipeline",   "decentralized",
      "--layers",     "3",
      "--fanouts",    "5,5,5",
      "--hidden",     "16",
      "--batch-size", "32",
      "--epochs",     "2",
      "--no-progress"};
  if (sparse) args.push_back("--sparse-features");
  if (!cache_mb.empty()) {
    args.push_back("--halo-cache-mb");
    args.push_back(cache_mb);
  }
  const command_outcome r =
      run_command(dir, args, std::string(sparse ? "sparse" : "dense") + "-" + cache_mb);
  EXPECT_EQ(r.rc, 0) << r.out;
  const nlohmann::json summary = node_summary(r.out);
  EXPECT_FALSE(summary.is_null()) << r.out;
  return summary;
}

}  // namespace

TEST(HaloCacheNodes, NodesKeepingNoHaloRowTrainAsNodesKeepingEvery) {
  temp_dir dir("halo-cache-nodes");
  for (const bool sparse : {false, true}) {
    SCOPED_TRACE(sparse ? "compressed rows" : "dense rows");
    const nlohmann::json whole = run(dir, sparse, "");
    const nlohmann::json none = run(dir, sparse, "0");
    if (whole.is_null() || none.is_null()) continue;
    ASSERT_FALSE(whole["step_losses"].empty());
    EXPECT_EQ(none["step_losses"], whole["step_losses"]);
    EXPECT_EQ(none["test_acc"], whole["test_acc"]);
    EXPECT_EQ(none["valid_acc"], whole["valid_acc"]);
    EXPECT_EQ(none["rejected"], 0);
    // The feature and history rows each step pulls for itself.
    EXPECT_GT(none["bytes_by_kind"]["embedding_rows"].get<std::uint64_t>(),
              whole["bytes_by_kind"]["embedding_rows"].get<std::uint64_t>());
  }
}
