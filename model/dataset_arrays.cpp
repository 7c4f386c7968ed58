// Loader of the array layouts: NumPy files (edge_index.npy, node_feat.npy, node_label.npy) and
// OGB's binary raw layout (data.npz, node-label.npz, after ogb.io.read_binary_graph_raw), both
// with splits as .npy or CSV. Arrays are streamed from their mappings into the dataset's own
// arrays, converted on the way; memory is the dataset plus a few MiB.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>
#include <optional>

#include "model/array_stream.hpp"
#include "model/data_error.hpp"
#include "model/dataset.hpp"
#include "model/dataset_arrays.hpp"
#include "model/dataset_detail.hpp"
#include "model/sparse_input.hpp"

namespace degnn {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kChunk = std::size_t{1} << 20;  // elements converted at a time

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// Where one array lies: a .npy file, or an entry of an .npz archive.
struct array_place {
  fs::path file;
  std::string entry;  ///< empty: `file` is a .npy

  array_stream open() const {
    auto mapped = std::make_shared<const mapped_file>(file);
    return entry.empty() ? array_stream::of_npy(std::move(mapped))
                         : array_stream::of_npz(std::move(mapped), entry);
  }
};

struct array_files {
  array_place edges, features, labels;
  std::optional<array_place> node_count;  ///< OGB's num_nodes_list
};

array_files files_of(const fs::path& dir, dataset_layout layout) {
  if (layout == dataset_layout::numpy_arrays)
    return {{dir / "edge_index.npy", ""},
            {dir / "node_feat.npy", ""},
            {dir / "node_label.npy", ""},
            std::nullopt};
  const fs::path raw = fs::exists(dir / "raw" / "data.npz") ? dir / "raw" : dir;
  return {{raw / "data.npz", "edge_index"},
          {raw / "data.npz", "node_feat"},
          {raw / "node-label.npz", "node_label"},
          array_place{raw / "data.npz", "num_nodes_list"}};
}

void log(bool verbose, const char* fmt, auto... args) {
  if (verbose) std::fprintf(stderr, fmt, args...);
}

// The labels, one per node: integers, or floats holding integers with NaN for a node without a
// label (ogbn-papers100M labels 1.5M of its 111M nodes so). `unlabeled` gets those nodes.
std::vector<std::int32_t> read_labels(array_stream s, node_id n, std::vector<node_id>& unlabeled) {
  const auto& shape = s.shape();
  if (!(shape.size() == 1 || (shape.size() == 2 && shape[1] == 1)) || shape[0] != n)
    throw data_error::at(s.where(), 0,
                         "shape " + shape_text(shape) + ": expected one label per node (" +
                             std::to_string(n) + ",) or (" + std::to_string(n) + ", 1)");
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
  std::vector<double> buf;
  for (std::int64_t at = 0; at < n; at += static_cast<std::int64_t>(kChunk)) {
    buf.resize(static_cast<std::size_t>(std::min<std::int64_t>(kChunk, n - at)));
    s.read(buf.data(), buf.size());
    for (std::size_t i = 0; i < buf.size(); ++i) {
      const double y = buf[i];
      const auto v = static_cast<node_id>(at + static_cast<std::int64_t>(i));
      if (std::isnan(y)) {
        unlabeled.push_back(v);
        labels[static_cast<std::size_t>(v)] = 0;
      } else if (y != std::floor(y) || y < 0 || y > 1'000'000) {
        throw data_error::at(s.where(), 0,
                             "node " + std::to_string(v) + ": label " + std::to_string(y) +
                                 " is not a class id (0..num_classes-1)");
      } else {
        labels[static_cast<std::size_t>(v)] = static_cast<std::int32_t>(y);
      }
    }
  }
  s.finish();
  return labels;
}

// edge_index (2, E): row 0 the sources, row 1 the destinations, each id below n.
std::pair<std::vector<node_id>, std::vector<node_id>> read_edges(array_stream s, node_id n) {
  const auto& shape = s.shape();
  if (shape.size() != 2 || shape[0] != 2)
    throw data_error::at(s.where(), 0, "shape " + shape_text(shape) + ": expected (2, edges)");
  const std::int64_t m = shape[1];
  std::vector<node_id> src(static_cast<std::size_t>(m)), dst(static_cast<std::size_t>(m));
  std::vector<std::int64_t> buf;
  for (int row = 0; row < 2; ++row) {
    std::vector<node_id>& out = row == 0 ? src : dst;
    for (std::int64_t at = 0; at < m; at += static_cast<std::int64_t>(kChunk)) {
      buf.resize(static_cast<std::size_t>(std::min<std::int64_t>(kChunk, m - at)));
      s.read(buf.data(), buf.size());
      for (std::size_t i = 0; i < buf.size(); ++i) {
        if (buf[i] < 0 || buf[i] >= n)
          throw data_error::at(s.where(), 0,
                               "edge_index[" + std::to_string(row) + "][" +
                                   std::to_string(at + static_cast<std::int64_t>(i)) +
                                   "]: node id " + std::to_string(buf[i]) + " out of range [0, " +
                                   std::to_string(n) + ")");
        out[static_cast<std::size_t>(at) + i] = static_cast<node_id>(buf[i]);
      }
    }
  }
  s.finish();
  return {std::move(src), std::move(dst)};
}

// node_feat's width F, its shape checked to be (n, F).
std::int64_t feature_width(const array_stream& s, node_id n) {
  const auto& shape = s.shape();
  if (shape.size() != 2 || shape[0] != n || shape[1] < 1)
    throw data_error::at(
        s.where(), 0,
        "shape " + shape_text(shape) + ": expected (" + std::to_string(n) + ", features)");
  return shape[1];
}

// node_feat (n, F) into d.features (dense) or d.sparse_features, a block of rows at a time; a
// NaN or infinite value is refused, naming its row and column.
void read_features(array_stream s, node_id n, bool sparse, bool verbose, dataset& d) {
  const std::int64_t f = feature_width(s, n);
  const std::int64_t block = std::max<std::int64_t>(1, static_cast<std::int64_t>(kChunk) / f);
  std::vector<float> buf;
  std::vector<std::int32_t> counts, columns;
  std::vector<float> values;
  if (sparse) {
    d.features = Matrix(0, f);
    counts.reserve(static_cast<std::size_t>(n));
  } else {
    d.features.resize(n, f);
  }
  for (std::int64_t row = 0; row < n; row += block) {
    const std::int64_t rows = std::min(block, static_cast<std::int64_t>(n) - row);
    float* out = sparse ? (buf.resize(static_cast<std::size_t>(rows * f)), buf.data())
                        : d.features.data() + row * f;
    s.read(out, static_cast<std::size_t>(rows * f));
    for (std::int64_t i = 0; i < rows * f; ++i) {
      if (!std::isfinite(out[i]))
        throw data_error::at(s.where(), 0,
                             "row " + std::to_string(row + i / f) + ", column " +
                                 std::to_string(i % f) + ": not finite");
    }
    if (sparse) {
      for (std::int64_t r = 0; r < rows; ++r) {
        std::int32_t k = 0;
        for (std::int64_t j = 0; j < f; ++j) {
          if (out[r * f + j] == 0.0f) continue;
          columns.push_back(static_cast<std::int32_t>(j));
          values.push_back(out[r * f + j]);
          ++k;
        }
        counts.push_back(k);
      }
    }
    if (verbose && (row / block) % 256 == 255)
      std::fprintf(stderr, "\r  features: %lld / %d rows", static_cast<long long>(row + rows), n);
  }
  s.finish();
  if (verbose)
    std::fprintf(stderr, "\r  features: %d x %lld%s\n", n, static_cast<long long>(f),
                 sparse ? " (compressed rows)" : "                ");
  if (sparse) {
    if (values.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
      throw data_error::at(s.where(), 0, "more than 2^31 non-zero features");
    d.sparse_features =
        std::make_shared<const sparse_rows>(sparse_from_parts(f, counts, columns, values));
  }
}

// node_feat.npy (float32) left where it lies: d.mapped_features, checked a block at a time (a NaN
// or infinite value is refused as read_features refuses it) without keeping the pages read.
void map_feature_file(array_stream s, const fs::path& file, node_id n, bool verbose, dataset& d,
                      row_share share = {}) {
  const std::int64_t f = feature_width(s, n);
  const std::int64_t first = share.begin(n) * f, last = share.end(n) * f;
  s.skip(first);
  std::vector<float> buf(kChunk);
  for (std::int64_t at = first; at < last; at += static_cast<std::int64_t>(kChunk)) {
    const auto count = static_cast<std::size_t>(std::min<std::int64_t>(kChunk, last - at));
    s.read(buf.data(), count);
    for (std::size_t i = 0; i < count; ++i) {
      if (!std::isfinite(buf[i])) {
        const std::int64_t k = at + static_cast<std::int64_t>(i);
        throw data_error::at(
            s.where(), 0,
            "row " + std::to_string(k / f) + ", column " + std::to_string(k % f) + ": not finite");
      }
    }
  }
  if (last == n * f) s.finish();
  auto rows = std::make_shared<mapped_rows>();
  rows->file = std::make_shared<const mapped_file>(file);
  const std::string_view bytes = rows->file->bytes();
  const std::size_t data_at = read_npy_header(bytes, file.string()).data_at;
  if (data_at % alignof(float) != 0)
    throw data_error::at(file.string(), 0,
                         "its data starts at byte " + std::to_string(data_at) +
                             ", not a float boundary: save it again with numpy");
  rows->data = reinterpret_cast<const float*>(bytes.data() + data_at);
  rows->rows = n;
  rows->cols = f;
  d.features = Matrix(0, f);
  d.mapped_features = std::move(rows);
  if (verbose)
    std::fprintf(stderr, "  features: %d x %lld, mapped from %s\n", n, static_cast<long long>(f),
                 file.c_str());
}

// A split as .npy (a 1-D integer array) or CSV, in split/ or in its one subfolder (OGB's
// split/time/, split/species/ ...).
fs::path find_split(const fs::path& dir, const std::string& name) {
  std::vector<fs::path> folders{dir / "split"};
  std::error_code ec;
  std::vector<fs::path> subs;
  for (const auto& e : fs::directory_iterator(dir / "split", ec))
    if (e.is_directory()) subs.push_back(e.path());
  for (const fs::path& folder : folders)
    for (const char* ext : {".npy", ".csv.gz"})
      if (fs::exists(folder / (name + ext))) return folder / (name + ext);
  if (subs.size() > 1)
    throw data_error::at((dir / "split").string(), 0,
                         "no " + name + " split here, and more than one subfolder to look in");
  if (subs.size() == 1)
    for (const char* ext : {".npy", ".csv.gz"})
      if (fs::exists(subs[0] / (name + ext))) return subs[0] / (name + ext);
  throw data_error::at((dir / "split").string(), 0,
                       "no " + name + ".npy or " + name + ".csv.gz (nor in one subfolder)");
}

std::vector<node_id> read_split(const fs::path& file, node_id n) {
  if (file.extension() != ".npy") return dataset_detail::read_split(file, n);
  array_stream s = array_stream::of_npy(std::make_shared<const mapped_file>(file));
  if (s.shape().size() != 1 && !(s.shape().size() == 2 && s.shape()[1] == 1))
    throw data_error::at(file.string(), 0,
                         "shape " + shape_text(s.shape()) + ": expected a list of node ids");
  std::vector<std::int64_t> ids(static_cast<std::size_t>(s.elements()));
  s.read(ids.data(), ids.size());
  s.finish();
  std::vector<node_id> out(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= n)
      throw data_error::at(file.string(), 0,
                           "entry " + std::to_string(i) + ": unknown node " +
                               std::to_string(ids[i]) + " (the graph has nodes 0.." +
                               std::to_string(n - 1) + ")");
    out[i] = static_cast<node_id>(ids[i]);
  }
  std::sort(out.begin(), out.end());
  if (auto dup = std::adjacent_find(out.begin(), out.end()); dup != out.end())
    throw data_error::at(file.string(), 0, "node " + std::to_string(*dup) + " listed twice");
  return out;
}

// A dataset with DIR's name and direction (its dataset.ini), nothing else yet.
dataset named_dataset(const fs::path& dir) {
  const dataset_detail::dataset_meta meta = dataset_detail::read_meta(dir);
  dataset d;
  d.name = meta.name;
  d.directed = meta.directed;
  return d;
}

// The node count: node_feat's rows, which must fit our 32-bit ids.
node_id node_count(const array_stream& features) {
  if (features.shape().empty())
    throw data_error::at(features.where(), 0, "expected a (nodes, features) array");
  if (features.shape()[0] > std::numeric_limits<node_id>::max())
    throw data_error::at(features.where(), 0, "too many nodes for 32-bit ids");
  return static_cast<node_id>(features.shape()[0]);
}

// The three splits, checked: disjoint, and no node without a label.
void read_splits(const fs::path& dir, node_id n, const std::vector<node_id>& unlabeled,
                 const fs::path& label_file, dataset& d) {
  const fs::path train = find_split(dir, "train"), valid = find_split(dir, "valid"),
                 test = find_split(dir, "test");
  d.train = read_split(train, n);
  d.valid = read_split(valid, n);
  d.test = read_split(test, n);
  for (const auto& [split, file] :
       {std::pair{&d.train, train}, {&d.valid, valid}, {&d.test, test}}) {
    std::vector<node_id> both;
    std::set_intersection(split->begin(), split->end(), unlabeled.begin(), unlabeled.end(),
                          std::back_inserter(both));
    if (!both.empty())
      throw data_error::at(file.string(), 0,
                           "node " + std::to_string(both.front()) + " has no label (NaN in " +
                               label_file.string() + ")");
  }
  auto overlap = [&](const std::vector<node_id>& a, const std::vector<node_id>& b,
                     const fs::path& bfile) {
    std::vector<node_id> both;
    std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
    if (!both.empty())
      throw data_error::at(bfile.string(), 0,
                           "node " + std::to_string(both.front()) + " is in more than one split");
  };
  overlap(d.train, d.valid, valid);
  overlap(d.train, d.test, test);
  overlap(d.valid, d.test, test);
}

}  // namespace

