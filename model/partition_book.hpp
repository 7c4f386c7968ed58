// The partition book: who owns each node, and the mapping between global node ids and the local ids
// a partition uses for its own rows (local id = position in the part's sorted list of owned ids).
// Every node keeps a copy, so any node id can be routed to its shard without asking anyone.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/tensor.hpp"

namespace degnn {

class partition_book {
 public:
  partition_book() = default;
  /// owner[g] in [0, num_parts) for every global node g; throws std::invalid_argument otherwise.
  partition_book(std::vector<std::int32_t> owner, int num_parts);

  int num_parts() const { return num_parts_; }
  node_id num_nodes() const { return static_cast<node_id>(owner_.size()); }

  /// Part owning global node g.
  std::int32_t owner(node_id g) const { return owner_[static_cast<size_t>(g)]; }
  /// Position of global node g among its owner's sorted owned ids.
  node_id local_id(node_id g) const { return local_[static_cast<size_t>(g)]; }
  /// Local id of global node g, which part `part` must own; throws std::invalid_argument naming
  /// `what` when g is out of range or owned elsewhere (a routing bug or a hostile peer: never a
  /// reason to answer with another partition's data).
  node_id owned_local_id(node_id g, int part, const char* what) const;
  /// owned_local_id of every id of a request, which may name each owned node at most once (so a
  /// reply is never larger than the partition): a repeat, or more ids than the part owns, throws
  /// std::invalid_argument naming `what`.
  std::vector<node_id> owned_local_ids(std::span<const node_id> ids, int part,
                                       const char* what) const;
  /// Global id of local row l of part p.
  node_id global_id(int part, node_id l) const {
    return owned_[static_cast<size_t>(start_[static_cast<size_t>(part)] + l)];
  }
  node_id num_owned(int part) const {
    return start_[static_cast<size_t>(part) + 1] - start_[static_cast<size_t>(part)];
  }
  /// Global ids owned by part p, ascending.
  std::span<const node_id> owned(int part) const {
    return {owned_.data() + start_[static_cast<size_t>(part)],
            static_cast<size_t>(num_owned(part))};
  }
  /// The whole owner vector (size num_nodes).
  std::span<const std::int32_t> owners() const { return owner_; }

 private:
  int num_parts_ = 0;
  std::vector<std::int32_t> owner_;  ///< global -> part
  std::vector<node_id> local_;       ///< global -> local id within its part
  std::vector<node_id> start_{
      0};  ///< size num_parts + 1: part p's ids are owned_[start_[p], start_[p+1])
  std::vector<node_id> owned_;  ///< all global ids grouped by part, ascending within a part
};

/// Where a list of nodes goes: the positions (into the list) of the nodes each other part owns,
/// owners ascending, and the positions of the nodes `self_part` owns.
struct owner_groups {
  std::vector<std::int32_t> owners;
  std::vector<std::vector<std::size_t>> positions;  ///< per entry of owners
  std::vector<std::size_t> own;
};
owner_groups group_by_owner(const partition_book& book, std::span<const node_id> nodes,
                            int self_part);
/// The same groups with none longer than max_positions (>= 1): a longer one becomes several
/// consecutive groups of the same owner, in order.
owner_groups split_groups(owner_groups groups, std::size_t max_positions);

}  // namespace degnn
