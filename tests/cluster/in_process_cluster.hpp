// What the actor tests share: bundled Cora, the model configuration of a run, and a cluster of
// workers' actors (batch actor, shard, embedding store) wired in this process, so that a test can
// drive the coordinator step by step or talk to one batch actor by hand.
#pragma once

#include <caf/all.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "actors/coordinator.hpp"
#include "model/dataset.hpp"
#include "model/partitioner.hpp"
#include "runtime/train/cluster_trainer.hpp"
#include "runtime/train/training_report.hpp"
#include "runtime/train/worker_actors.hpp"

namespace degnn::testing {

/// Bundled Cora, loaded once per test binary.
inline const dataset& cora() {
  static const dataset d = load_dataset(std::filesystem::path(DEGNN_SOURCE_DIR) / "data" / "cora");
  return d;
}

/// A whole cluster run in this process: every step's loss, the result and the best validation
/// accuracy its report kept.
struct traced_run {
  std::vector<double> losses;
  cluster_result result;
  double best_valid = 0;
};

inline traced_run run_traced(const train_settings& s, const dataset& d) {
  traced_run t;
  training_report report(s.pipeline, "", false);
  t.result =
      train_cluster(s, d, report, [&](std::uint64_t, double loss) { t.losses.push_back(loss); });
  t.best_valid = report.best_valid();
  return t;
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
    config() { add_actor_types(*this); }
  };
  config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  std::shared_ptr<const partition_book> book;
  std::vector<std::shared_ptr<const graph_partition>> parts;
  std::vector<worker_actors> workers;
  cluster_handles handles;

  in_process_cluster(const dataset& d, const train_settings& s, const replica_config& rc,
                     const wire::context& ctx) {
    auto owner = partition_graph(d.graph, d.train, s.parts,
                                 parse_partition_method(s.partition_method), s.seed);
    book = std::make_shared<partition_book>(std::move(owner), s.parts);
    for (int p = 0; p < s.parts; ++p) {
      auto part = std::make_shared<graph_partition>(extract_partition(d, *book, p));
      set_feature_layout(*part, s.sparse_features);
      parts.push_back(std::move(part));
    }
    const worker_settings ws = make_worker_settings(s);
    for (const auto& part : parts) {
      workers.push_back(spawn_worker(sys, part, book, rc, ws, ctx));
      handles.batchers.push_back(workers.back().batch);
      handles.shards.push_back(workers.back().shard);
      handles.stores.push_back(workers.back().store);
    }
    const peer_view view = handles.view();
    for (const auto& w : workers)
      send_view(self, w, view);
  }
  ~in_process_cluster() {
    for (const auto& w : workers)
      stop_worker(self, w);
  }

  coordinator make_coordinator(const wire::context& ctx, std::chrono::milliseconds timeout) {
    return coordinator(self.ptr(), handles.batchers, handles.shards, handles.stores, ctx, timeout);
  }

  /// The reply of shard p to one message, or an empty message (kind 0) and the error text in
  /// `error`.
  template <class Atom>
  wire_message ask_shard(int p, Atom atom, wire::kind k, wire::bytes b,
                         std::string* error = nullptr) {
    return ask(handles.shards[static_cast<size_t>(p)], atom, k, std::move(b), error);
  }
  /// The same of embedding store p.
  template <class Atom>
  wire_message ask_store(int p, Atom atom, wire::kind k, wire::bytes b,
                         std::string* error = nullptr) {
    return ask(handles.stores[static_cast<size_t>(p)], atom, k, std::move(b), error);
  }
  /// The same of batch actor p.
  template <class Atom>
  wire_message ask_batcher(int p, Atom atom, wire::kind k, wire::bytes b,
                           std::string* error = nullptr) {
    return ask(handles.batchers[static_cast<size_t>(p)], atom, k, std::move(b), error);
  }

 private:
  template <class Handle, class Atom>
  wire_message ask(const Handle& to, Atom atom, wire::kind k, wire::bytes b, std::string* error) {
    wire_message out;
    self->request(to, std::chrono::seconds(30), atom, pack(k, std::move(b)))
        .receive([&](wire_message& r) { out = std::move(r); },
                 [&](caf::error& e) {
                   if (error) *error = sys.render(e);
                 });
    return out;
  }
};

}  // namespace degnn::testing
