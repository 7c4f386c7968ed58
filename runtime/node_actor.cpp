// The node actor's behaviour.
#include "runtime/node_actor.hpp"

#include <memory>
#include <set>

#include "actors/gather.hpp"

namespace degnn {

namespace {

struct node_state {
  static constexpr const char* name = "degnn.node";
  int id = 0;
  worker_actors local;
  wire::context ctx;
  std::set<std::int32_t> greeted;  ///< peers whose connection to this node is set up
  bool has_view = false;           ///< the local workers know every peer
};

node_actor::behavior_type node_behavior(node_actor::stateful_pointer<node_state> self, int id,
                                        worker_actors local, wire::context ctx) {
  self->state.id = id;
  self->state.local = std::move(local);
  self->state.ctx = ctx;
  return {
      [self](greet_atom, std::int32_t peer) {
        self->state.greeted.insert(peer);
        return static_cast<std::int32_t>(self->state.id);
      },
      [self](greeted_atom, std::int32_t peer) { return self->state.greeted.count(peer) > 0; },
      [self](workers_atom) {
        cluster_handles h{
            {self->state.local.batch}, {self->state.local.shard}, {self->state.local.store}};
        return h.view();
      },
      [self](view_atom, const peer_view& all) -> caf::result<bool> {
        auto& st = self->state;
        if (st.has_view) return actor_error(actor_errc::rejected, "the view is given once");
        self->send(st.local.shard, view_atom_v, all);
        self->send(st.local.batch, view_atom_v, all);
        st.has_view = true;
        return true;
      },
      [self](ready_atom, const peer_view& all) -> caf::result<bool> {
        if (!self->state.has_view)
          return actor_error(actor_errc::not_ready, "node " + std::to_string(self->state.id) +
                                                        " is still connecting to its peers");
        if (all.shards.size() != all.batchers.size() || all.stores.size() != all.batchers.size())
          return actor_error(actor_errc::rejected, "a view with lists of different lengths");
        // A traffic report of every other node's actors: answered by each, counted by none.
        const wire::control ask{.h = {0, self->state.id}, .what = wire::control_kind::result};
        const auto msg = pack(wire::kind::control, wire::encode(self->state.ctx, ask));
        std::vector<wire_request<batch_actor, report_atom>> batchers;
        std::vector<wire_request<shard_actor, report_atom>> shards;
        std::vector<wire_request<store_actor, report_atom>> stores;
        for (size_t p = 0; p < all.batchers.size(); ++p) {
          if (static_cast<int>(p) == self->state.id) continue;
          batchers.push_back({caf::actor_cast<batch_actor>(all.batchers[p]), msg});
          shards.push_back({caf::actor_cast<shard_actor>(all.shards[p]), msg});
          stores.push_back({caf::actor_cast<store_actor>(all.stores[p]), msg});
        }
        auto rp = self->make_response_promise<bool>();
        const auto timeout = std::chrono::milliseconds(2000);
        auto fail = [self, rp](const caf::error& e) mutable {
          rp.deliver(actor_error(actor_errc::peer_failed,
                                 "node " + std::to_string(self->state.id) +
                                     ": a peer's actor did not answer: " + caf::to_string(e)));
        };
        gather(
            self, report_atom_v, std::move(batchers), timeout,
            [self, rp, timeout, fail, shards = std::move(shards),
             stores = std::move(stores)](std::vector<wire_message>&) mutable {
              gather(
                  self, report_atom_v, std::move(shards), timeout,
                  [self, rp, timeout, fail,
                   stores = std::move(stores)](std::vector<wire_message>&) mutable {
                    gather(
                        self, report_atom_v, std::move(stores), timeout,
                        [rp](std::vector<wire_message>&) mutable { rp.deliver(true); }, fail);
                  },
                  fail);
            },
            fail);
        return rp;
      },
      [self](bye_atom) {
        self->quit();
        return true;
      },
  };
}

}  // namespace

node_actor spawn_node_actor(caf::actor_system& sys, int id, const worker_actors& local,
                            const wire::context& ctx) {
  return sys.spawn(node_behavior, id, local, ctx);
}

void add_runtime_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::degnn_runtime>();
}

}  // namespace degnn
