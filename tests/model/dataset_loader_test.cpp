// Tests of model/dataset.hpp: the OGB raw-layout loader on the bundled Planetoid graphs, its
// error messages for every kind of malformed input, and the binary cache.
#include <gtest/gtest.h>

#include <zlib.h>
#include <filesystem>
#include <fstream>
#include <string>

#include "model/data_error.hpp"
#include "model/dataset.hpp"
#include "model/gzip_lines.hpp"
#include "model/sparse_input.hpp"

using namespace degnn;
namespace fs = std::filesystem;

namespace {

fs::path bundled(const char* name) {
  return fs::path(DEGNN_SOURCE_DIR) / "data" / name;
}

// A fresh temporary directory, removed at the end of the test.
struct temp_dir {
  fs::path path;
  temp_dir() {
    path = fs::temp_directory_path() /
           ("degnn-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
    fs::create_directories(path / "split");
  }
  ~temp_dir() { fs::remove_all(path); }
};

void write_gz(const fs::path& file, const std::string& text) {
  gzip_writer w(file);
  w.write(text);
  w.close();
}

// A valid 4-node dataset; tests then break one file.
void write_tiny(const fs::path& dir) {
  write_gz(dir / "num-node-list.csv.gz", "4\n");
  write_gz(dir / "num-edge-list.csv.gz", "3\n");
  write_gz(dir / "edge.csv.gz", "0,1\n1,2\n2,3\n");
  write_gz(dir / "node-feat.csv.gz", "1,0\n0,1\n0.5,0.25\n-1,2e-3\n");
  write_gz(dir / "node-label.csv.gz", "0\n1\n1\n0\n");
  write_gz(dir / "split" / "train.csv.gz", "0\n1\n");
  write_gz(dir / "split" / "valid.csv.gz", "2\n");
  write_gz(dir / "split" / "test.csv.gz", "3\n");
}

// Loads DIR and returns the error message (fails the test when loading succeeds).
std::string load_error(const fs::path& dir) {
  try {
    load_ogb_csv(dir);
  } catch (const data_error& e) {
    return e.what();
  }
  ADD_FAILURE() << "loading " << dir << " did not fail";
  return {};
}

}  // namespace

struct planetoid_case {
  const char* name;
  node_id nodes;
  edge_offset undirected_edges;
  int features, classes;
  size_t train, valid, test;
};

void PrintTo(const planetoid_case& c, std::ostream* os) {
  *os << c.name;
}

class BundledDataset : public ::testing::TestWithParam<planetoid_case> {};

TEST_P(BundledDataset, HasThePublishedCounts) {
  const auto& c = GetParam();
  const dataset d = load_ogb_csv(bundled(c.name));
  EXPECT_EQ(d.num_nodes(), c.nodes);
  EXPECT_EQ(d.raw_edges, c.undirected_edges);
  EXPECT_EQ(d.graph.num_edges(), 2 * c.undirected_edges);  // symmetrized
  EXPECT_EQ(d.num_features(), c.features);
  EXPECT_EQ(d.num_classes, c.classes);
  EXPECT_EQ(d.train.size(), c.train);
  EXPECT_EQ(d.valid.size(), c.valid);
  EXPECT_EQ(d.test.size(), c.test);
  EXPECT_FALSE(d.directed);
}

INSTANTIATE_TEST_SUITE_P(
    Planetoid, BundledDataset,
    ::testing::Values(planetoid_case{"cora", 2708, 5278, 1433, 7, 140, 500, 1000},
                      planetoid_case{"citeseer", 3327, 4552, 3703, 6, 120, 500, 1000},
                      planetoid_case{"pubmed", 19717, 44324, 500, 3, 60, 500, 1000}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(DatasetLoader, ReadsFeatureValuesExactly) {
  temp_dir t;
  write_tiny(t.path);
  const dataset d = load_ogb_csv(t.path);
  EXPECT_FLOAT_EQ(d.features(2, 0), 0.5f);
  EXPECT_FLOAT_EQ(d.features(3, 1), 2e-3f);
  EXPECT_EQ(d.labels, (std::vector<std::int32_t>{0, 1, 1, 0}));
  EXPECT_EQ(d.num_classes, 2);
  EXPECT_EQ(d.graph.num_edges(), 6);
}

TEST(DatasetLoader, ReportsAMissingFile) {
  temp_dir t;
  write_tiny(t.path);
  fs::remove(t.path / "node-label.csv.gz");
  const std::string e = load_error(t.path);
  EXPECT_NE(e.find("node-label.csv.gz"), std::string::npos) << e;
  EXPECT_NE(e.find("not found"), std::string::npos) << e;
}

TEST(DatasetLoader, ReportsAWrongColumnCountWithFileAndLine) {
  temp_dir t;
  write_tiny(t.path);
  write_gz(t.path / "edge.csv.gz", "0,1\n1,2,3\n2,3\n");
  const std::string e = load_error(t.path);
  EXPECT_NE(e.find("edge.csv.gz:2:"), std::string::npos) << e;
  EXPECT_NE(e.find("2 columns"), std::string::npos) << e;
}

TEST(DatasetLoader, ReportsAShortFeatureRow) {
  temp_dir t;
  write_tiny(t.path);
  write_gz(t.path / "node-feat.csv.gz", "1,0\n0,1\n0.5\n-1,2\n");
  const std::string e = load_error(t.path);
  EXPECT_NE(e.find("node-feat.csv.gz:3:"), std::string::npos) << e;
  EXPECT_NE(e.find("expected 2 columns, found 1"), std::string::npos) << e;
}

TEST(DatasetLoader, ReportsANonNumericField) {
  temp_dir t;
  write_tiny(t.path);
  write_gz(t.path / "node-feat.csv.gz", "1,0\n0,1\n0.5,abc\n-1,2\n");
  const std::string e = load_error(t.path);
  EXPECT_NE(e.find("node-feat.csv.gz:3:"), std::string::npos) << e;
  EXPECT_NE(e.find("column 2: not a number: 'abc'"), std::string::npos) << e;
}

TEST(DatasetLoader, ReportsANonFiniteFeatureInEitherLayout) {
  temp_dir t;
  write_tiny(t.path);
  write_gz(t.path / "node-feat.csv.gz", "1,0\n0,inf\n0.5,0\n-1,2\n");
  const std::string e = load_error(t.path);
  EXPECT_NE(e.find("node-feat.csv.gz:2:"), std::string::npos) << e;
  EXPECT_NE(e.find("column 2: not finite: 'inf'"), std::string::npos) << e;
  write_gz(t.path / "node-feat.csv.gz", "1,0\n0,1\nnan,0\n-1,2\n");
  try {
    load_ogb_csv(t.path, false, true);
    ADD_FAILURE() << "a NaN was taken";
  } catch (const data_error& err) {
    EXPECT_NE(std::string(err.what()).find("node-feat.csv.gz:3:"), std::string::npos) << err.what();
  }
}

TEST(DatasetLoader, ReportsANodeIdOutOfRange) {
  temp_dir t;
  write_tiny(t.path);
  write_gz(t.path / "edge.csv.gz", "0,1\n1,2\n2,4\n");
  const std::string e = load_error(t.path);
  EXPECT_NE(e.find("edge.csv.gz:3:"), std::string::npos) << e;
  EXPECT_NE(e.find("node id 4 out of range"), std::string::npos) << e;
}

TEST(DatasetLoader, ReportsATruncatedGzipFile) {
  temp_dir t;
  write_tiny(t.path);
  // A large enough edge file that cutting it in half leaves an incomplete deflate stream.
  std::string edges;
  for (int i = 0; i < 20000; ++i)
    edges += std::to_string(i % 3) + "," + std::to_string(i % 3 + 1) + "\n";
  write_gz(t.path / "edge.csv.gz", edges);
  write_gz(t.path / "num-edge-list.csv.gz", "20000\n");
  const auto size = fs::file_size(t.path / "edge.csv.gz");
  fs::resize_file(t.path / "edge.csv.gz", size / 2);
  const std::string e = load_error(t.path);
  EXPECT_NE(e.find("edge.csv.gz"), std::string::npos) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
}

TEST(DatasetLoader, ReportsALabelOutOfRange) {
  temp_dir t;
  write_tiny(t.path);
  write_gz(t.path / "node-label.csv.gz", "0\n1\n-3\n0\n");
  const std::string e = load_error(t.path);
  EXPECT_NE(e.find("node-label.csv.gz:3:"), std::string::npos) << e;
  EXPECT_NE(e.find("label -3 out of range"), std::string::npos) << e;
}

TEST(DatasetLoader, ReportsASplitNamingAnUnknownNode) {
  temp_dir t;
  write_tiny(t.path);
  write_gz(t.path / "split" / "valid.csv.gz", "2\n17\n");
  const std::string e = load_error(t.path);
  EXPECT_NE(e.find("valid.csv.gz:2:"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown node 17"), std::string::npos) << e;
}

TEST(DatasetLoader, ReportsOverlappingSplits) {
  temp_dir t;
  write_tiny(t.path);
  write_gz(t.path / "split" / "test.csv.gz", "1\n");
  const std::string e = load_error(t.path);
  EXPECT_NE(e.find("more than one split"), std::string::npos) << e;
}

TEST(DatasetLoader, ReportsAnEdgeCountThatDisagreesWithTheDeclaredOne) {
  temp_dir t;
  write_tiny(t.path);
  write_gz(t.path / "num-edge-list.csv.gz", "5\n");
  const std::string e = load_error(t.path);
  EXPECT_NE(e.find("edge.csv.gz"), std::string::npos) << e;
  EXPECT_NE(e.find("says 5"), std::string::npos) << e;
}

TEST(DatasetLoader, ReportsTooFewFeatureRows) {
  temp_dir t;
  write_tiny(t.path);
  write_gz(t.path / "node-feat.csv.gz", "1,0\n0,1\n");
  const std::string e = load_error(t.path);
  EXPECT_NE(e.find("node-feat.csv.gz"), std::string::npos) << e;
  EXPECT_NE(e.find("has 2 rows"), std::string::npos) << e;
}

// The labels are read first and hold the declared node count to the files: a forged count is
// an error naming the label file, before the graph or the features are sized by it (fuzz_csv
// found a num-node-list of 688,555,555 that made the CSR ask for 5.5 GB).
TEST(DatasetLoader, ADeclaredNodeCountTheLabelsContradictIsAnErrorBeforeAnythingIsSized) {
  temp_dir t;
  write_tiny(t.path);
  write_gz(t.path / "num-node-list.csv.gz", "5\n");
  const std::string e = load_error(t.path);
  EXPECT_NE(e.find("node-label.csv.gz"), std::string::npos) << e;
  EXPECT_NE(e.find("has 4 labels, expected one per node (5)"), std::string::npos) << e;
}

// The peak virtual size of this process in KiB (/proc/self/status VmPeak): an allocation shows
// there even when no page of it is touched.
long peak_virtual_kib() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmPeak:", 0) == 0) return std::stol(line.substr(7));
  return -1;
}

TEST(DatasetLoader, AForgedEdgeCountIsAnErrorWithoutReservingWhatItSays) {
  // fuzz_csv found it: num-edge-list said 555,856,855 and the loader reserved 4.4 GB of edge
  // arrays before counting the lines.
  temp_dir t;
  write_tiny(t.path);
  write_gz(t.path / "num-edge-list.csv.gz", "555856855\n");
  const long before = peak_virtual_kib();
  const std::string e = load_error(t.path);
  const long grown_mib = (peak_virtual_kib() - before) / 1024;
  EXPECT_NE(e.find("edge.csv.gz"), std::string::npos) << e;
  EXPECT_NE(e.find("has 3 edges but num-edge-list.csv.gz says 555856855"), std::string::npos) << e;
  ASSERT_GE(before, 0) << "no VmPeak in /proc/self/status";
  EXPECT_LT(grown_mib, 1024) << "the peak virtual size grew by " << grown_mib << " MiB";
}

TEST(DatasetLoader, KeepsDirectedGraphsDirectedWhenTheMetadataSaysSo) {
  temp_dir t;
  write_tiny(t.path);
  std::ofstream(t.path / "dataset.ini") << "directed = true\n";
  const dataset d = load_ogb_csv(t.path);
  EXPECT_TRUE(d.directed);
  EXPECT_EQ(d.graph.num_edges(), 3);
}

TEST(DatasetCache, RoundTripsAndIsUsedOnTheSecondLoad) {
  temp_dir t;
  write_tiny(t.path);
  const fs::path cache = t.path / "cache.bin";
  const dataset a = load_dataset(t.path, {.use_cache = true, .cache_path = cache});
  ASSERT_TRUE(fs::exists(cache));
  dataset b;
  ASSERT_TRUE(read_dataset_cache(cache, dataset_source_stamp(t.path), b));
  EXPECT_EQ(a.graph.indptr, b.graph.indptr);
  EXPECT_EQ(a.graph.indices, b.graph.indices);
  EXPECT_TRUE(a.features == b.features);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.train, b.train);
  EXPECT_EQ(a.test, b.test);
  EXPECT_EQ(a.name, b.name);
}

TEST(DatasetCache, GoesToTheCacheFolderNeverIntoTheDatasetFolder) {
  temp_dir t;
  fs::create_directories(t.path / "tiny" / "split");
  write_tiny(t.path / "tiny");
  const fs::path caches = t.path / "caches";
  const dataset a = load_dataset(t.path / "tiny", {.use_cache = true, .cache_dir = caches});
  // The dataset folder holds what it held; the cache is one file in the cache folder, named
  // after the dataset, and the second load reads it.
  for (const auto& e : fs::directory_iterator(t.path / "tiny"))
    EXPECT_EQ(e.path().string().find("degnn-cache"), std::string::npos) << e.path();
  std::vector<fs::path> files(fs::directory_iterator(caches), fs::directory_iterator{});
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].filename().string().rfind("tiny-", 0), 0u) << files[0];
  dataset b;
  ASSERT_TRUE(read_dataset_cache(files[0], dataset_source_stamp(t.path / "tiny"), b));
  EXPECT_EQ(a.graph.indices, b.graph.indices);
}

TEST(DatasetCache, IsIgnoredWhenTheSourceChanges) {
  temp_dir t;
  write_tiny(t.path);
  const fs::path cache = t.path / "cache.bin";
  load_dataset(t.path, {.use_cache = true, .cache_path = cache});
  dataset b;
  EXPECT_FALSE(read_dataset_cache(cache, dataset_source_stamp(t.path) + 1, b));
}

TEST(DatasetCache, RejectsACorruptCacheWithTheFileName) {
  temp_dir t;
  write_tiny(t.path);
  const fs::path cache = t.path / "cache.bin";
  load_dataset(t.path, {.use_cache = true, .cache_path = cache});
  {
    std::fstream f(cache, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(cache)) - 20);
    f.put('\x7f');
  }
  dataset b;
  try {
    read_dataset_cache(cache, dataset_source_stamp(t.path), b);
    FAIL() << "corrupt cache accepted";
  } catch (const data_error& e) {
    EXPECT_NE(std::string(e.what()).find("cache.bin"), std::string::npos) << e.what();
  }
  fs::resize_file(cache, 100);
  EXPECT_THROW(read_dataset_cache(cache, dataset_source_stamp(t.path), b), data_error);
}

