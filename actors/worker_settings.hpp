// The settings of one worker's actors (its batch actor, shard and embedding store), derived by
// the runtime from the training settings; every worker of a run has the same.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/faults/link_faults.hpp"
#include "model/replica.hpp"

namespace degnn {

struct graph_partition;

/// Told of every request an actor refuses, with the actor, the sender and the cause (the runtime
/// logs it); empty: refusals are only counted.
using reject_log = std::function<void(const std::string&)>;

/// Where a replica starts when a run resumes from a committed checkpoint: parameters (in
/// parameter order) and the optimiser's state, the same for every replica.
struct replica_start {
  std::vector<float> parameters;
  adam_state optimizer;
};

/// Default cap on one halo or feature message's row payload: far below Cap'n Proto's 512 MiB
/// limit on one Data field (a 10M-node graph's halo feature rows from one partition were 795 MB).
/// Compressed feature rows are counted at their dense size (feature_row_bytes), so their
/// messages stay within twice the cap however the rows' densities differ.
inline constexpr std::size_t kMaxRowPayloadBytes = std::size_t{32} << 20;

/// How the decentralized history is set up before the first step (docs/design.md section 6): a
/// layer-wise inference pass of the history's levels, whose first layer brings the halo's
/// features (exact: steps read them).
enum class history_setup : std::uint8_t {
  exact,      ///< the hidden layers' halo rows exact (float32)
  quantized,  ///< the hidden layers' halo rows quantized at the history's bits
};

struct worker_settings {
  bool decentralized = false;        ///< computation push (DEGNN) instead of pulling (DistDGL)
  std::vector<int> fanouts{10, 25};  ///< seed-first
  std::int32_t batch_size = 1024;
  std::uint64_t seed = 1;                    ///< sampling, batching and dropout
  std::chrono::milliseconds timeout{60000};  ///< every request's limit
  int history_bits = 8;                      ///< 32 (off), 16, 8, 4 or 2 bits per historical value
  history_setup setup = history_setup::exact;
  /// Rows per halo or feature message are capped near this many payload bytes (tests lower it).
  std::size_t max_row_payload_bytes = kMaxRowPayloadBytes;
  /// Owned nodes per range of an evaluation layer, as layerwise_inference's ranges: a range's
  /// block and gathered rows stay small whatever the part's size (tests lower it).
  std::int32_t evaluation_range = 8192;
  bool stochastic_rounding = false;
  /// A halo row used at step t was confirmed current by its owner at a step > t - staleness.
  int staleness = 1;
  /// Bytes of halo rows a worker keeps, the most read ones (model/halo_rank.hpp); a step pulls
  /// the others it reads from their owners. Decentralized: the shard's feature and history rows
  /// (-1: every row); centralized: the batch actor's feature rows, kept as steps pull them (-1:
  /// none).
  std::int64_t halo_cache_bytes = -1;
  int fusion = 2;           ///< CG fusion level (model/push_plan.hpp): 2, 1 or 0
  double local_bias = 1.0;  ///< see expand_local: remote share of a local expansion's fanout
  bool trace = false;       ///< keep every stage span for a trace file
  reject_log on_reject;
  /// Coordinated checkpoints: partition p's batch actor writes its replica's state to
  /// checkpoint_dir/part-p (empty: a checkpoint request is refused).
  std::string checkpoint_dir;
  std::shared_ptr<const replica_start> start;  ///< null: fresh parameters from the seed
  /// Each evaluation's last layer also writes partition p's predictions (and, with
  /// predictions_embeddings = L > 0, layer L's output) under predictions_dir/part-p, as `degnn
  /// infer` does (model/prediction_files.hpp); empty: nothing is written.
  std::string predictions_dir;
  std::int32_t predictions_embeddings = 0;
  std::uint64_t run_id = 0;  ///< names the run in commit records (what a resume must match)
  /// Told the global step of every step command the batch actor takes, before it starts the
  /// step (the runtime's fault injection crashes a node at a named point here).
  std::function<void(std::uint64_t)> on_step;
  /// Faults to inject on this process's sends to other nodes (null: none), and their counters.
  std::shared_ptr<const fault_policy> faults;
  std::shared_ptr<fault_counters> fault_counts = std::make_shared<fault_counters>();
  /// Set when every partition's shard lives in this address space (an in-process cluster): a
  /// shard's halo cache then reads its halo's feature rows where their owners hold them instead
  /// of keeping copies. The messages that bring them still travel and are checked and counted.
  std::shared_ptr<const std::vector<std::shared_ptr<const graph_partition>>> shared_parts;

  /// The level the shards' partial sums are at: h^(top) of the neighbours, top = layers - 1.
  int top_level() const { return static_cast<int>(fanouts.size()) - 1; }
};

/// Rows of row_bytes each that fit s.max_row_payload_bytes (at least one).
inline std::size_t rows_per_message(const worker_settings& s, std::size_t row_bytes) {
  return std::max<std::size_t>(1, s.max_row_payload_bytes / std::max<std::size_t>(1, row_bytes));
}

/// A new replica, restored to `start` when the run resumes.
inline std::unique_ptr<model_replica> make_replica(const replica_config& c,
                                                   const worker_settings& s) {
  auto r = std::make_unique<model_replica>(c);
  if (s.start) {
    r->set_parameters(s.start->parameters);
    r->optimizer().set_state(s.start->optimizer);
  }
  return r;
}

/// Partition 0's node runs the coordinator: replies to it from other parts count as traffic.
inline constexpr int kCoordinatorPart = 0;

}  // namespace degnn
