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

struct dataset {
  std::string name;
  bool directed = false;      ///< false: the stored edges were symmetrized
  edge_offset raw_edges = 0;  ///< lines of edge.csv.gz
  csr_graph graph;            ///< in-edges, after symmetrizing / de-duplication
  Matrix features;            ///< (num_nodes, num_features); no rows when sparse
  /// The features as compressed rows instead of `features` (make_features_sparse, for wide
  /// mostly-zero inputs); null when they are dense.
  std::shared_ptr<const sparse_rows> sparse_features;
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
};

/// The cache file load_dataset uses for DIR in `folder` (empty: the default folder of
/// load_options::cache_dir); empty when no folder can be named.
std::filesystem::path default_cache_path(const std::filesystem::path& dir,
                                         std::filesystem::path folder = {});

/// Loads DIR in OGB raw layout. Throws data_error naming the file and line of any malformed input.
/// An optional DIR/dataset.ini may say `directed = true` (default false: edges are symmetrized).
dataset load_dataset(const std::filesystem::path& dir, const load_options& options = {});

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
