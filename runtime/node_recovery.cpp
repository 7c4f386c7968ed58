// Node 0's part of a recovery: finding the lost, the next view, announcing it.
#include "runtime/node_recovery.hpp"

#include <algorithm>

namespace degnn {

std::vector<int> lost_members(caf::scoped_actor& self, const node_mesh& mesh,
                              const wire::membership_view& view, std::chrono::milliseconds wait) {
  std::vector<int> lost;
  for (size_t p = 1; p < view.members.size(); ++p) {
    if (view.members[p].lost) continue;
    bool answered = false;
    self->request(mesh.node_of(p), wait, node_stats_atom_v)
        .receive([&](std::vector<std::int64_t>&) { answered = true; }, [](caf::error&) {});
    if (!answered) lost.push_back(static_cast<int>(p));
  }
  return lost;
}

wire::membership_view adopted_view(const wire::membership_view& view, const std::vector<int>& lost,
                                   std::uint64_t step) {
  wire::membership_view next = view;
  next.id = view.id + 1;
  next.resume_step = step;
  const auto n = static_cast<int>(view.members.size());
  for (int r : lost) {
    auto& gone = next.members[static_cast<size_t>(r)];
    gone.lost = true;
    const std::vector<std::int32_t> orphans = std::exchange(gone.partitions, {});
    // The ranks after the lost one, cyclically, node 0 (the coordinator, busiest) last.
    std::vector<int> order;
    for (int k = 1; k < n; ++k)
      if ((r + k) % n != 0) order.push_back((r + k) % n);
    order.push_back(0);
    for (std::int32_t part : orphans) {
      int best = -1;
      for (int cand : order) {
        const auto& m = next.members[static_cast<size_t>(cand)];
        if (m.lost) continue;
        if (best < 0 ||
            m.partitions.size() < next.members[static_cast<size_t>(best)].partitions.size())
          best = cand;
      }
      auto& heir = next.members[static_cast<size_t>(best)].partitions;
      heir.push_back(part);
      std::sort(heir.begin(), heir.end());
    }
  }
  return next;
}

std::string moved_partitions(const wire::membership_view& before,
                             const wire::membership_view& after) {
  std::string out;
  for (const auto& m : before.members) {
    for (std::int32_t part : m.partitions) {
      const int now = after.rank_of_partition(part);
      if (now == m.rank) continue;
      out += (out.empty() ? "" : ", ") + std::string("partition ") + std::to_string(part) +
             " (node " + std::to_string(m.rank) + ") to node " + std::to_string(now);
    }
  }
  return out;
}

void announce_view(caf::scoped_actor& self, const node_mesh& mesh, const wire::context& ctx,
                   const wire::membership_view& next) {
  const std::vector<char> bytes = wire::encode(ctx, next);
  for (size_t p = 1; p < next.members.size(); ++p) {
    if (next.members[p].lost) continue;
    std::string failure;
    self->request(mesh.node_of(p), std::chrono::seconds(10), recover_atom_v, bytes, next.secret)
        .receive([](bool) {}, [&](caf::error& e) { failure = caf::to_string(e); });
    if (!failure.empty())
      throw std::runtime_error("node 0: node " + std::to_string(p) + " did not take view " +
                               std::to_string(next.id) + ": " + failure);
  }
}

}  // namespace degnn