// Cora's features are 1.3% non-zero: the CSV parse with sparse_features makes the compressed
// rows straight away, the cache keeps them compressed (a fraction of the dense bytes), and both
// loads of the cache give back exactly the parsed rows.
TEST(DatasetCache, MostlyZeroFeaturesAreParsedAndCachedAsCompressedRows) {
  const fs::path cora = fs::path(DEGNN_SOURCE_DIR) / "data" / "cora";
  const dataset dense = load_ogb_csv(cora);
  const dataset sparse = load_ogb_csv(cora, false, true);
  ASSERT_TRUE(sparse.sparse_features);
  EXPECT_EQ(sparse.features.rows(), 0);
  EXPECT_EQ(sparse.num_features(), dense.num_features());
  EXPECT_TRUE(to_dense(*sparse.sparse_features) == dense.features);
  EXPECT_EQ(sparse.graph.indices, dense.graph.indices);
  temp_dir t;
  for (const bool from_sparse : {false, true}) {
    const fs::path cache = t.path / (from_sparse ? "from-sparse.bin" : "from-dense.bin");
    write_dataset_cache(from_sparse ? sparse : dense, cache, 7);
    EXPECT_LT(fs::file_size(cache), static_cast<std::uintmax_t>(dense.features.size()))
        << "a quarter of the dense feature bytes or less";
    dataset as_dense, as_sparse;
    ASSERT_TRUE(read_dataset_cache(cache, 7, as_dense, false));
    ASSERT_TRUE(read_dataset_cache(cache, 7, as_sparse, true));
    EXPECT_TRUE(as_dense.features == dense.features);
    ASSERT_TRUE(as_sparse.sparse_features);
    EXPECT_TRUE(to_dense(*as_sparse.sparse_features) == dense.features);
    EXPECT_EQ(as_sparse.labels, dense.labels);
  }
  // Dense features (the tiny set's are all non-zero) stay dense in the cache.
  write_tiny(t.path);
  const dataset tiny = load_ogb_csv(t.path);
  write_dataset_cache(tiny, t.path / "tiny.bin", 7);
  dataset back;
  ASSERT_TRUE(read_dataset_cache(t.path / "tiny.bin", 7, back, true));
  EXPECT_TRUE(to_dense(*back.sparse_features) == tiny.features);
  // A bad row is named the same way by the compressed parse.
  write_gz(t.path / "node-feat.csv.gz", "1,0\n0,1\n0.5\n-1,2\n");
  try {
    load_ogb_csv(t.path, false, true);
    ADD_FAILURE() << "a short row was taken";
  } catch (const data_error& e) {
    EXPECT_NE(std::string(e.what()).find("node-feat.csv.gz:3:"), std::string::npos) << e.what();
  }
}

