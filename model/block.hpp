// One layer of a sampled message-flow graph (DGL's "block"): destination nodes first among the
// sources, local relabelling, CSR of the sampled edges. A mini-batch is a stack of blocks.
#pragma once

#include <cstdint>
#include <vector>

#include "model/tensor.hpp"

namespace degnn {

struct block {
  /// Global ids of the source nodes; the first num_dst() of them are the destination nodes, in
  /// the same order, so a destination's own previous-layer row is src row i.
  std::vector<node_id> src_nodes;
  std::int32_t num_dst_nodes = 0;
  /// CSR over destination rows: sampled in-neighbours of dst i are
  /// src_nodes[indices[indptr[i] .. indptr[i+1])] (local source indices).
  std::vector<std::int32_t> indptr{0};
  std::vector<std::int32_t> indices;
  /// Full-graph in-degree of every source node (GCN normalisation and unbiased rescaling).
  std::vector<std::int32_t> src_degree;
  /// Empty: GraphSAGE takes the plain mean over the sampled neighbours. Otherwise one weight per
  /// edge (CSR order) of a weighted neighbour sum: the importance weights of a stratified,
  /// locality-biased sample, so that the sum stays an unbiased estimate of the full mean.
  std::vector<float> edge_weight;

  std::int32_t num_src() const { return static_cast<std::int32_t>(src_nodes.size()); }
  std::int32_t num_dst() const { return num_dst_nodes; }
  std::int64_t num_edges() const { return static_cast<std::int64_t>(indices.size()); }
};

/// A mini-batch: blocks[0] consumes the input features, blocks.back() produces the seeds.
/// (Fanouts are written seed-first, so fanouts[0] built blocks.back().)
struct sampled_batch {
  std::vector<block> blocks;
  const std::vector<node_id>& seeds() const { return output_nodes; }
  const std::vector<node_id>& inputs() const { return blocks.front().src_nodes; }
  std::vector<node_id> output_nodes;
};

}  // namespace degnn
