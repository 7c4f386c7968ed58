// Rank and partition assignment of the seed's rendezvous.
#include "runtime/node/rendezvous.hpp"

#include <charconv>
#include <stdexcept>

#include "runtime/process/config_error.hpp"

namespace degnn {

rendezvous::rendezvous(int min_nodes, int max_nodes, int partitions, candidate seed)
    : min_(min_nodes), max_(max_nodes), partitions_(partitions), seed_(std::move(seed)) {
  if (min_ < 1 || max_ < min_ || max_ > partitions_)
    throw std::invalid_argument("rendezvous: need 1 <= min <= max <= partitions");
}

std::string rendezvous::add(std::uint64_t key, candidate c) {
  if (closed_) return "the cluster has formed already";
  if (full()) return "the cluster is full (" + std::to_string(max_) + " nodes)";
  auto same_place = [&](const candidate& o) { return o.host == c.host && o.port == c.port; };
  if (same_place(seed_) || c.name == seed_.name)
    return "its address or name " + c.host + ":" + std::to_string(c.port) + " / " + c.name +
           " is the seed's";
  for (const auto& e : joined_) {
    if (e.key == key) return "it asked to join twice";
    if (same_place(e.c)) return "address " + c.host + ":" + std::to_string(c.port) + " is taken";
    if (e.c.name == c.name) return "name '" + c.name + "' is taken";
  }
  joined_.push_back({key, std::move(c)});
  return "";
}

bool rendezvous::remove(std::uint64_t key) {
  if (closed_) return false;
  for (auto it = joined_.begin(); it != joined_.end(); ++it) {
    if (it->key == key) {
      joined_.erase(it);
      return true;
    }
  }
  return false;
}

wire::membership_view rendezvous::close(std::uint64_t view_id,
                                        std::vector<std::uint64_t>& key_of_rank) {
  closed_ = true;
  const int n = size();
  std::vector<int> rank_of(joined_.size(), -1);
  std::vector<bool> taken(static_cast<size_t>(n), false);
  taken[0] = true;
  // Hints first, in join order (the first asker of a rank gets it), then the others.
  for (size_t i = 0; i < joined_.size(); ++i) {
    const int h = joined_[i].c.rank_hint;
    if (h >= 1 && h < n && !taken[static_cast<size_t>(h)]) {
      rank_of[i] = h;
      taken[static_cast<size_t>(h)] = true;
    }
  }
  int next = 1;
  for (size_t i = 0; i < joined_.size(); ++i) {
    if (rank_of[i] >= 0) continue;
    while (taken[static_cast<size_t>(next)])
      ++next;
    rank_of[i] = next;
    taken[static_cast<size_t>(next)] = true;
  }
  wire::membership_view v;
  v.id = view_id;
  v.members.resize(static_cast<size_t>(n));
  key_of_rank.assign(static_cast<size_t>(n), 0);
  auto fill = [&](int rank, const candidate& c) {
    auto& m = v.members[static_cast<size_t>(rank)];
    m.rank = rank;
    m.host = c.host;
    m.port = c.port;
    m.name = c.name;
    for (int p = rank; p < partitions_; p += n)
      m.partitions.push_back(p);
  };
  fill(0, seed_);
  for (size_t i = 0; i < joined_.size(); ++i) {
    fill(rank_of[i], joined_[i].c);
    key_of_rank[static_cast<size_t>(rank_of[i])] = joined_[i].key;
  }
  return v;
}

std::pair<int, int> parse_node_range(const std::string& text) {
  auto number = [&](const std::string& s) {
    int v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || v < 1)
      throw config_error("--nodes: '" + text + "' is not N or MIN:MAX (positive numbers)");
    return v;
  };
  const auto colon = text.find(':');
  if (colon == std::string::npos) {
    const int n = number(text);
    return {n, n};
  }
  const int lo = number(text.substr(0, colon)), hi = number(text.substr(colon + 1));
  if (lo > hi)
    throw config_error("--nodes: MIN " + std::to_string(lo) + " exceeds MAX " + std::to_string(hi));
  return {lo, hi};
}

}  // namespace degnn
