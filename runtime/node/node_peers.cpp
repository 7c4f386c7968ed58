// The node actor among its peers: its role in a view, the greetings, the workers it shows and
// takes, readiness, and the figures node 0's console polls.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "actors/gather.hpp"
#include "runtime/node/node_state.hpp"
#include "runtime/process/process_stats.hpp"
#include "runtime/train/cluster_identity.hpp"
#include "runtime/train/status_board.hpp"

namespace degnn::node_detail {

namespace {

// Why greetings and worker requests wait; "fetching" lets the asker extend its deadline.
std::string not_serving_yet(const node_state& st) {
  if (!st.fetching.empty())
    return st.me() + " is fetching its partitions from the seed (" + st.fetching + ")";
  return st.me() + " has not spawned its workers yet";
}

}  // namespace

// This node's role in a view, from its own runtime (again after a recovery).
caf::result<bool> take_role(node_pointer self, node_role& role, const std::string& key) {
  auto& st = self->state;
  if (!from_this_process(self, key) || (st.role && role.view_id <= st.role->view_id))
    return actor_error(actor_errc::rejected, "the role comes once per view, from this process");
  // A new view's role (after a recovery): its workers get their peers anew.
  st.role = std::move(role);
  st.has_view = false;
  return true;
}

// A peer greets this node once per view, with its node actor and settings.
caf::result<std::int32_t> take_greeting(node_pointer self, const node_greeting& g) {
  auto& st = self->state;
  if (!st.role) return actor_error(actor_errc::not_ready, not_serving_yet(st));
  // In a joined cluster only members know the view's secret: anything else is refused
  // before it can mark a rank greeted or refused.
  if (!st.role->view_secret.empty() && g.secret != st.role->view_secret)
    return actor_error(actor_errc::rejected, "a greeting without this view's secret");
  const int id = st.role->rank;
  // Each other rank greets once (a higher one when it connects, a lower one when it
  // connects back): anything else is not a peer of this cluster, and must not mark a
  // real rank refused or greeted.
  if (g.rank < 0 || g.rank == id || g.rank >= st.role->nodes || st.greeted.count(g.rank) > 0 ||
      st.refused.count(g.rank) > 0) {
    return actor_error(actor_errc::rejected,
                       st.me() + " takes no greeting from rank " + std::to_string(g.rank) + " now");
  }
  const std::string diff = cluster_identity{st.identity}.difference(
      g.identity, st.me(), "node " + std::to_string(g.rank));
  if (!diff.empty()) {
    const std::string why = "settings that must agree differ: " + diff;
    st.refused.emplace(g.rank, why);
    return actor_error(actor_errc::rejected, why);
  }
  if (!g.node)
    return actor_error(actor_errc::rejected, "a greeting without the greeter's node actor");
  st.greeted.emplace(g.rank, node_greeting{g.rank, {}, g.node, {}, g.kill_token});
  st.gone.erase(g.rank);
  self->monitor(g.node);
  return static_cast<std::int32_t>(id);
}

// This node's workers, to a peer of the same view.
caf::result<peer_view> give_workers(node_pointer self, std::uint64_t view_id) {
  auto& st = self->state;
  if (!st.role) return actor_error(actor_errc::not_ready, not_serving_yet(st));
  // Workers of another view are not the asker's peers: an older view's are being replaced
  // (ask again), a newer one means the asker missed a change.
  if (st.role->view_id < view_id)
    return actor_error(actor_errc::not_ready,
                       st.me() + " is still moving to view " + std::to_string(view_id));
  if (st.role->view_id > view_id)
    return actor_error(actor_errc::rejected, st.me() + " is at view " +
                                                 std::to_string(st.role->view_id) +
                                                 ", after view " + std::to_string(view_id));
  return st.role->workers;
}

// Every peer's workers, from this node's runtime: handed to the local workers.
caf::result<bool> take_view(node_pointer self, const peer_view& all, const std::string& key) {
  auto& st = self->state;
  if (!from_this_process(self, key))
    return actor_error(actor_errc::rejected, "the view comes from this node's runtime only");
  if (st.has_view || !st.role)
    return actor_error(actor_errc::rejected, "the view is given once, after the role");
  if (!all.batchers.empty() && all.batchers.front()) {
    const caf::node_id now = all.batchers.front()->node();
    std::erase(st.node0, now);
    st.node0.insert(st.node0.begin(), now);
  }
  st.part_nodes.clear();
  for (const auto& b : all.batchers)
    st.part_nodes.push_back(b ? b->node() : caf::node_id{});
  for (size_t i = 0; i < st.role->partitions.size(); ++i) {
    self->send(caf::actor_cast<shard_actor>(st.role->workers.shards[i]), view_atom_v, all);
    self->send(caf::actor_cast<batch_actor>(st.role->workers.batchers[i]), view_atom_v, all);
    self->send(caf::actor_cast<store_actor>(st.role->workers.stores[i]), view_atom_v, all);
  }
  st.has_view = true;
  return true;
}

// Ready once every other node's actors answered a traffic report: the training sizes.
caf::result<std::vector<std::int64_t>> answer_ready(node_pointer self, const peer_view& all) {
  auto& st = self->state;
  if (!st.has_view)
    return actor_error(actor_errc::not_ready, st.me() + " is still connecting to its peers");
  if (all.shards.size() != all.batchers.size() || all.stores.size() != all.batchers.size())
    return actor_error(actor_errc::rejected, "a view with lists of different lengths");
  // A traffic report of every other node's actors: answered by each, counted by none.
  const wire::control ask{.h = {0, st.role->rank}, .what = wire::control_kind::result};
  const auto msg = pack(wire::kind::control, wire::encode(st.ctx, ask));
  std::vector<wire_request<batch_actor, report_atom>> batchers;
  std::vector<wire_request<shard_actor, report_atom>> shards;
  std::vector<wire_request<store_actor, report_atom>> stores;
  for (size_t p = 0; p < all.batchers.size(); ++p) {
    if (!all.batchers[p] || all.batchers[p]->node() == self->node()) continue;
    batchers.push_back({caf::actor_cast<batch_actor>(all.batchers[p]), msg});
    shards.push_back({caf::actor_cast<shard_actor>(all.shards[p]), msg});
    stores.push_back({caf::actor_cast<store_actor>(all.stores[p]), msg});
  }
  auto rp = self->make_response_promise<std::vector<std::int64_t>>();
  const auto timeout = std::chrono::milliseconds(2000);
  auto fail = [self, rp](const caf::error& e) mutable {
    rp.deliver(
        actor_error(actor_errc::peer_failed,
                    self->state.me() + ": a peer's actor did not answer: " + caf::to_string(e)));
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
                    auto& st = self->state;
                    // Node 0 asks every member its figures from now on.
                    if (st.console && !std::exchange(st.polling, true))
                      self->send(self, stats_poll_atom_v, st.local_key);
                    rp.deliver(st.role->num_train);
                  },
                  fail);
            },
            fail);
      },
      fail);
  return rp;
}

