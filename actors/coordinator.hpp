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

#include "actors/messages.hpp"

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
