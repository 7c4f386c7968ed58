// Work counters of the decentralized pipeline: what the local sub-graphs computed and pulled, so
// that the effect of CG fusion and of the history staleness shows in the metrics.
#pragma once

#include <cstdint>
#include <vector>

namespace degnn {

struct compute_counters {
  std::uint64_t nodes = 0;         ///< node rows computed by local layers
  std::uint64_t edges = 0;         ///< edges aggregated by local layers
  std::uint64_t kernel_calls = 0;  ///< layer applications (one per block)
  std::uint64_t graphs = 0;        ///< sub-graphs built
  std::uint64_t rows_pulled = 0;   ///< historical rows received from other shards

  static constexpr std::size_t kSize = 5;
  std::vector<std::uint64_t> to_list() const {
    return {nodes, edges, kernel_calls, graphs, rows_pulled};
  }
  static compute_counters from_list(const std::vector<std::uint64_t>& v) {
    return {v.at(0), v.at(1), v.at(2), v.at(3), v.at(4)};
  }
  compute_counters& operator+=(const compute_counters& o) {
    nodes += o.nodes, edges += o.edges, kernel_calls += o.kernel_calls, graphs += o.graphs,
        rows_pulled += o.rows_pulled;
    return *this;
  }
  compute_counters operator-(const compute_counters& o) const {
    return {nodes - o.nodes, edges - o.edges, kernel_calls - o.kernel_calls, graphs - o.graphs,
            rows_pulled - o.rows_pulled};
  }
  bool operator==(const compute_counters&) const = default;
};

}  // namespace degnn
