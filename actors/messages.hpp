// The actor protocol of DEGNN, all of it: the CAF type-ID blocks (the workers', then the
// coordinator's), one atom per message kind, the coordinator's result types, the typed actor
// interfaces of the shard, embedding-store and batch actors, and the actors' error codes. (The
// node process's own messages are runtime/node/node_protocol.hpp's, the block after these.)
// Every payload that may cross a node is a wire_message (kind + Cap'n Proto bytes), so the bytes
// that cross a process boundary are exactly the bytes that travel in-process and get counted.
#pragma once

#include <caf/all.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "actors/compute_counters.hpp"
#include "actors/stage_log.hpp"
#include "serialization/traffic.hpp"
#include "serialization/wire.hpp"

namespace degnn {

/// One encoded message: its kind (wire::kind) and its Cap'n Proto bytes, with the envelope every
/// receiver checks before it reads them: the sender's sequence number (0: unnumbered, a reply or a
/// command a batch actor passes on to its own shard) and a CRC-32 of kind, number and bytes. The
/// counted traffic is the bytes; the envelope's 14 bytes are overhead like CAF's own header.
struct wire_message;
/// The CRC-32 of m's kind, sequence number and bytes.
std::uint32_t message_crc(const wire_message& m);

struct wire_message {
  std::uint16_t kind = 0;
  std::vector<char> bytes;
  std::uint64_t seq = 0;
  std::uint32_t crc = 0;

  wire_message() = default;
  /// An unnumbered message, sealed: every message made from a kind and bytes carries its checksum.
  wire_message(std::uint16_t k, std::vector<char> b) : kind(k), bytes(std::move(b)) {
    crc = message_crc(*this);
  }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, wire_message& x) {
  return f(caf::meta::type_name("degnn.wire_message"), x.kind, x.bytes, x.seq, x.crc);
}

/// Sets m's checksum; after any change to m, before it is sent.
inline void seal(wire_message& m) {
  m.crc = message_crc(m);
}
/// Gives a sealed m the number seq and seals it again, without reading its bytes again.
void renumber(wire_message& m, std::uint64_t seq);
/// Whether m arrived as it was sealed.
inline bool intact(const wire_message& m) {
  return m.crc == message_crc(m);
}
/// A message received and passed on within the node (a batch actor's to its shard): without its
/// sender's number, which the next receiver would otherwise take for this actor's own.
inline wire_message passed_on(wire_message m) {
  renumber(m, 0);
  return m;
}

/// Where a partition's peers are, index = partition id: sent by whoever wires the cluster (the
/// runtime) to the batch and shard actors before the first step; they refuse work until then.
/// Untyped pointers, because the typed handles below name this type in their own interfaces.
struct peer_view {
  std::vector<caf::strong_actor_ptr> batchers, shards, stores;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, peer_view& x) {
  return f(caf::meta::type_name("degnn.peer_view"), x.batchers, x.shards, x.stores);
}

/// One step's history rows of one level, from a shard to the embedding store beside it (never
/// across nodes, so not a Cap'n Proto message: the rows are moved, not encoded). values holds
/// nodes.size() rows of float32, row-major. version: step + 1 of the step that computed them, or
/// 0 for the initial exact pass (which names every owned node in order).
struct history_commit {
  std::int32_t sender = 0;
  std::int32_t level = 0;
  std::uint64_t version = 0;
  std::vector<std::int32_t> nodes;
  std::vector<float> values;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, history_commit& x) {
  return f(caf::meta::type_name("degnn.history_commit"), x.sender, x.level, x.version, x.nodes,
           x.values);
}

/// Errors of the actors (caf::error with category "degnn"); the context names the actor and the
/// cause.
enum class actor_errc : std::uint8_t {
  rejected = 1,  ///< a request failed validation (counted by the actor that refused it)
  not_ready,     ///< work asked before the actor knows its peers
  peer_failed,   ///< a request this actor made to a peer failed or timed out
  internal,      ///< an actor could not do what was asked (its own data or state)
  damaged,       ///< a message's checksum did not match: refused unread, may be sent again
  superseded,    ///< the asker acts for a view this node has left: it was left behind
};
const char* to_string(actor_errc x);

struct step_result {
  double loss_sum = 0;
  std::uint64_t seeds = 0, correct = 0;
};

struct eval_result {
  std::array<std::uint64_t, 3> correct{};  ///< train, valid, test
  std::array<std::uint64_t, 3> total{};
  double accuracy(int split) const {
    const auto s = static_cast<size_t>(split);
    return total[s] ? static_cast<double>(correct[s]) / static_cast<double>(total[s]) : 0;
  }
};

struct cluster_traffic {
  wire::traffic sent;                                ///< all messages that crossed nodes
  std::uint64_t rejected = 0;                        ///< requests any actor refused
  compute_counters work;                             ///< decentralized: summed over the shards
  std::array<std::uint64_t, kNumStages> stage_us{};  ///< workers' stage time, summed
};

/// What the coordinator is doing (docs/design.md section 9: the console's `progress`).
enum class coordinator_phase : std::uint8_t {
  idle,        ///< between commands
  stepping,    ///< a step: the workers' batches (and, pipelined, the previous step's gradient)
  reducing,    ///< averaging gradients and having every replica apply the average
  evaluating,  ///< exact layer-wise inference
  history,     ///< decentralized set-up: history from the evaluation, halo refresh
  reporting,   ///< collecting parameters, counters or traces
  failed,      ///< a command failed; every later one is refused with the same error
};
const char* to_string(coordinator_phase p);

struct coordinator_status {
  /// A coordinator_phase (kept as its number, the form it travels in).
  std::uint8_t phase_code = static_cast<std::uint8_t>(coordinator_phase::idle);
  std::uint32_t epoch = 0;
  std::uint64_t step = 0;           ///< global step of the last step command
  std::uint64_t steps_done = 0;     ///< step commands answered
  std::uint64_t applies = 0;        ///< averaged gradients every replica applied
  std::uint64_t queued = 0;         ///< commands waiting behind the running one
  double last_loss = 0;             ///< mean loss of the last step (over its labelled seeds)
  std::uint64_t allreduce_us = 0;   ///< time spent averaging and applying, in total
  std::uint64_t step_phase_us = 0;  ///< time spent in step commands, in total
  /// Wall time split: only a step phase running, only an all-reduce (with, decentralized, the
  /// shards' backward that feeds it), both at once (pipelined steps). Totals.
  std::uint64_t steps_only_us = 0, allreduce_only_us = 0, overlap_us = 0;
  std::uint64_t commits = 0;              ///< coordinated checkpoints committed
  std::uint64_t committed_next_step = 0;  ///< the last commit's step to resume with
  /// The last checkpoint every replica wrote and confirmed (phase 1), its records maybe not yet
  /// written: each node holds its file, so a recovery may roll back to it. 0: none yet.
  std::uint64_t durable_next_step = 0;
  std::string error;  ///< why the coordinator failed, if it did

