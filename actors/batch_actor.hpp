// The batch actor: one per worker, beside its partition's shard; only the batch owner's work.
// It picks the worker's seeds each step. Centralized (DistDGL-style): samples the batch hop by hop
// (asking each remote shard once per hop), pulls the remote input features and trains its model
// replica on the batch. Decentralized (DEGNN): samples the seeds' first hop, splits it by owner
// and pushes every shard one computation push, sums the partial aggregates that come back, runs
// the top layer and the loss and returns each shard the gradient of its partial sums. It hands
// the gradient phase and the averaged gradient on to its own shard, so both replicas agree.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "actors/message_guard.hpp"
#include "actors/messages.hpp"
#include "actors/reports.hpp"
#include "actors/stage_log.hpp"
#include "actors/weight_gate.hpp"
#include "actors/worker_settings.hpp"
#include "model/halo_cache.hpp"
#include "model/partition_book.hpp"
#include "model/partition_store.hpp"
#include "model/replica.hpp"
#include "model/ring_reduction.hpp"
#include "serialization/traffic.hpp"

namespace degnn {

struct batch_state {
  static constexpr const char* name = "degnn.batch";
  static constexpr const char* role = "batch actor";  ///< in its errors
  std::shared_ptr<const graph_partition> part;
  std::shared_ptr<const partition_book> book;
  std::vector<batch_actor> batchers;  ///< every worker's batch actor (from the peer view)
  std::vector<shard_actor> shards;    ///< every partition's shard
  link_sender link;     ///< numbers and (under a fault policy) damages this actor's requests
  message_guard guard;  ///< refuses damaged and repeated requests
  bool has_view = false;
  std::vector<caf::node_id> members;       ///< nodes of the view: the only senders served
  std::unique_ptr<model_replica> replica;  ///< trains the whole model (centralized), the top layer
  worker_settings settings;
  wire::context ctx;
  wire::traffic sent;          ///< messages to other nodes
  std::uint64_t rejected = 0;  ///< requests that failed validation
  mailbox_counts mailbox;      ///< queued requests when serving one, and the peak
  std::vector<node_id> train_global;
  std::int64_t batches_epoch = -1;
  std::vector<std::vector<node_id>> batches;
  std::vector<std::int32_t> scratch;  ///< global id -> local block index, -1 between uses
  std::vector<std::int32_t> degree;   ///< in-degree of nodes met in the current step
  /// Centralized with settings.halo_cache_bytes >= 0: the halo feature rows this worker samples
  /// most, kept as steps pull them (model/halo_rank.hpp); made at the first step.
  std::unique_ptr<halo_cache> feature_cache;
  weight_gate weights;
  /// Decentralized: gradient phases handed to the shard and not answered yet; a step's pushes
  /// wait for them (so that every history read of the step follows the previous commit).
  int gradient_phases_open = 0;
  struct deferred_step {
    std::function<void()> run;                     ///< sends the step's pushes
    std::function<void(const std::string&)> fail;  ///< the gradient phase before it failed
  };
  std::vector<deferred_step> after_gradient_phase;
  stage_log stages;  ///< time per pipeline stage (and, when tracing, the spans)
  /// The ring all-reduce of one step's gradient (batch_ring.cpp): at most one runs.
  struct ring_job {
    std::uint64_t step = 0;
    ring_reduction ring;
    int acks_out = 0;  ///< chunks sent and not yet taken by the next worker
    std::int64_t began_us = 0;
    std::function<void(std::vector<float>)> then;  ///< the average, once every round is done
    std::function<void(const caf::error&)> fail;
  };
  std::shared_ptr<ring_job> ring;
  /// Chunks that came before this worker reached their round (or step), by (step, round).
  std::map<std::pair<std::uint64_t, std::uint32_t>, wire::allreduce_chunk> ring_early;
  std::int64_t ring_finished = -1;  ///< steps up to this one were reduced
  /// Decentralized steps of this worker that had seeds, until their gradient phase (they count
  /// in the average's divisor).
  std::set<std::uint64_t> seeded_steps;
};

/// Spawn with `sys.spawn(batch_behavior, part, book, replica_config, settings, ctx)`, then send
/// it the peer view.
batch_actor::behavior_type batch_behavior(batch_actor::stateful_pointer<batch_state> self,
                                          std::shared_ptr<const graph_partition> part,
                                          std::shared_ptr<const partition_book> book,
                                          replica_config model, worker_settings settings,
                                          wire::context ctx);

}  // namespace degnn
