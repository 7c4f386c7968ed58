// The degnn train command refuses every option the run would ignore, naming it, takes what a
// partition set records (its dataset folder, its number of parts) instead of a guess, and prints
// an epoch time split whose parts add up to it.
#include <gtest/gtest.h>

#include <regex>

#include "tests/integration/node_processes.hpp"

using namespace degnn::test;
using namespace std::chrono_literals;

namespace {

command_outcome run_degnn(const temp_dir& dir, std::vector<std::string> args) {
  args.insert(args.begin(), DEGNN_BINARY);
  return run_command(dir, args);
}

const std::string cora = (fs::path(DEGNN_SOURCE_DIR) / "data/cora").string();

// The loss of each epoch line of a run's output.
std::vector<double> epoch_losses(const std::string& out) {
  std::vector<double> losses;
  static const std::regex line(R"(epoch +\d+ +loss ([0-9.]+))");
  for (std::sregex_iterator it(out.begin(), out.end(), line), end; it != end; ++it)
    losses.push_back(std::stod((*it)[1]));
  return losses;
}

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
      {{"--data", cora, "--allreduce", "star"}, "--allreduce applies to clusters only"},
      {{"--data", cora, "--halo-cache-mb", "64"},
       "--halo-cache-mb applies to clusters (a single process has no halo)"},
      {{"--data", cora, "--parts", "2", "--halo-cache-mb", "-1"},
       "--halo-cache-mb = -1 is out of range"},
      {{"--data", cora, "--parts", "2", "--allreduce", "tree"},
       "--allreduce must be one of ring|star, got 'tree'"},
      {{"--partitions", parts, "--parts", "4"}, "--parts 4 but " + parts + " has 2 parts"},
      {{"--partitions", parts, "--partition-method", "random"},
       "--partition-method is not used with --partitions"},
      {{"--data", cora, "--parts", "2", "--pipeline", "decentralized", "--layers", "1", "--fanouts",
        "5", "--sparse-features"},
       "--sparse-features with the decentralized pipeline needs at least 2 layers"},
      {{"--data", cora, "--parts", "2", "--compare-with", "decentralized", "--resume",
        dir.path.string()},
       "--compare-with trains the whole run again"},
      {{"--data", cora, "--model", "gat", "--hidden", "60", "--heads", "8"},
       "--heads 8 must divide --hidden 60"},
      {{"--data", cora, "--heads", "4"}, "--heads applies to --model gat only"},
      {{"--data", cora, "--model", "gat", "--parts", "2", "--pipeline", "decentralized", "--layers",
        "1", "--fanouts", "5", "--input-dropout", "0.3"},
       "--input-dropout with one layer and the decentralized pipeline"},
      {{"--data", cora, "--model", "gat", "--sparse-features", "--input-dropout", "0.2"},
       "with --sparse-features leave it at 0"},
  };
  for (const auto& bad : cases) {
    std::vector<std::string> args = {"train", "--epochs", "1", "--no-progress"};
    args.insert(args.end(), bad.args.begin(), bad.args.end());
    const command_outcome r = run_degnn(dir, args);
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.out.find(bad.message), std::string::npos) << r.out;
  }
}

// Compressed-row features train the same model as dense ones: the same losses up to float
// rounding, and the run says how it holds them.
TEST(TrainOptions, SparseFeaturesTrainAsDenseOnes) {
  temp_dir dir("train-sparse");
  auto losses = [&](bool sparse) {
    std::vector<std::string> args = {
        "train", "--data",        cora,          "--epochs",
        "3",     "--no-progress", "--cache-dir", (dir.path / "cache").string()};
    if (sparse) args.push_back("--sparse-features");
    const command_outcome r = run_degnn(dir, args);
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_EQ(sparse,
              r.out.find("features as compressed rows: 1.27% of 2708 x 1433") != std::string::npos)
        << r.out;
    return epoch_losses(r.out);
  };
  const auto dense = losses(false), sparse = losses(true);
  ASSERT_EQ(dense.size(), 3u);
  ASSERT_EQ(sparse.size(), 3u);
  for (size_t i = 0; i < dense.size(); ++i)
    EXPECT_NEAR(sparse[i], dense[i], 1e-3 * dense[i]) << "epoch " << i + 1;
}

