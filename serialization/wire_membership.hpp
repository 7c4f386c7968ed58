// Codecs of the membership messages (a join request to the seed, the view it answers with), with
// the checks a hostile joiner or a broken seed could get wrong: bounded texts, ranks in order,
// every partition served exactly once.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "serialization/wire.hpp"

namespace degnn::wire {

struct join_request {
  std::uint64_t cluster_id = 0;       ///< the joiner's; not checked when decoding
  std::vector<std::string> identity;  ///< key=value lines
  std::string host;
  std::uint16_t port = 0;
  std::int32_t rank_hint = -1;
  std::string name;
  // With TLS (runtime/transport/cluster_certificates.hpp): the proof that the joiner holds a
  // certificate of the cluster CA and the job token, over the challenge the seed gave it.
  std::string certificate;
  std::vector<std::uint8_t> signature;
  std::vector<std::uint8_t> token_mac;
};

struct view_member {
  std::int32_t rank = 0;
  std::string host;
  std::uint16_t port = 0;
  std::string name;
  std::vector<std::int32_t> partitions;  ///< empty only when lost
  bool lost = false;  ///< lost in a recovery (its partitions moved to others); rank 0 never is
};

struct membership_view {
  std::uint64_t id = 0;
  std::vector<view_member> members;    ///< rank order
  std::string secret;                  ///< empty for a static cluster
  std::uint64_t resume_step = 0;       ///< 0: fresh; else the checkpoint every node restores
  std::vector<std::int32_t> replaced;  ///< ranks whose node is new in this view

  /// The rank serving partition p, or -1.
  int rank_of_partition(int p) const;
  /// The coordinator: the lowest live rank (node 0 until it is lost), which serves partition 0
  /// (the decoder checks it); -1 when every member is lost. Derived from the view alone, so every
  /// member that holds the view agrees on it without an election.
  int coordinator() const;
  int num_partitions() const;
};

bytes encode(const context& c, const join_request& m);
/// Checks the version, not the cluster id (the seed compares the identity lines itself).
join_request decode_join_request(const context& c, std::span<const char> b);
bytes encode(const context& c, const membership_view& m);
membership_view decode_membership_view(const context& c, std::span<const char> b);

}  // namespace degnn::wire
