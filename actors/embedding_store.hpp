// The embedding-store actor: one per partition, beside its shard. It keeps the partition's
// historical embeddings quantized (model/embedding_table.hpp): its shard puts the rows a step
// computed once the step's gradient phase runs (and the exact rows of the evaluation pass at
// set-up), and any shard gets the rows it reads that are newer than the version it holds.
#pragma once

#include <memory>

#include "actors/message_guard.hpp"
#include "actors/messages.hpp"
#include "actors/reports.hpp"
#include "actors/worker_settings.hpp"
#include "model/embedding_table.hpp"
#include "model/partition_book.hpp"
#include "model/partition_store.hpp"
#include "serialization/traffic.hpp"

namespace degnn {

struct store_settings {
  std::vector<int> widths;  ///< widths of levels 1 .. L-1 (h^(1) .. h^(L-1))
  int bits = 8;             ///< 32 (exact), 16, 8, 4 or 2 per value
  bool stochastic_rounding = false;
  reject_log on_reject;
};

struct store_state {
  static constexpr const char* name = "degnn.embedding_store";
  std::shared_ptr<const graph_partition> part;  ///< level 0 (features) is served from here
  std::shared_ptr<const partition_book> book;
  std::unique_ptr<embedding_table> table;
  wire::context ctx;
  message_guard guard;                ///< refuses damaged and repeated requests
  wire::traffic sent;                 ///< replies to other nodes
  std::uint64_t rejected = 0;         ///< requests that failed validation
  mailbox_counts mailbox;             ///< queued requests when serving one, and the peak
  std::vector<caf::node_id> members;  ///< nodes of the view: the only senders of gets served
  reject_log on_reject;
  /// Set when a put was refused: the history is then not the step's, and every later get is
  /// refused with this cause (gets queue behind puts, so none reads the stale rows).
  std::string failed_commit;
};

store_actor::behavior_type store_behavior(store_actor::stateful_pointer<store_state> self,
                                          std::shared_ptr<const graph_partition> part,
                                          std::shared_ptr<const partition_book> book,
                                          store_settings settings, wire::context ctx);

}  // namespace degnn
