// The node process's protocol, all of it: the greeting and role types, the CAF type-ID block
// that follows the actors' two (actors/messages.hpp), and the node actor's typed interface.
// Every message between node actors is listed here; the node actor's behaviour is
// runtime/node/node_actor.cpp.
#pragma once

#include <caf/all.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "actors/messages.hpp"
#include "runtime/train/validation_history.hpp"

namespace degnn {

/// What a connecting node says first: its rank, its cluster identity lines (see
/// runtime/train/cluster_identity.hpp) and its own node actor, which the greeted node then reaches
/// over the same connection (a second connection between two nodes confuses CAF's routing, and with
/// TLS it never works). Handshake of the runtime, next to the node actor's handles.
struct node_greeting {
  std::int32_t rank = 0;
  std::vector<std::string> identity;
  caf::strong_actor_ptr node;
  std::string secret;  ///< the view's secret (joined clusters): only members know it
  /// To node 0 only, from a node started with --allow-faults: what node 0 must show to have
  /// this node killed or stopped (no other member learns it).
  std::string kill_token;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_greeting& x) {
  return f(caf::meta::type_name("degnn.node_greeting"), x.rank, x.identity, x.node, x.secret,
           x.kill_token);
}

/// What this node serves, once it knows its rank (from this process only): its workers, one
/// entry per partition it serves (in `partitions` order), and their training-set sizes.
struct node_role {
  std::int32_t rank = 0;
  std::int32_t nodes = 0;
  std::vector<std::int32_t> partitions;
  peer_view workers;
  std::vector<std::int64_t> num_train;
  std::string view_secret;  ///< what greetings and node 0's bye must carry ("" in a static cluster)
  std::uint64_t view_id = 1;  ///< the membership view this role belongs to
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_role& x) {
  return f(caf::meta::type_name("degnn.node_role"), x.rank, x.nodes, x.partitions, x.workers,
           x.num_train, x.view_secret, x.view_id);
}

/// An evaluated epoch (1-based epoch, validation and test accuracy): the coordinator gives every
/// member the run's after each evaluation, so a successor's closing line names the best
/// validation epoch of the whole run, not only of the epochs it coordinated.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, validation_point& x) {
  return f(caf::meta::type_name("degnn.validation_point"), x.epoch, x.valid, x.test);
}

}  // namespace degnn

CAF_BEGIN_TYPE_ID_BLOCK(degnn_runtime, caf::id_block::degnn_coordinator::end)
CAF_ADD_TYPE_ID(degnn_runtime, (degnn::node_greeting))
CAF_ADD_TYPE_ID(degnn_runtime, (degnn::node_role))
CAF_ADD_TYPE_ID(degnn_runtime, (std::vector<degnn::validation_point>))
CAF_ADD_TYPE_ID(degnn_runtime, (std::vector<std::int64_t>))
CAF_ADD_ATOM(degnn_runtime, degnn, greet_atom, "greet")
CAF_ADD_ATOM(degnn_runtime, degnn, greeted_atom, "greeted")
CAF_ADD_ATOM(degnn_runtime, degnn, workers_atom, "workers")
CAF_ADD_ATOM(degnn_runtime, degnn, ready_atom, "ready")
CAF_ADD_ATOM(degnn_runtime, degnn, bye_atom, "bye")
CAF_ADD_ATOM(degnn_runtime, degnn, join_atom, "join")
CAF_ADD_ATOM(degnn_runtime, degnn, formed_atom, "formed")
CAF_ADD_ATOM(degnn_runtime, degnn, last_call_atom, "lastcall")
CAF_ADD_ATOM(degnn_runtime, degnn, serve_atom, "serve")
CAF_ADD_ATOM(degnn_runtime, degnn, challenge_atom, "challenge")
CAF_ADD_ATOM(degnn_runtime, degnn, manifest_atom, "manifest")
CAF_ADD_ATOM(degnn_runtime, degnn, chunk_atom, "chunk")
CAF_ADD_ATOM(degnn_runtime, degnn, fetching_atom, "fetching")
CAF_ADD_ATOM(degnn_runtime, degnn, console_atom, "console")
CAF_ADD_ATOM(degnn_runtime, degnn, farewell_atom, "farewell")
CAF_ADD_ATOM(degnn_runtime, degnn, kill_atom, "faultkill")
CAF_ADD_ATOM(degnn_runtime, degnn, kill_now_atom, "killnow")
CAF_ADD_ATOM(degnn_runtime, degnn, cut_atom, "faultcut")
CAF_ADD_ATOM(degnn_runtime, degnn, node_stats_atom, "nodestats")
CAF_ADD_ATOM(degnn_runtime, degnn, stats_poll_atom, "statspoll")
CAF_ADD_ATOM(degnn_runtime, degnn, recover_atom, "recover")
CAF_ADD_ATOM(degnn_runtime, degnn, recovery_atom, "recovery")
CAF_ADD_ATOM(degnn_runtime, degnn, replace_atom, "replace")
CAF_ADD_ATOM(degnn_runtime, degnn, place_atom, "place")
CAF_ADD_ATOM(degnn_runtime, degnn, offer_atom, "offer")
CAF_ADD_ATOM(degnn_runtime, degnn, gone_atom, "gone")
CAF_ADD_ATOM(degnn_runtime, degnn, watch_atom, "watch")
CAF_ADD_ATOM(degnn_runtime, degnn, validation_atom, "validation")
CAF_END_TYPE_ID_BLOCK(degnn_runtime)

