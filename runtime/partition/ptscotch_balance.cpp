// The balancing pass of the PT-Scotch ranks (see ptscotch_graph.hpp): moves out of parts over
// the limit, proposed by the rank holding each vertex and accepted at rank 0.
#include <algorithm>
#include <array>
#include <numeric>

#include "model/partitioner.hpp"
#include "runtime/partition/ptscotch_graph.hpp"

namespace degnn::ptscotch {

// The METIS path's balance (partition_balance_limit on train nodes, then on nodes), reached by
// moving nodes out of parts over the limit, each to the part with room holding most of its
// neighbours. Each rank proposes moves of its own vertices (its adjacency is local), rank 0
// accepts the best by gain within each part's excess and room, and every rank applies them.
// Returns the nodes moved.
edge_offset balance(const local_graph& g, const std::vector<node_id>& train, int parts,
                    bool train_phase, const rank_info& me, std::vector<std::int32_t>& owner) {
  const auto n = static_cast<std::int64_t>(owner.size());
  std::vector<char> is_train(static_cast<std::size_t>(g.vertices()), 0);
  for (node_id v : train)
    if (v >= g.first && v < g.first + g.vertices())
      is_train[static_cast<std::size_t>(v - g.first)] = 1;
  const std::int64_t limit =
      partition_balance_limit(train_phase ? static_cast<std::int64_t>(train.size()) : n, parts);
  edge_offset moved = 0;
  std::vector<std::int64_t> neighbours(static_cast<std::size_t>(parts), 0);
  for (int round = 0; round < 32; ++round) {
    std::vector<std::int64_t> count(static_cast<std::size_t>(parts), 0);
    if (train_phase) {
      for (node_id v : train)
        ++count[static_cast<std::size_t>(owner[static_cast<std::size_t>(v)])];
    } else {
      for (std::int32_t p : owner)
        ++count[static_cast<std::size_t>(p)];
    }
    std::vector<std::int64_t> excess(count.size()), room(count.size());
    bool over = false;
    for (std::size_t p = 0; p < count.size(); ++p) {
      excess[p] = std::max<std::int64_t>(0, count[p] - limit);
      room[p] = std::max<std::int64_t>(0, limit - count[p]);
      over = over || excess[p] > 0;
    }
    if (!over) break;
    // Proposals (gain, vertex, target) for vertices in parts over the limit.
    std::vector<std::vector<std::array<std::int64_t, 3>>> by_part(count.size());
    for (std::int64_t l = 0; l < g.vertices(); ++l) {
      const std::int64_t v = g.first + l;
      const auto p = static_cast<std::size_t>(owner[static_cast<std::size_t>(v)]);
      if (excess[p] == 0 || (is_train[static_cast<std::size_t>(l)] != 0) != train_phase) continue;
      const auto row_begin = static_cast<std::size_t>(g.vert[static_cast<std::size_t>(l)]);
      const auto row_end = static_cast<std::size_t>(g.vert[static_cast<std::size_t>(l) + 1]);
      for (std::size_t i = row_begin; i < row_end; ++i)
        ++neighbours[static_cast<std::size_t>(owner[static_cast<std::size_t>(g.edges[i])])];
      std::int64_t best = -1;
      for (std::size_t q = 0; q < count.size(); ++q)
        if (room[q] > 0 && (best < 0 || neighbours[q] > neighbours[static_cast<std::size_t>(best)]))
          best = static_cast<std::int64_t>(q);
      if (best >= 0)
        by_part[p].push_back({neighbours[static_cast<std::size_t>(best)] - neighbours[p], v, best});
      for (std::size_t i = row_begin; i < row_end; ++i)
        neighbours[static_cast<std::size_t>(owner[static_cast<std::size_t>(g.edges[i])])] = 0;
    }
    std::vector<std::int64_t> proposals;
    for (std::size_t p = 0; p < by_part.size(); ++p) {
      auto& c = by_part[p];
      const auto keep = static_cast<std::size_t>(
          std::min<std::int64_t>(excess[p], static_cast<std::int64_t>(c.size())));
      std::partial_sort(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(keep), c.end(),
                        [](const auto& a, const auto& b) { return a[0] > b[0]; });
      for (std::size_t i = 0; i < keep; ++i)
        proposals.insert(proposals.end(), c[i].begin(), c[i].end());
    }
    // Gather the proposals at rank 0, which accepts some; the accepted (vertex, target) pairs go
    // to every rank.
    int mine = static_cast<int>(proposals.size());
    std::vector<int> counts(static_cast<std::size_t>(me.ranks)), at(counts.size());
    MPI_Gather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    std::exclusive_scan(counts.begin(), counts.end(), at.begin(), 0);
    std::vector<std::int64_t> all(me.lead() ? static_cast<std::size_t>(at.back() + counts.back())
                                            : 0);
    MPI_Gatherv(proposals.data(), mine, MPI_INT64_T, all.data(), counts.data(), at.data(),
                MPI_INT64_T, 0, MPI_COMM_WORLD);
    std::vector<std::int64_t> accepted;
    if (me.lead()) {
      std::vector<std::array<std::int64_t, 3>> c(all.size() / 3);
      for (std::size_t i = 0; i < c.size(); ++i)
        c[i] = {all[3 * i], all[3 * i + 1], all[3 * i + 2]};
      std::sort(c.begin(), c.end(), [](const auto& a, const auto& b) {
        return a[0] != b[0] ? a[0] > b[0] : a[1] < b[1];
      });
      for (const auto& [gain, v, q] : c) {
        const auto p = static_cast<std::size_t>(owner[static_cast<std::size_t>(v)]);
        if (excess[p] == 0 || room[static_cast<std::size_t>(q)] == 0) continue;
        --excess[p];
        --room[static_cast<std::size_t>(q)];
        accepted.insert(accepted.end(), {v, q});
      }
    }
    std::int64_t size = static_cast<std::int64_t>(accepted.size());
    MPI_Bcast(&size, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
    accepted.resize(static_cast<std::size_t>(size));
    MPI_Bcast(accepted.data(), static_cast<int>(size), MPI_INT64_T, 0, MPI_COMM_WORLD);
    for (std::size_t i = 0; i + 1 < accepted.size(); i += 2)
      owner[static_cast<std::size_t>(accepted[i])] = static_cast<std::int32_t>(accepted[i + 1]);
    moved += size / 2;
    if (size == 0) break;  // nothing movable: left as it is, and reported by the balance figures
  }
  return moved;
}

}  // namespace degnn::ptscotch