// A set cut with compressed rows: a cluster reads it in either layout, in one process or in node
// processes, and both train the same model (the same epoch losses up to float rounding).
TEST(TrainOptions, ACompressedPartitionSetTrainsInEitherLayout) {
  temp_dir dir("train-sparse-set");
  const auto parts = (dir.path / "cora-2").string();
  const command_outcome cut =
      run_degnn(dir, {"partition", "--data", cora, "--parts", "2", "--out", parts,
                      "--sparse-features", "--cache-dir", (dir.path / "cache").string()});
  ASSERT_EQ(cut.rc, 0) << cut.out;
  const command_outcome info = run_degnn(dir, {"info", "--data", parts});
  EXPECT_NE(info.out.find("feature rows stored compressed"), std::string::npos) << info.out;
  // In one process, and in two node processes (degnn launch: each node reads its part's file).
  auto losses = [&](bool sparse, bool processes) {
    std::vector<std::string> args = {"--partitions", parts, "--pipeline",   "decentralized",
                                     "--layers",     "3",   "--fanouts",    "5,5,5",
                                     "--epochs",     "2",   "--batch-size", "16",
                                     "--no-progress"};
    const std::vector<std::string> how = processes
                                             ? std::vector<std::string>{"launch", "--local", "2"}
                                             : std::vector<std::string>{"train"};
    args.insert(args.begin(), how.begin(), how.end());
    if (sparse) args.push_back("--sparse-features");
    const command_outcome r = run_degnn(dir, args);
    EXPECT_EQ(r.rc, 0) << r.out;
    return epoch_losses(r.out);
  };
  for (const bool processes : {false, true}) {
    const auto dense = losses(false, processes), sparse = losses(true, processes);
    ASSERT_EQ(dense.size(), 2u) << (processes ? "launch" : "train");
    ASSERT_EQ(sparse.size(), 2u) << (processes ? "launch" : "train");
    for (size_t i = 0; i < dense.size(); ++i)
      EXPECT_NEAR(sparse[i], dense[i], 1e-3 * dense[i])
          << (processes ? "launch" : "train") << ", epoch " << i + 1;
  }
}

