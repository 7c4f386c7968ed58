// A node-classification dataset in memory: graph, features, labels and split, plus the loader of
// the Open Graph Benchmark raw layout (gzip CSV, see data/README.md) and its binary cache.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "model/csr_graph.hpp"
#include "model/tensor.hpp"

namespace degnn {

struct sparse_rows;
struct mapped_rows;

struct dataset {
  std::string name;
  bool directed = false;      ///< false: the stored edges were symmetrized
  edge_offset raw_edges = 0;  ///< lines of edge.csv.gz
  csr_graph graph;            ///< in-edges, after symmetrizing / de-duplication
  Matrix features;            ///< (num_nodes, num_features); no rows when sparse
  /// The features as compressed rows instead of `features` (make_features_sparse, for wide
  /// mostly-zero inputs); null when they are dense.
  std::shared_ptr<const sparse_rows> sparse_features;
  /// The features left in their float32 .npy file (load_options::map_features), read where they
  /// lie; `features` then keeps the width and no rows. Null when they are in memory.
  std::shared_ptr<const mapped_rows> mapped_features;
  std::vector<std::int32_t> labels;  ///< num_nodes class ids in [0, num_classes)
  std::int32_t num_classes = 0;
  std::vector<node_id> train, valid, test;  ///< sorted, disjoint

  node_id num_nodes() const { return graph.num_nodes; }
  std::int32_t num_features() const { return static_cast<std::int32_t>(features.cols()); }
};

struct load_options {
  bool use_cache = true;  ///< read/write the binary cache (see cache_path)
  /// The cache file; empty = NAME-HASH.degnn-cache in cache_dir (HASH: of DIR's absolute path).
  std::filesystem::path cache_path;
  bool verbose = false;  ///< progress lines on stderr
  /// Where caches go; empty = $XDG_CACHE_HOME/degnn, else ~/.cache/degnn (never the dataset's
  /// own folder, which may be shared or read-only); no cache when neither can be named.
  std::filesystem::path cache_dir;
  /// Features as compressed rows in d.sparse_features (model/sparse_input.hpp); from the CSV
  /// files or the cache they are read so without ever holding the dense matrix.
  bool sparse_features = false;
  /// Array layouts: leave a float32 node_feat.npy where it lies (d.mapped_features; its values
  /// are still checked, a block at a time) instead of reading it into d.features. Other files,
  /// dtypes and layouts, and sparse_features, read the features as usual.
  bool map_features = false;
};

/// The cache file load_dataset uses for DIR in `folder` (empty: the default folder of
/// load_options::cache_dir); empty when no folder can be named.
std::filesystem::path default_cache_path(const std::filesystem::path& dir,
                                         std::filesystem::path folder = {});

/// Loads DIR in any layout (detect_layout); the array layouts are not cached (their arrays are
/// read at disk speed already). Throws data_error naming the file and line of any malformed input.
/// An optional DIR/dataset.ini may say `directed = true` (default false: edges are symmetrized).
dataset load_dataset(const std::filesystem::path& dir, const load_options& options = {});

/// How a dataset folder holds its data: OGB's CSV raw layout; NumPy arrays (edge_index.npy (2, E),
/// node_feat.npy (N, F), node_label.npy (N,) or (N, 1)); or OGB's binary raw layout
/// ([raw/]data.npz with edge_index and node_feat, [raw/]node-label.npz with node_label). Splits
/// are split/{train,valid,test} as .npy or .csv.gz, in split/ or in its one subfolder.
enum class dataset_layout { ogb_csv, numpy_arrays, ogb_binary };
/// The layout of DIR: binary when DIR/raw/data.npz or DIR/data.npz exists, arrays when
/// DIR/edge_index.npy does, CSV otherwise.
dataset_layout detect_layout(const std::filesystem::path& dir);

/// Reads DIR in one of the array layouts, streaming each array from its memory mapping (deflated
/// .npz entries inflated as they are read) and converting the arrays' own dtypes to ours. Labels
/// may be floats with NaN for nodes in no split. Throws data_error naming file and array.
dataset load_array_dataset(const std::filesystem::path& dir, bool verbose = false,
                           bool sparse_features = false, bool map_features = false);

/// Writes d in the NumPy layout (edge_index.npy int32 with each stored edge once, node_feat.npy
/// float32, node_label.npy, split/*.npy, dataset.ini with its name and direction): what
/// `degnn convert` makes, which load_dataset reads back as d. Dense or mapped features only.
void write_numpy_dataset(const dataset& d, const std::filesystem::path& dir);

/// Parses the CSV files only (no cache). Exposed for tests and benchmarks. sparse_features: the
/// feature rows go straight into d.sparse_features (no dense matrix is ever made).
dataset load_ogb_csv(const std::filesystem::path& dir, bool verbose = false,
                     bool sparse_features = false);

/// Binary cache of a loaded dataset: magic, version, a stamp of the source files, raw arrays;
/// the features as compressed rows when at most a quarter of them are non-zero (or d holds them
/// so), dense rows otherwise. Either load reads either layout.
void write_dataset_cache(const dataset& d, const std::filesystem::path& file, std::uint64_t stamp);
/// Returns false (and leaves d alone) when the file is absent or its stamp differs; throws
/// data_error when it is present but corrupt. sparse_features: read the features into
/// d.sparse_features (from dense rows a chunk at a time: the dense matrix is never whole).
bool read_dataset_cache(const std::filesystem::path& file, std::uint64_t stamp, dataset& d,
                        bool sparse_features = false);
/// Stamp of DIR's source files (sizes and modification times).
std::uint64_t dataset_source_stamp(const std::filesystem::path& dir);

}  // namespace degnn