  coordinator_phase phase() const { return static_cast<coordinator_phase>(phase_code); }
  void set_phase(coordinator_phase p) { phase_code = static_cast<std::uint8_t>(p); }
};

/// Every replica's parameters, partition order.
struct replica_parameters {
  std::vector<std::vector<float>> values;
};

/// A cluster_traffic as the coordinator sends it: to_list() / from_list() layout.
struct cluster_report {
  std::vector<std::uint64_t> counts;
  /// Every actor's own report, in order: the batch actors, the shards, the stores (one per
  /// partition each), as they sent it (traffic counters, then for workers work and stage times).
  std::vector<std::vector<std::uint64_t>> per_actor;
  static cluster_report from(const cluster_traffic& t);
  cluster_traffic traffic() const;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_result& x) {
  return f(caf::meta::type_name("degnn.step_result"), x.loss_sum, x.seeds, x.correct);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, eval_result& x) {
  return f(caf::meta::type_name("degnn.eval_result"), x.correct[0], x.correct[1], x.correct[2],
           x.total[0], x.total[1], x.total[2]);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, coordinator_status& x) {
  return f(caf::meta::type_name("degnn.coordinator_status"), x.phase_code, x.epoch, x.step,
           x.steps_done, x.applies, x.queued, x.last_loss, x.allreduce_us, x.step_phase_us,
           x.steps_only_us, x.allreduce_only_us, x.overlap_us, x.commits, x.committed_next_step,
           x.durable_next_step, x.error);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, replica_parameters& x) {
  return f(caf::meta::type_name("degnn.replica_parameters"), x.values);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_report& x) {
  return f(caf::meta::type_name("degnn.cluster_report"), x.counts, x.per_actor);
}

}  // namespace degnn

CAF_ERROR_CODE_ENUM(degnn::actor_errc, "degnn")

