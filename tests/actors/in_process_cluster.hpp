// What the actor tests share: bundled Cora, the model configuration of a run, and a cluster of
// shard and batch actors wired in this process, so that a test can drive the coordinator step by
// step or talk to one batch actor by hand.
#pragma once

#include <caf/all.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "actors/batch_actor.hpp"
#include "actors/shard_actor.hpp"
#include "model/dataset.hpp"
#include "model/partitioner.hpp"
#include "runtime/cluster_trainer.hpp"

namespace degnn::testing {

/// Bundled Cora, loaded once per test binary.
inline const dataset& cora() {
  static const dataset d = load_dataset(std::filesystem::path(DEGNN_SOURCE_DIR) / "data" / "cora");
  return d;
}

/// The model configuration of settings s for dataset d.
inline replica_config full_config(const train_settings& s, const dataset& d) {
  replica_config rc = s.model;
  rc.in_dim = d.num_features();
  rc.num_classes = d.num_classes;
  return rc;
}

struct in_process_cluster {
  struct config : caf::actor_system_config {
    config() { add_message_types<caf::id_block::degnn>(); }
  };
  config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  std::shared_ptr<cluster_view> view = std::make_shared<cluster_view>();
  std::shared_ptr<const partition_book> book;
  std::vector<std::shared_ptr<const graph_partition>> parts;

  in_process_cluster(const dataset& d, const train_settings& s, const replica_config& rc,
                     const wire::context& ctx) {
    auto owner = partition_graph(d.graph, d.train, s.parts,
                                 parse_partition_method(s.partition_method), s.seed);
    book = std::make_shared<partition_book>(std::move(owner), s.parts);
    for (int p = 0; p < s.parts; ++p)
      parts.push_back(std::make_shared<graph_partition>(extract_partition(d, *book, p)));
    const batch_settings bs = make_batch_settings(s);
    for (const auto& part : parts)
      view->shards.push_back(sys.spawn(shard_behavior, part, book, ctx));
    for (const auto& part : parts) {
      view->batchers.push_back(sys.spawn(batch_behavior, part, book,
                                         std::shared_ptr<const cluster_view>(view), rc, bs, ctx));
    }
    view->ready.store(true, std::memory_order_release);
  }
  ~in_process_cluster() {
    for (auto& a : view->batchers)
      self->send_exit(a, caf::exit_reason::user_shutdown);
    for (auto& a : view->shards)
      self->send_exit(a, caf::exit_reason::user_shutdown);
  }

  /// The reply of batch actor p, or an empty message (kind 0) and the error text in `error`.
  wire_message ask(int p, wire::kind k, wire::bytes b, std::string* error = nullptr) {
    wire_message out;
    self->request(view->batchers[static_cast<size_t>(p)], std::chrono::seconds(30), batch_atom_v,
                  wire_message{static_cast<std::uint16_t>(k), std::move(b)})
        .receive([&](wire_message& r) { out = std::move(r); },
                 [&](caf::error& e) {
                   if (error) *error = sys.render(e);
                 });
    return out;
  }
};

}  // namespace degnn::testing
