// Tests of model/partition_book.hpp and model/partition_store.hpp: id maps, the invariants of cut
// partitions (every edge once, at its destination's owner; exact halos), the on-disk round trip,
// and clear data_errors for truncated, corrupted or mismatched files.
#include "model/partition_store.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "model/data_error.hpp"
#include "model/partitioner.hpp"
#include "model/sparse_input.hpp"

using namespace degnn;
namespace fs = std::filesystem;

namespace {

const dataset& bundled(const std::string& name) {
  static std::map<std::string, dataset> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    it = cache.emplace(name, load_dataset(fs::path(DEGNN_SOURCE_DIR) / "data" / name)).first;
  }
  return it->second;
}

struct temp_dir {
  fs::path path;
  explicit temp_dir(const std::string& suffix = "") {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path = fs::temp_directory_path() / ("degnn-parts-" + std::to_string(::getpid()) + "-" +
                                        info->test_suite_name() + "-" + info->name() + suffix);
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Pubmed in 4 METIS parts, written once to a directory shared by the tests that only read it.
struct written_pubmed {
  temp_dir dir;
  std::vector<std::int32_t> owner;
  written_pubmed() {
    const dataset& d = bundled("pubmed");
    owner = partition_graph(d.graph, d.train, 4, partition_method::metis, 11);
    write_partitions(d, owner, dir.path, "metis", 11);
  }
};

std::vector<char> read_bytes(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void write_bytes(const fs::path& f, const std::vector<char>& bytes) {
  std::ofstream out(f, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Runs f, expects a data_error, and returns its message.
template <class F>
std::string data_error_of(F&& f) {
  try {
    f();
  } catch (const data_error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a data_error";
  return {};
}

}  // namespace

// -- partition book --

TEST(PartitionBook, MapsGlobalIdsToLocalIdsAndBack) {
  const partition_book book({1, 0, 1, 2, 0, 1}, 3);
  EXPECT_EQ(book.num_parts(), 3);
  EXPECT_EQ(book.num_nodes(), 6);
  EXPECT_EQ(book.num_owned(0), 2);
  EXPECT_EQ(book.num_owned(1), 3);
  EXPECT_EQ(book.num_owned(2), 1);
  EXPECT_EQ(std::vector<node_id>(book.owned(1).begin(), book.owned(1).end()),
            (std::vector<node_id>{0, 2, 5}));
  EXPECT_EQ(book.owner(5), 1);
  EXPECT_EQ(book.local_id(5), 2);
  EXPECT_EQ(book.local_id(4), 1);
  for (node_id g = 0; g < book.num_nodes(); ++g)
    EXPECT_EQ(book.global_id(book.owner(g), book.local_id(g)), g);
}

TEST(PartitionBook, AllowsAnEmptyPartAndRejectsOwnersOutOfRange) {
  const partition_book book({0, 0, 2}, 3);
  EXPECT_EQ(book.num_owned(1), 0);
  EXPECT_TRUE(book.owned(1).empty());
  EXPECT_THROW(partition_book({0, 3}, 3), std::invalid_argument);
  EXPECT_THROW(partition_book({0, -1}, 3), std::invalid_argument);
  EXPECT_THROW(partition_book({0}, 0), std::invalid_argument);
}

// -- cutting partitions in memory --

TEST(PartitionStore, StoresEachEdgeOnceAtItsDestinationsOwner) {
  const dataset& d = bundled("pubmed");
  const partition_book book(partition_graph(d.graph, d.train, 4, partition_method::metis, 1), 4);
  edge_offset edges = 0;
  node_id nodes = 0;
  std::vector<int> seen(static_cast<size_t>(d.num_nodes()), 0);
  for (int k = 0; k < 4; ++k) {
    const graph_partition p = extract_partition(d, book, k);
    ASSERT_EQ(p.indptr.size(), p.owned.size() + 1);
    edges += p.num_edges();
    nodes += p.num_owned();
    for (node_id l = 0; l < p.num_owned(); ++l) {
      const node_id g = p.owned[static_cast<size_t>(l)];
      ++seen[static_cast<size_t>(g)];
      ASSERT_EQ(book.owner(g), k);
      ASSERT_EQ(book.local_id(g), l);
      const auto row = p.in_neighbors_global(l);
      const auto global_row = d.graph.in_neighbors(g);
      ASSERT_TRUE(std::equal(row.begin(), row.end(), global_row.begin(), global_row.end()))
          << "row of " << g;
      for (auto e = p.indptr[static_cast<size_t>(l)]; e < p.indptr[static_cast<size_t>(l) + 1];
           ++e) {
        const node_id u = p.src_global[static_cast<size_t>(e)];
        const node_id lu = p.src_local[static_cast<size_t>(e)];
        if (book.owner(u) == k) {
          ASSERT_EQ(lu, book.local_id(u));
        } else {
          ASSERT_EQ(lu, -1);
        }
      }
    }
  }
  EXPECT_EQ(edges, d.graph.num_edges());
  EXPECT_EQ(nodes, d.num_nodes());
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
}

TEST(PartitionStore, HaloIsExactlyTheSetOfRemoteInNeighbours) {
  const dataset& d = bundled("cora");
  const partition_book book(partition_graph(d.graph, d.train, 4, partition_method::random, 2), 4);
  for (int k = 0; k < 4; ++k) {
    std::set<node_id> expected;
    for (node_id g : book.owned(k)) {
      for (node_id u : d.graph.in_neighbors(g)) {
        if (book.owner(u) != k) expected.insert(u);
      }
    }
    const graph_partition p = extract_partition(d, book, k);
    EXPECT_EQ(p.halo, std::vector<node_id>(expected.begin(), expected.end())) << "part " << k;
    ASSERT_EQ(p.halo_owner.size(), p.halo.size());
    ASSERT_EQ(p.halo_degree.size(), p.halo.size());
    for (size_t i = 0; i < p.halo.size(); ++i) {
      EXPECT_EQ(p.halo_owner[i], book.owner(p.halo[i]));
      EXPECT_EQ(p.halo_degree[i], d.graph.in_degree(p.halo[i]));
    }
  }
}

TEST(PartitionStore, CarriesFeaturesLabelsAndSplitsOfTheOwnedNodes) {
  const dataset& d = bundled("cora");
  const partition_book book(partition_graph(d.graph, d.train, 3, partition_method::metis, 4), 3);
  size_t train = 0, valid = 0, test = 0;
  for (int k = 0; k < 3; ++k) {
    const graph_partition p = extract_partition(d, book, k);
    ASSERT_EQ(p.features.rows(), p.num_owned());
    ASSERT_EQ(p.features.cols(), d.num_features());
    for (node_id l = 0; l < p.num_owned(); ++l) {
      const node_id g = p.owned[static_cast<size_t>(l)];
      ASSERT_TRUE(p.features.row(l) == d.features.row(g));
      ASSERT_EQ(p.labels[static_cast<size_t>(l)], d.labels[static_cast<size_t>(g)]);
    }
    for (node_id l : p.train)
      EXPECT_TRUE(std::binary_search(d.train.begin(), d.train.end(), p.owned[l]));
    EXPECT_TRUE(std::is_sorted(p.train.begin(), p.train.end()));
    train += p.train.size();
    valid += p.valid.size();
    test += p.test.size();
  }
  EXPECT_EQ(train, d.train.size());
  EXPECT_EQ(valid, d.valid.size());
  EXPECT_EQ(test, d.test.size());
}

// -- on disk --

TEST(PartitionStore, WriteThenLoadReproducesEveryPartitionExactly) {
  const dataset& d = bundled("pubmed");
  written_pubmed w;
  const partition_meta m = load_partition_meta(w.dir.path);
  EXPECT_EQ(m.dataset_name, d.name);
  EXPECT_EQ(m.num_nodes, d.num_nodes());
  EXPECT_EQ(m.num_edges, d.graph.num_edges());
  EXPECT_EQ(m.num_features, d.num_features());
  EXPECT_EQ(m.num_classes, d.num_classes);
  EXPECT_EQ(m.num_parts, 4);
  EXPECT_EQ(m.method, "metis");
  EXPECT_EQ(m.seed, 11u);

  const partition_book book = load_partition_book(w.dir.path);
  EXPECT_EQ(std::vector<std::int32_t>(book.owners().begin(), book.owners().end()), w.owner);
  for (int k = 0; k < 4; ++k) {
    const graph_partition a = extract_partition(d, book, k);
    const graph_partition b = load_partition(w.dir.path, k);
    EXPECT_EQ(b.part, k);
    EXPECT_EQ(b.num_parts, 4);
    EXPECT_EQ(b.num_global_nodes, d.num_nodes());
    EXPECT_EQ(b.num_classes, d.num_classes);
    EXPECT_EQ(b.owned, a.owned);
    EXPECT_EQ(b.indptr, a.indptr);
    EXPECT_EQ(b.src_global, a.src_global);
    EXPECT_EQ(b.src_local, a.src_local);
    EXPECT_TRUE(b.features == a.features);  // bitwise: floats are stored raw
    EXPECT_EQ(b.labels, a.labels);
    EXPECT_EQ(b.train, a.train);
    EXPECT_EQ(b.valid, a.valid);
    EXPECT_EQ(b.test, a.test);
    EXPECT_EQ(b.halo, a.halo);
    EXPECT_EQ(b.halo_owner, a.halo_owner);
    EXPECT_EQ(b.halo_degree, a.halo_degree);
  }
}

TEST(PartitionStore, CompressedFeatureRowsRoundTripAndEqualTheDenseOnes) {
  const dataset& dense = bundled("cora");
  dataset d = dense;
  make_features_sparse(d);
  temp_dir dir;
  const auto owner = partition_graph(d.graph, d.train, 3, partition_method::metis, 5);
  write_partitions(d, owner, dir.path, "metis", 5);
  const partition_book book = load_partition_book(dir.path);
  std::uintmax_t sparse_bytes = 0;
  for (int k = 0; k < 3; ++k) {
    const graph_partition want = extract_partition(dense, book, k);
    graph_partition got = load_partition(dir.path, k);
    ASSERT_TRUE(got.sparse_features);
    EXPECT_EQ(got.features.rows(), 0);
    EXPECT_EQ(got.features.cols(), dense.num_features());
    EXPECT_TRUE(to_dense(*got.sparse_features) == want.features);
    EXPECT_EQ(got.halo, want.halo);
    sparse_bytes += fs::file_size(partition_file(dir.path, k));
    // Either layout converts to the other exactly.
    set_feature_layout(got, false);
    EXPECT_FALSE(got.sparse_features);
    EXPECT_TRUE(got.features == want.features);
    set_feature_layout(got, true);
    EXPECT_TRUE(to_dense(*got.sparse_features) == want.features);
  }
  // Cora's rows are 1.3% non-zero: the set is much smaller than its dense rows alone.
  EXPECT_LT(sparse_bytes, static_cast<std::uintmax_t>(dense.features.size()) * 4 / 10);
}

TEST(PartitionStore, ACompressedRowWithABadColumnIsADataErrorNamingTheFile) {
  dataset d = bundled("cora");
  make_features_sparse(d);
  const auto owner = partition_graph(d.graph, d.train, 2, partition_method::random, 5);
  // A buggy writer: part 0's first row names column 1433 of 1433. The file's checksum is right,
  // so only the structural check can catch it.
  const node_id first =
      static_cast<node_id>(std::find(owner.begin(), owner.end(), 0) - owner.begin());
  auto rows = std::make_shared<sparse_rows>(*d.sparse_features);
  ASSERT_GT(rows->m.innerVector(first).nonZeros(), 0);
  rows->m.innerIndexPtr()[rows->m.outerIndexPtr()[first]] = d.num_features();
  d.sparse_features = rows;
  temp_dir dir;
  write_partitions(d, owner, dir.path, "random", 5);
  const std::string what = data_error_of([&] { load_partition(dir.path, 0); });
  EXPECT_NE(what.find(partition_file(dir.path, 0).string()), std::string::npos) << what;
  EXPECT_NE(what.find("column " + std::to_string(d.num_features())), std::string::npos) << what;
  EXPECT_NO_THROW(load_partition(dir.path, 1));
}

TEST(PartitionStore, WritesAHumanReadableMetaFile) {
  written_pubmed w;
  std::ifstream in(w.dir.path / "partitions.meta");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* line : {"format_version=3\n", "dataset=pubmed\n", "num_nodes=19717\n",
                           "num_parts=4\n", "method=metis\n", "seed=11\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << " in\n" << text;
  }
  // No temporary files are left behind.
  for (const auto& e : fs::recursive_directory_iterator(w.dir.path)) {
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
  }
}

constexpr part_loading kLoadings[] = {part_loading::read_features, part_loading::map_features};

TEST(PartitionStore, TruncatedPartitionFileGivesADataErrorNamingTheFile) {
  written_pubmed w;
  const fs::path file = partition_file(w.dir.path, 2);
  auto bytes = read_bytes(file);
  for (size_t keep : {bytes.size() - 1, bytes.size() / 2, size_t{40}, size_t{0}}) {
    write_bytes(
        file, std::vector<char>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(keep)));
    for (const part_loading how : kLoadings) {
      const std::string msg = data_error_of([&] { load_partition(w.dir.path, 2, how); });
      EXPECT_NE(msg.find("part-2/partition.bin"), std::string::npos) << msg;
      EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
    }
  }
  // The other partitions still load: a node reads only its own file.
  EXPECT_NO_THROW(load_partition(w.dir.path, 1));
}

TEST(PartitionStore, CorruptedPartitionByteIsCaughtByTheChecksum) {
  written_pubmed w;
  const fs::path file = partition_file(w.dir.path, 0);
  auto bytes = read_bytes(file);
  bytes[bytes.size() / 2] ^= 0x10;  // inside the feature block
  write_bytes(file, bytes);
  // A mapped part is checked whole too, though its feature rows are never copied.
  for (const part_loading how : kLoadings) {
    const std::string msg = data_error_of([&] { load_partition(w.dir.path, 0, how); });
    EXPECT_NE(msg.find("part-0/partition.bin"), std::string::npos) << msg;
    EXPECT_NE(msg.find("checksum"), std::string::npos) << msg;
  }
}

// Resident memory of this process in bytes (statm's second field), now.
std::size_t resident_bytes() {
  std::ifstream in("/proc/self/statm");
  std::size_t size = 0, resident = 0;
  in >> size >> resident;
  return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

TEST(PartitionStore, AMappedPartHoldsTheSameRowsWhereTheyLieInItsFile) {
  written_pubmed w;
  const dataset& d = bundled("pubmed");
  const partition_book book = load_partition_book(w.dir.path);
  for (int k = 0; k < 4; ++k) {
    const graph_partition want = extract_partition(d, book, k);
    const std::size_t before = resident_bytes();
    const graph_partition got = load_partition(w.dir.path, k, part_loading::map_features);
    const std::size_t after = resident_bytes();
    const std::size_t grown = after > before ? after - before : 0;
    ASSERT_NE(got.mapped_features, nullptr);
    EXPECT_EQ(got.features.rows(), 0);
    EXPECT_EQ(got.features.cols(), d.num_features());
    EXPECT_TRUE(got.dense_features() == want.features);  // bitwise
    EXPECT_EQ(got.src_global, want.src_global);
    EXPECT_EQ(got.halo_degree, want.halo_degree);
    // Checking the file touched every page of it, and handed them back: what stays resident is
    // the arrays read into memory, not the feature rows (a quarter of Pubmed's 39 MB).
    const auto feature_bytes = static_cast<std::size_t>(want.features.size()) * sizeof(float);
    EXPECT_LT(grown, feature_bytes / 2) << "part " << k << ": " << grown << " bytes resident";
    // The rows read into memory, compressed, or rewritten by a transform leave the file.
    graph_partition copy = got;
    copy_mapped_features(copy);
    EXPECT_EQ(copy.mapped_features, nullptr);
    EXPECT_TRUE(copy.features == want.features);
    graph_partition sparse = got;
    set_feature_layout(sparse, true);
    EXPECT_EQ(sparse.mapped_features, nullptr);
    EXPECT_TRUE(to_dense(*sparse.sparse_features) == want.features);
    graph_partition normalized = got;
    apply_feature_transform("row", normalized);
    EXPECT_EQ(normalized.mapped_features, nullptr);
    EXPECT_EQ(normalized.features.rows(), want.features.rows());
    graph_partition untouched = got;
    apply_feature_transform("none", untouched);
    EXPECT_NE(untouched.mapped_features, nullptr);
  }
  // A run maps its parts unless it reads them into memory or rewrites their rows.
  EXPECT_EQ(part_loading_for(false, false, "none"), part_loading::map_features);
  EXPECT_EQ(part_loading_for(true, false, "none"), part_loading::read_features);
  EXPECT_EQ(part_loading_for(false, true, "none"), part_loading::read_features);
  EXPECT_EQ(part_loading_for(false, false, "row"), part_loading::read_features);
}

TEST(PartitionStore, AMappedPartOutlivesItsFileBeingReplaced) {
  written_pubmed w;
  const graph_partition got = load_partition(w.dir.path, 1, part_loading::map_features);
  const Matrix rows = got.dense_features();
  // Writers replace a file by renaming a new one over it: the mapping keeps the old contents.
  const dataset& d = bundled("pubmed");
  write_partitions(d, partition_graph(d.graph, d.train, 4, partition_method::random, 3), w.dir.path,
                   "random", 3);
  EXPECT_TRUE(got.dense_features() == rows);
}

TEST(PartitionStore, RejectsBadMagicAndTrailingBytes) {
  written_pubmed w;
  const fs::path file = partition_file(w.dir.path, 3);
  auto bytes = read_bytes(file);
  auto extra = bytes;
  extra.push_back(0);
  write_bytes(file, extra);
  EXPECT_NE(data_error_of([&] { load_partition(w.dir.path, 3); }).find("trailing bytes"),
            std::string::npos);
  bytes[0] = 'X';
  write_bytes(file, bytes);
  EXPECT_NE(data_error_of([&] { load_partition(w.dir.path, 3); }).find("bad magic"),
            std::string::npos);
}

TEST(PartitionStore, RejectsAPartitionFileFromAnotherPartitioning) {
  const dataset& d = bundled("cora");
  temp_dir a("-a"), b("-b");
  write_partitions(d, partition_graph(d.graph, d.train, 2, partition_method::metis, 1), a.path,
                   "metis", 1);
  write_partitions(d, partition_graph(d.graph, d.train, 2, partition_method::random, 1), b.path,
                   "random", 1);
  fs::copy_file(partition_file(b.path, 1), partition_file(a.path, 1),
                fs::copy_options::overwrite_existing);
  const std::string msg = data_error_of([&] { load_partition(a.path, 1); });
  EXPECT_NE(msg.find("part-1/partition.bin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("different partitioning"), std::string::npos) << msg;
  fs::copy_file(b.path / "owner.bin", a.path / "owner.bin", fs::copy_options::overwrite_existing);
  EXPECT_NE(data_error_of([&] { load_partition_book(a.path); }).find("owner.bin"),
            std::string::npos);
}

TEST(PartitionStore, CorruptOrTruncatedBookGivesADataErrorNamingTheFile) {
  written_pubmed w;
  const fs::path file = w.dir.path / "owner.bin";
  auto bytes = read_bytes(file);
  bytes[100] ^= 1;
  write_bytes(file, bytes);
  std::string msg = data_error_of([&] { load_partition_book(w.dir.path); });
  EXPECT_NE(msg.find("owner.bin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("checksum"), std::string::npos) << msg;
  bytes.erase(bytes.end() - 12, bytes.end());  // the last 12 bytes
  write_bytes(file, bytes);
  msg = data_error_of([&] { load_partition_book(w.dir.path); });
  EXPECT_NE(msg.find("owner.bin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
}

TEST(PartitionStore, ReportsMetaFileProblemsWithFileAndLine) {
  written_pubmed w;
  const fs::path meta = w.dir.path / "partitions.meta";
  std::ifstream in(meta);
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  auto with = [&](std::string text) {
    std::ofstream(meta, std::ios::trunc) << text;
    return data_error_of([&] { load_partition_book(w.dir.path); });
  };
  std::string text = good;
  text.replace(text.find("num_parts=4"), 11, "num_parts=four");
  std::string msg = with(text);
  EXPECT_NE(msg.find("partitions.meta:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("num_parts"), std::string::npos) << msg;
  msg = with(good + "colour=blue\n");
  EXPECT_NE(msg.find("unknown key 'colour'"), std::string::npos) << msg;
  text = good;
  text.erase(text.find("seed="), text.find('\n', text.find("seed=")) - text.find("seed=") + 1);
  msg = with(text);
  EXPECT_NE(msg.find("missing key seed"), std::string::npos) << msg;
  fs::remove(meta);
  msg = data_error_of([&] { load_partition(w.dir.path, 0); });
  EXPECT_NE(msg.find("partitions.meta"), std::string::npos) << msg;
}

TEST(PartitionStore, ReportsAMissingPartitionDirectory) {
  written_pubmed w;
  fs::remove_all(w.dir.path / "part-1");
  const std::string msg = data_error_of([&] { load_partition(w.dir.path, 1); });
  EXPECT_NE(msg.find("part-1/partition.bin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
  EXPECT_THROW(load_partition(w.dir.path, 4), std::invalid_argument);
}

// Rows per message are capped: a long group of one owner becomes consecutive groups, in order.
TEST(PartitionBook, SplitGroupsCapsEachGroupAndKeepsTheOrder) {
  const partition_book book({0, 1, 1, 2, 1, 0, 1, 2}, 3);
  const std::vector<node_id> nodes = {1, 2, 4, 6, 3, 7, 0};
  const owner_groups whole = group_by_owner(book, nodes, 0);
  const owner_groups split = split_groups(whole, 3);
  EXPECT_EQ(split.own, whole.own);
  EXPECT_EQ(split.owners, (std::vector<std::int32_t>{1, 1, 2}));
  ASSERT_EQ(split.positions.size(), 3u);
  EXPECT_EQ(split.positions[0], (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_EQ(split.positions[1], (std::vector<std::size_t>{3}));
  EXPECT_EQ(split.positions[2], (std::vector<std::size_t>{4, 5}));
  EXPECT_EQ(split_groups(whole, 100).positions, whole.positions);
  EXPECT_THROW(split_groups(whole, 0), std::invalid_argument);
}