CAF_BEGIN_TYPE_ID_BLOCK(degnn, caf::first_custom_type_id)
CAF_ADD_TYPE_ID(degnn, (degnn::wire_message))
CAF_ADD_TYPE_ID(degnn, (degnn::peer_view))
CAF_ADD_TYPE_ID(degnn, (degnn::history_commit))
// -- shard: centralized pulls, evaluation --
CAF_ADD_ATOM(degnn, degnn, sample_atom, "sample")
CAF_ADD_ATOM(degnn, degnn, feature_atom, "feature")
CAF_ADD_ATOM(degnn, degnn, halo_atom, "halo")
CAF_ADD_ATOM(degnn, degnn, eval_atom, "evaluate")
// -- shard: decentralized step --
CAF_ADD_ATOM(degnn, degnn, push_atom, "push")
CAF_ADD_ATOM(degnn, degnn, grad_ret_atom, "gradret")
CAF_ADD_ATOM(degnn, degnn, init_hist_atom, "inithist")
CAF_ADD_ATOM(degnn, degnn, refresh_atom, "refresh")
// -- embedding store --
CAF_ADD_ATOM(degnn, degnn, get_atom, "get")
CAF_ADD_ATOM(degnn, degnn, put_atom, "put")
// -- batch actor, and the step phases both replicas of a worker take part in --
CAF_ADD_ATOM(degnn, degnn, step_atom, "step")
CAF_ADD_ATOM(degnn, degnn, gradient_atom, "gradient")
CAF_ADD_ATOM(degnn, degnn, apply_atom, "apply")
CAF_ADD_ATOM(degnn, degnn, params_atom, "params")
CAF_ADD_ATOM(degnn, degnn, save_atom, "save")
CAF_ADD_ATOM(degnn, degnn, settings_atom, "settings")
CAF_ADD_ATOM(degnn, degnn, ring_atom, "ring")
// -- every actor --
CAF_ADD_ATOM(degnn, degnn, report_atom, "report")
CAF_ADD_ATOM(degnn, degnn, trace_atom, "trace")
CAF_ADD_ATOM(degnn, degnn, view_atom, "view")
CAF_ADD_ATOM(degnn, degnn, relay_atom, "relay")
CAF_ADD_ATOM(degnn, degnn, fire_atom, "fire")
CAF_END_TYPE_ID_BLOCK(degnn)

CAF_BEGIN_TYPE_ID_BLOCK(degnn_coordinator, caf::id_block::degnn::end)
CAF_ADD_TYPE_ID(degnn_coordinator, (degnn::step_result))
CAF_ADD_TYPE_ID(degnn_coordinator, (degnn::eval_result))
CAF_ADD_TYPE_ID(degnn_coordinator, (degnn::coordinator_status))
CAF_ADD_TYPE_ID(degnn_coordinator, (degnn::replica_parameters))
CAF_ADD_TYPE_ID(degnn_coordinator, (degnn::cluster_report))
CAF_ADD_ATOM(degnn_coordinator, degnn, run_step_atom, "runstep")
CAF_ADD_ATOM(degnn_coordinator, degnn, finish_atom, "finish")
CAF_ADD_ATOM(degnn_coordinator, degnn, status_atom, "status")
CAF_ADD_ATOM(degnn_coordinator, degnn, configure_atom, "configure")
CAF_END_TYPE_ID_BLOCK(degnn_coordinator)

