// Recovery from a lost member inside a running cluster (--recover adopt, DESIGN.md section 8):
// node 0 finds which members stopped answering, makes the next view (their partitions go to
// survivors, every worker rolls back to the last commit) and announces it to the survivors.
#pragma once

#include <caf/all.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "runtime/node_mesh.hpp"
#include "serialization/wire_membership.hpp"

namespace degnn {

/// Ranks of `view` (never 0) serving partitions whose node actor did not answer node 0 within
/// `wait`: a killed process answers at once with an error, a stopped one not at all.
std::vector<int> lost_members(caf::scoped_actor& self, const node_mesh& mesh,
                              const wire::membership_view& view, std::chrono::milliseconds wait);

/// The view after losing `lost`: id + 1, the lost members marked so and their partitions given,
/// one by one, to the survivor serving fewest (ties: the first rank after the lost one, node 0
/// last, so losses spread over neighbours), resuming at global step `step`.
wire::membership_view adopted_view(const wire::membership_view& view, const std::vector<int>& lost,
                                   std::uint64_t step);

/// "partition 2 (node 2) to node 3, ..." for the log.
std::string moved_partitions(const wire::membership_view& before,
                             const wire::membership_view& after);

/// Gives `next` to every survivor other than node 0; throws naming one that refused it or did
/// not answer.
void announce_view(caf::scoped_actor& self, const node_mesh& mesh, const wire::context& ctx,
                   const wire::membership_view& next);

}  // namespace degnn