dataset_layout detect_layout(const fs::path& dir) {
  if (fs::exists(dir / "raw" / "data.npz") || fs::exists(dir / "data.npz"))
    return dataset_layout::ogb_binary;
  if (fs::exists(dir / "edge_index.npy")) return dataset_layout::numpy_arrays;
  return dataset_layout::ogb_csv;
}

array_stream open_edge_index(const fs::path& dir) {
  const dataset_layout layout = detect_layout(dir);
  if (layout == dataset_layout::ogb_csv)
    throw data_error::at(dir.string(), 0,
                         "no edge_index.npy, data.npz or raw/data.npz: not an array layout");
  array_stream s = files_of(dir, layout).edges.open();
  if (s.shape().size() != 2 || s.shape()[0] != 2)
    throw data_error::at(s.where(), 0, "shape " + shape_text(s.shape()) + ": expected (2, edges)");
  return s;
}

dataset load_array_outline(const fs::path& dir, row_share share, bool verbose) {
  const dataset_layout layout = detect_layout(dir);
  if (layout != dataset_layout::numpy_arrays)
    throw data_error::at(dir.string(), 0,
                         "expected the NumPy layout (edge_index.npy, node_feat.npy, "
                         "node_label.npy), which is read where it lies: degnn convert --data " +
                             dir.string() + " --out NEW_DIR writes it");
  const array_files files = files_of(dir, layout);
  dataset d = named_dataset(dir);
  array_stream features = files.features.open();
  if (features.dtype() != array_dtype::f32 || features.shape().size() != 2)
    throw data_error::at(features.where(), 0,
                         "expected a float32 (nodes, features) array to map (convert it with "
                         "numpy: np.save(f, x.astype(np.float32)))");
  const node_id n = node_count(features);
  std::vector<node_id> unlabeled;
  d.labels = read_labels(files.labels.open(), n, unlabeled);
  d.num_classes = d.labels.empty() ? 0 : *std::max_element(d.labels.begin(), d.labels.end()) + 1;
  d.graph.num_nodes = n;
  d.graph.indptr.assign(static_cast<std::size_t>(n) + 1, 0);
  map_feature_file(std::move(features), files.features.file, n, verbose, d, share);
  read_splits(dir, n, unlabeled, files.labels.file, d);
  return d;
}

