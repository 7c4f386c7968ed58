// Internals shared by the shard actor's source files (pulls and dispatch, evaluation, the
// decentralized step). Not part of the actor protocol.
#pragma once

#include <string>

#include "actors/gather.hpp"
#include "actors/shard_actor.hpp"
#include "actors/worker_handlers.hpp"

namespace degnn::shard_detail {

using self_ptr = shard_actor::stateful_pointer<shard_state>;
using promise = caf::typed_response_promise<wire_message>;

using worker_detail::as_error;
using worker_detail::count;

inline wire_message result_message(shard_state& st, std::uint64_t step) {
  wire::control out{.h = {step, st.part->part}, .what = wire::control_kind::result};
  return pack(wire::kind::control, wire::encode(st.ctx, out));
}

/// Rows of local nodes `local` into res with each node's full in-degree: rows of `rows`, or
/// with rows null the part's features (compressed when the part's are). A feature pull's answer
/// and a halo request's (shard_actor.cpp).
void put_rows(const graph_partition& part, const Matrix* rows, std::span<const node_id> local,
              wire::row_block& res);

// -- evaluation (shard_evaluation.cpp) --

/// Computes h^(layer) of every owned node from h^(layer - 1), pulling the halo's rows; at the
/// last layer the reply holds the accuracy counts (correct, total for train, valid, test).
caf::result<wire_message> evaluate_layer(self_ptr self, const wire::control& c);
/// Rows of h^(layer) of owned nodes (with their in-degrees) for a peer's evaluation.
wire_message serve_halo(shard_state& st, const wire_message& m);

// -- decentralized step (shard_push.cpp) --

/// Collects a step's pushes; once every part's is in, computes them (fused) and answers each
/// with its targets' partial sums.
caf::result<wire_message> serve_push(self_ptr self, const wire_message& m);
/// Keeps a push's partial-sum gradients until the step's gradient phase.
wire_message serve_gradient_return(shard_state& st, const wire_message& m);
/// The gradient phase of every step up to c.h.step: back-propagates the kept gradients in sender
/// order, commits the steps' history rows to the embedding store, and replies this replica's
/// gradient.
caf::result<wire_message> gradient_phase(self_ptr self, const wire::control& c);
// -- decentralized GAT step (shard_attention.cpp) --

/// Whether this replica's model is GAT: its steps take an attention push and return too.
bool attention_model(const shard_state& st);
/// Answers an owner's attention push (its step computed): its targets' attention partials.
wire_message serve_attention_push(shard_state& st, const wire_message& m);
/// Answers an attention return with d loss / d er and keeps the push's gradient share.
wire_message serve_attention_return(shard_state& st, const wire_message& m);
/// Adds every push's kept attention gradient share of a step to the replica, in sender order.
void add_attention_gradients(shard_state& st, const served_step& s);

/// Width of a level's rows as this replica computes them (level 0: the features).
Eigen::Index level_width(const shard_state& st, int level);
/// Makes the halo cache hold levels 0 (features) to the history's top level.
void ensure_halo_levels(shard_state& st);
/// Stores an owner's answer to `ask` in the halo cache; returns the number of rows received.
/// Throws wire::wire_error (or std::invalid_argument) for an answer that does not fit the ask.
size_t store_answer(shard_state& st, const wire::embedding_get& ask,
                    const wire::embedding_rows& rows, std::uint64_t step);

// -- history set-up (shard_history.cpp) --

/// Sends the puts to this partition's embedding store and answers `reply` once the store took
/// them all (an error naming `what` otherwise).
caf::result<wire_message> put_then_reply(self_ptr self, std::vector<history_commit> puts,
                                         wire_message reply, const char* what);
/// Sends a step's history commits to this partition's embedding store without waiting: the store
/// is in this process and serves its mailbox in order, so every read caused by this shard's later
/// replies finds the rows there. A refused commit sets commit_failure.
void commit_history(self_ptr self, std::vector<history_commit> puts);

/// Puts the last evaluation pass's rows into the embedding store as the initial history.
caf::result<wire_message> init_history(self_ptr self, const wire::control& c);
/// Brings the whole halo cache up to date: features the first time, then every history level
/// (rows newer than the held version only). Run once before the first step.
caf::result<wire_message> refresh_halo(self_ptr self, const wire::control& c);

}  // namespace degnn::shard_detail
