// The node actor's behaviour.
#include "runtime/node_actor.hpp"

#include <map>
#include <memory>
#include <set>

#include "actors/gather.hpp"
#include "runtime/cluster_identity.hpp"

namespace degnn {

namespace {

struct node_state {
  static constexpr const char* name = "degnn.node";
  int id = 0;
  worker_actors local;
  wire::context ctx;
  int nodes = 0;  ///< the cluster's size
  std::vector<std::string> identity;
  std::int64_t num_train = 0;
  std::vector<caf::node_id> node0;              ///< node 0's CAF node, from the view
  std::set<std::int32_t> greeted;               ///< peers whose connection to this node is set up
  std::map<std::int32_t, std::string> refused;  ///< peers whose settings differ, and how
  bool has_view = false;                        ///< the local workers know every peer
};

node_actor::behavior_type node_behavior(node_actor::stateful_pointer<node_state> self, int id,
                                        worker_actors local, wire::context ctx,
                                        std::vector<std::string> identity, std::int64_t num_train,
                                        int nodes) {
  self->state.id = id;
  self->state.nodes = nodes;
  self->state.identity = std::move(identity);
  self->state.num_train = num_train;
  self->state.local = std::move(local);
  self->state.ctx = ctx;
  return {
      [self](greet_atom, const node_greeting& g) -> caf::result<std::int32_t> {
        auto& st = self->state;
        // Each other rank greets once (a higher one when it connects, a lower one when it
        // connects back): anything else is not a peer of this cluster, and must not mark a
        // real rank refused or greeted.
        if (g.rank < 0 || g.rank == st.id || g.rank >= st.nodes || st.greeted.count(g.rank) > 0 ||
            st.refused.count(g.rank) > 0) {
          return actor_error(actor_errc::rejected, "node " + std::to_string(st.id) +
                                                       " takes no greeting from rank " +
                                                       std::to_string(g.rank) + " now");
        }
        const std::string diff = cluster_identity{st.identity}.difference(
            g.identity, "node " + std::to_string(st.id), "node " + std::to_string(g.rank));
        if (!diff.empty()) {
          const std::string why = "settings that must agree differ: " + diff;
          st.refused.emplace(g.rank, why);
          return actor_error(actor_errc::rejected, why);
        }
        st.greeted.insert(g.rank);
        return static_cast<std::int32_t>(st.id);
      },
      [self](greeted_atom, std::int32_t peer) -> caf::result<bool> {
        auto& st = self->state;
        if (auto it = st.refused.find(peer); it != st.refused.end())
          return actor_error(actor_errc::rejected, it->second);
        return st.greeted.count(peer) > 0;
      },
      [self](workers_atom) {
        cluster_handles h{
            {self->state.local.batch}, {self->state.local.shard}, {self->state.local.store}};
        return h.view();
      },
      [self](view_atom, const peer_view& all) -> caf::result<bool> {
        auto& st = self->state;
        if (!outsider(self->current_sender(), self->node(), {}).empty())
          return actor_error(actor_errc::rejected, "the view comes from this node's runtime only");
        if (st.has_view) return actor_error(actor_errc::rejected, "the view is given once");
        if (!all.batchers.empty() && all.batchers.front())
          st.node0 = {all.batchers.front()->node()};
        self->send(st.local.shard, view_atom_v, all);
        self->send(st.local.batch, view_atom_v, all);
        self->send(st.local.store, view_atom_v, all);
        st.has_view = true;
        return true;
      },
      [self](ready_atom, const peer_view& all) -> caf::result<std::int64_t> {
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
        auto rp = self->make_response_promise<std::int64_t>();
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
                        [self, rp](std::vector<wire_message>&) mutable {
                          rp.deliver(self->state.num_train);
                        },
                        fail);
                  },
                  fail);
            },
            fail);
        return rp;
      },
      [self](bye_atom) -> caf::result<bool> {
        // From node 0 (its actors are partition 0's in the view) or this process only.
        auto& st = self->state;
        const auto sender = self->current_sender();
        const bool from_node0 = sender && !st.node0.empty() && sender->node() == st.node0.front();
        if (!from_node0 && !outsider(sender, self->node(), {}).empty())
          return actor_error(actor_errc::rejected, "bye is taken from node 0 only");
        self->quit();
        return true;
      },
  };
}

}  // namespace

node_actor spawn_node_actor(caf::actor_system& sys, int id, const worker_actors& local,
                            const wire::context& ctx, std::vector<std::string> identity,
                            std::int64_t num_train, int nodes) {
  return sys.spawn(node_behavior, id, local, ctx, std::move(identity), num_train, nodes);
}

void add_runtime_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::degnn_runtime>();
}

}  // namespace degnn