TEST(TrainOptions, APartitionSetNamesItsDatasetFolder) {
  temp_dir dir("train-partitions");
  const auto parts = (dir.path / "cora-2").string();
  ASSERT_EQ(run_degnn(dir, {"partition", "--data", cora, "--parts", "2", "--out", parts}).rc, 0);
  // No --data: the set's folder is used (it used to fall back to data/pubmed and fail).
  const command_outcome r = run_degnn(dir, {"train", "--partitions", parts, "--epochs", "1",
                                            "--no-progress", "--batch-size", "64"});
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("cora: 2708 nodes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("centralized pipeline, 2 part(s)"), std::string::npos) << r.out;
}

// A cluster on a partition set reads the set's files only, as degnn node does: the dataset it was
// cut from is not loaded (a second copy of every feature), so it may even be gone. The run that
// loads it (an explicit --data) gives the same losses.
TEST(TrainOptions, APartitionSetTrainsWithoutItsDatasetFolder) {
  temp_dir dir("train-outline");
  const fs::path copy = dir.path / "cora";
  fs::copy(cora, copy, fs::copy_options::recursive);
  const auto parts = (dir.path / "cora-2").string();
  ASSERT_EQ(
      run_degnn(dir, {"partition", "--data", copy.string(), "--parts", "2", "--out", parts}).rc, 0);
  const std::vector<std::string> train = {"train", "--partitions",  parts,          "--epochs",
                                          "2",     "--no-progress", "--batch-size", "64"};
  std::vector<std::string> loading = train;
  loading.insert(loading.end(), {"--data", copy.string()});
  const command_outcome with = run_degnn(dir, loading);
  ASSERT_EQ(with.rc, 0) << with.out;
  fs::remove_all(copy);
  const command_outcome without = run_degnn(dir, train);
  ASSERT_EQ(without.rc, 0) << without.out;
  EXPECT_NE(without.out.find("cora: 2708 nodes, 10556 in-edges, 1433 features, 7 classes"),
            std::string::npos)
      << without.out;
  static const std::regex loss(R"(epoch +\d+ +loss ([0-9.]+))");
  auto losses = [](const std::string& out) {
    std::vector<std::string> v;
    for (std::sregex_iterator it(out.begin(), out.end(), loss), end; it != end; ++it)
      v.push_back((*it)[1]);
    return v;
  };
  EXPECT_EQ(losses(without.out), losses(with.out));
  EXPECT_EQ(losses(with.out).size(), 2u);
}

namespace {

// Every metrics line's epoch_s and the sum of its split, and the overlapped part.
struct epoch_times {
  double epoch_s, split_sum, overlapped;
};

std::vector<epoch_times> read_times(const fs::path& metrics) {
  std::vector<epoch_times> out;
  std::ifstream in(metrics);
  const std::regex epoch_re(R"("epoch_s":([0-9.]+))"), split_re(R"("split":\{([^}]*)\})"),
      part_re(R"re("([^"]+)":([0-9.]+))re");
  for (std::string line; std::getline(in, line);) {
    std::smatch e, sp;
    if (!std::regex_search(line, e, epoch_re) || !std::regex_search(line, sp, split_re)) continue;
    epoch_times t{std::stod(e[1].str()), 0, 0};
    const std::string parts = sp[1].str();
    for (auto it = std::sregex_iterator(parts.begin(), parts.end(), part_re);
         it != std::sregex_iterator(); ++it) {
      t.split_sum += std::stod((*it)[2].str());
      if ((*it)[1].str() == "overlapped") t.overlapped = std::stod((*it)[2].str());
    }
    out.push_back(t);
  }
  return out;
}

}  // namespace

TEST(EpochTimes, TheSplitAddsUpToTheEpochAndOverlapIsShownAsSuch) {
  temp_dir dir("epoch-times");
  struct run_case {
    std::string name;
    std::vector<std::string> args;
    bool overlaps;
  };
  const std::vector<run_case> runs = {
      {"single", {}, false},
      {"centralized", {"--parts", "4"}, false},
      {"pipelined", {"--parts", "4", "--pipeline", "decentralized"}, true},
      {"not pipelined", {"--parts", "4", "--pipeline", "decentralized", "--no-overlap"}, false},
  };
  for (const auto& run : runs) {
    const fs::path metrics = dir.path / "m.json";
    fs::remove(metrics);
    std::vector<std::string> args = {"train",     "--data",        cora,       "--epochs",
                                     "2",         "--batch-size",  "8",        "--layers",
                                     "3",         "--fanouts",     "10,10,10", "--no-progress",
                                     "--metrics", metrics.string()};
    args.insert(args.end(), run.args.begin(), run.args.end());
    const command_outcome r = run_degnn(dir, args);
    ASSERT_EQ(r.rc, 0) << r.out;
    const auto times = read_times(metrics);
    ASSERT_EQ(times.size(), 2u) << run.name;
    for (const auto& t : times) {
      // Four parts printed with four decimals each.
      EXPECT_NEAR(t.split_sum, t.epoch_s, 5e-4) << run.name;
      if (run.overlaps)
        EXPECT_GT(t.overlapped, 0.0) << run.name;
      else
        EXPECT_EQ(t.overlapped, 0.0) << run.name;
    }
    std::printf("%s: epoch %.4f s, split sum %.4f s, overlapped %.4f s\n", run.name.c_str(),
                times.back().epoch_s, times.back().split_sum, times.back().overlapped);
  }
}

TEST(ClusterEpoch, VisitsEveryTrainingNodeOnce) {
  temp_dir dir("cluster-epoch");
  // Cora has 140 training nodes; the 4 METIS parts hold unequal shares, so at 16 per batch a
  // smaller part runs out of batches before the epoch ends (it used to start over: 156 seeds).
  for (const std::string method : {"metis", "random"}) {
    for (const std::string pipeline : {"centralized", "decentralized"}) {
      const fs::path metrics = dir.path / "m.json";
      fs::remove(metrics);
      const command_outcome r =
          run_degnn(dir, {"train", "--data", cora, "--parts", "4", "--partition-method", method,
                          "--pipeline", pipeline, "--epochs", "2", "--batch-size", "16",
                          "--eval-every", "0", "--no-progress", "--metrics", metrics.string()});
      ASSERT_EQ(r.rc, 0) << r.out;
      const std::string m = read_file(metrics);
      const std::regex seeds_re(R"("seeds":(\d+))");
      int epochs = 0;
      for (auto it = std::sregex_iterator(m.begin(), m.end(), seeds_re);
           it != std::sregex_iterator(); ++it, ++epochs)
        EXPECT_EQ(std::stoi((*it)[1].str()), 140) << method << " " << pipeline;
      EXPECT_EQ(epochs, 2) << m;
    }
  }
}

TEST(ClusterEpoch, AGlobalBatchSizeIsSharedByTheWorkers) {
  temp_dir dir("global-batch");
  const command_outcome r =
      run_degnn(dir, {"train", "--data", cora, "--parts", "4", "--global-batch-size", "32",
                      "--epochs", "1", "--no-progress"});
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("batch 8 per worker (32 per step)"), std::string::npos) << r.out;
  const command_outcome bad = run_degnn(
      dir, {"train", "--data", cora, "--parts", "4", "--global-batch-size", "30", "--epochs", "1"});
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.out.find("--global-batch-size 30 is not a multiple of the 4 workers"),
            std::string::npos)
      << bad.out;
}

TEST(NormalizeFeatures, PartitionFilesAreNormalizedLikeTheDatasetInMemory) {
  temp_dir dir("normalize");
  const auto parts = (dir.path / "cora-2").string();
  ASSERT_EQ(run_degnn(dir, {"partition", "--data", cora, "--parts", "2", "--out", parts}).rc, 0);
  auto last_line = [](const std::string& out) {
    const auto at = out.rfind("test accuracy");
    return at == std::string::npos ? out : out.substr(at);
  };
  const std::vector<std::string> common = {"train",         "--epochs",     "3",
                                           "--no-progress", "--batch-size", "32"};
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = common;
    args.insert(args.end(), extra.begin(), extra.end());
    return run_degnn(dir, args);
  };
  const command_outcome from_files = run({"--partitions", parts, "--normalize-features", "row"});
  const command_outcome in_memory =
      run({"--data", cora, "--parts", "2", "--normalize-features", "row"});
  const command_outcome raw = run({"--partitions", parts});
  ASSERT_EQ(from_files.rc, 0) << from_files.out;
  ASSERT_EQ(in_memory.rc, 0) << in_memory.out;
  ASSERT_EQ(raw.rc, 0) << raw.out;
  // The same METIS cut and seed: the same run, to the last printed digit.
  EXPECT_EQ(last_line(from_files.out), last_line(in_memory.out));
  EXPECT_NE(from_files.out.substr(from_files.out.find("epoch   1")),
            raw.out.substr(raw.out.find("epoch   1")));
}
