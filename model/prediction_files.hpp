// What `degnn infer` writes: for the chosen nodes, NumPy arrays of their dataset ids, predicted
// classes, class probabilities, logits and (optionally) one hidden layer's embeddings, plus a JSON
// manifest. Everything is written into a staging folder and moved in whole, manifest last.
#pragma once

#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "model/csr_graph.hpp"
#include "model/tensor.hpp"

namespace degnn {

/// What write_predictions writes, where it already is (nothing is copied).
struct prediction_outputs {
  std::span<const node_id> nodes;      ///< dataset node ids, one row each
  const Matrix* logits = nullptr;      ///< (nodes, classes)
  const Matrix* embeddings = nullptr;  ///< (nodes, hidden), or null: none
  std::int32_t embeddings_layer = 0;   ///< 1-based layer whose output `embeddings` is
};

/// Rows `nodes` of `all` (a row per node id), in that order.
Matrix rows_of(const Matrix& all, std::span<const node_id> nodes);

/// Writes OUT/node_ids.npy (int64), predictions.npy (int32), probabilities.npy and logits.npy
/// (float32, (n, classes)), embeddings.npy (float32, when asked) and manifest.json (their shapes
/// and dtypes plus `manifest` fields, as strings). OUT is created if missing; files of an earlier
/// run are replaced. On any failure nothing of this run is left and data_error names the file.
/// Returns the files written.
std::vector<std::filesystem::path> write_predictions(
    const std::filesystem::path& out, const prediction_outputs& p,
    const std::map<std::string, std::string>& manifest);

/// Node ids from a file: a .npy array of int32/int64, or text with one id per line (# comments
/// and blank lines skipped). Each must lie in [0, num_nodes); data_error names file and line.
std::vector<node_id> read_node_list(const std::filesystem::path& file, node_id num_nodes);

}  // namespace degnn
