// The planted model behind the synthetic graphs (model/synthetic_graph.hpp): classes, degree
// propensities and the draws of edges, feature rows and splits, each from engines seeded by
// (seed, purpose, chunk or node), so any piece can be drawn alone, in any order, on any thread.
// generate_synthetic assembles the pieces in memory; write_synthetic_arrays streams them to disk.
#pragma once

#include <memory>
#include <vector>

#include "model/synthetic_graph.hpp"

namespace degnn {

class synthetic_model {
 public:
  /// Edges are drawn in chunks of this many.
  static constexpr edge_offset kEdgeChunk = 1 << 20;

  /// Draws the classes and degree propensities (about 36 bytes a node). Throws
  /// std::invalid_argument for nonsensical options.
  explicit synthetic_model(const synthetic_options& options);
  ~synthetic_model();

  const synthetic_options& options() const { return o_; }
  const std::vector<std::int32_t>& labels() const { return labels_; }
  edge_offset edge_chunks() const { return (o_.num_edges + kEdgeChunk - 1) / kEdgeChunk; }
  /// The draws of edge chunk `chunk` (undirected, unsorted, repeats and self-loops included) into
  /// src[i] -> dst[i] for i below the chunk's size; both are resized to it.
  void draw_edges(edge_offset chunk, std::vector<node_id>& src, std::vector<node_id>& dst) const;
  /// Node v's feature row (num_features values).
  void feature_row(node_id v, float* out) const;
  /// The train / valid / test nodes, each sorted.
  void draw_splits(std::vector<node_id>& train, std::vector<node_id>& valid,
                   std::vector<node_id>& test) const;

 private:
  struct tables;
  synthetic_options o_;
  std::vector<std::int32_t> labels_;
  std::unique_ptr<tables> t_;
};

}  // namespace degnn
