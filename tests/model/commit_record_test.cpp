// Tests of model/commit_record.hpp: the record reads back as written, a malformed one is refused
// naming file and line, and a commit keeps exactly its own file and the newest older one (also
// when the folder holds a newer record and files of a run abandoned for a resumed one).
#include "model/commit_record.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "model/data_error.hpp"
#include "tests/model/temp_dir.hpp"

using namespace degnn;
namespace fs = std::filesystem;

namespace {

struct temp_dir : degnn::testing::temp_dir {
  temp_dir() : degnn::testing::temp_dir("degnn_commit_") {}
};

void touch(const fs::path& p) {
  std::ofstream(p) << "x";
}

std::set<std::string> names(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    out.insert(e.path().filename().string());
  return out;
}

commit_record record_of(std::uint64_t step) {
  return {.next_step = step,
          .cluster_id = 77,
          .parts = 4,
          .file = checkpoint_file_name(step),
          .size = 1,
          .crc = 9};
}

}  // namespace

TEST(CommitRecord, ReadsBackWhatWasWritten) {
  temp_dir dir;
  EXPECT_FALSE(read_commit_record(dir.path).has_value());
  write_commit_record(dir.path, record_of(40));
  EXPECT_EQ(read_commit_record(dir.path), record_of(40));
}

TEST(CommitRecord, MalformedRecordNamesFileAndLine) {
  temp_dir dir;
  std::ofstream(dir.path / "COMMIT") << "degnn-commit 1\nnext_step 4\nnext_step 5\n";
  try {
    read_commit_record(dir.path);
    FAIL() << "a key given twice was accepted";
  } catch (const data_error& e) {
    EXPECT_NE(std::string(e.what()).find("COMMIT"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("3"), std::string::npos) << e.what();
  }
}

TEST(CommitRecord, KeepsItsFileAndThePreviousOne) {
  temp_dir dir;
  for (std::uint64_t step : {10, 20, 30})
    touch(dir.path / checkpoint_file_name(step));
  touch(dir.path / "ckpt-x.bin");        // not a checkpoint of ours: left alone
  touch(dir.path / "ckpt-40.bin.tmp1");  // a writer killed mid-write (another process)
  const std::string own = "ckpt-40.bin.tmp" + std::to_string(::getpid());
  touch(dir.path / own);  // this process's (kept: a writer of this process may be at work)
  write_commit_record(dir.path, record_of(30));
  EXPECT_EQ(names(dir.path),
            (std::set<std::string>{"COMMIT", "ckpt-20.bin", "ckpt-30.bin", "ckpt-x.bin", own}));
}

TEST(CommitRecord, AResumedRunDropsTheAbandonedRunsNewerFiles) {
  temp_dir dir;
  // The abandoned run committed 40 (keeping 30); the resumed one restarted from 30 and now
  // commits 35: the file of 30 is its previous commit and must stay, 40 is garbage.
  for (std::uint64_t step : {20, 30, 40})
    touch(dir.path / checkpoint_file_name(step));
  write_commit_record(dir.path, record_of(40));
  touch(dir.path / checkpoint_file_name(35));
  write_commit_record(dir.path, record_of(35));
  EXPECT_EQ(names(dir.path), (std::set<std::string>{"COMMIT", "ckpt-30.bin", "ckpt-35.bin"}));
  EXPECT_EQ(read_commit_record(dir.path)->next_step, 35u);
}
