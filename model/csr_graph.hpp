// Compressed sparse rows of in-edges (src -> dst): row v lists the sources of v's in-edges,
// sorted ascending. Messages flow along in-edges, so this is the layout the sampler walks.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/tensor.hpp"

namespace degnn {

struct csr_graph {
  node_id num_nodes = 0;
  std::vector<edge_offset> indptr{0};  ///< size num_nodes + 1
  std::vector<node_id> indices;        ///< source ids; row v is indices[indptr[v], indptr[v+1])

  edge_offset num_edges() const { return indptr.back(); }
  edge_offset in_degree(node_id v) const { return indptr[v + 1] - indptr[v]; }
  std::span<const node_id> in_neighbors(node_id v) const {
    return {indices.data() + indptr[v], static_cast<size_t>(in_degree(v))};
  }
};

struct csr_build_options {
  bool symmetrize = true;   ///< add dst -> src for every src -> dst
  bool deduplicate = true;  ///< keep one copy of repeated edges
  bool drop_self_loops = true;
};

/// Builds in-edge CSR from an edge list (edge i is src[i] -> dst[i]); ids must be < num_nodes.
/// Parallel counting sort: O(N + E), rows sorted ascending.
csr_graph build_in_csr(node_id num_nodes, std::span<const node_id> src,
                       std::span<const node_id> dst, const csr_build_options& options = {});

struct degree_stats {
  edge_offset min = 0, max = 0;
  double mean = 0, median = 0, p99 = 0;
  node_id isolated = 0;  ///< nodes with no in-edge
};
degree_stats in_degree_stats(const csr_graph& g);

}  // namespace degnn
