// Multi-process tests of `degnn launch --local N` (issue 11 item 6): it runs a whole cluster with
// each line prefixed by its rank; Ctrl-C, a killed node or a killed launcher end every process
// within 5 s and leave none behind; the exit code is the worst node's.
#include <gtest/gtest.h>

#include <dirent.h>

#include <algorithm>

#include "tests/integration/node_processes.hpp"

using namespace degnn;
using namespace degnn::test;
using namespace std::chrono_literals;

namespace {

class LaunchLocal : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new temp_dir("launch");
    write_two_metis_parts(fs::path(DEGNN_SOURCE_DIR) / "data/pubmed", dir_->path / "parts");
  }
  static void TearDownTestSuite() { delete dir_; }

  static std::vector<std::string> launch(int nodes, const std::string& epochs) {
    return {DEGNN_BINARY,
            "launch",
            "--local",
            std::to_string(nodes),
            "--partitions",
            (dir_->path / "parts").string(),
            "--epochs",
            epochs,
            "--batch-size",
            "16",
            "--fanouts",
            "5,10",
            "--hidden",
            "16",
            "--no-progress",
            "--eval-every",
            "0"};
  }
  static fs::path log(const std::string& name) { return dir_->path / (name + ".log"); }
  static temp_dir* dir_;
};
temp_dir* LaunchLocal::dir_ = nullptr;

// The processes whose parent is `parent`.
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    const std::string stat = read_file("/proc/" + std::string(e->d_name) + "/stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent && state != 'Z') out.push_back(pid);
  }
  ::closedir(d);
  return out;
}

// True once none of `pids` exists any more (bounded wait).
bool all_gone(const std::vector<pid_t>& pids, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    bool any = false;
    for (pid_t p : pids) {
      const std::string stat = read_file("/proc/" + std::to_string(p) + "/stat");
      const auto close = stat.rfind(')');
      if (close != std::string::npos && stat[close + 2] != 'Z') any = true;
    }
    if (!any) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

}  // namespace

TEST_F(LaunchLocal, RunsAClusterAndPrefixesEachNodesLinesWithItsRank) {
  child_process l(launch(2, "1"), log("run"));
  const int rc = l.wait(120s);
  const std::string out = read_file(log("run"));
  EXPECT_EQ(rc, 0) << out;
  EXPECT_TRUE(contains(out, "[0] seed: formed view 1 with 2 nodes")) << out;
  EXPECT_TRUE(contains(out, "[1] node 1: stopped by the coordinator")) << out;
  EXPECT_TRUE(contains(out, "[0] {\"node_summary\":true,\"replicas_identical\":true")) << out;
  EXPECT_TRUE(contains(out, "launch: every node ended (exit code 0)")) << out;
}

TEST_F(LaunchLocal, CtrlCAKilledNodeOrAKilledLauncherEndsEveryProcessWithin5s) {
  for (const std::string what : {"ctrl-c", "kill node", "kill launcher"}) {
    child_process l(launch(2, "100000"), log(what));
    ASSERT_TRUE(wait_for(log(what), "[0] epoch   2", 90s)) << read_file(log(what));
    const std::vector<pid_t> nodes = children_of(l.pid());
    ASSERT_EQ(nodes.size(), 2u) << read_file(log(what));
    const auto t = std::chrono::steady_clock::now();
    if (what == "ctrl-c") l.signal(SIGINT);
    if (what == "kill node") ::kill(nodes[1], SIGKILL);
    if (what == "kill launcher") l.signal(SIGKILL);
    const int rc = l.wait(10s);
    EXPECT_TRUE(all_gone(nodes, 6s)) << what << "\n" << read_file(log(what));
    std::printf("%s: launcher exited %d, every node gone after %.2f s\n", what.c_str(), rc,
                seconds_since(t));
    EXPECT_LT(seconds_since(t), 6.0) << what;
    // The cause's code: 130 after Ctrl-C, the killed node's 137, the killed launcher's 137.
    EXPECT_EQ(rc, what == "ctrl-c" ? 130 : 137) << what;
    EXPECT_NE(rc, -1) << what;
    if (what != "kill launcher") {
      EXPECT_TRUE(contains(read_file(log(what)), "stopping every node")) << read_file(log(what));
    }
  }
}

TEST_F(LaunchLocal, OptionsTheLauncherSetsItselfAreRefused) {
  for (const char* own : {"--join", "--is-seed", "--peers"}) {
    auto args = launch(2, "1");
    args.push_back(own);
    args.push_back("x");
    child_process l(args, log("own"));
    EXPECT_EQ(l.wait(10s), 1);
    EXPECT_TRUE(contains(read_file(log("own")), "is set by the launcher")) << read_file(log("own"));
  }
}

