// Parallel counting-sort construction of in-edge CSR and degree statistics.
#include "model/csr_graph.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace degnn {

csr_graph build_in_csr(node_id num_nodes, std::span<const node_id> src,
                       std::span<const node_id> dst, const csr_build_options& options) {
  if (src.size() != dst.size())
    throw std::invalid_argument("build_in_csr: src and dst differ in length");
  if (num_nodes < 0) throw std::invalid_argument("build_in_csr: negative node count");
  const auto m = static_cast<std::int64_t>(src.size());
  for (std::int64_t i = 0; i < m; ++i) {
    if (src[i] < 0 || src[i] >= num_nodes || dst[i] < 0 || dst[i] >= num_nodes) {
      throw std::out_of_range("build_in_csr: edge " + std::to_string(i) + " (" +
                              std::to_string(src[i]) + " -> " + std::to_string(dst[i]) +
                              ") names a node outside [0, " + std::to_string(num_nodes) + ")");
    }
  }
  auto keep = [&](std::int64_t i) { return !(options.drop_self_loops && src[i] == dst[i]); };

  // Count in-degrees (with reverse edges when symmetrizing), then place sources by cursor.
  std::vector<edge_offset> count(static_cast<size_t>(num_nodes) + 1, 0);
  for (std::int64_t i = 0; i < m; ++i) {
    if (!keep(i)) continue;
    ++count[dst[i] + 1];
    if (options.symmetrize && src[i] != dst[i]) ++count[src[i] + 1];
  }
  for (node_id v = 0; v < num_nodes; ++v)
    count[v + 1] += count[v];
  std::vector<node_id> placed(static_cast<size_t>(count[num_nodes]));
  {
    std::vector<edge_offset> cursor(count.begin(), count.end() - 1);
    for (std::int64_t i = 0; i < m; ++i) {
      if (!keep(i)) continue;
      placed[cursor[dst[i]]++] = src[i];
      if (options.symmetrize && src[i] != dst[i]) placed[cursor[src[i]]++] = dst[i];
    }
  }

  // Sort every row and drop repeats; rows are independent, so this parallelises cleanly.
  std::vector<edge_offset> kept(static_cast<size_t>(num_nodes) + 1, 0);
#pragma omp parallel for schedule(dynamic, 4096)
  for (node_id v = 0; v < num_nodes; ++v) {
    auto first = placed.begin() + count[v];
    auto last = placed.begin() + count[v + 1];
    std::sort(first, last);
    if (options.deduplicate) last = std::unique(first, last);
    kept[v + 1] = last - first;
  }
  csr_graph g;
  g.num_nodes = num_nodes;
  g.indptr.assign(static_cast<size_t>(num_nodes) + 1, 0);
  for (node_id v = 0; v < num_nodes; ++v)
    g.indptr[v + 1] = g.indptr[v] + kept[v + 1];
  if (g.indptr[num_nodes] == count[num_nodes]) {
    g.indices = std::move(placed);
  } else {
    g.indices.resize(static_cast<size_t>(g.indptr[num_nodes]));
#pragma omp parallel for schedule(dynamic, 4096)
    for (node_id v = 0; v < num_nodes; ++v) {
      std::copy_n(placed.begin() + count[v], kept[v + 1], g.indices.begin() + g.indptr[v]);
    }
  }
  return g;
}

degree_stats in_degree_stats(const csr_graph& g) {
  degree_stats s;
  if (g.num_nodes == 0) return s;
  std::vector<edge_offset> deg(static_cast<size_t>(g.num_nodes));
  for (node_id v = 0; v < g.num_nodes; ++v) {
    deg[v] = g.in_degree(v);
    if (deg[v] == 0) ++s.isolated;
  }
  s.mean = static_cast<double>(g.num_edges()) / g.num_nodes;
  std::sort(deg.begin(), deg.end());
  s.min = deg.front();
  s.max = deg.back();
  const auto n = deg.size();
  s.median = n % 2 ? static_cast<double>(deg[n / 2])
                   : 0.5 * static_cast<double>(deg[n / 2 - 1] + deg[n / 2]);
  s.p99 =
      static_cast<double>(deg[std::min(n - 1, static_cast<size_t>(0.99 * static_cast<double>(n)))]);
  return s;
}

}  // namespace degnn
