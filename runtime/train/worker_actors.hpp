// Spawning one worker's actors (batch actor, shard, embedding store) and telling them where
// their peers are: the wiring shared by the in-process cluster, `degnn node` and the tests.
#pragma once

#include <caf/all.hpp>

#include <memory>
#include <vector>

#include "actors/messages.hpp"
#include "actors/worker_settings.hpp"
#include "model/partition_book.hpp"
#include "model/partition_store.hpp"
#include "model/replica.hpp"

namespace degnn {

struct worker_actors {
  batch_actor batch;
  shard_actor shard;
  store_actor store;
};

/// The three actors of partition `part`.
worker_actors spawn_worker(caf::actor_system& sys, std::shared_ptr<const graph_partition> part,
                           std::shared_ptr<const partition_book> book, const replica_config& model,
                           const worker_settings& settings, const wire::context& ctx);

/// A reject_log that prints refusals on stderr after `prefix` ("node 1: "), rate-limited.
reject_log log_rejections(std::string prefix);

/// Every partition's actors, index = partition id.
struct cluster_handles {
  std::vector<batch_actor> batchers;
  std::vector<shard_actor> shards;
  std::vector<store_actor> stores;

  peer_view view() const;
};

/// Tells a worker's batch actor and shard where every peer is (before any other message to them).
void send_view(caf::scoped_actor& self, const worker_actors& w, const peer_view& v);

/// Asks a worker's actors to stop (an exit message each).
void stop_worker(caf::scoped_actor& self, const worker_actors& w);

}  // namespace degnn
