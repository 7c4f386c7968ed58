// Binary cache of a loaded dataset, so a second load of a large graph skips CSV parsing: a fixed
// header (magic, version, source stamp, sizes), then the raw arrays, then a payload checksum.
// Version 2 keeps mostly-zero features as compressed rows (a bag-of-words graph's cache was a
// gigabyte of dense zeros).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>

#include "model/data_error.hpp"
#include "model/dataset.hpp"
#include "model/durable_file.hpp"
#include "model/hashing.hpp"
#include "model/sparse_input.hpp"

namespace degnn {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'D', 'E', 'G', 'N', 'N', 'D', 'S', '1'};
constexpr std::uint32_t kVersion = 2;
/// Features at most this dense are cached as compressed rows (8 bytes a non-zero against 4 an
/// entry: a quarter keeps the file at most half the dense size).
constexpr double kCompressedUpTo = 0.25;

struct cache_header {
  char magic[8];
  std::uint32_t version;
  std::uint32_t directed;
  std::uint64_t stamp;
  std::int64_t num_nodes, num_edges, raw_edges, num_features, num_classes;
  std::int64_t num_train, num_valid, num_test, name_length;
  std::int64_t feature_nonzeros;  ///< -1: dense rows; else compressed rows with this many
};

template <class T>
void write_array(durable_file& out, checksum64& sum, const T* data, size_t count) {
  out.write(data, count * sizeof(T));
  sum.add(data, count * sizeof(T));
}

template <class T>
void read_array(std::ifstream& in, checksum64& sum, T* data, size_t count, const fs::path& file) {
  in.read(reinterpret_cast<char*>(data), static_cast<std::streamsize>(count * sizeof(T)));
  if (static_cast<size_t>(in.gcount()) != count * sizeof(T)) {
    throw data_error::at(file.string(), 0, "truncated dataset cache (delete it to rebuild)");
  }
  sum.add(data, count * sizeof(T));
}

// The cached dense feature rows read straight into compressed rows, a chunk of rows at a time,
// so the dense matrix is never whole in memory.
void read_sparse_features(std::ifstream& in, checksum64& sum, std::int64_t rows, std::int64_t cols,
                          const fs::path& file, dataset& d) {
  // About 16 MiB of rows at a time, an even number of them: a whole chunk is then a multiple of
  // 8 bytes, so the checksum sees the same words as one read of the whole array.
  const std::int64_t chunk_rows =
      std::max<std::int64_t>(2, (std::int64_t{1} << 22) / std::max<std::int64_t>(cols, 1)) & ~1;
  std::vector<std::int32_t> outer{0}, inner;
  std::vector<float> values;
  Matrix chunk;
  for (std::int64_t first = 0; first < rows; first += chunk_rows) {
    chunk.resize(std::min(chunk_rows, rows - first), cols);
    read_array(in, sum, chunk.data(), static_cast<size_t>(chunk.size()), file);
    for (Eigen::Index r = 0; r < chunk.rows(); ++r) {
      for (Eigen::Index c = 0; c < cols; ++c) {
        if (const float v = chunk(r, c); v != 0.0f) {
          inner.push_back(static_cast<std::int32_t>(c));
          values.push_back(v);
        }
      }
      if (inner.size() > static_cast<size_t>(INT32_MAX))
        throw data_error::at(file.string(), 0, "more than 2^31 non-zero features");
      outer.push_back(static_cast<std::int32_t>(inner.size()));
    }
  }
  auto s = std::make_shared<sparse_rows>();
  s->m = Eigen::Map<const decltype(s->m)>(rows, cols, static_cast<Eigen::Index>(values.size()),
                                          outer.data(), inner.data(), values.data());
  d.sparse_features = std::move(s);
  d.features = Matrix(0, cols);
}

}  // namespace

fs::path default_cache_path(const fs::path& dir, fs::path folder) {
  if (folder.empty()) {
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    const char* home = std::getenv("HOME");
    if (xdg && *xdg)
      folder = fs::path(xdg) / "degnn";
    else if (home && *home)
      folder = fs::path(home) / ".cache" / "degnn";
    else
      return {};
  }
  // One cache per dataset folder, named after its path.
  const std::string abs = fs::absolute(dir).lexically_normal().string();
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : abs)
    h = (h ^ c) * 1099511628211ull;
  char name[64];
  std::snprintf(name, sizeof name, "-%016llx.degnn-cache", static_cast<unsigned long long>(h));
  return folder / (fs::absolute(dir).lexically_normal().filename().string() + name);
}

