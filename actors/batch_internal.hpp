// Internals shared by the batch actor's source files (behaviour and centralized step, the
// decentralized owner step). Not part of the actor protocol.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/batch_actor.hpp"
#include "actors/gather.hpp"
#include "actors/worker_handlers.hpp"

namespace degnn::batch_detail {

using self_ptr = batch_actor::stateful_pointer<batch_state>;
using promise = caf::typed_response_promise<wire_message>;

using worker_detail::as_error;
using worker_detail::count;

/// The batch index a step control names; throws wire::wire_error unless a whole number >= 0.
std::uint64_t batch_index(const wire::control& c);

/// This epoch's seeds of batch `index` (parts with fewer batches wrap around); empty when the
/// part has no training nodes.
const std::vector<node_id>& seeds_of(batch_state& st, std::uint32_t epoch, std::uint64_t index);

/// Centralized step (batch_centralized_step.cpp): sample hop by hop, pull features, train the
/// replica; replies with the gradient and the step statistics.
caf::result<wire_message> start_centralized_step(self_ptr self, const wire::control& c);

/// One decentralized step in flight on its owner.
struct owner_job {
  std::uint64_t step = 0;
  std::uint64_t applies = 0;  ///< the weights the step computes with
  std::vector<node_id> seeds;
  std::vector<std::int32_t> counts;  ///< sampled neighbours per seed
  /// Per part: the seed positions its push's targets stand for.
  std::vector<std::vector<std::int32_t>> push_targets;
  promise rp;
};

/// Width of the rows the shards' answers carry: the top layer's input.
Eigen::Index push_width(const batch_state& st);

/// The step's statistics for the coordinator (counted), the step noted as seeded when it was.
wire_message step_stats_reply(batch_state& st, std::uint64_t step, const step_stats& stats);

/// GAT's owner step once every first push was answered (batch_owner_attention.cpp): er to every
/// shard, their attention partials merged, the top layer, loss and backward, the returns in two
/// rounds (the own rows' gradient needs every shard's d loss / d er); then job->rp gets the
/// statistics as for the other models.
void finish_attention_step(self_ptr self, const std::shared_ptr<owner_job>& job,
                           std::vector<wire_message>& replies);

/// Decentralized owner step (batch_owner_step.cpp): sample the seeds' neighbours, push to their
/// owners, top layer, loss, gradients back; replies with the step statistics once every shard
/// took its gradients.
caf::result<wire_message> start_decentralized_step(self_ptr self, const wire::control& c);

/// Ring all-reduce (batch_ring.cpp): this worker's gradient of `step` joins the ring (counted in
/// the divisor when `contributes`); then(average) once every round is done, fail(error) on the
/// first failure. One ring runs at a time; a new step's ring fails one left over.
void ring_allreduce(self_ptr self, std::uint64_t step, std::vector<float> gradient,
                    bool contributes, std::function<void(std::vector<float>)> then,
                    std::function<void(const caf::error&)> fail);

/// A centralized step's answer, `out` holding the gradient and the step's statistics: to the
/// coordinator as it is, or (ring) after the workers' ring reduced it and both replicas applied
/// the average, without the values.
void answer(self_ptr self, promise rp, wire::allreduce_chunk out, bool ring);

/// A round's chunk from the previous worker (ring_atom): kept until its round comes. Throws
/// wire::wire_error for a chunk of another sender, of a step already reduced, or one too many.
wire_message take_ring_chunk(self_ptr self, const wire_message& m);

/// The average applied to this replica and then to the shard's; then(the control result to
/// answer with, not counted yet), or fail(error). `encoded`: the average as a message already
/// (the coordinator's, passed on as it came), else it is encoded for the shard here.
void apply_average(self_ptr self, std::uint64_t step, std::vector<float> average,
                   std::optional<wire_message> encoded, std::function<void(wire_message)> then,
                   std::function<void(const caf::error&)> fail);

/// Coordinated checkpoint (batch_checkpoint.cpp): a checkpoint control snapshots the replica and
/// replies once the file is durable (counts: size, CRC-32); a commit control writes the commit
/// record. Throws (the caller refuses the request) on a bad control or a missing file.
caf::result<wire_message> save_replica(self_ptr self, const wire_message& m);

}  // namespace degnn::batch_detail
