// One worker's actors: spawn, wire, stop.
#include "runtime/train/worker_actors.hpp"

#include <atomic>
#include <cstdio>

#include "actors/batch_actor.hpp"
#include "actors/embedding_store.hpp"
#include "actors/shard_actor.hpp"

namespace degnn {

worker_actors spawn_worker(caf::actor_system& sys, std::shared_ptr<const graph_partition> part,
                           std::shared_ptr<const partition_book> book, const replica_config& model,
                           const worker_settings& settings, const wire::context& ctx) {
  // History is kept at the levels a shard reads from its peers: h^(1) .. h^(top - 1), each as
  // wide as the hidden layers.
  store_settings ss{.widths = {},
                    .bits = settings.history_bits,
                    .stochastic_rounding = settings.stochastic_rounding,
                    .on_reject = settings.on_reject};
  for (int level = 1; level < settings.top_level(); ++level)
    ss.widths.push_back(model.hidden);
  return {sys.spawn(batch_behavior, part, book, model, settings, ctx),
          sys.spawn(shard_behavior, part, book, model, settings, ctx),
          sys.spawn(store_behavior, part, book, ss, ctx)};
}

peer_view cluster_handles::view() const {
  peer_view v;
  for (const auto& a : batchers)
    v.batchers.push_back(caf::actor_cast<caf::strong_actor_ptr>(a));
  for (const auto& a : shards)
    v.shards.push_back(caf::actor_cast<caf::strong_actor_ptr>(a));
  for (const auto& a : stores)
    v.stores.push_back(caf::actor_cast<caf::strong_actor_ptr>(a));
  return v;
}

void send_view(caf::scoped_actor& self, const worker_actors& w, const peer_view& v) {
  self->send(w.shard, view_atom_v, v);
  self->send(w.batch, view_atom_v, v);
  self->send(w.store, view_atom_v, v);
}

reject_log log_rejections(std::string prefix) {
  // Shared by a process's actors, which call it from their threads: the first 20 refusals are
  // printed, then one in 1,000, so a flood cannot fill the disk.
  auto count = std::make_shared<std::atomic<std::uint64_t>>(0);
  return [prefix = std::move(prefix), count](const std::string& what) {
    const auto n = ++*count;
    if (n <= 20 || n % 1000 == 0)
      std::fprintf(stderr, "%s%s (refusal %llu)\n", prefix.c_str(), what.c_str(),
                   static_cast<unsigned long long>(n));
  };
}

void stop_worker(caf::scoped_actor& self, const worker_actors& w) {
  self->send_exit(w.batch, caf::exit_reason::user_shutdown);
  self->send_exit(w.shard, caf::exit_reason::user_shutdown);
  self->send_exit(w.store, caf::exit_reason::user_shutdown);
}

}  // namespace degnn