namespace degnn {

/// manifest (-> the seed's partition files as a wire::file_manifest), chunk (a
/// wire::file_chunk_request -> the wire::file_chunk; the seed only, files of its manifest only),
/// challenge (-> 32 random bytes a joiner or an operator must sign when the cluster uses TLS),
/// console (a wire::console_request -> a wire::console_reply; node 0 only; with TLS only with an
/// operator certificate's proof),
/// join (a wire::join_request -> the encoded wire::membership_view once the cluster formed;
/// refused with the reason on anything but the seed, on differing settings, a taken address or
/// name, a full or formed cluster, and with TLS a proof that fails or answers no challenge of
/// this seed to this asker), formed (-> the view once formed; this process only),
/// lastcall (the seed's own timer), fetching (how far this node's partition download is, from
/// this process: greetings meanwhile say so, and the others wait while it moves on), serve (this
/// node's role, this process only, once per view), greet (a peer that connected -> this node's
/// rank; not_ready before serve; refused with the first differing setting when the peer's identity
/// differs), greeted (rank -> its greeting, with an empty node until it greeted; the refusal once a
/// greeting of that rank was refused), workers
/// (the view id the asker is at -> this node's batch actors, shards and stores, one entry per
/// partition it serves; not_ready while this node is at an older view), view (every
/// partition's workers, from this process once connected -> handed to the local workers), ready
/// (every partition's workers
/// -> the training-set size of each partition this node serves, once this node has its view and
/// each remote actor answered a report; not_ready before), bye (the view's secret and "" or why the
/// coordinator stopped the run -> true: the coordinator going away is now the end of the run, not
/// a loss to recover from), farewell (-> nothing before the coordinator's bye, then its one
/// string; this process only), faultkill
/// (this node's kill token, SIGKILL or SIGSTOP -> true, then the signal: a test run's fault from
/// node 0's console, refused unless this node was started with --allow-faults), killnow (the
/// signal, now; this process only), nodestats (-> this process's peak resident memory in KiB;
/// node 0 only), statspoll (node 0, this process only: ask every member its nodestats, each
/// second, for the console's `nodes`), recover (node 0 with the view's secret: a new encoded
/// wire::membership_view after a member was lost -> true; this node's runtime picks it up,
/// rolls its workers back and serves the new view's role), recovery (this process only -> the
/// view node 0 announced and nobody took yet, or nothing); on the seed, this process only:
/// replace (the live members' names and HOST:PORTs, which a replacement may not take -> the
/// encoded join request of the next node that joins the formed cluster, held until place), place
/// (the new view -> true: the held joiners get it, and the ranks it replaced may greet again),
/// offer (a file of the seed's checkpoint folder -> true: listed in the manifest under checkpoint/
/// and served, to accepted replacements only, like a partition file); gone (this process only ->
/// the ranks that greeted this node, or that it watches, and whose node actor is down since: a
/// killed process is known at once, without waiting for a probe to time out); watch (a rank this
/// node connected to and its node actor, this process only -> true: counted in gone once down);
/// validation (the coordinator with the view's secret: the run's evaluated epochs so far, kept;
/// this process only: -> the last ones kept).
using node_actor = caf::typed_actor<
    caf::replies_to<manifest_atom>::with<std::vector<char>>,
    caf::replies_to<chunk_atom, std::vector<char>>::with<std::vector<char>>,
    caf::replies_to<challenge_atom>::with<std::vector<char>>,
    caf::replies_to<console_atom, std::vector<char>>::with<std::vector<char>>,
    caf::replies_to<console_atom, std::string, std::string, std::string>::with<std::vector<char>>,
    caf::replies_to<join_atom, std::vector<char>>::with<std::vector<char>>,
    caf::replies_to<formed_atom, std::string>::with<std::vector<char>>,
    caf::reacts_to<last_call_atom, std::string>,
    caf::reacts_to<fetching_atom, std::string, std::string>,
    caf::replies_to<serve_atom, node_role, std::string>::with<bool>,
    caf::replies_to<greet_atom, node_greeting>::with<std::int32_t>,
    caf::replies_to<greeted_atom, std::int32_t>::with<node_greeting>,
    caf::replies_to<workers_atom, std::uint64_t>::with<peer_view>,
    caf::replies_to<view_atom, peer_view, std::string>::with<bool>,
    caf::replies_to<ready_atom, peer_view>::with<std::vector<std::int64_t>>,
    caf::replies_to<bye_atom, std::string, std::string>::with<bool>,
    caf::replies_to<farewell_atom, std::string>::with<std::vector<std::string>>,
    caf::replies_to<kill_atom, std::string, std::int32_t>::with<bool>,
    caf::replies_to<cut_atom, std::string, std::uint64_t>::with<bool>,
    caf::reacts_to<kill_now_atom, std::string, std::int32_t>,
    caf::replies_to<node_stats_atom>::with<std::vector<std::int64_t>>,
    caf::reacts_to<stats_poll_atom, std::string>,
    caf::replies_to<recover_atom, std::vector<char>, std::string>::with<bool>,
    caf::replies_to<recovery_atom, std::string>::with<std::vector<char>>,
    caf::replies_to<replace_atom, std::vector<std::string>, std::string>::with<std::vector<char>>,
    caf::replies_to<place_atom, std::vector<char>, std::string>::with<bool>,
    caf::replies_to<offer_atom, std::string, std::string>::with<bool>,
    caf::replies_to<gone_atom, std::string>::with<std::vector<std::int32_t>>,
    caf::replies_to<watch_atom, std::int32_t, caf::strong_actor_ptr, std::string>::with<bool>,
    caf::reacts_to<validation_atom, std::vector<validation_point>, std::string>,
    caf::replies_to<validation_atom, std::string>::with<std::vector<validation_point>>>;

}  // namespace degnn
