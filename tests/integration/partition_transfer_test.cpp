// Tests of runtime/node/partition_transfer.hpp against the seed's own chunk reader: missing files
// are fetched with the seed's checksums, present ones are not, a damaged chunk is asked for again,
// an interrupted fetch resumes where it stopped, a wrong partial file is thrown away, and nothing
// outside the manifest is served.
#include "runtime/node/partition_transfer.hpp"

#include <gtest/gtest.h>

#include "tests/integration/node_processes.hpp"

using namespace degnn;
using namespace degnn::test;

namespace {

class PartitionTransfer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new temp_dir("transfer");
    write_two_metis_parts(fs::path(DEGNN_SOURCE_DIR) / "data/pubmed", dir_->path / "seed");
    manifest_ = new wire::file_manifest(manifest_of(dir_->path / "seed"));
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete manifest_;
  }
  // The seed's side, in-process: every request answered by read_chunk.
  static std::vector<char> serve(const std::vector<char>& req) {
    const auto r = wire::decode_file_chunk_request({}, req);
    return wire::encode(wire::context{}, read_chunk(dir_->path / "seed", *manifest_, r));
  }
  static chunk_fetcher honest() {
    return [](const std::vector<std::vector<char>>& reqs) {
      std::vector<std::vector<char>> out;
      for (const auto& r : reqs)
        out.push_back(serve(r));
      return out;
    };
  }
  static std::vector<std::string> all_paths() {
    std::vector<std::string> p;
    for (const auto& f : manifest_->files)
      p.push_back(f.path);
    return p;
  }
  static void expect_same_files(const fs::path& dir) {
    const auto theirs = manifest_of(dir);
    ASSERT_EQ(theirs.files.size(), manifest_->files.size());
    for (size_t i = 0; i < theirs.files.size(); ++i) {
      EXPECT_EQ(theirs.files[i].path, manifest_->files[i].path);
      EXPECT_EQ(theirs.files[i].size, manifest_->files[i].size);
      EXPECT_EQ(theirs.files[i].crc32, manifest_->files[i].crc32);
    }
  }
  static temp_dir* dir_;
  static wire::file_manifest* manifest_;
};
temp_dir* PartitionTransfer::dir_ = nullptr;
wire::file_manifest* PartitionTransfer::manifest_ = nullptr;

}  // namespace

