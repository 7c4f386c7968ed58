// Internals shared by the batch actor's source files (centralized step, decentralized step,
// push serving). Not part of the actor protocol.
#pragma once

#include <string>

#include "actors/batch_actor.hpp"
#include "actors/gather.hpp"

namespace degnn::batch_detail {

using self_ptr = batch_actor::stateful_pointer<batch_state>;
using promise = caf::typed_response_promise<wire_message>;
using shard_request = wire_request<shard_actor, shard_atom>;
using batch_request = wire_request<batch_actor, batch_atom>;

/// The coordinator runs on partition 0's node: replies to it from other parts count as traffic.
inline constexpr int kCoordinatorPart = 0;

inline wire_message pack(wire::kind k, wire::bytes b) {
  return {static_cast<std::uint16_t>(k), std::move(b)};
}

inline caf::error as_error(const batch_state& st, const std::string& what) {
  return caf::make_error(caf::sec::runtime_error,
                         "batch actor " + std::to_string(st.part->part) + ": " + what);
}

/// Counts a message this actor sends, when it leaves the node.
inline void count(batch_state& st, int to_part, const wire_message& m) {
  if (to_part != st.part->part) st.sent.add(static_cast<wire::kind>(m.kind), m.bytes.size());
}

// -- decentralized pipeline (decentralized_step.cpp) --

/// Owner side of one step: sample the seeds' neighbours, push to their owners, top layer, loss,
/// gradients back; replies with the step statistics once every shard finished its backward.
caf::result<wire_message> start_decentralized_step(self_ptr self, const wire::control& c);
/// Shard side: collects a step's pushes; once every part's is in, computes them (fused) and
/// answers each with its targets' partial sums.
caf::result<wire_message> serve_push(self_ptr self, const wire_message& m);
/// Shard side: keeps a push's partial-sum gradients until the step's gradient is asked for.
wire_message serve_gradient_return(batch_state& st, const wire_message& m);
/// Shard side: back-propagates the kept gradients of every step up to `upto` in sender order and
/// commits those steps' history rows.
void backward_served_steps(batch_state& st, std::uint64_t upto);
/// Serves the historical embeddings (quantized) of owned nodes.
wire_message serve_embedding_get(batch_state& st, const wire_message& m);
/// Brings the whole halo cache up to date: features the first time, then every history level
/// (rows newer than the held version only). Run once before the first step.
caf::result<wire_message> refresh_halo(self_ptr self, const wire::control& c);
/// Runs the work waiting for weights that are now there (after an apply or a step control).
void run_ready_work(self_ptr self);
/// Seeds the history with the exact embeddings of the last evaluation pass.
wire_message init_history(batch_state& st, const wire::control& c);

}  // namespace degnn::batch_detail
