// Storing a partitioned dataset: a text meta file, the book as owner.bin and one binary file per
// partition (cutting the values out: partition_extract.cpp). Binary files are a fixed header
// (magic, version, sizes), the raw arrays written one call each, and a trailing checksum over
// header and payload.
#include "model/partition_store.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "model/data_error.hpp"
#include "model/durable_file.hpp"
#include "model/hashing.hpp"
#include "model/mapped_file.hpp"
#include "model/partition_file_io.hpp"
#include "model/sparse_input.hpp"

namespace degnn {

namespace fs = std::filesystem;
using namespace partition_io;

namespace {

constexpr std::int32_t kFormatVersion = kPartitionFormatVersion;
constexpr char kPartMagic[8] = {'D', 'E', 'G', 'N', 'N', 'P', 'T', '1'};
constexpr char kBookMagic[8] = {'D', 'E', 'G', 'N', 'N', 'P', 'B', '1'};
constexpr const char* kMetaName = kPartitionMetaName;
constexpr const char* kBookName = "owner.bin";

// Padding-free headers (all fields 8-byte aligned in order), memset before use so every byte that
// enters the checksum is defined.
struct part_header {
  char magic[8];
  std::uint32_t version;
  std::int32_t part;
  std::int32_t num_parts;
  std::int32_t num_classes;
  std::int64_t num_global_nodes, num_owned, num_edges, num_features;
  std::int64_t num_train, num_valid, num_test, num_halo;
  std::uint64_t owner_checksum;
  std::int64_t feature_nonzeros;  ///< -1: dense rows; else compressed rows with this many
};
static_assert(sizeof(part_header) == 8 + 4 * 4 + 8 * 8 + 8 + 8);

struct book_header {
  char magic[8];
  std::uint32_t version;
  std::int32_t num_parts;
  std::int64_t num_nodes;
};
static_assert(sizeof(book_header) == 24);

void write_text_file(const fs::path& file, const std::string& text) {
  write_file_durably(file, text);
}

}  // namespace

void write_partition_file(const fs::path& file, const graph_partition& p, std::uint64_t book_sum,
                          const mapped_rows* rows_from) {
  if (rows_from &&
      (p.sparse_features || p.features.rows() != 0 || p.features.cols() != rows_from->cols))
    throw std::invalid_argument(
        "write_partition_file: rows from a mapping need a partition without feature rows of "
        "the same width");
  part_header h;
  std::memset(&h, 0, sizeof h);
  std::memcpy(h.magic, kPartMagic, 8);
  h.version = kFormatVersion;
  h.part = p.part;
  h.num_parts = p.num_parts;
  h.num_classes = p.num_classes;
  h.num_global_nodes = p.num_global_nodes;
  h.num_owned = p.num_owned();
  h.num_edges = p.num_edges();
  h.num_features = p.features.cols();
  h.num_train = static_cast<std::int64_t>(p.train.size());
  h.num_valid = static_cast<std::int64_t>(p.valid.size());
  h.num_test = static_cast<std::int64_t>(p.test.size());
  h.num_halo = static_cast<std::int64_t>(p.halo.size());
  h.owner_checksum = book_sum;
  h.feature_nonzeros = p.sparse_features ? p.sparse_features->m.nonZeros() : -1;
  bin_writer w(file);
  w.put(&h, 1);
  w.put(p.owned.data(), p.owned.size());
  w.put(p.indptr.data(), p.indptr.size());
  w.put(p.src_global.data(), p.src_global.size());
  w.put(p.src_local.data(), p.src_local.size());
  if (p.sparse_features) {
    // Each array in one put, as the reader gets it: the checksum hashes a call's bytes whole.
    const sparse_rows* rows = p.sparse_features.get();
    sparse_rows compressed;
    if (!rows->m.isCompressed()) {
      compressed = *rows;
      compressed.m.makeCompressed();
      rows = &compressed;
    }
    const auto counts = row_counts(*rows);
    const auto nnz = static_cast<size_t>(rows->m.nonZeros());
    w.put(counts.data(), counts.size());
    w.put(rows->m.innerIndexPtr(), nnz);
    w.put(rows->m.valuePtr(), nnz);
  } else if (rows_from) {
    // Rows gathered into a buffer of an even number of rows, so each put is a multiple of 8
    // bytes and the checksum (8 bytes a step) equals the one of a single put of all of them.
    const auto cols = static_cast<std::size_t>(rows_from->cols);
    const std::size_t batch = std::max<std::size_t>(2, ((std::size_t{4} << 20) / 4 / cols) & ~1);
    std::vector<float> buf;
    buf.reserve(batch * cols);
    for (std::size_t l = 0; l < p.owned.size(); ++l) {
      const float* row = rows_from->row(p.owned[l]);
      buf.insert(buf.end(), row, row + cols);
      if (buf.size() == batch * cols || l + 1 == p.owned.size()) {
        w.put(buf.data(), buf.size());
        buf.clear();
      }
    }
    rows_from->release();
  } else {
    const auto rows = p.dense_features();
    w.put(rows.data(), static_cast<size_t>(rows.size()));
  }
  w.put(p.labels.data(), p.labels.size());
  w.put(p.train.data(), p.train.size());
  w.put(p.valid.data(), p.valid.size());
  w.put(p.test.data(), p.test.size());
  w.put(p.halo.data(), p.halo.size());
  w.put(p.halo_owner.data(), p.halo_owner.size());
  w.put(p.halo_degree.data(), p.halo_degree.size());
  w.finish();
}

namespace {

// Structural checks of a loaded partition: the checksum catches corruption on disk, these catch a
// file written by a buggy or foreign writer before a shard indexes out of bounds with it.
void validate_partition(const graph_partition& p, const mapped_reader& r) {
  const node_id n = p.num_global_nodes;
  const node_id owned = p.num_owned();
  for (node_id l = 0; l < owned; ++l) {
    const node_id g = p.owned[static_cast<size_t>(l)];
    if (g < 0 || g >= n || (l > 0 && g <= p.owned[static_cast<size_t>(l) - 1])) {
      throw r.fail("owned ids are not ascending ids in [0, num_nodes) (at local row " +
                   std::to_string(l) + ")");
    }
  }
  if (p.indptr.front() != 0) throw r.fail("edge offsets do not start at 0");
  for (size_t l = 0; l + 1 < p.indptr.size(); ++l) {
    if (p.indptr[l + 1] < p.indptr[l])
      throw r.fail("edge offsets decrease at local row " + std::to_string(l));
  }
  if (p.indptr.back() != static_cast<edge_offset>(p.src_global.size())) {
    throw r.fail("edge offsets end at " + std::to_string(p.indptr.back()) +
                 ", not at the edge count " + std::to_string(p.src_global.size()));
  }
  for (size_t e = 0; e < p.src_global.size(); ++e) {
    const node_id g = p.src_global[e], l = p.src_local[e];
    if (g < 0 || g >= n)
      throw r.fail("edge " + std::to_string(e) + " has a source outside [0, num_nodes)");
    const bool ok = l == -1 ? std::binary_search(p.halo.begin(), p.halo.end(), g) &&
                                  !std::binary_search(p.owned.begin(), p.owned.end(), g)
                            : l >= 0 && l < owned && p.owned[static_cast<size_t>(l)] == g;
    if (!ok)
      throw r.fail("edge " + std::to_string(e) + " has inconsistent local/global/halo source ids");
  }
  for (std::int32_t y : p.labels) {
    if (y < 0 || y >= p.num_classes)
      throw r.fail("label " + std::to_string(y) + " outside [0, num_classes)");
  }
  for (const auto* split : {&p.train, &p.valid, &p.test}) {
    for (size_t i = 0; i < split->size(); ++i) {
      const node_id l = (*split)[i];
      if (l < 0 || l >= owned || (i > 0 && l <= (*split)[i - 1])) {
        throw r.fail("split ids are not ascending local ids in [0, owned)");
      }
    }
  }
  for (size_t i = 0; i < p.halo.size(); ++i) {
    const node_id g = p.halo[i];
    const std::int32_t o = p.halo_owner[i];
    if (g < 0 || g >= n || (i > 0 && g <= p.halo[i - 1]))
      throw r.fail("halo ids are not ascending ids in range");
    if (o < 0 || o >= p.num_parts || o == p.part)
      throw r.fail("halo node " + std::to_string(g) + " has owner " + std::to_string(o) +
                   ", not another part");
    if (p.halo_degree[i] < 0 || p.halo_degree[i] >= n)
      throw r.fail("halo node " + std::to_string(g) + " has in-degree " +
                   std::to_string(p.halo_degree[i]));
  }
}

}  // namespace

std::uint64_t owner_checksum(std::span<const std::int32_t> owner) {
  checksum64 sum;
  sum.add(owner.data(), owner.size_bytes());
  return sum.h;
}

// -- in memory --

fs::path partition_file(const fs::path& dir, int part) {
  return dir / ("part-" + std::to_string(part)) / "partition.bin";
}

void write_partitions(const dataset& d, const std::vector<std::int32_t>& owner, const fs::path& dir,
                      std::string_view method, std::uint64_t seed, int num_parts,
                      const fs::path& source) {
  if (owner.size() != static_cast<size_t>(d.num_nodes())) {
    throw std::invalid_argument("write_partitions: owner has " + std::to_string(owner.size()) +
                                " entries for a dataset of " + std::to_string(d.num_nodes()) +
                                " nodes");
  }
  if (num_parts <= 0)
    num_parts = owner.empty() ? 1 : *std::max_element(owner.begin(), owner.end()) + 1;
  const std::string source_text = source.empty() ? "" : fs::absolute(source).string();
  for (const std::string_view s :
       {std::string_view(d.name), method, std::string_view(source_text)}) {
    if (s.find('\n') != std::string_view::npos || s.find('\r') != std::string_view::npos) {
      throw std::invalid_argument(
          "write_partitions: dataset and method names and the source folder must be single lines");
    }
  }
  const partition_book book(owner, num_parts);  // validates the owners
  const std::uint64_t book_sum = owner_checksum(owner);

  fs::create_directories(dir);
  for (int k = 0; k < num_parts; ++k) {
    const fs::path file = partition_file(dir, k);
    fs::create_directories(file.parent_path());
    write_partition_file(file, extract_partition(d, book, k, false), book_sum,
                         d.mapped_features.get());
  }
  write_partition_book(dir, owner, num_parts);
  partition_meta m;
  m.format_version = kFormatVersion;
  m.dataset_name = d.name;
  m.num_nodes = d.num_nodes();
  m.num_edges = d.graph.num_edges();
  m.num_features = d.num_features();
  m.num_classes = d.num_classes;
  m.num_parts = num_parts;
  m.method = std::string(method);
  m.seed = seed;
  m.owner_checksum = book_sum;
  m.source = source_text;
  write_partition_meta(dir, m);  // last: its presence marks a complete set
}

void write_partition_book(const fs::path& dir, std::span<const std::int32_t> owner, int num_parts) {
  book_header h;
  std::memset(&h, 0, sizeof h);
  std::memcpy(h.magic, kBookMagic, 8);
  h.version = kFormatVersion;
  h.num_parts = num_parts;
  h.num_nodes = static_cast<std::int64_t>(owner.size());
  bin_writer w(dir / kBookName);
  w.put(&h, 1);
  w.put(owner.data(), owner.size());
  w.finish();
}

void write_partition_meta(const fs::path& dir, const partition_meta& m) {
  write_text_file(dir / kMetaName, partition_meta_text(m));
}

partition_book load_partition_book(const fs::path& dir) {
  const partition_meta m = load_partition_meta(dir);
  bin_reader r(dir / kBookName);
  const auto h = read_header<book_header>(r, kBookMagic, "partition book");
  if (h.num_parts != m.num_parts || h.num_nodes != m.num_nodes) {
    throw r.fail("header says " + std::to_string(h.num_nodes) + " nodes in " +
                 std::to_string(h.num_parts) + " parts, " + kMetaName + " says " +
                 std::to_string(m.num_nodes) + " in " + std::to_string(m.num_parts));
  }
  check_size(r, sizeof h + 4 * static_cast<unsigned __int128>(h.num_nodes) + 8);
  std::vector<std::int32_t> owner(static_cast<size_t>(h.num_nodes));
  r.get(owner.data(), owner.size());
  r.verify_checksum();
  if (owner_checksum(owner) != m.owner_checksum) {
    throw r.fail(std::string("does not match ") + kMetaName +
                 " (owner checksum differs: files from different runs?)");
  }
  for (size_t g = 0; g < owner.size(); ++g) {
    if (owner[g] < 0 || owner[g] >= m.num_parts) {
      throw r.fail("node " + std::to_string(g) + " has owner " + std::to_string(owner[g]) +
                   ", outside [0, " + std::to_string(m.num_parts) + ")");
    }
  }
  return partition_book(std::move(owner), m.num_parts);
}

graph_partition load_partition(const fs::path& dir, int part, part_loading how) {
  const partition_meta m = load_partition_meta(dir);
  if (part < 0 || part >= m.num_parts) {
    throw std::invalid_argument("load_partition: part " + std::to_string(part) + " outside [0, " +
                                std::to_string(m.num_parts) + ") of " + dir.string());
  }
  mapped_reader r(partition_file(dir, part));
  const auto h = read_header<part_header>(r, kPartMagic, "partition");
  if (h.part != part || h.num_parts != m.num_parts || h.num_global_nodes != m.num_nodes ||
      h.num_features != m.num_features || h.num_classes != m.num_classes ||
      h.owner_checksum != m.owner_checksum) {
    throw r.fail("header (part " + std::to_string(h.part) + " of " + std::to_string(h.num_parts) +
                 ", " + std::to_string(h.num_global_nodes) + " nodes) does not match " + kMetaName +
                 " (part " + std::to_string(part) + " of " + std::to_string(m.num_parts) + ", " +
                 std::to_string(m.num_nodes) + " nodes) or comes from a different partitioning");
  }
  if (h.num_owned < 0 || h.num_owned > h.num_global_nodes || h.num_edges < 0 ||
      h.num_edges > m.num_edges || h.num_halo < 0 || h.num_halo > h.num_global_nodes) {
    throw r.fail("corrupt sizes in the header");
  }
  for (std::int64_t s : {h.num_train, h.num_valid, h.num_test}) {
    if (s < 0 || s > h.num_owned) throw r.fail("corrupt split sizes in the header");
  }
  if (h.feature_nonzeros < -1 || h.feature_nonzeros > h.num_owned * h.num_features ||
      h.feature_nonzeros > std::numeric_limits<std::int32_t>::max())
    throw r.fail("corrupt count of feature non-zeros in the header");
  using u128 = unsigned __int128;
  const bool sparse = h.feature_nonzeros >= 0;
  const u128 feature_bytes = sparse ? 4 * u128(h.num_owned) + 8 * u128(h.feature_nonzeros)
                                    : 4 * u128(h.num_owned) * u128(h.num_features);
  const u128 expected = sizeof h + 4 * u128(h.num_owned) + 8 * (u128(h.num_owned) + 1) +
                        8 * u128(h.num_edges) + feature_bytes + 4 * u128(h.num_owned) +
                        4 * u128(h.num_train + h.num_valid + h.num_test) + 12 * u128(h.num_halo) +
                        8;
  check_size(r, expected);

  graph_partition p;
  p.part = h.part;
  p.num_parts = h.num_parts;
  p.num_global_nodes = static_cast<node_id>(h.num_global_nodes);
  p.num_classes = h.num_classes;
  const auto owned = static_cast<size_t>(h.num_owned), edges = static_cast<size_t>(h.num_edges);
  p.owned.resize(owned);
  p.indptr.resize(owned + 1);
  p.src_global.resize(edges);
  p.src_local.resize(edges);
  const bool map_rows = !sparse && how == part_loading::map_features;
  p.features.resize(sparse || map_rows ? 0 : static_cast<Eigen::Index>(owned),
                    static_cast<Eigen::Index>(h.num_features));
  p.labels.resize(owned);
  p.train.resize(static_cast<size_t>(h.num_train));
  p.valid.resize(static_cast<size_t>(h.num_valid));
  p.test.resize(static_cast<size_t>(h.num_test));
  p.halo.resize(static_cast<size_t>(h.num_halo));
  p.halo_owner.resize(static_cast<size_t>(h.num_halo));
  p.halo_degree.resize(static_cast<size_t>(h.num_halo));
  r.get(p.owned.data(), p.owned.size());
  r.get(p.indptr.data(), p.indptr.size());
  r.get(p.src_global.data(), p.src_global.size());
  r.get(p.src_local.data(), p.src_local.size());
  if (sparse) {
    std::vector<std::int32_t> counts(owned), columns(static_cast<size_t>(h.feature_nonzeros));
    std::vector<float> values(columns.size());
    r.get(counts.data(), counts.size());
    r.get(columns.data(), columns.size());
    r.get(values.data(), values.size());
    try {
      p.sparse_features = std::make_shared<const sparse_rows>(
          sparse_from_parts(static_cast<Eigen::Index>(h.num_features), counts, columns, values));
    } catch (const std::invalid_argument& e) {
      throw r.fail(std::string("feature rows: ") + e.what());
    }
  } else if (map_rows) {
    auto rows = std::make_shared<mapped_rows>();
    rows->file = r.mapping();
    rows->rows = h.num_owned;
    rows->cols = h.num_features;
    rows->data = r.view<float>(owned * static_cast<size_t>(h.num_features));
    p.mapped_features = std::move(rows);
  } else {
    r.get(p.features.data(), static_cast<size_t>(p.features.size()));
  }
  r.get(p.labels.data(), p.labels.size());
  r.get(p.train.data(), p.train.size());
  r.get(p.valid.data(), p.valid.size());
  r.get(p.test.data(), p.test.size());
  r.get(p.halo.data(), p.halo.size());
  r.get(p.halo_owner.data(), p.halo_owner.size());
  r.get(p.halo_degree.data(), p.halo_degree.size());
  r.verify_checksum();
  validate_partition(p, r);
  return p;
}

}  // namespace degnn