// A newcomer's first cluster: --data instead of --partitions. The launcher partitions the
// dataset once beside its cache (--cache-dir here), says where, and a second launch reuses it.
TEST_F(LaunchLocal, DataIsPartitionedOnceIntoTheCacheAndReused) {
  const fs::path cache = dir_->path / "cache";
  auto with_data = [&] {
    auto args = launch(2, "1");
    const auto p = std::find(args.begin(), args.end(), "--partitions");
    *p = "--data";
    *(p + 1) = (fs::path(DEGNN_SOURCE_DIR) / "data/cora").string();
    args.insert(args.end(), {"--cache-dir", cache.string()});
    return args;
  };
  child_process first(with_data(), log("data-1"));
  const int rc1 = first.wait(120s);
  const std::string out1 = read_file(log("data-1"));
  ASSERT_EQ(rc1, 0) << out1;
  EXPECT_TRUE(contains(out1, "launch: partitioning ")) << out1;
  EXPECT_TRUE(contains(out1, "into 2 parts (metis)")) << out1;
  EXPECT_TRUE(contains(out1, "[0] seed: formed view 1 with 2 nodes")) << out1;
  // The partition set sits in the cache folder, named by the dataset, parts, method and seed.
  int sets = 0;
  for (const auto& e : fs::directory_iterator(cache))
    if (fs::exists(e.path() / "partitions.meta")) {
      ++sets;
      EXPECT_TRUE(contains(e.path().filename().string(), "cora-")) << e.path();
      EXPECT_TRUE(contains(e.path().filename().string(), "-2parts-metis-seed1")) << e.path();
    }
  EXPECT_EQ(sets, 1);

  child_process second(with_data(), log("data-2"));
  const int rc2 = second.wait(120s);
  const std::string out2 = read_file(log("data-2"));
  ASSERT_EQ(rc2, 0) << out2;
  EXPECT_TRUE(contains(out2, "launch: using the 2 partitions of ")) << out2;
  EXPECT_FALSE(contains(out2, "launch: partitioning ")) << out2;

  // --data with --partitions is one too many.
  auto both = with_data();
  both.insert(both.end(), {"--partitions", (dir_->path / "parts").string()});
  child_process l(both, log("data-both"));
  EXPECT_EQ(l.wait(10s), 1);
  EXPECT_TRUE(contains(read_file(log("data-both")), "--data and --partitions: give one"))
      << read_file(log("data-both"));
}

namespace {
// "epoch N loss L train T valid V test X" of every epoch line in `out` (a node's lines carry
// their rank's prefix), the figures as printed.
std::vector<std::string> epoch_figures(const std::string& out) {
  static const std::regex line(
      R"(epoch +\d+ +loss [0-9.]+ +train [0-9.]+ +valid [0-9.]+ +test [0-9.]+)");
  std::vector<std::string> found;
  for (std::sregex_iterator it(out.begin(), out.end(), line), end; it != end; ++it)
    found.push_back(it->str());
  return found;
}
}  // namespace

// GAT's decentralized step sends its attention rounds (attention push, partial, return) between
// real node processes as it does between the actors of one process: the same losses and
// accuracies, epoch by epoch, with identical replicas.
TEST_F(LaunchLocal, GatDecentralizedNodeProcessesTrainAsTheInProcessCluster) {
  const std::vector<std::string> gat = {
      "--pipeline", "decentralized", "--model", "gat",      "--heads", "4", "--layers",
      "2",          "--eval-every",  "1",       "--epochs", "3"};
  auto nodes = launch(2, "3");
  nodes.insert(nodes.end(), gat.begin(), gat.end());
  child_process l(nodes, log("gat-nodes"));
  const int rc = l.wait(180s);
  const std::string out = read_file(log("gat-nodes"));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_TRUE(contains(out, "\"replicas_identical\":true")) << out;

  std::vector<std::string> one = {
      DEGNN_BINARY,   "train", "--partitions", (dir_->path / "parts").string(),
      "--batch-size", "16",    "--fanouts",    "5,10",
      "--hidden",     "16",    "--no-progress"};
  one.insert(one.end(), gat.begin(), gat.end());
  child_process t(one, log("gat-one"));
  const int rc1 = t.wait(180s);
  const std::string in_process = read_file(log("gat-one"));
  ASSERT_EQ(rc1, 0) << in_process;
  const auto want = epoch_figures(in_process);
  ASSERT_EQ(want.size(), 3u) << in_process;
  EXPECT_EQ(epoch_figures(out), want) << out;
}