// A compressed cache keeps no byte that backs the feature width: a damaged width once made the
// dense load allocate nodes x width floats (16 GiB for a fuzzed file; found by fuzz_files) before
// the checksum was compared. Now the checksum comes first: the damage is a data_error naming the
// file, not std::bad_alloc (Cora x 2^30 columns would be 11 TB).
TEST(DatasetCache, ADamagedWidthOfACompressedCacheIsAChecksumErrorBeforeAnyDenseRow) {
  const dataset sparse = load_ogb_csv(fs::path(DEGNN_SOURCE_DIR) / "data" / "cora", false, true);
  temp_dir t;
  const fs::path cache = t.path / "compressed.bin";
  write_dataset_cache(sparse, cache, 7);
  {
    std::fstream f(cache, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(48);  // the header's num_features, after magic, version, directed, stamp and 3 counts
    const std::int64_t width = std::int64_t{1} << 30;
    f.write(reinterpret_cast<const char*>(&width), sizeof width);
  }
  dataset b;
  try {
    read_dataset_cache(cache, 7, b, false);
    ADD_FAILURE() << "a damaged cache was read";
  } catch (const data_error& e) {
    EXPECT_NE(std::string(e.what()).find("compressed.bin"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("checksum"), std::string::npos) << e.what();
  }
}
