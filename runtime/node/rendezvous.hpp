// The seed's rendezvous: who asked to join, whether the cluster may form (MAX joined, or MIN and
// the last call passed), and the first view: ranks (the seed 0, rank hints honoured when free,
// the rest in join order) and the partition map (rank r serves partitions r, r+N, r+2N, ...).
// A value type: the node actor owns one and the tests drive it directly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "serialization/wire_membership.hpp"

namespace degnn {

class rendezvous {
 public:
  struct candidate {
    std::string host;
    std::uint16_t port = 0;
    std::int32_t rank_hint = -1;
    std::string name;
  };

  /// The seed counts as one of min..max nodes; max <= partitions.
  rendezvous(int min_nodes, int max_nodes, int partitions, candidate seed);

  /// Takes a joiner (`key` identifies its request); "" when taken, else why it is refused
  /// (the cluster is full or formed, or its address or name is taken).
  std::string add(std::uint64_t key, candidate c);
  /// A joiner that went away before the view: forgotten. False when `key` is unknown.
  bool remove(std::uint64_t key);

  int size() const { return static_cast<int>(joined_.size()) + 1; }
  bool full() const { return size() >= max_; }
  bool enough() const { return size() >= min_; }
  bool closed() const { return closed_; }

  /// Forms the view; afterwards every add is refused. key_of_rank[r]: the request of rank r
  /// (entry 0, the seed's, is 0).
  wire::membership_view close(std::uint64_t view_id, std::vector<std::uint64_t>& key_of_rank);

 private:
  struct entry {
    std::uint64_t key;
    candidate c;
  };
  int min_, max_, partitions_;
  candidate seed_;
  std::vector<entry> joined_;  ///< in join order
  bool closed_ = false;
};

/// "MIN:MAX" or "N" of --nodes; throws config_error for anything else or MIN > MAX.
std::pair<int, int> parse_node_range(const std::string& text);

}  // namespace degnn
