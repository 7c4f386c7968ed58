// Tests of model/durable_file.hpp: a committed file holds exactly what was written, an abandoned
// or failed one leaves neither the file nor its temporary, and a full disk is an error naming it.
#include "model/durable_file.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "model/checkpoint.hpp"
#include "model/data_error.hpp"
#include "model/gnn_model.hpp"

using namespace degnn;
namespace fs = std::filesystem;

namespace {

struct temp_dir {
  fs::path path = fs::temp_directory_path() / ("degnn-durable-" + std::to_string(::getpid()));
  temp_dir() { fs::create_directories(path); }
  ~temp_dir() { fs::remove_all(path); }
  size_t entries() const {
    return static_cast<size_t>(std::distance(fs::directory_iterator(path), {}));
  }
};

std::string contents(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST(DurableFile, CommitPutsExactlyTheBytesInPlaceAndNothingElse) {
  temp_dir dir;
  const fs::path file = dir.path / "a.bin";
  {
    durable_file f(file);
    f.write("hello ");
    EXPECT_FALSE(fs::exists(file));  // not under its name before the commit
    f.write("world");
    f.commit();
  }
  EXPECT_EQ(contents(file), "hello world");
  EXPECT_EQ(dir.entries(), 1u);
  write_file_durably(file, "replaced");
  EXPECT_EQ(contents(file), "replaced");
  EXPECT_EQ(dir.entries(), 1u);
}

TEST(DurableFile, AnAbandonedWriteLeavesTheOldFileAndNoTemporary) {
  temp_dir dir;
  const fs::path file = dir.path / "a.bin";
  write_file_durably(file, "old");
  try {
    durable_file f(file);
    f.write("half of the new");
    throw std::runtime_error("the writer failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(contents(file), "old");
  EXPECT_EQ(dir.entries(), 1u);
}

TEST(DurableFile, AMissingFolderIsAnErrorNamingTheFile) {
  temp_dir dir;
  const fs::path file = dir.path / "no-such-folder" / "a.bin";
  try {
    write_file_durably(file, "x");
    FAIL() << "accepted";
  } catch (const data_error& e) {
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
  }
}

TEST(DurableFile, AFailedCheckpointWriteLeavesNoTemporaryFile) {
  temp_dir dir;
  const gnn_model model(model_config{.in_dim = 4, .hidden = 3, .num_classes = 2, .num_layers = 2});
  const adam opt;
  // A folder where the checkpoint file should be: the rename into place fails.
  const fs::path target = dir.path / "ckpt";
  fs::create_directories(target / "inside");
  EXPECT_THROW(save_checkpoint(target, model, opt), data_error);
  EXPECT_EQ(dir.entries(), 1u);  // only the folder: no ckpt.tmpPID left behind
  save_checkpoint(dir.path / "ok.ckpt", model, opt);
  EXPECT_EQ(dir.entries(), 2u);
}
