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
#include "runtime/train/validation_history.hpp"
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
  int best_epoch = 0;  ///< the report's best validation epoch, its accuracies
  double best_valid = 0, test_at_best = 0;
  std::vector<validation_point> history;
};

run_losses train(const train_settings& s, std::uint64_t crash_after = ~0ull) {
  run_losses out;
  training_report quiet("test", "", false);
  out.result = train_cluster(s, cora(), quiet, [&](std::uint64_t step, double loss) {
    out.steps.push_back(step);
    out.losses.push_back(loss);
    if (step == crash_after) throw std::runtime_error("crash at step " + std::to_string(step));
  });
  out.best_epoch = quiet.best_epoch();
  out.best_valid = quiet.best_valid();
  out.test_at_best = quiet.test_at_best();
  out.history = quiet.history();
  return out;
}

// One byte of `file` changed (at offset 100).
void damage(const fs::path& file) {
  std::fstream io(file, std::ios::in | std::ios::out | std::ios::binary);
  io.seekp(100);
  io.put('\x7f');
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
  // What a commit interrupted by kill -9 leaves behind (another process's temporary record).
  fs::create_directories(replica_checkpoint_dir(dir.path, 1));
  const fs::path stale = replica_checkpoint_dir(dir.path, 1) / "COMMIT.tmp999999999";
  std::ofstream(stale) << "half a record";
  train(s);
  EXPECT_FALSE(fs::exists(stale)) << "an interrupted commit's temporary record stays";
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

// Every replica holds the same file: one damaged copy and one missing copy do not stop a resume;
// both are restored from the intact one, and the run resumes as from a clean folder.
TEST(ClusterCheckpoint, ADamagedOrMissingReplicaCopyIsRestoredFromAnIntactOne) {
  temp_dir dir("degnn-ckpt-restore");
  train_settings s = settings("centralized", 2);
  s.checkpoint_dir = dir.path.string();
  s.epochs = 1;
  train(s);
  const commit_record r = *read_commit_record(replica_checkpoint_dir(dir.path, 0));
  const fs::path f0 = replica_checkpoint_dir(dir.path, 0) / r.file;
  const fs::path f1 = replica_checkpoint_dir(dir.path, 1) / r.file;
  const fs::path f2 = replica_checkpoint_dir(dir.path, 2) / r.file;
  const auto intact = fs::file_size(f2);
  damage(f0);
  fs::remove(f1);
  const committed_checkpoint c = load_committed_checkpoint(dir.path);
  EXPECT_EQ(c.folder, replica_checkpoint_dir(dir.path, 2));
  EXPECT_EQ(c.record.next_step, 7u);
  for (const fs::path& f : {f0, f1}) {
    ASSERT_TRUE(fs::exists(f)) << f;
    EXPECT_EQ(fs::file_size(f), intact) << f;
  }
  // Restored: every copy passes the check again, and part 0's is the one used.
  EXPECT_EQ(load_committed_checkpoint(dir.path).folder, replica_checkpoint_dir(dir.path, 0));
  s.epochs = 2;
  s.resume = dir.path.string();
  const run_losses again = train(s);
  EXPECT_EQ(again.steps.front(), 7u);
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
  for (int p = 0; p < 3; ++p)
    damage(replica_checkpoint_dir(dir.path, p) / r.file);
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

// A resumed run reports the best validation epoch of the whole run, as the uninterrupted one does
// (before, only its own epochs counted: a run resumed after its best epoch named a later one).
// The crash comes two steps after the uninterrupted run's best epoch; the validation history the
// first run kept beside its checkpoints brings that epoch back.
TEST(ClusterCheckpoint, AResumedRunReportsTheBestValidationEpochOfTheWholeRun) {
  temp_dir dir("degnn-ckpt-best");
  train_settings s = settings("centralized", 2);
  s.epochs = 5;
  s.model.lr = 0.05f;  // validation peaks at epoch 4 of 5 (0.592, 0.736, 0.738, 0.746, 0.74)
  const run_losses full = train(s);
  ASSERT_EQ(full.history.size(), 5u);
  ASSERT_LT(full.best_epoch, 5) << "the check needs a best epoch before the last: "
                                << ::testing::PrintToString([&] {
                                     std::vector<double> v;
                                     for (const auto& p : full.history)
                                       v.push_back(p.valid);
                                     return v;
                                   }());
  s.checkpoint_dir = dir.path.string();
  const std::uint64_t crash = static_cast<std::uint64_t>(full.best_epoch) * 7 + 2;
  EXPECT_THROW(train(s, crash), std::runtime_error);
  ASSERT_EQ(load_committed_checkpoint(dir.path).record.next_step,
            static_cast<std::uint64_t>(full.best_epoch) * 7);
  s.resume = dir.path.string();
  const run_losses again = train(s);
  EXPECT_EQ(again.steps.front(), static_cast<std::uint64_t>(full.best_epoch) * 7);
  EXPECT_EQ(again.best_epoch, full.best_epoch);
  EXPECT_EQ(again.best_valid, full.best_valid);
  EXPECT_EQ(again.test_at_best, full.test_at_best);
  EXPECT_EQ(again.history, full.history);  // restored epochs and new ones, bit for bit
}

// The history file names the epochs of commits that exist only: one line past the commit (the
// crash came after the evaluation) is not taken; a malformed file is an error naming it.
TEST(ClusterCheckpoint, TheValidationHistoryKeepsTheEpochsUpToTheCommit) {
  temp_dir dir("degnn-validation");
  const fs::path file = dir.path / kValidationFileName;
  const std::vector<validation_point> points = {{1, 0.5, 0.25}, {2, 0.7, 1.0 / 3}, {3, 0.6, 0.1}};
  write_validation_history(file, points);
  EXPECT_EQ(read_validation_history(file, 3), points);
  EXPECT_EQ(read_validation_history(file, 2),
            std::vector<validation_point>(points.begin(), points.begin() + 2));
  EXPECT_TRUE(read_validation_history(dir.path / "none", 3).empty());
  std::ofstream(file, std::ios::app) << "2 0x1p-1 0x1p-2\n";  // not ascending
  try {
    read_validation_history(file, 9);
    ADD_FAILURE() << "a malformed history was read";
  } catch (const data_error& e) {
    EXPECT_NE(std::string(e.what()).find("VALIDATION:5"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace degnn
