// halo_rank: the expected reads of a partition's halo rows, and the rows a budget keeps.
#include "model/halo_rank.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "model/sparse_input.hpp"

namespace degnn {

std::vector<std::vector<double>> halo_read_scores(const graph_partition& part,
                                                  std::span<const int> fanouts, int top_level) {
  const int num_levels = static_cast<int>(fanouts.size());
  if (top_level < 0 || top_level > num_levels)
    throw std::invalid_argument("halo_read_scores: top level " + std::to_string(top_level) +
                                " outside [0, " + std::to_string(num_levels) + "]");
  const auto n = static_cast<std::size_t>(part.num_owned());
  std::vector<std::vector<double>> reads(static_cast<std::size_t>(top_level),
                                         std::vector<double>(part.halo.size(), 0.0));
  // reach[l]: expected times owned node l is a destination at the level being expanded.
  std::vector<double> reach(n, 1.0), next(n);
  for (int k = top_level - 1; k >= 0; --k) {
    const int fanout = fanouts[static_cast<std::size_t>(num_levels - (k + 1))];
    auto& level_reads = reads[static_cast<std::size_t>(k)];
    std::fill(next.begin(), next.end(), 0.0);
    for (std::size_t l = 0; l < n; ++l) {
      const std::int32_t degree = part.in_degree(static_cast<node_id>(l));
      if (reach[l] == 0.0 || degree == 0) continue;
      // Each in-neighbour is picked with probability min(1, fanout / degree).
      const double pick = fanout < 0 || fanout >= degree ? 1.0 : double(fanout) / degree;
      const double w = reach[l] * pick;
      for (edge_offset e = part.indptr[l]; e < part.indptr[l + 1]; ++e) {
        const node_id local = part.src_local[static_cast<std::size_t>(e)];
        if (local >= 0) {
          next[static_cast<std::size_t>(local)] += w;
          continue;
        }
        const node_id g = part.src_global[static_cast<std::size_t>(e)];
        const std::int64_t at = halo_position(part, g);
        if (at < 0)
          throw std::invalid_argument("halo_read_scores: in-neighbour " + std::to_string(g) +
                                      " of partition " + std::to_string(part.part) +
                                      " is neither owned nor in its halo");
        level_reads[static_cast<std::size_t>(at)] += w;
      }
    }
    reach.swap(next);
  }
  return reads;
}

std::size_t kept_row_bytes(std::int64_t width) {
  return static_cast<std::size_t>(width) * sizeof(float) + 2 * sizeof(std::uint64_t);
}

std::size_t kept_feature_row_bytes(const graph_partition& part) {
  if (!part.sparse_features || part.num_owned() == 0) return kept_row_bytes(part.features.cols());
  const double nnz = static_cast<double>(part.sparse_features->m.nonZeros()) /
                     static_cast<double>(part.num_owned());
  // A value and its column per entry, and the row's offset.
  return static_cast<std::size_t>(nnz * (sizeof(float) + sizeof(std::int32_t))) +
         sizeof(std::int32_t) + 2 * sizeof(std::uint64_t);
}

std::vector<std::vector<std::uint32_t>> choose_resident(
    const std::vector<std::vector<double>>& scores, std::span<const std::size_t> row_bytes,
    std::size_t budget_bytes) {
  if (row_bytes.size() < scores.size())
    throw std::invalid_argument("choose_resident: row sizes for " +
                                std::to_string(row_bytes.size()) + " levels, scores for " +
                                std::to_string(scores.size()));
  struct candidate {
    double per_byte;
    std::uint32_t level;
    std::uint32_t row;
  };
  std::vector<candidate> all;
  for (std::size_t k = 0; k < scores.size(); ++k) {
    const double bytes = static_cast<double>(std::max<std::size_t>(row_bytes[k], 1));
    for (std::size_t i = 0; i < scores[k].size(); ++i)
      if (scores[k][i] > 0.0)
        all.push_back(
            {scores[k][i] / bytes, static_cast<std::uint32_t>(k), static_cast<std::uint32_t>(i)});
  }
  std::sort(all.begin(), all.end(), [](const candidate& a, const candidate& b) {
    if (a.per_byte != b.per_byte) return a.per_byte > b.per_byte;
    if (a.level != b.level) return a.level < b.level;
    return a.row < b.row;
  });
  std::vector<std::vector<std::uint32_t>> keep(scores.size());
  std::size_t used = 0;
  for (const candidate& c : all) {
    const std::size_t bytes = row_bytes[c.level];
    if (used + bytes > budget_bytes) continue;  // a smaller row of another level may still fit
    used += bytes;
    keep[c.level].push_back(c.row);
  }
  for (auto& rows : keep)
    std::sort(rows.begin(), rows.end());
  return keep;
}

}  // namespace degnn
