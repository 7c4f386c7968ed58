// Readers of an array dataset in slices, for processes that each handle a share of it (the ranks
// of a distributed partitioning): its edge array as a stream, and everything but the edges.
#pragma once

#include <filesystem>

#include "model/array_stream.hpp"
#include "model/dataset.hpp"

namespace degnn {

/// Share `index` of `count` equal slices of [0, total): rank r of R reads begin(n) to end(n).
struct row_share {
  int index = 0, count = 1;
  std::int64_t begin(std::int64_t total) const { return total * index / count; }
  std::int64_t end(std::int64_t total) const { return total * (index + 1) / count; }
};

/// DIR's edge_index as a stream (any array layout), its shape checked to be (2, edges).
array_stream open_edge_index(const std::filesystem::path& dir);

/// DIR in the NumPy layout without its edges: name, labels, splits (checked as
/// load_array_dataset checks them), a graph of the right node count and no edges, and the
/// features mapped (a float32 node_feat.npy is required; only rows of `share` are checked for
/// NaN and infinity, so the R readers of one dataset check each row once).
dataset load_array_outline(const std::filesystem::path& dir, row_share share = {},
                           bool verbose = false);

}  // namespace degnn
