// Builds the global <-> local id maps of a partition book with one counting sort over the owners.
#include "model/partition_book.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace degnn {

partition_book::partition_book(std::vector<std::int32_t> owner, int num_parts)
    : num_parts_(num_parts), owner_(std::move(owner)) {
  if (num_parts < 1) {
    throw std::invalid_argument("partition_book: num_parts must be at least 1, got " +
                                std::to_string(num_parts));
  }
  const size_t n = owner_.size();
  start_.assign(static_cast<size_t>(num_parts) + 1, 0);
  for (size_t g = 0; g < n; ++g) {
    const std::int32_t o = owner_[g];
    if (o < 0 || o >= num_parts) {
      throw std::invalid_argument("partition_book: node " + std::to_string(g) + " has owner " +
                                  std::to_string(o) + ", outside [0, " + std::to_string(num_parts) +
                                  ")");
    }
    ++start_[static_cast<size_t>(o) + 1];
  }
  for (int p = 0; p < num_parts; ++p)
    start_[static_cast<size_t>(p) + 1] += start_[static_cast<size_t>(p)];
  // Visiting globals in ascending order keeps each part's list sorted, so local ids follow global
  // order.
  owned_.resize(n);
  local_.resize(n);
  std::vector<node_id> fill(start_.begin(), start_.end() - 1);
  for (size_t g = 0; g < n; ++g) {
    const auto p = static_cast<size_t>(owner_[g]);
    local_[g] = fill[p] - start_[p];
    owned_[static_cast<size_t>(fill[p]++)] = static_cast<node_id>(g);
  }
}

node_id partition_book::owned_local_id(node_id g, int part, const char* what) const {
  if (g < 0 || g >= num_nodes() || owner(g) != part) {
    throw std::invalid_argument(std::string(what) + " names node " + std::to_string(g) +
                                ", which partition " + std::to_string(part) + " does not own");
  }
  return local_id(g);
}

std::vector<node_id> partition_book::owned_local_ids(std::span<const node_id> ids, int part,
                                                     const char* what) const {
  const auto owned = static_cast<size_t>(num_owned(part));
  if (ids.size() > owned) {
    throw std::invalid_argument(std::string(what) + " names " + std::to_string(ids.size()) +
                                " nodes, more than the " + std::to_string(owned) + " partition " +
                                std::to_string(part) + " owns");
  }
  std::vector<node_id> out(ids.size());
  std::vector<bool> seen(owned, false);
  for (size_t i = 0; i < ids.size(); ++i) {
    out[i] = owned_local_id(ids[i], part, what);
    if (seen[static_cast<size_t>(out[i])]) {
      throw std::invalid_argument(std::string(what) + " names node " + std::to_string(ids[i]) +
                                  " twice");
    }
    seen[static_cast<size_t>(out[i])] = true;
  }
  return out;
}

owner_groups group_by_owner(const partition_book& book, std::span<const node_id> nodes,
                            int self_part) {
  owner_groups out;
  std::vector<std::vector<std::size_t>> by_part(static_cast<std::size_t>(book.num_parts()));
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const auto q = book.owner(nodes[i]);
    if (q == self_part)
      out.own.push_back(i);
    else
      by_part[static_cast<std::size_t>(q)].push_back(i);
  }
  for (std::size_t q = 0; q < by_part.size(); ++q) {
    if (by_part[q].empty()) continue;
    out.owners.push_back(static_cast<std::int32_t>(q));
    out.positions.push_back(std::move(by_part[q]));
  }
  return out;
}

owner_groups split_groups(owner_groups groups, std::size_t max_positions) {
  if (max_positions == 0) throw std::invalid_argument("split_groups: max_positions is 0");
  owner_groups out;
  out.own = std::move(groups.own);
  for (std::size_t g = 0; g < groups.owners.size(); ++g) {
    const auto& pos = groups.positions[g];
    for (std::size_t begin = 0; begin < pos.size(); begin += max_positions) {
      const std::size_t end = std::min(pos.size(), begin + max_positions);
      out.owners.push_back(groups.owners[g]);
      out.positions.emplace_back(pos.begin() + static_cast<std::ptrdiff_t>(begin),
                                 pos.begin() + static_cast<std::ptrdiff_t>(end));
    }
  }
  return out;
}

}  // namespace degnn
