// The batch actor: one per worker, co-located with its partition's shard. In the centralized
// (DistDGL-style) pipeline it samples its batch hop by hop, asking each remote owner once per hop,
// pulls the remote input features, trains its model replica on the batch and returns the gradient
// for the all-reduce. It also runs its partition's share of layer-wise evaluation.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "actors/compute_counters.hpp"
#include "actors/messages.hpp"
#include "actors/stage_log.hpp"
#include "model/local_cg.hpp"
#include "model/partition_book.hpp"
#include "model/partition_store.hpp"
#include "model/replica.hpp"
#include "serialization/traffic.hpp"

namespace degnn {

struct batch_settings {
  bool decentralized = false;        ///< computation push (DEGNN) instead of pulling (DistDGL)
  std::vector<int> fanouts{10, 25};  ///< seed-first
  std::int32_t batch_size = 1024;
  std::uint64_t seed = 1;                    ///< sampling, batching and dropout
  std::chrono::milliseconds timeout{60000};  ///< every request's limit
  int history_bits = 8;                      ///< 32 (off), 16, 8, 4 or 2 bits per historical value
  bool stochastic_rounding = false;
  /// A halo row used at step t was confirmed current by its owner at a step > t - staleness.
  int staleness = 1;
  bool fuse_targets = true;  ///< CG fusion level 1: nodes shared by a push's targets computed once
  bool fuse_pushes = true;   ///< level 2: one sub-graph for all pushes of a step (needs level 1)
  double local_bias = 1.0;   ///< see expand_local: remote share of a local expansion's fanout
  bool trace = false;        ///< keep every stage span for a trace file
};

/// One push as the receiving shard serves it: where its nodes are computed and the gradient it
/// got back.
struct served_push {
  wire::computation_push push;
  caf::typed_response_promise<wire_message> rp;
  /// Per listed neighbour and per asked row: (sub-graph, row among its targets).
  std::vector<std::pair<std::int32_t, std::int32_t>> neighbor_at, row_at;
  std::optional<wire::gradient_return> grad;
};

/// Everything a shard holds for one step: every owner's push (its own included), the sub-graphs
/// computing them, what their backward needs and the history rows they produced.
struct served_step {
  std::vector<std::optional<served_push>> pushes;  ///< by sender
  int received = 0;
  bool computed = false;
  std::vector<local_cg> graphs;
  std::vector<local_cg_state> states;
  std::vector<Matrix> outs;              ///< per graph: its targets' rows
  std::vector<std::vector<Matrix>> pre;  ///< per graph, per block: rows to write back as history
};

/// Where the batch actor's peers are. Index = partition id; the entry of its own part is unused.
/// Filled by whoever wires the cluster; `ready` is set (release) once both lists are complete,
/// and the batch actor reads the lists only after seeing it (acquire).
struct cluster_view {
  std::vector<shard_actor> shards;
  std::vector<batch_actor> batchers;
  std::atomic<bool> ready{false};
};

struct batch_state {
  static constexpr const char* name = "degnn.batch";
  std::shared_ptr<const graph_partition> part;
  std::shared_ptr<const partition_book> book;
  /// Filled by whoever wires the cluster, before the first step; read-only afterwards.
  std::shared_ptr<const cluster_view> view;
  std::unique_ptr<model_replica> replica;
  batch_settings settings;
  wire::context ctx;
  wire::traffic sent;          ///< messages to other nodes
  std::uint64_t rejected = 0;  ///< requests that failed validation
  std::vector<node_id> train_global;
  std::int64_t batches_epoch = -1;
  std::vector<std::vector<node_id>> batches;
  std::vector<std::int32_t> scratch;  ///< global id -> local block index, -1 between uses
  std::vector<std::int32_t> degree;   ///< in-degree of nodes met in the current step
  std::vector<Matrix> eval_h;         ///< eval_h[l]: h^(l) of the owned nodes, l >= 1
  // -- decentralized pipeline --
  std::vector<Matrix> history;  ///< history[l]: last computed h^(l) of owned nodes
  std::vector<std::vector<std::uint64_t>> history_version;  ///< step each row was computed at
  std::vector<Matrix> halo_rows;  ///< halo_rows[l]: cached rows of part->halo at level l
  std::vector<std::vector<std::uint64_t>> halo_version;  ///< version held (wire::kNoVersion: none)
  std::vector<std::vector<std::int64_t>> halo_checked;  ///< step its owner confirmed it (-1: never)
  bool halo_features_loaded = false;  ///< level 0 (features) is pulled once: it never changes
  std::map<std::uint64_t, served_step> served;  ///< by step
  compute_counters work;
  /// Averaged gradients applied so far; a step's forward needs as many as its step control says
  /// (the previous step's may still be in its all-reduce while this one prepares).
  std::uint64_t applies_done = 0;
  std::map<std::uint64_t, std::uint64_t> applies_needed;  ///< by step
  /// Work of a step waiting for its weights: (step, what to run).
  std::vector<std::pair<std::uint64_t, std::function<void()>>> waiting_for_weights;
  stage_log stages;       ///< time per pipeline stage (and, when tracing, the spans)
  std::set<int> greeted;  ///< peers whose node connected to this one (degnn node set-up)
};

/// Spawn with `sys.spawn(batch_behavior, part, book, view, replica_config, settings, ctx)`.
/// Control messages: step, evaluate, checkpoint (parameters), result (traffic, work and stage
/// time report), trace (Chrome trace events of the stages),
/// epoch (readiness probe: fails until the cluster view is ready; value 1 also reaches every peer,
/// 2 is a peer node's greeting, 3 asks which of the nodes in counts greeted), shutdown (replies,
/// then quits).
/// The coordinator lives on partition 0's node: replies to it from other parts count as traffic.
batch_actor::behavior_type batch_behavior(batch_actor::stateful_pointer<batch_state> self,
                                          std::shared_ptr<const graph_partition> part,
                                          std::shared_ptr<const partition_book> book,
                                          std::shared_ptr<const cluster_view> view,
                                          replica_config model, batch_settings settings,
                                          wire::context ctx);

}  // namespace degnn
