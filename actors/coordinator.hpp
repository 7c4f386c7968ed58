// The coordinator: drives steps and epochs over the batch actors, averages their gradients (the
// all-reduce, gathered at the coordinator and broadcast back), runs distributed layer-wise
// evaluation on the shards and collects every actor's counters. It runs on partition 0's node,
// inside a blocking actor, so its control flow reads top to bottom.
#pragma once

#include <array>
#include <chrono>
#include <optional>
#include <string>
#include <utility>
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
  std::uint64_t correct[3] = {0, 0, 0};  ///< train, valid, test
  std::uint64_t total[3] = {0, 0, 0};
  double accuracy(int split) const {
    return total[split] ? static_cast<double>(correct[split]) / total[split] : 0;
  }
};

struct cluster_traffic {
  wire::traffic sent;          ///< all messages that crossed nodes
  std::uint64_t rejected = 0;  ///< requests any actor refused
  compute_counters work;       ///< decentralized: summed over the batch actors
  std::array<std::uint64_t, kNumStages> stage_us{};  ///< batch actors' stage time, summed
};

class coordinator {
 public:
  /// batchers[p], shards[p] and stores[p] belong to partition p; the coordinator shares
  /// partition 0's node.
  coordinator(caf::blocking_actor* self, std::vector<batch_actor> batchers,
              std::vector<shard_actor> shards, std::vector<store_actor> stores, wire::context ctx,
              std::chrono::milliseconds timeout);

  /// One synchronous data-parallel step: every batch actor trains on its batch `index` of `epoch`,
  /// the gradients are averaged over the workers that had seeds, and every replica applies the
  /// average. Throws std::runtime_error naming the actor when any request fails or times out.
  step_result step(std::uint32_t epoch, std::uint64_t index, std::uint64_t global_step);

  /// One decentralized step: every worker runs its batch (pushing computation to the owners of
  /// its seeds' neighbours, which pull the stale history they read), then the gradients every
  /// worker accumulated (its own batch and the pushes it served) are averaged over the workers
  /// that had seeds and applied everywhere.
  /// When pipelined, the gradient phase of a step runs together with the next step (see
  /// set_pipelined); call finish_steps() (evaluate and parameters do) to complete the last one.
  step_result step_decentralized(std::uint32_t epoch, std::uint64_t index,
                                 std::uint64_t global_step);

  /// Overlap each decentralized step's preparation with the previous step's all-reduce. Results
  /// are the same either way (the forward still waits for the averaged gradient).
  void set_pipelined(bool on) { pipelined_ = on; }
  /// Reduces and applies the gradient of a step still in flight, if any.
  void finish_steps();

  /// Initialises the decentralized pipeline's history with one exact inference pass.
  void init_history(int num_layers, std::uint64_t global_step);

  /// Exact layer-wise full-neighbour inference over all partitions; accuracy counts per split.
  eval_result evaluate(int num_layers, std::uint64_t global_step);

  /// Every replica's parameters (to check they agree, or to checkpoint).
  std::vector<std::vector<float>> parameters(std::uint64_t global_step);

  /// Sum of every actor's counters and the coordinator's own.
  cluster_traffic traffic();

  std::size_t num_parts() const { return batchers_.size(); }
  /// The coordinator's own phases (step, all-reduce).
  const stage_log& stages() const { return stages_; }
  void keep_spans() { stages_.keep_spans(); }
  /// A Chrome trace event file (JSON object) of every batch actor's stages and the coordinator's
  /// phases; process p is partition p, the coordinator is process `parts`.
  std::string chrome_trace();

 private:
  using handle = decltype(std::declval<caf::blocking_actor*>()->request(
      std::declval<batch_actor>(), std::chrono::milliseconds(), step_atom_v, wire_message{}));
  struct in_flight {
    const char* what = "";
    std::vector<handle> handles;
  };
  /// Sends message p to actor p of one role; collect() waits for every reply (in part order).
  template <class Handle, class Atom>
  in_flight send_all(const std::vector<Handle>& to, Atom atom,
                     const std::vector<wire_message>& messages, const char* what);
  std::vector<wire_message> collect(in_flight& f);
  /// send_all, then collect: the actors work concurrently.
  template <class Handle, class Atom>
  std::vector<wire_message> broadcast(const std::vector<Handle>& to, Atom atom,
                                      const std::vector<wire_message>& messages, const char* what);
  /// One control message per partition, counted.
  std::vector<wire_message> control_messages(const wire::control& c);
  void reduce_and_apply(const std::vector<wire_message>& gradients, int contributors,
                        std::uint64_t global_step);
  /// Averages the summed gradients over the contributors and has every replica apply it.
  void apply_average(std::vector<float> sum, int contributors, std::uint64_t global_step);
  void count(int part, const wire_message& m);

  caf::blocking_actor* self_;
  std::vector<batch_actor> batchers_;
  std::vector<shard_actor> shards_;
  std::vector<store_actor> stores_;
  wire::context ctx_;
  std::chrono::milliseconds timeout_;
  wire::traffic sent_;
  stage_log stages_;
  bool pipelined_ = false;
  std::uint64_t applies_sent_ = 0;  ///< averaged gradients every replica has applied
  struct unreduced_step {
    std::uint64_t step;
    int contributors;
  };
  std::optional<unreduced_step> unreduced_;  ///< a step whose gradient phase has not run yet
};

}  // namespace degnn
