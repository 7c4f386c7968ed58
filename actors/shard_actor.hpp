// The shard actor: one per graph partition. It owns the partition's in-edges and features and
// answers the batch owners' sampling requests and feature pulls (centralized pipeline).
#pragma once

#include <memory>

#include "actors/messages.hpp"
#include "model/partition_book.hpp"
#include "model/partition_store.hpp"
#include "serialization/traffic.hpp"

namespace degnn {

struct shard_state {
  static constexpr const char* name = "degnn.shard";
  std::shared_ptr<const graph_partition> part;
  std::shared_ptr<const partition_book> book;
  wire::context ctx;
  wire::traffic sent;          ///< replies, all of which go to other nodes
  std::uint64_t rejected = 0;  ///< requests that failed validation
};

shard_actor::behavior_type shard_behavior(shard_actor::stateful_pointer<shard_state> self,
                                          std::shared_ptr<const graph_partition> part,
                                          std::shared_ptr<const partition_book> book,
                                          wire::context ctx);

/// Answers one encoded request against a partition; the pure core of the shard actor, used by
/// its behaviour and by tests. Throws wire::wire_error for a request it must reject.
wire_message serve_shard_request(const graph_partition& part, const partition_book& book,
                                 const wire::context& ctx, const wire_message& request);

}  // namespace degnn
