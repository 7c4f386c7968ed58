// One worker's actors: spawn, wire, stop.
#include "runtime/worker_actors.hpp"

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
                    .stochastic_rounding = settings.stochastic_rounding};
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

void stop_worker(caf::scoped_actor& self, const worker_actors& w) {
  self->send_exit(w.batch, caf::exit_reason::user_shutdown);
  self->send_exit(w.shard, caf::exit_reason::user_shutdown);
  self->send_exit(w.store, caf::exit_reason::user_shutdown);
}

}  // namespace degnn