dataset load_array_dataset(const fs::path& dir, bool verbose, bool sparse_features,
                           bool map_features) {
  const auto t0 = std::chrono::steady_clock::now();
  const dataset_layout layout = detect_layout(dir);
  if (layout == dataset_layout::ogb_csv)
    throw data_error::at(dir.string(), 0,
                         "no edge_index.npy, data.npz or raw/data.npz: not an array layout");
  const array_files files = files_of(dir, layout);
  dataset d = named_dataset(dir);

  // The node count is node_feat's rows (checked against OGB's num_nodes_list when present).
  array_stream features = files.features.open();
  const node_id n = node_count(features);
  if (files.node_count) {
    array_stream counts = files.node_count->open();
    std::vector<std::int64_t> c(static_cast<std::size_t>(counts.elements()));
    counts.read(c.data(), c.size());
    counts.finish();
    if (c.size() != 1 || c[0] != n)
      throw data_error::at(counts.where(), 0,
                           "expected one graph of " + std::to_string(n) +
                               " nodes (node_feat's rows); node prediction reads one graph");
  }

  std::vector<node_id> unlabeled;
  d.labels = read_labels(files.labels.open(), n, unlabeled);
  d.num_classes = d.labels.empty() ? 0 : *std::max_element(d.labels.begin(), d.labels.end()) + 1;
  {
    auto [src, dst] = read_edges(files.edges.open(), n);
    d.raw_edges = static_cast<edge_offset>(src.size());
    log(verbose, "  edges: %lld from %s\n", static_cast<long long>(d.raw_edges),
        files.edges.file.c_str());
    d.graph = build_in_csr(
        n, src, dst, {.symmetrize = !d.directed, .deduplicate = true, .drop_self_loops = false});
  }  // the edge lists go before the features come
  if (map_features && !sparse_features && files.features.entry.empty() &&
      features.dtype() == array_dtype::f32) {
    map_feature_file(std::move(features), files.features.file, n, verbose, d);
  } else {
    read_features(std::move(features), n, sparse_features, verbose, d);
  }

  read_splits(dir, n, unlabeled, files.labels.file, d);
  if (!unlabeled.empty())
    log(verbose, "  %zu nodes have no label (NaN): in no split, never read\n", unlabeled.size());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  log(verbose, "  read %s in %.2f s\n", dir.string().c_str(), secs);
  return d;
}

}  // namespace degnn