std::uint64_t dataset_source_stamp(const fs::path& dir) {
  std::uint64_t h = 1469598103934665603ull ^ kVersion;
  auto mix = [&](std::uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  for (const char* name : {"edge.csv.gz", "node-feat.csv.gz", "node-label.csv.gz",
                           "num-node-list.csv.gz", "num-edge-list.csv.gz", "split/train.csv.gz",
                           "split/valid.csv.gz", "split/test.csv.gz", "dataset.ini"}) {
    std::error_code ec;
    const fs::path p = dir / name;
    const auto size = fs::file_size(p, ec);
    mix(ec ? 0xffffffffull : size);
    const auto time = fs::last_write_time(p, ec);
    mix(ec ? 0 : static_cast<std::uint64_t>(time.time_since_epoch().count()));
    for (unsigned char c : std::string(name))
      mix(c);
  }
  return h;
}

void write_dataset_cache(const dataset& d, const fs::path& file, std::uint64_t stamp) {
  if (file.has_parent_path()) fs::create_directories(file.parent_path());
  // Compressed rows come from d, or from its dense rows when few enough are non-zero.
  std::shared_ptr<const sparse_rows> compressed = d.sparse_features;
  if (!compressed && density(d.features) <= kCompressedUpTo)
    compressed = std::make_shared<const sparse_rows>(to_sparse(d.features));
  {
    durable_file out(file);  // a reader never sees a half-written cache
    cache_header h{};
    std::memcpy(h.magic, kMagic, 8);
    h.version = kVersion;
    h.directed = d.directed ? 1 : 0;
    h.stamp = stamp;
    h.num_nodes = d.graph.num_nodes;
    h.num_edges = d.graph.num_edges();
    h.raw_edges = d.raw_edges;
    h.num_features = d.features.cols();
    h.num_classes = d.num_classes;
    h.num_train = static_cast<std::int64_t>(d.train.size());
    h.num_valid = static_cast<std::int64_t>(d.valid.size());
    h.num_test = static_cast<std::int64_t>(d.test.size());
    h.name_length = static_cast<std::int64_t>(d.name.size());
    h.feature_nonzeros = compressed ? compressed->m.nonZeros() : -1;
    checksum64 sum;
    write_array(out, sum, &h, 1);
    write_array(out, sum, d.name.data(), d.name.size());
    write_array(out, sum, d.graph.indptr.data(), d.graph.indptr.size());
    write_array(out, sum, d.graph.indices.data(), d.graph.indices.size());
    if (compressed) {
      sparse_rows rows = *compressed;  // compressed storage: each array in one piece
      rows.m.makeCompressed();
      const auto counts = row_counts(rows);
      const auto nnz = static_cast<size_t>(rows.m.nonZeros());
      write_array(out, sum, counts.data(), counts.size());
      write_array(out, sum, rows.m.innerIndexPtr(), nnz);
      write_array(out, sum, rows.m.valuePtr(), nnz);
    } else {
      write_array(out, sum, d.features.data(), static_cast<size_t>(d.features.size()));
    }
    write_array(out, sum, d.labels.data(), d.labels.size());
    write_array(out, sum, d.train.data(), d.train.size());
    write_array(out, sum, d.valid.data(), d.valid.size());
    write_array(out, sum, d.test.data(), d.test.size());
    out.write(&sum.h, sizeof sum.h);
    out.commit();
  }
}

bool read_dataset_cache(const fs::path& file, std::uint64_t stamp, dataset& result,
                        bool sparse_features) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return false;
  cache_header h{};
  checksum64 sum;
  in.read(reinterpret_cast<char*>(&h), sizeof h);
  if (in.gcount() != sizeof h || std::memcmp(h.magic, kMagic, 8) != 0) {
    throw data_error::at(file.string(), 0,
                         "not a DEGNN dataset cache (bad magic); delete it to rebuild");
  }
  if (h.version != kVersion || h.stamp != stamp) return false;  // stale: caller rebuilds it
  sum.add(&h, sizeof h);
  const std::int64_t limit = std::int64_t{1} << 40;
  for (std::int64_t v : {h.num_nodes, h.num_edges, h.raw_edges, h.num_features, h.num_classes,
                         h.num_train, h.num_valid, h.num_test, h.name_length}) {
    if (v < 0 || v > limit) throw data_error::at(file.string(), 0, "corrupt dataset cache header");
  }
  const bool compressed = h.feature_nonzeros >= 0;
  if (h.feature_nonzeros < -1 || h.feature_nonzeros > h.num_nodes * h.num_features ||
      h.feature_nonzeros > std::numeric_limits<std::int32_t>::max())
    throw data_error::at(file.string(), 0, "corrupt dataset cache header (feature non-zeros)");
  std::error_code ec;
  const std::int64_t feature_bytes =
      compressed ? 4 * h.num_nodes + 8 * h.feature_nonzeros : 4 * h.num_nodes * h.num_features;
  const auto expected = sizeof h + h.name_length + 8 * (h.num_nodes + 1) + 4 * h.num_edges +
                        feature_bytes + 4 * h.num_nodes +
                        4 * (h.num_train + h.num_valid + h.num_test) + 8;
  if (fs::file_size(file, ec) != static_cast<std::uintmax_t>(expected)) {
    throw data_error::at(file.string(), 0,
                         "dataset cache has the wrong size (truncated?); delete it to rebuild");
  }
  dataset d;
  d.directed = h.directed != 0;
  d.raw_edges = h.raw_edges;
  d.num_classes = static_cast<std::int32_t>(h.num_classes);
  d.name.resize(static_cast<size_t>(h.name_length));
  read_array(in, sum, d.name.data(), d.name.size(), file);
  d.graph.num_nodes = static_cast<node_id>(h.num_nodes);
  d.graph.indptr.resize(static_cast<size_t>(h.num_nodes + 1));
  read_array(in, sum, d.graph.indptr.data(), d.graph.indptr.size(), file);
  d.graph.indices.resize(static_cast<size_t>(h.num_edges));
  read_array(in, sum, d.graph.indices.data(), d.graph.indices.size(), file);
  if (compressed) {
    std::vector<std::int32_t> counts(static_cast<size_t>(h.num_nodes)),
        columns(static_cast<size_t>(h.feature_nonzeros));
    std::vector<float> values(columns.size());
    read_array(in, sum, counts.data(), counts.size(), file);
    read_array(in, sum, columns.data(), columns.size(), file);
    read_array(in, sum, values.data(), values.size(), file);
    std::shared_ptr<const sparse_rows> rows;
    try {
      rows = std::make_shared<const sparse_rows>(
          sparse_from_parts(h.num_features, counts, columns, values));
    } catch (const std::invalid_argument& e) {
      throw data_error::at(file.string(), 0,
                           std::string("corrupt dataset cache (") + e.what() + ")");
    }
    d.sparse_features = std::move(rows);  // made dense below if asked, once the checksum holds
    d.features = Matrix(0, h.num_features);
  } else if (sparse_features) {
    read_sparse_features(in, sum, h.num_nodes, h.num_features, file, d);
  } else {
    d.features.resize(h.num_nodes, h.num_features);
    read_array(in, sum, d.features.data(), static_cast<size_t>(d.features.size()), file);
  }
  d.labels.resize(static_cast<size_t>(h.num_nodes));
  read_array(in, sum, d.labels.data(), d.labels.size(), file);
  for (auto [vec, count] :
       {std::pair{&d.train, h.num_train}, {&d.valid, h.num_valid}, {&d.test, h.num_test}}) {
    vec->resize(static_cast<size_t>(count));
    read_array(in, sum, vec->data(), vec->size(), file);
  }
  std::uint64_t stored = 0;
  in.read(reinterpret_cast<char*>(&stored), sizeof stored);
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
  if (stored != sum.h)
    throw data_error::at(file.string(), 0, "dataset cache checksum mismatch; delete it to rebuild");
#endif
  if (d.graph.indptr.front() != 0 || d.graph.indptr.back() != h.num_edges) {
    throw data_error::at(file.string(), 0, "corrupt dataset cache (CSR offsets)");
  }
  if (compressed && !sparse_features) {
    // Only after the checksum: the dense size is nodes x width, and no byte of a compressed
    // cache backs the width (a damaged one asked 16 GiB; found by fuzz_files).
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
    // The fuzz build compares no checksum, so what it guards is bounded here instead.
    if (h.num_features > 0 && h.num_nodes > (std::int64_t{1} << 28) / h.num_features)
      throw data_error::at(file.string(), 0, "fuzz build: dense features over 2^28 values");
#endif
    d.features = to_dense(*d.sparse_features);
    d.sparse_features.reset();
  }
  result = std::move(d);
  return true;
}