namespace degnn {

/// request -> reply, both encoded.
template <class Atom>
using wire_call = typename caf::replies_to<Atom, wire_message>::template with<wire_message>;

/// One per partition: its in-edges, features, labels and a model replica.
///   sample (sample_request -> sample_response), feature (feature_request -> feature_response):
///     the centralized pipeline's pulls;
///   halo (halo_request -> halo_response), evaluate (control -> control with accuracy counts at
///     the last layer): layer-wise exact evaluation;
///   push (computation_push -> partial_aggregate), gradret (gradient_return -> control),
///   gradient (control: back-propagate the step's pushes, commit its history -> allreduce_chunk),
///   inithist, refresh (control -> control): the decentralized pipeline;
///   apply (averaged allreduce_chunk -> control), params (control -> allreduce_chunk);
///   report (control -> traffic, work and stage counters), trace (control -> Chrome events),
///   settings (control settings, counts = [staleness] -> control: between steps).
using shard_actor =
    caf::typed_actor<wire_call<sample_atom>, wire_call<feature_atom>, wire_call<halo_atom>,
                     wire_call<eval_atom>, wire_call<push_atom>, wire_call<grad_ret_atom>,
                     wire_call<gradient_atom>, wire_call<init_hist_atom>, wire_call<refresh_atom>,
                     wire_call<apply_atom>, wire_call<params_atom>, wire_call<report_atom>,
                     wire_call<trace_atom>, wire_call<settings_atom>,
                     caf::reacts_to<view_atom, peer_view>>;

/// One per partition, beside its shard: the quantized historical embeddings of its owned nodes.
///   get (embedding_get -> embedding_rows, rows newer than the asker holds), put (a history_commit
///   of its own shard -> true), report.
using store_actor =
    caf::typed_actor<wire_call<get_atom>, caf::replies_to<put_atom, history_commit>::with<bool>,
                     wire_call<report_atom>, caf::reacts_to<view_atom, peer_view>>;

/// One per worker: the batch owner.
///   step (control -> allreduce_chunk with the step's loss counts: the gradient in the
///   centralized pipeline), gradient (control -> allreduce_chunk: its own and its shard's
///   gradient), apply (averaged allreduce_chunk -> control, after its shard applied it too),
///   params (control -> allreduce_chunk), save (control checkpoint: snapshot the replica and
///   write it in the background -> result with size and CRC-32; control commit: write the commit
///   record -> result), report, trace.
///   With Control.ring set, step and gradient reduce the gradient in a ring among the workers
///   instead: ring (one round's allreduce_chunk from the previous worker -> control), and each
///   worker applies the average itself before answering (step: the loss counts, no values;
///   gradient: control result).
using batch_actor =
    caf::typed_actor<wire_call<step_atom>, wire_call<gradient_atom>, wire_call<apply_atom>,
                     wire_call<params_atom>, wire_call<save_atom>, wire_call<report_atom>,
                     wire_call<trace_atom>, wire_call<ring_atom>,
                     caf::reacts_to<view_atom, peer_view>>;

/// One encoded message of kind k.
inline wire_message pack(wire::kind k, wire::bytes b) {
  return {static_cast<std::uint16_t>(k), std::move(b)};
}

/// Throws wire::wire_error unless m is of kind `expected` (an entry point takes one kind).
inline void expect_kind(const wire_message& m, wire::kind expected) {
  if (m.kind != static_cast<std::uint16_t>(expected)) {
    throw wire::wire_error(std::string("expected a ") + wire::kind_name(expected) + ", got a " +
                           wire::kind_name(static_cast<wire::kind>(m.kind)));
  }
}

/// Whether a view may be taken: the first one, with one entry per partition in every list.
inline bool acceptable_view(const peer_view& v, bool already_have_one, std::size_t parts) {
  return !already_have_one && v.batchers.size() == parts && v.shards.size() == parts &&
         v.stores.size() == parts;
}

/// The CAF nodes hosting a view's actors. Once an actor has its view it serves these nodes only:
/// a process outside the cluster that learned an actor's handle (the node actor hands them out)
/// cannot pull data or push a forged gradient.
std::vector<caf::node_id> member_nodes(const peer_view& v);

/// Empty when the current message's sender may be served, else why not: a member node once the
/// view came (`members` not empty), before it this node only; never an anonymous sender.
std::string outsider(const caf::strong_actor_ptr& sender, const caf::node_id& here,
                     const std::vector<caf::node_id>& members);

/// "actor 12 on node 5E1C...#4711" (CAF's node id: host hash and process id), for logs.
std::string sender_name(const caf::strong_actor_ptr& sender);

/// Tells `log`, when set, that `actor` ("shard 2") refused message m of `sender` because of `why`.
void log_refusal(const std::function<void(const std::string&)>& log, const std::string& actor,
                 const wire_message& m, const caf::strong_actor_ptr& sender,
                 const std::string& why);

/// The typed handles of a peer view's entries.
template <class Handle>
std::vector<Handle> handles_of(const std::vector<caf::strong_actor_ptr>& ptrs) {
  std::vector<Handle> out;
  out.reserve(ptrs.size());
  for (const auto& p : ptrs)
    out.push_back(caf::actor_cast<Handle>(p));
  return out;
}

/// An averaged gradient (round 1) for a replica of `num_parameters`, made by the coordinator
/// (partition 0) or, after a ring all-reduce, by the worker of partition `own_part`; throws
/// wire::wire_error for anything else (only such an average is applied).
wire::allreduce_chunk decode_average(const wire::context& ctx, const wire_message& m,
                                     std::size_t num_parameters, int own_part);

/// Registers the message types and renders actor_errc in errors.
void add_actor_types(caf::actor_system_config& cfg);

/// A caf::error of the actors.
inline caf::error actor_error(actor_errc code, std::string what) {
  return caf::make_error(code, std::move(what));
}

}  // namespace degnn