// This process's peak RSS, for node 0's console.
caf::result<std::vector<std::int64_t>> give_node_stats(node_pointer self) {
  auto& st = self->state;
  const auto sender = self->current_sender();
  if (sender && !st.node0.empty() && sender->node() != st.node0.front() &&
      std::find(st.node0.begin(), st.node0.end(), sender->node()) != st.node0.end())
    return actor_error(actor_errc::superseded, st.me() + " is in view " +
                                                   std::to_string(st.role ? st.role->view_id : 0) +
                                                   " now, which a later coordinator announced");
  if (!sender || st.node0.empty() || sender->node() != st.node0.front())
    return actor_error(actor_errc::rejected, "figures are given to node 0 only");
  return std::vector<std::int64_t>{static_cast<std::int64_t>(peak_rss_mib() * 1024)};
}

// Node 0 asks every member its figures each second, for the console.
void poll_member_stats(node_pointer self, const std::string& key) {
  auto& st = self->state;
  if (!from_this_process(self, key) || !st.console || st.farewell) return;
  using clock = std::chrono::steady_clock;
  const auto now = clock::now();
  auto seconds = [](clock::duration d) { return std::chrono::duration<double>(d).count(); };
  // The poll comes every second: a much later one means this process did not run meanwhile (a
  // SIGSTOP, a starved machine), which the members saw as silence.
  if (st.last_poll != clock::time_point{} && now - st.last_poll > kSilenceLogged) {
    if (st.log) {
      char line[128];
      std::snprintf(line, sizeof line, "this node did not run for %.1f s (stopped or starved)",
                    seconds(now - st.last_poll));
      st.log(line);
    }
    for (auto& [rank, heard] : st.last_heard)  // the silence was this node's, not theirs
      heard = now;
  }
  st.last_poll = now;
  auto board = st.console->board;
  board->heard_from(st.role->rank, peak_rss_mib());
  for (const auto& [rank, g] : st.greeted) {
    if (!g.node) continue;
    auto& heard = st.last_heard[rank];
    if (heard == clock::time_point{}) heard = now;
    // A member silent for a few seconds is said once, and again when it answers.
    if (now - heard > kSilenceLogged && st.silent.insert(rank).second && st.log) {
      char line[128];
      std::snprintf(line, sizeof line, "node %d has not answered for %.1f s", rank,
                    seconds(now - heard));
      st.log(line);
    }
    self->request(caf::actor_cast<node_actor>(g.node), std::chrono::seconds(5), node_stats_atom_v)
        .then(
            [self, board, rank = rank](const std::vector<std::int64_t>& kib) {
              auto& st = self->state;
              const auto at = clock::now();
              if (st.silent.erase(rank) && st.log) {
                char line[128];
                std::snprintf(line, sizeof line, "node %d answers again after %.1f s", rank,
                              std::chrono::duration<double>(at - st.last_heard[rank]).count());
                st.log(line);
              }
              st.last_heard[rank] = at;
              if (!kib.empty()) board->heard_from(rank, static_cast<double>(kib[0]) / 1024);
            },
            [](caf::error&) {});  // not heard: the console shows how long ago it last was
  }
  self->delayed_send(self, std::chrono::seconds(1), stats_poll_atom_v, st.local_key);
}