TEST_F(PartitionTransfer, FetchesWhatIsMissingWithTheSeedsChecksumsAndNothingWhenPresent) {
  const fs::path node = dir_->path / "fresh";
  const auto first = fetch_files(node, *manifest_, all_paths(), honest(), {}, 256 << 10, 4, {});
  EXPECT_EQ(first.files_fetched, 4);
  EXPECT_EQ(first.files_present, 0);
  std::uint64_t total = 0;
  for (const auto& f : manifest_->files)
    total += f.size;
  EXPECT_EQ(first.bytes, total);
  expect_same_files(node);
  const auto again = fetch_files(node, *manifest_, all_paths(), honest(), {}, 256 << 10, 4, {});
  EXPECT_EQ(again.files_fetched, 0);
  EXPECT_EQ(again.files_present, 4);
  EXPECT_EQ(again.bytes, 0u);
  // A file that differs from the seed's (same size, one byte changed) is fetched again.
  {
    std::fstream f(node / "part-1/partition.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1000);
    f.put('\x5a');
  }
  const auto repaired = fetch_files(node, *manifest_, all_paths(), honest(), {}, 256 << 10, 4, {});
  EXPECT_EQ(repaired.files_fetched, 1);
  expect_same_files(node);
}

TEST_F(PartitionTransfer, ADamagedChunkIsAskedForAgain) {
  int damaged = 0;
  chunk_fetcher flaky = [&](const std::vector<std::vector<char>>& reqs) {
    auto out = honest()(reqs);
    if (damaged < 2) {
      out.back()[out.back().size() / 2] ^= 0x40;  // in the chunk's data
      ++damaged;
    }
    return out;
  };
  std::vector<std::string> lines;
  const fs::path node = dir_->path / "damaged";
  const auto st = fetch_files(node, *manifest_, {partition_file(0)}, flaky, {}, 256 << 10, 4,
                              [&](const std::string& l) { lines.push_back(l); });
  EXPECT_EQ(st.chunks_retried, 2);
  EXPECT_EQ(st.files_fetched, 1);
  ASSERT_FALSE(lines.empty());
  EXPECT_TRUE(contains(lines.front(), "does not match its CRC-32")) << lines.front();
  const std::string fetched = read_file(node / partition_file(0));
  EXPECT_EQ(wire::crc32_of(fetched), manifest_->find(partition_file(0))->crc32);
}

TEST_F(PartitionTransfer, AnInterruptedFetchResumesWhereItStopped) {
  const fs::path node = dir_->path / "interrupted";
  int calls = 0;
  chunk_fetcher dies = [&](const std::vector<std::vector<char>>& reqs) {
    if (++calls == 3) throw std::runtime_error("connection lost");
    return honest()(reqs);
  };
  EXPECT_THROW(fetch_files(node, *manifest_, {partition_file(1)}, dies, {}, 256 << 10, 4, {}),
               std::runtime_error);
  char crc[9];
  std::snprintf(crc, sizeof crc, "%08x", manifest_->find(partition_file(1))->crc32);
  const fs::path partial = node / (partition_file(1) + "." + crc + ".partial");
  ASSERT_TRUE(fs::exists(partial));
  const auto kept = fs::file_size(partial);
  EXPECT_EQ(kept, 2u * 4 * (256 << 10));  // two whole windows
  std::vector<std::string> lines;
  const auto st = fetch_files(node, *manifest_, {partition_file(1)}, honest(), {}, 256 << 10, 4,
                              [&](const std::string& l) { lines.push_back(l); });
  EXPECT_EQ(st.bytes, manifest_->find(partition_file(1))->size - kept);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(contains(lines[0], "resumed at byte " + std::to_string(kept))) << lines[0];
  EXPECT_FALSE(fs::exists(partial));
  // A partial file of another version of the file (another CRC in its name) is never resumed.
  fs::remove(node / partition_file(1));
  const fs::path stale = node / (partition_file(1) + ".0badc0de.partial");
  std::ofstream(stale, std::ios::binary) << std::string(5000, 'x');
  EXPECT_EQ(
      fetch_files(node, *manifest_, {partition_file(1)}, honest(), {}, 256 << 10, 4, {}).bytes,
      manifest_->find(partition_file(1))->size);
  // A damaged partial file under the right name is thrown away, and the next fetch works.
  fs::remove(node / partition_file(1));
  std::ofstream(partial, std::ios::binary) << std::string(5000, 'x');
  EXPECT_THROW(fetch_files(node, *manifest_, {partition_file(1)}, honest(), {}, 256 << 10, 4, {}),
               std::runtime_error);
  EXPECT_FALSE(fs::exists(partial));
  fetch_files(node, *manifest_, {partition_file(1)}, honest(), {}, 256 << 10, 4, {});
  EXPECT_EQ(manifest_of(dir_->path / "seed").find(partition_file(1))->crc32,
            manifest_->find(partition_file(1))->crc32);
}

TEST_F(PartitionTransfer, OnlyFilesOfTheManifestAreServed) {
  EXPECT_THROW(read_chunk(dir_->path / "seed", *manifest_, {"part-9/partition.bin", 0, 10}),
               std::runtime_error);
  EXPECT_THROW(read_chunk(dir_->path / "seed", *manifest_, {"owner.bin", 1u << 30, 10}),
               std::runtime_error);
  for (const char* bad : {"../seed/owner.bin", "/etc/passwd", "part-0/../../x", "a//b", "."}) {
    EXPECT_FALSE(wire::safe_relative_path(bad)) << bad;
    EXPECT_THROW(
        wire::decode_file_chunk_request({}, wire::encode({}, wire::file_chunk_request{bad, 0, 10})),
        wire::wire_error)
        << bad;
  }
  EXPECT_TRUE(wire::safe_relative_path("part-0/partition.bin"));
}
