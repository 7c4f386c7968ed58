// The coordinator: drives steps and epochs over the batch actors, averages their gradients (the
// all-reduce, gathered at the coordinator and broadcast back), runs distributed layer-wise
// evaluation on the shards and collects every actor's counters. It is an event-based actor on
// partition 0's node that runs one command at a time, in order, and answers `status` at any time
// (the console asks it); every request it makes has a finite timeout. The `coordinator` class is
// its blocking client for the runtime's epoch loop and the tests.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "actors/compute_counters.hpp"
#include "actors/messages.hpp"
#include "actors/stage_log.hpp"
#include "serialization/traffic.hpp"

namespace degnn {

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

/// runstep (epoch, batch index, global step, decentralized -> step_result), finish (the gradient
/// phase of a step still in flight -> true), inithist (layers, step -> true), evaluate (layers,
/// step -> eval_result), params (step -> replica_parameters), report (-> cluster_report), trace
/// (-> Chrome trace JSON), configure (pipelined, keep spans -> true), save (next step, wait ->
/// next step: a coordinated checkpoint), status (-> at once), settings (staleness -> true: every
/// shard takes it at the step boundary, a step in flight finished first).
using coordinator_actor =
    caf::typed_actor<caf::replies_to<run_step_atom, std::uint32_t, std::uint64_t, std::uint64_t,
                                     bool>::with<step_result>,
                     caf::replies_to<finish_atom>::with<bool>,
                     caf::replies_to<init_hist_atom, std::int32_t, std::uint64_t>::with<bool>,
                     caf::replies_to<eval_atom, std::int32_t, std::uint64_t>::with<eval_result>,
                     caf::replies_to<params_atom, std::uint64_t>::with<replica_parameters>,
                     caf::replies_to<report_atom>::with<cluster_report>,
                     caf::replies_to<trace_atom>::with<std::string>,
                     caf::replies_to<trace_atom, bool>::with<bool>,
                     caf::replies_to<configure_atom, bool, bool, bool>::with<bool>,
                     caf::replies_to<save_atom, std::uint64_t, bool>::with<std::uint64_t>,
                     caf::replies_to<status_atom>::with<coordinator_status>,
                     caf::replies_to<settings_atom, std::int32_t>::with<bool>>;

/// Spawns the coordinator of the cluster whose partition p has batchers[p], shards[p] and
/// stores[p]. timeout bounds every request it makes.
coordinator_actor spawn_coordinator(caf::actor_system& sys, std::vector<batch_actor> batchers,
                                    std::vector<shard_actor> shards,
                                    std::vector<store_actor> stores, wire::context ctx,
                                    std::chrono::milliseconds timeout);

/// Blocking client of a coordinator actor: each call sends one command and waits for its answer
/// (bounded by the command's rounds times the request timeout); a failed command throws
/// std::runtime_error naming the partition and the cause.
class coordinator {
 public:
  /// Spawns a coordinator for the cluster; it stops with this object.
  coordinator(caf::blocking_actor* self, std::vector<batch_actor> batchers,
              std::vector<shard_actor> shards, std::vector<store_actor> stores, wire::context ctx,
              std::chrono::milliseconds timeout);
  ~coordinator();
  coordinator(const coordinator&) = delete;
  coordinator& operator=(const coordinator&) = delete;

  /// One synchronous data-parallel step: every batch actor trains on its batch `index` of `epoch`,
  /// the gradients are averaged over the workers that had seeds, and every replica applies the
  /// average.
  step_result step(std::uint32_t epoch, std::uint64_t index, std::uint64_t global_step);

  /// One decentralized step: every worker runs its batch (pushing computation to the shards that
  /// own its seeds' neighbours), then the gradients every worker accumulated are averaged over the
  /// workers that had seeds and applied everywhere. Pipelined, a step's gradient phase runs with
  /// the next step; finish_steps() (evaluate and parameters call it) completes the last one.
  step_result step_decentralized(std::uint32_t epoch, std::uint64_t index,
                                 std::uint64_t global_step);

  /// Overlap each decentralized step's preparation with the previous step's all-reduce. Results
  /// are the same either way (the forward still waits for the averaged gradient).
  void set_pipelined(bool on);
  /// All-reduce in a ring among the workers (the default), each applying the average itself, or
  /// (false) as a star through the coordinator. Either way every replica applies the average of
  /// the same gradients; the sums differ in the order of their terms (float rounding).
  void set_ring(bool on);
  /// Keep every stage span of the coordinator for chrome_trace().
  void keep_spans();
  /// Reduces and applies the gradient of a step still in flight, if any.
  void finish_steps();

  /// Initialises the decentralized pipeline's history with one exact inference pass.
  void init_history(int num_layers, std::uint64_t global_step);
  /// Exact layer-wise full-neighbour inference over all partitions; accuracy counts per split.
  eval_result evaluate(int num_layers, std::uint64_t global_step);
  /// A coordinated two-phase checkpoint of the state before global step `next_step`, taken at
  /// the step boundary (a step in flight is finished first): every batch actor snapshots its
  /// replica and writes it in the background; once all confirmed the same file, each writes its
  /// commit record. wait: return after the commit; otherwise at once (steps go on while the files
  /// are written; a failure fails the next command). Throws when the checkpoint fails.
  void checkpoint(std::uint64_t next_step, bool wait);

  /// Decentralized: every shard uses halo rows confirmed within `staleness` steps from the next
  /// step on (a step in flight is finished first).
  void set_staleness(int staleness);
  /// Every actor keeps its stage spans anew from now on (true; chrome_trace() then has the steps
  /// since) or stops keeping them (false). Between steps (the console's trace start / stop).
  void set_tracing(bool on);

  /// Every replica's parameters (to check they agree, or to checkpoint).
  std::vector<std::vector<float>> parameters(std::uint64_t global_step);
  /// Sum of every actor's counters and the coordinator's own.
  cluster_traffic traffic();
  /// The same report with every actor's own counters (the console's `actors`).
  cluster_report report();
  /// A Chrome trace event file (JSON object) of every worker's stages and the coordinator's
  /// phases; process p is partition p, the coordinator is process `parts`.
  std::string chrome_trace();
  /// What the coordinator is doing, answered at once even during a command.
  coordinator_status status();

  std::size_t num_parts() const { return parts_; }
  const coordinator_actor& handle() const { return actor_; }

 private:
  template <class T, class... Ts>
  T ask(int rounds, Ts&&... xs);

  caf::blocking_actor* self_;
  coordinator_actor actor_;
  std::size_t parts_;
  std::chrono::milliseconds timeout_;
  bool pipelined_ = false;
  bool ring_ = true;
};

}  // namespace degnn
