// Relabelling of picked neighbours into a block (model/block.hpp): destinations first, then new
// sources in order of first appearance. Shared by the local sampler and the distributed batch
// owner, so both build bit-identical blocks from the same picks.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/block.hpp"

namespace degnn {

/// Builds the block whose destination i has in-neighbours picks[offset_i, offset_i + counts[i])
/// (global ids, offsets = prefix sums of counts). `scratch` maps global id -> local index; it must
/// hold -1 for every node on entry (size >= number of nodes) and does again on return.
/// Leaves src_degree empty: the caller knows the degrees. Throws std::invalid_argument when a
/// destination appears twice.
block assemble_block(std::span<const node_id> dst, std::span<const std::int32_t> counts,
                     std::span<const node_id> picks, std::vector<std::int32_t>& scratch);

}  // namespace degnn