// A peer's greeting as this node took it (or why it refused it); an empty one if none came yet.
caf::result<node_greeting> give_greeting_of(node_pointer self, std::int32_t peer) {
  auto& st = self->state;
  if (auto it = st.refused.find(peer); it != st.refused.end())
    return actor_error(actor_errc::rejected, it->second);
  const auto it = st.greeted.find(peer);
  return it == st.greeted.end() ? node_greeting{peer, {}, nullptr} : it->second;
}

// This node's runtime connected to a lower rank's node actor: watch it go down.
caf::result<bool> watch_peer(node_pointer self, std::int32_t rank, caf::strong_actor_ptr& node,
                             const std::string& key) {
  auto& st = self->state;
  if (!from_this_process(self, key) || !node)
    return actor_error(actor_errc::rejected, "asked outside this node's process");
  st.watched[rank] = node->address();
  st.gone.erase(rank);
  self->monitor(node);
  return true;
}

// The greeted or watched peers whose node actor went down, to this node's runtime.
caf::result<std::vector<std::int32_t>> give_gone(node_pointer self, const std::string& key) {
  if (!from_this_process(self, key))
    return actor_error(actor_errc::rejected, "asked outside this node's process");
  const auto& gone = self->state.gone;
  return std::vector<std::int32_t>(gone.begin(), gone.end());
}

}  // namespace degnn::node_detail
