// Coordinated checkpoints of the in-process cluster (docs/design.md section 9): every replica
// writes the same file and a commit record; a run resumed from the newest commit redoes the steps
// after it exactly (centralized: bit-identical to the uninterrupted run; decentralized, whose
// history is rebuilt on resume: bit-identical to any other resume from that commit); a damaged or
// foreign checkpoint is refused with the file named.
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/commit_record.hpp"
#include "model/data_error.hpp"
#include "runtime/process/config_error.hpp"
#include "runtime/train/cluster_trainer.hpp"
#include "tests/cluster/in_process_cluster.hpp"

namespace degnn {
namespace {

namespace fs = std::filesystem;
using testing::cora;

struct temp_dir {
  fs::path path;
  explicit temp_dir(const std::string& stem)
      : path(fs::temp_directory_path() / (stem + "-" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Cora's 140 training nodes in batches of 8 over 3 parts: 7 steps an epoch (the part with the
// most training nodes sets it), with dropout.
train_settings settings(const std::string& pipeline, int layers) {
  train_settings s;
  s.data = (fs::path(DEGNN_SOURCE_DIR) / "data" / "cora").string();
  s.pipeline = pipeline;
  s.parts = 3;
  s.model.num_layers = layers;
  s.model.hidden = 16;
  s.model.seed = s.seed = 3;
  s.fanouts = layers == 2 ? std::vector<int>{5, 10} : std::vector<int>{5, 5, 5};
  s.batch_size = 8;
  s.epochs = 3;
  s.eval_every = 1;
  s.progress = false;
  s.timeout_s = 30;
  return s;
}

struct run_losses {
  std::vector<std::uint64_t> steps;
  std::vector<double> losses;
  cluster_result result;
};

run_losses train(const train_settings& s, std::uint64_t crash_after = ~0ull) {
  run_losses out;
  training_report quiet("test", "", false);
  out.result = train_cluster(s, cora(), quiet, [&](std::uint64_t step, double loss) {
    out.steps.push_back(step);
    out.losses.push_back(loss);
    if (step == crash_after) throw std::runtime_error("crash at step " + std::to_string(step));
  });
  return out;
}

// The losses of `full` from global step `from` on.
std::vector<double> losses_from(const run_losses& full, std::uint64_t from) {
  std::vector<double> out;
  for (size_t i = 0; i < full.steps.size(); ++i)
    if (full.steps[i] >= from) out.push_back(full.losses[i]);
  return out;
}

TEST(ClusterCheckpoint, EveryReplicaCommitsTheSameFileAndOldFilesGo) {
  temp_dir dir("degnn-ckpt-commit");
  train_settings s = settings("centralized", 2);
  s.checkpoint_dir = dir.path.string();
  s.checkpoint_every = 2;
  train(s);
  std::optional<commit_record> first;
  for (int p = 0; p < 3; ++p) {
    const fs::path part = replica_checkpoint_dir(dir.path, p);
    const auto r = read_commit_record(part);
    ASSERT_TRUE(r) << part;
    EXPECT_EQ(r->parts, 3);
    // The last commit is the run's end: 3 epochs of 7 steps.
    EXPECT_EQ(r->next_step, 21u);
    // The same file everywhere: the replicas agree.
    if (first) {
      EXPECT_EQ(*r, *first);
    }
    first = r;
    int files = 0;
    for (const auto& e : fs::directory_iterator(part))
      files += e.path().filename().string().rfind("ckpt-", 0) == 0;
    EXPECT_LE(files, 2) << "older checkpoint files are removed after a commit";
  }
  const committed_checkpoint c = load_committed_checkpoint(dir.path);
  EXPECT_EQ(c.record.next_step, 21u);
}

TEST(ClusterCheckpoint, CentralizedResumeRedoesTheStepsExactlyAsTheUninterruptedRun) {
  temp_dir dir("degnn-ckpt-central");
  const run_losses full = train(settings("centralized", 2));
  ASSERT_EQ(full.steps.size(), 21u);
  // A run that checkpoints every 2 steps and crashes in its second epoch.
  train_settings s = settings("centralized", 2);
  s.checkpoint_dir = dir.path.string();
  s.checkpoint_every = 2;
  EXPECT_THROW(train(s, 9), std::runtime_error);
  const std::uint64_t resumed_at = load_committed_checkpoint(dir.path).record.next_step;
  // The checkpoint before step 9 (2 steps into epoch 2) may not have committed before the crash
  // (it is written in the background); the one of the first epoch's end (7) had to.
  EXPECT_TRUE(resumed_at == 7u || resumed_at == 9u) << resumed_at;
  s.resume = dir.path.string();
  const run_losses again = train(s);
  ASSERT_FALSE(again.steps.empty());
  EXPECT_EQ(again.steps.front(), resumed_at);
  EXPECT_EQ(again.losses, losses_from(full, resumed_at));  // bit for bit
  EXPECT_EQ(again.result.parameters, full.result.parameters);
}

TEST(ClusterCheckpoint, DecentralizedResumeIsExactAndRebuildsTheHistory) {
  temp_dir dir("degnn-ckpt-decentral");
  train_settings s = settings("decentralized", 3);
  s.checkpoint_dir = (dir.path / "run").string();
  s.epochs = 1;
  const run_losses first = train(s);
  // Two runs resumed from the same commit into folders of their own: the same losses, bit for
  // bit, and a model that goes on learning.
  std::vector<run_losses> resumed;
  for (const char* copy : {"a", "b"}) {
    fs::copy(dir.path / "run", dir.path / copy, fs::copy_options::recursive);
    train_settings r = settings("decentralized", 3);
    r.resume = (dir.path / copy).string();
    r.checkpoint_dir = r.resume;
    resumed.push_back(train(r));
  }
  ASSERT_EQ(resumed[0].steps.front(), 7u);
  EXPECT_EQ(resumed[0].losses, resumed[1].losses);
  EXPECT_EQ(resumed[0].result.parameters, resumed[1].result.parameters);
  EXPECT_LT(resumed[0].losses.back(), first.losses.front());
}

TEST(ClusterCheckpoint, DamagedForeignOrMissingCheckpointsAreRefusedNamingTheFile) {
  temp_dir dir("degnn-ckpt-bad");
  train_settings s = settings("centralized", 2);
  s.checkpoint_dir = dir.path.string();
  s.epochs = 1;
  train(s);
  // Another seed is another run.
  train_settings other = settings("centralized", 2);
  other.resume = dir.path.string();
  other.seed = 4;
  try {
    train(other);
    ADD_FAILURE() << "a checkpoint of another run was accepted";
  } catch (const config_error& e) {
    EXPECT_NE(std::string(e.what()).find("another run"), std::string::npos) << e.what();
  }
  // One flipped byte in every copy of the file.
  const commit_record r = *read_commit_record(replica_checkpoint_dir(dir.path, 0));
  for (int p = 0; p < 3; ++p) {
    const fs::path f = replica_checkpoint_dir(dir.path, p) / r.file;
    std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(100);
    io.put('\x7f');
  }
  train_settings resume = settings("centralized", 2);
  resume.resume = dir.path.string();
  try {
    train(resume);
    ADD_FAILURE() << "a damaged checkpoint was accepted";
  } catch (const data_error& e) {
    EXPECT_NE(std::string(e.what()).find(r.file), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("CRC"), std::string::npos) << e.what();
  }
  // A malformed record names its file and line.
  std::ofstream(replica_checkpoint_dir(dir.path, 0) / "COMMIT") << "degnn-commit 1\nstep\n";
  try {
    read_commit_record(replica_checkpoint_dir(dir.path, 0));
    ADD_FAILURE() << "a malformed commit record was accepted";
  } catch (const data_error& e) {
    EXPECT_NE(std::string(e.what()).find("COMMIT:2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_committed_checkpoint(dir.path / "nothing"), data_error);
  // A run that has no step left after the commit says so instead of training nothing.
  temp_dir done("degnn-ckpt-done");
  train_settings finished = settings("centralized", 2);
  finished.checkpoint_dir = done.path.string();
  finished.epochs = 1;
  train(finished);
  finished.resume = done.path.string();
  try {
    train(finished);
    ADD_FAILURE() << "a resume with nothing to train was accepted";
  } catch (const config_error& e) {
    EXPECT_NE(std::string(e.what()).find("raise --epochs"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace degnn
