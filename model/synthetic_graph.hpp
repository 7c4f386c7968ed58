// Synthetic node-classification graphs for scale tests: a degree-corrected stochastic block model
// with planted classes, tunable homophily, power-law-ish degrees and class-correlated features.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "model/dataset.hpp"

namespace degnn {

struct synthetic_options {
  node_id num_nodes = 100'000;
  edge_offset num_edges = 1'000'000;  ///< undirected edges drawn (before removing repeats)
  std::int32_t num_classes = 10;
  std::int32_t num_features = 64;
  double homophily = 0.7;        ///< probability that an edge joins two nodes of one class
  double degree_exponent = 2.5;  ///< tail exponent of the Pareto degree propensities (> 2)
  double feature_signal = 0.35;  ///< class-centroid scale; noise per feature is N(0, 1)
  double train_fraction = 0.10, valid_fraction = 0.05, test_fraction = 0.10;
  std::uint64_t seed = 1;
};

/// Generates the graph in memory (symmetrized CSR). Deterministic for options.seed whatever the
/// thread count. Throws std::invalid_argument for nonsensical options.
dataset generate_synthetic(const synthetic_options& options);

/// Writes a dataset in the OGB raw layout (plus dataset.ini) so load_dataset can read it back.
/// An undirected dataset is written with each edge once (src < dst), as the bundled graphs are.
void write_ogb_dataset(const dataset& d, const std::filesystem::path& dir, bool verbose = false);

/// Progress of a long write: (phase, done, total).
using progress_fn = std::function<void(const char* phase, std::int64_t done, std::int64_t total)>;

struct synthetic_arrays_summary {
  edge_offset edges = 0;  ///< columns of edge_index.npy (the draws that are not self-loops)
};

/// Streams the graph generate_synthetic(options) makes to DIR as NumPy arrays (the numpy_arrays
/// layout of dataset.hpp: edge_index.npy int32 (2, E) with each drawn edge once, node_feat.npy
/// float32, node_label.npy int32, split/*.npy int32, dataset.ini last), never holding more than the
/// model's per-node tables (about 36 bytes a node) and a few blocks. load_dataset(DIR) gives
/// generate_synthetic(options) (the same CSR, features, labels and splits). Each file appears
/// whole (written as NAME.partial, then renamed). Throws std::runtime_error naming a file it
/// cannot write.
synthetic_arrays_summary write_synthetic_arrays(const synthetic_options& options,
                                                const std::filesystem::path& dir,
                                                const progress_fn& progress = {});

}  // namespace degnn
