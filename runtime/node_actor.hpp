// The node actor: one per `degnn node` process and the only actor it publishes. A peer node greets
// it when it connects and asks it for this node's worker actors (their handles travel in the
// reply); node 0 asks it to reach every other node's actors once before training (so every route
// has carried a message) and, at the end, to stop the node.
#pragma once

#include <caf/all.hpp>

#include "actors/coordinator.hpp"
#include "actors/messages.hpp"
#include "runtime/worker_actors.hpp"

namespace degnn {

/// What a connecting node says first: its rank and its cluster identity lines (see
/// runtime/cluster_identity.hpp). Handshake of the runtime, next to the node actor's handles.
struct node_greeting {
  std::int32_t rank = 0;
  std::vector<std::string> identity;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_greeting& x) {
  return f(caf::meta::type_name("degnn.node_greeting"), x.rank, x.identity);
}

}  // namespace degnn

CAF_BEGIN_TYPE_ID_BLOCK(degnn_runtime, caf::id_block::degnn_coordinator::end)
CAF_ADD_TYPE_ID(degnn_runtime, (degnn::node_greeting))
CAF_ADD_ATOM(degnn_runtime, degnn, greet_atom, "greet")
CAF_ADD_ATOM(degnn_runtime, degnn, greeted_atom, "greeted")
CAF_ADD_ATOM(degnn_runtime, degnn, workers_atom, "workers")
CAF_ADD_ATOM(degnn_runtime, degnn, ready_atom, "ready")
CAF_ADD_ATOM(degnn_runtime, degnn, bye_atom, "bye")
CAF_END_TYPE_ID_BLOCK(degnn_runtime)

namespace degnn {

/// greet (a peer that connected -> this node's id; refused with the first differing setting when
/// the peer's identity differs), greeted (node id -> whether it greeted; asked locally; the
/// refusal's error once a greeting of that node was refused), workers (-> this node's batch actor,
/// shard and store, one entry each), view (every node's workers, from the local runtime once
/// connected -> handed to the local workers), ready (every node's workers -> the number of training
/// nodes of this node's partition, once this node has its view and each remote actor answered a
/// report; not_ready before the view), bye (-> true, then the node actor quits and its node stops).
using node_actor = caf::typed_actor<caf::replies_to<greet_atom, node_greeting>::with<std::int32_t>,
                                    caf::replies_to<greeted_atom, std::int32_t>::with<bool>,
                                    caf::replies_to<workers_atom>::with<peer_view>,
                                    caf::replies_to<view_atom, peer_view>::with<bool>,
                                    caf::replies_to<ready_atom, peer_view>::with<std::int64_t>,
                                    caf::replies_to<bye_atom>::with<bool>>;

/// Spawns node `id`'s node actor for its local worker actors; `identity` is this node's cluster
/// identity lines, which every greeting must match; num_train: its partition's training nodes;
/// nodes: the cluster's size. A view only from this process, bye only from node 0 or this
/// process, one greeting per other rank.
node_actor spawn_node_actor(caf::actor_system& sys, int id, const worker_actors& local,
                            const wire::context& ctx, std::vector<std::string> identity,
                            std::int64_t num_train, int nodes);

/// Registers the runtime's message types (after add_actor_types).
void add_runtime_types(caf::actor_system_config& cfg);

}  // namespace degnn
