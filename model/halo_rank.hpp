// Which rows a bounded halo cache keeps (--halo-cache-mb): every remote in-neighbour's expected
// reads per step at each level under the fanouts, and the rows most read per byte that fit a
// budget (SALIENT++ ranks its feature replicas the same way).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "model/partition_store.hpp"

namespace degnn {

/// Per level k in [0, top_level), per halo row i of part: the expected reads of halo[i] at level
/// k in one local expansion (model/local_cg.hpp) whose targets are every owned node once.
/// fanouts are seed-first (fanouts[hop], -1: every neighbour), as expand_local takes them; a
/// top_level of fanouts.size() starts at the seeds (the centralized sampler's hops). The owned
/// nodes' reach is an expected count, not capped at one; only the ranking is used.
std::vector<std::vector<double>> halo_read_scores(const graph_partition& part,
                                                  std::span<const int> fanouts, int top_level);

/// The rows to keep, per level: (level, row) pairs in descending reads per byte (ties: lower
/// level, then lower row) while their bytes (row_bytes[level] each) fit budget_bytes. Rows never
/// read are not kept. Throws std::invalid_argument when row_bytes has fewer levels than scores.
/// Bytes a kept row costs: its values, its version and the step it was confirmed at. A feature
/// row of part: compressed rows at the part's mean length.
std::size_t kept_row_bytes(std::int64_t width);
std::size_t kept_feature_row_bytes(const graph_partition& part);

std::vector<std::vector<std::uint32_t>> choose_resident(
    const std::vector<std::vector<double>>& scores, std::span<const std::size_t> row_bytes,
    std::size_t budget_bytes);

}  // namespace degnn
