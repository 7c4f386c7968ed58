// Sequential relabel pass: one dense-array probe per sampled edge.
#include "model/block_builder.hpp"

#include <stdexcept>
#include <string>

namespace degnn {

block assemble_block(std::span<const node_id> dst, std::span<const std::int32_t> counts,
                     std::span<const node_id> picks, std::vector<std::int32_t>& scratch) {
  const auto num_dst = static_cast<std::int64_t>(dst.size());
  if (static_cast<std::int64_t>(counts.size()) != num_dst) {
    throw std::invalid_argument("assemble_block: one count per destination expected");
  }
  block b;
  b.num_dst_nodes = static_cast<std::int32_t>(num_dst);
  b.src_nodes.assign(dst.begin(), dst.end());
  for (std::int64_t i = 0; i < num_dst; ++i) {
    if (scratch[dst[i]] != -1) {
      for (std::int64_t j = 0; j < i; ++j)
        scratch[dst[j]] = -1;
      throw std::invalid_argument("assemble_block: node " + std::to_string(dst[i]) +
                                  " appears twice among the destinations");
    }
    scratch[dst[i]] = static_cast<std::int32_t>(i);
  }
  b.indptr.resize(static_cast<size_t>(num_dst) + 1);
  b.indptr[0] = 0;
  for (std::int64_t i = 0; i < num_dst; ++i)
    b.indptr[i + 1] = b.indptr[i] + counts[i];
  if (static_cast<size_t>(b.indptr[num_dst]) != picks.size()) {
    for (node_id u : b.src_nodes)
      scratch[u] = -1;
    throw std::invalid_argument("assemble_block: counts do not add up to the picks");
  }
  b.indices.resize(picks.size());
  for (size_t e = 0; e < picks.size(); ++e) {
    const node_id u = picks[e];
    std::int32_t l = scratch[u];
    if (l < 0) {
      l = static_cast<std::int32_t>(b.src_nodes.size());
      scratch[u] = l;
      b.src_nodes.push_back(u);
    }
    b.indices[e] = l;
  }
  for (node_id u : b.src_nodes)
    scratch[u] = -1;
  return b;
}

}  // namespace degnn
