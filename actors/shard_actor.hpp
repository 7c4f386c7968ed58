// The shard actor: one per graph partition. It owns the partition's in-edges, features and labels
// and a model replica, and serves everything that needs them: the centralized pipeline's sampling
// and feature pulls, the decentralized pipeline's computation pushes (local expansion, fused
// sub-graphs, history pulls, partial sums, their gradients and the history commit), the layers
// of exact evaluation and the halo rows peers need for them. It applies the averaged gradient
// itself (handed on by its worker's batch actor).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "actors/compute_counters.hpp"
#include "actors/message_guard.hpp"
#include "actors/messages.hpp"
#include "actors/reports.hpp"
#include "actors/stage_log.hpp"
#include "actors/weight_gate.hpp"
#include "actors/worker_settings.hpp"
#include "model/gat_push.hpp"
#include "model/halo_cache.hpp"
#include "model/local_cg.hpp"
#include "model/partition_book.hpp"
#include "model/partition_store.hpp"
#include "model/push_plan.hpp"
#include "model/replica.hpp"
#include "serialization/traffic.hpp"

namespace degnn {

/// One push as the shard serves it, and the gradient that came back for it.
struct served_push {
  wire::computation_push push;
  std::vector<float> neighbor_scale;  ///< GCN: per listed neighbour, 1/sqrt(degree + 1)
  caf::typed_response_promise<wire_message> rp;
  std::optional<wire::gradient_return> grad;
  // GAT (a second push, then two returns; docs/design.md section 2):
  bool attended = false;                              ///< the attention push was answered
  gat_push_cache attention;                           ///< what its backward needs
  std::optional<gat_push_gradients> attention_grads;  ///< from the first return
};

/// Everything a shard holds for one decentralized step: every owner's push (its own included),
/// the sub-graphs computing them, what their backward needs and the history rows they produced.
struct served_step {
  std::vector<std::optional<served_push>> pushes;  ///< by sender
  int received = 0;
  bool computed = false;
  push_plan plan;
  std::vector<local_cg> graphs;
  std::vector<local_cg_state> states;
  std::vector<Matrix> outs;              ///< per graph: its targets' rows
  std::vector<std::vector<Matrix>> pre;  ///< per graph, per block: rows to write back as history
};

struct shard_state {
  static constexpr const char* name = "degnn.shard";
  static constexpr const char* role = "shard";  ///< in its errors
  std::shared_ptr<const graph_partition> part;
  std::shared_ptr<const partition_book> book;
  std::vector<shard_actor> shards;  ///< every partition's shard (from the peer view)
  std::vector<store_actor> stores;  ///< every partition's embedding store
  link_sender link;     ///< numbers and (under a fault policy) damages this actor's requests
  message_guard guard;  ///< refuses damaged and repeated requests
  bool has_view = false;
  std::vector<caf::node_id> members;  ///< nodes of the view: the only senders served
  std::unique_ptr<model_replica> replica;
  worker_settings settings;
  wire::context ctx;
  wire::traffic sent;                 ///< messages to other nodes
  std::uint64_t rejected = 0;         ///< requests that failed validation
  mailbox_counts mailbox;             ///< queued requests when serving one, and the peak
  std::vector<std::int32_t> scratch;  ///< global id -> local block index, -1 between uses
  std::vector<Matrix> eval_h;         ///< eval_h[l]: h^(l) of the owned nodes, l >= 1
  // -- decentralized pipeline --
  halo_cache halo;                    ///< rows of remote leaves: features, then history levels
  bool halo_features_loaded = false;  ///< every halo feature row is held (they never change)
  bool history_ready = false;         ///< the set-up is done: steps commit history from now on
  std::map<std::uint64_t, served_step> served;  ///< by step
  /// Set when the store refused a history commit: the history is then not the step's, so every
  /// later decentralized request of this shard fails with this cause.
  std::string commit_failure;
  weight_gate weights;
  compute_counters work;
  stage_log stages;
};

/// Spawn with `sys.spawn(shard_behavior, part, book, replica_config, settings, ctx)`, then send
/// it the peer view.
shard_actor::behavior_type shard_behavior(shard_actor::stateful_pointer<shard_state> self,
                                          std::shared_ptr<const graph_partition> part,
                                          std::shared_ptr<const partition_book> book,
                                          replica_config model, worker_settings settings,
                                          wire::context ctx);

/// Answers a centralized pull (sample_request or feature_request) against a partition: the pure
/// core of those handlers, used by tests. Throws wire::wire_error for a request it must reject.
wire_message serve_shard_request(const graph_partition& part, const partition_book& book,
                                 const wire::context& ctx, const wire_message& request);

}  // namespace degnn