dataset load_dataset(const fs::path& dir, const load_options& options) {
  if (!fs::is_directory(dir)) throw data_error::at(dir.string(), 0, "dataset directory not found");
  if (detect_layout(dir) != dataset_layout::ogb_csv)
    return load_array_dataset(dir, options.verbose, options.sparse_features, options.map_features);
  const fs::path cache = !options.use_cache           ? fs::path{}
                         : options.cache_path.empty() ? default_cache_path(dir, options.cache_dir)
                                                      : options.cache_path;
  const std::uint64_t stamp = dataset_source_stamp(dir);
  if (!cache.empty()) {
    dataset d;
    if (read_dataset_cache(cache, stamp, d, options.sparse_features)) {
      if (options.verbose)
        std::fprintf(stderr, "  loaded %s from cache %s\n", dir.c_str(), cache.c_str());
      return d;
    }
  }
  dataset d = load_ogb_csv(dir, options.verbose, options.sparse_features);
  if (!cache.empty()) {
    try {
      write_dataset_cache(d, cache, stamp);
      // Announced: a cache can be large (a copy of every feature, dense when most are non-zero).
      std::fprintf(stderr, "dataset cache for %s written to %s (%.1f MB; --cache-dir moves it)\n",
                   dir.c_str(), cache.c_str(), static_cast<double>(fs::file_size(cache)) / 1e6);
    } catch (const std::exception& e) {  // a cache we cannot write only costs time next load
      if (options.verbose) std::fprintf(stderr, "  note: no dataset cache written: %s\n", e.what());
    }
  }
  return d;
}

}  // namespace degnn
