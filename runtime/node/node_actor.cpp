// The node actor's behaviour. Phases: joining (the seed takes joins; greetings are not_ready)
// -> serving (after serve: greetings, workers, view) -> viewed (after view: ready, bye); after a
// recovery the runtime serves the next view's role, and serving and viewed come again.
#include "runtime/node/node_actor.hpp"
#include "runtime/node/node_state.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "actors/gather.hpp"
#include "runtime/node/partition_transfer.hpp"
#include "runtime/process/process_stats.hpp"
#include "runtime/train/cluster_identity.hpp"
#include "runtime/train/status_board.hpp"
#include "serialization/wire_console.hpp"
#include "serialization/wire_membership.hpp"

namespace degnn {

namespace node_detail {

// Only this process's runtime knows the key (a peer can claim this node's id as its sender).
bool from_this_process(node_pointer self, const std::string& key) {
  return !self->state.local_key.empty() && key == self->state.local_key &&
         outsider(self->current_sender(), self->node(), {}).empty();
}

// From node 0: its actors are partition 0's in the view; in a joined cluster it also knows the
// view's secret.
bool from_node0(node_pointer self, const std::string& secret) {
  const auto& st = self->state;
  const auto sender = self->current_sender();
  return sender && !st.node0.empty() && sender->node() == st.node0.front() && st.role &&
         secret == st.role->view_secret;
}

// A joiner's or an operator's proof over the challenge this node gave the sender (used once):
// "" with `who` set to the certificate's name, or why not.
std::string check_proof(node_pointer self, const tls_files& tls, const join_proof& proof,
                        std::string& who) {
  auto& st = self->state;
  const auto it = st.challenges.find(caf::actor_cast<caf::actor_addr>(self->current_sender()));
  if (it == st.challenges.end()) return "it answers no challenge of this node (or reuses one)";
  const std::vector<std::uint8_t> challenge = std::move(it->second);
  st.challenges.erase(it);
  try {
    return verify_proof(tls, proof, challenge, who);
  } catch (const std::exception& e) {  // this node's own files: never let them kill the actor
    return std::string("its proof could not be checked: ") + e.what();
  }
}

}  // namespace node_detail

namespace {

using namespace node_detail;

// A rank a new node serves in `view` greets again (with its new node actor).
void forget_replaced(node_state& st, const wire::membership_view& view) {
  for (std::int32_t r : view.replaced) {
    st.greeted.erase(r);
    st.refused.erase(r);
    st.gone.erase(r);
  }
}

// Why greetings and worker requests wait; "fetching" lets the asker extend its deadline.
std::string not_serving_yet(const node_state& st) {
  if (!st.fetching.empty())
    return st.me() + " is fetching its partitions from the seed (" + st.fetching + ")";
  return st.me() + " has not spawned its workers yet";
}

// Empty when a fault order (`what`: kill, cut) may be taken: this node allows faults and node 0
// showed the token this node gave it alone (compared in constant time); else why not.
std::string refuse_fault_order(node_pointer self, const std::string& token, const char* what) {
  auto& st = self->state;
  if (st.kill_token.empty()) return st.me() + " was started without --allow-faults";
  unsigned char differ = token.size() != st.kill_token.size();
  for (size_t i = 0; i < std::min(token.size(), st.kill_token.size()); ++i)
    differ |= static_cast<unsigned char>(token[i] ^ st.kill_token[i]);
  const auto sender = self->current_sender();
  if (differ || !sender || st.node0.empty() || sender->node() != st.node0.front())
    return std::string(what) + " is taken from node 0 only";
  return {};
}

node_actor::behavior_type node_behavior(node_pointer self, wire::context ctx,
                                        std::vector<std::string> identity,
                                        std::optional<seed_role> seed,
                                        std::function<void(const std::string&)> log,
                                        std::string local_key, std::optional<console_role> console,
                                        std::string kill_token,
                                        std::shared_ptr<fault_counters> cut) {
  self->state.kill_token = std::move(kill_token);
  self->state.cut = std::move(cut);
  self->state.local_key = std::move(local_key);
  self->state.console = std::move(console);
  self->state.ctx = ctx;
  self->state.identity = std::move(identity);
  self->state.seed = std::move(seed);
  self->state.log = std::move(log);
  // A joiner that goes away before the view is forgotten (after the view, the mesh finds out).
  self->set_down_handler([self](caf::down_msg& d) {
    auto& st = self->state;
    for (const auto& [rank, g] : st.greeted)
      if (g.node && g.node->address() == d.source) st.gone.insert(rank);
    if (!st.seed || st.seed->joins.closed()) return;
    for (auto it = st.joins.begin(); it != st.joins.end(); ++it) {
      if (it->second.asker != d.source) continue;
      st.seed->joins.remove(it->first);
      if (st.log)
        st.log("a joiner went away before the cluster formed: " + caf::to_string(d.reason));
      st.joins.erase(it);
      return;
    }
  });
  if (self->state.seed && self->state.seed->joins.full()) form(self);  // a cluster of one
  return {
      [self](manifest_atom) -> caf::result<std::vector<char>> {
        auto& st = self->state;
        if (!st.seed)
          return actor_error(actor_errc::rejected, "only the seed serves partition files");
        return wire::encode(wire::context{}, st.seed->files);
      },
      [self](chunk_atom, const std::vector<char>& b) -> caf::result<std::vector<char>> {
        auto& st = self->state;
        if (!st.seed)
          return actor_error(actor_errc::rejected, "only the seed serves partition files");
        try {
          // A request is a few hundred bytes: anything larger is refused unread.
          auto req = wire::decode_file_chunk_request(wire::context{.max_bytes = 4096}, b);
          const std::string prefix = kSeedCheckpointPrefix;
          if (req.path.rfind(prefix, 0) != 0 || st.seed->checkpoints.empty())
            return wire::encode(wire::context{},
                                read_chunk(st.seed->partitions, st.seed->files, req));
          // A checkpoint file offered to a replacement: read from the checkpoint folder, given
          // to accepted replacements only (the model is not for whoever reaches the seed).
          const auto sender = self->current_sender();
          if (!sender || !st.replacements.count(sender->node()))
            throw std::runtime_error("'" + req.path + "' is offered to replacements only");
          const wire::file_entry* f = st.seed->files.find(req.path);
          if (!f) throw std::runtime_error("'" + req.path + "' is not offered");
          wire::file_manifest one{{*f}};
          one.files[0].path = req.path = req.path.substr(prefix.size());
          wire::file_chunk c = read_chunk(st.seed->checkpoints, one, req);
          c.path = prefix + c.path;
          return wire::encode(wire::context{}, c);
        } catch (const std::exception& e) {
          if (st.log)
            st.log("refused a file chunk to " + sender_name(self->current_sender()) + ": " +
                   e.what());
          return actor_error(actor_errc::rejected, e.what());
        }
      },
      [self](challenge_atom) -> caf::result<std::vector<char>> {
        auto& st = self->state;
        const auto sender = self->current_sender();
        const bool gives = (st.seed && st.seed->tls) || (st.console && st.console->tls);
        if (!gives || !sender)
          return actor_error(actor_errc::rejected, "this node gives no challenges");
        if (st.challenges.size() >= 256) st.challenges.erase(st.challenges.begin());
        auto& c = st.challenges[caf::actor_cast<caf::actor_addr>(sender)];
        c = random_challenge();
        return std::vector<char>(c.begin(), c.end());
      },
      [self](join_atom, const std::vector<char>& b) { return take_join(self, b); },
      [self](console_atom, const std::vector<char>& b) { return answer_operator(self, b); },
      [self](console_atom, const std::string& key, const std::string& name,
             const std::string& command) {
        return answer_verified_operator(self, key, name, command);
      },
      [self](formed_atom, const std::string& key) -> caf::result<std::vector<char>> {
        auto& st = self->state;
        if (!from_this_process(self, key) || !st.seed)
          return actor_error(actor_errc::rejected, "asked for the view outside the seed's process");
        if (!st.view_bytes.empty()) return st.view_bytes;
        auto rp = self->make_response_promise<std::vector<char>>();
        st.formed_waiters.push_back(rp);
        return rp;
      },
      [self](last_call_atom, const std::string& key) {
        auto& st = self->state;
        if (!from_this_process(self, key) || !st.seed || st.seed->joins.closed()) return;
        st.last_call_armed = false;
        // A joiner may have gone away meanwhile: form only with enough nodes, else wait on.
        if (st.seed->joins.enough()) form(self);
      },
      [self](fetching_atom, const std::string& status, const std::string& key) {
        if (from_this_process(self, key)) self->state.fetching = status;
      },
      [self](serve_atom, node_role& role, const std::string& key) -> caf::result<bool> {
        auto& st = self->state;
        if (!from_this_process(self, key) || (st.role && role.view_id <= st.role->view_id))
          return actor_error(actor_errc::rejected,
                             "the role comes once per view, from this process");
        // A new view's role (after a recovery): its workers get their peers anew.
        st.role = std::move(role);
        st.has_view = false;
        return true;
      },
      [self](greet_atom, const node_greeting& g) -> caf::result<std::int32_t> {
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
        if (g.rank < 0 || g.rank == id || g.rank >= st.role->nodes ||
            st.greeted.count(g.rank) > 0 || st.refused.count(g.rank) > 0) {
          return actor_error(actor_errc::rejected, st.me() + " takes no greeting from rank " +
                                                       std::to_string(g.rank) + " now");
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
      },
      [self](greeted_atom, std::int32_t peer) -> caf::result<node_greeting> {
        auto& st = self->state;
        if (auto it = st.refused.find(peer); it != st.refused.end())
          return actor_error(actor_errc::rejected, it->second);
        const auto it = st.greeted.find(peer);
        return it == st.greeted.end() ? node_greeting{peer, {}, nullptr} : it->second;
      },
      [self](workers_atom, std::uint64_t view_id) -> caf::result<peer_view> {
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
      },
      [self](view_atom, const peer_view& all, const std::string& key) -> caf::result<bool> {
        auto& st = self->state;
        if (!from_this_process(self, key))
          return actor_error(actor_errc::rejected, "the view comes from this node's runtime only");
        if (st.has_view || !st.role)
          return actor_error(actor_errc::rejected, "the view is given once, after the role");
        if (!all.batchers.empty() && all.batchers.front())
          st.node0 = {all.batchers.front()->node()};
        for (size_t i = 0; i < st.role->partitions.size(); ++i) {
          self->send(caf::actor_cast<shard_actor>(st.role->workers.shards[i]), view_atom_v, all);
          self->send(caf::actor_cast<batch_actor>(st.role->workers.batchers[i]), view_atom_v, all);
          self->send(caf::actor_cast<store_actor>(st.role->workers.stores[i]), view_atom_v, all);
        }
        st.has_view = true;
        return true;
      },
      [self](ready_atom, const peer_view& all) -> caf::result<std::vector<std::int64_t>> {
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
          rp.deliver(actor_error(
              actor_errc::peer_failed,
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
      },
      [self](bye_atom, const std::string& secret) -> caf::result<bool> {
        auto& st = self->state;
        if (!from_node0(self, secret) && !from_this_process(self, secret))
          return actor_error(actor_errc::rejected, "bye is taken from node 0 only");
        // The node ends when node 0 has gone, not now: closing a connection before node 0 said
        // bye to every node could drop node 0's routes to the others (CAF 0.17 with TLS).
        st.farewell = true;
        return true;
      },
      [self](kill_atom, const std::string& token, std::int32_t signal) -> caf::result<bool> {
        auto& st = self->state;
        if (signal != SIGKILL && signal != SIGSTOP)
          return actor_error(actor_errc::rejected, "a fault kill is SIGKILL or SIGSTOP");
        if (auto why = refuse_fault_order(self, token, "kill"); !why.empty())
          return actor_error(actor_errc::rejected, why);
        // The answer first: a stopped or killed process answers nothing.
        self->delayed_send(self, std::chrono::milliseconds(50), kill_now_atom_v, st.local_key,
                           signal);
        return true;
      },
      [self](cut_atom, const std::string& token, std::uint64_t parts) -> caf::result<bool> {
        auto& st = self->state;
        if (auto why = refuse_fault_order(self, token, "cut"); !why.empty())
          return actor_error(actor_errc::rejected, why);
        if (!st.cut) return actor_error(actor_errc::internal, st.me() + " has no fault counters");
        st.cut->cut_parts = parts;
        if (st.log)
          st.log(parts ? "the console cut partition mask " + std::to_string(parts) +
                             " off: messages across it are held"
                       : "the console healed the cut: held messages go on");
        return true;
      },
      [self](node_stats_atom) -> caf::result<std::vector<std::int64_t>> {
        auto& st = self->state;
        const auto sender = self->current_sender();
        if (!sender || st.node0.empty() || sender->node() != st.node0.front())
          return actor_error(actor_errc::rejected, "figures are given to node 0 only");
        return std::vector<std::int64_t>{static_cast<std::int64_t>(peak_rss_mib() * 1024)};
      },
      [self](stats_poll_atom, const std::string& key) {
        auto& st = self->state;
        if (!from_this_process(self, key) || !st.console || st.farewell) return;
        auto board = st.console->board;
        board->heard_from(st.role->rank, peak_rss_mib());
        for (const auto& [rank, g] : st.greeted) {
          if (!g.node) continue;
          self->request(caf::actor_cast<node_actor>(g.node), std::chrono::seconds(5),
                        node_stats_atom_v)
              .then(
                  [board, rank = rank](const std::vector<std::int64_t>& kib) {
                    if (!kib.empty()) board->heard_from(rank, static_cast<double>(kib[0]) / 1024);
                  },
                  [](caf::error&) {});  // not heard: the console shows how long ago it last was
        }
        self->delayed_send(self, std::chrono::seconds(1), stats_poll_atom_v, st.local_key);
      },
      [self](kill_now_atom, const std::string& key, std::int32_t signal) {
        auto& st = self->state;
        if (!from_this_process(self, key) || (signal != SIGKILL && signal != SIGSTOP)) return;
        std::fprintf(stderr, "%s: %s by the console (a test run's fault)\n", st.me().c_str(),
                     signal == SIGKILL ? "killed with SIGKILL" : "stopped with SIGSTOP");
        std::fflush(stderr);
        ::raise(signal);
      },
      [self](recover_atom, const std::vector<char>& bytes,
             const std::string& secret) -> caf::result<bool> {
        auto& st = self->state;
        if (!from_node0(self, secret))
          return actor_error(actor_errc::rejected, "a new view is taken from node 0 only");
        wire::membership_view view;
        try {
          view = wire::decode_membership_view(st.ctx, bytes);
        } catch (const wire::wire_error& e) {
          return actor_error(actor_errc::rejected, std::string("a malformed view: ") + e.what());
        }
        if (view.members.size() != static_cast<size_t>(st.role->nodes))
          return actor_error(actor_errc::rejected, "a view of another cluster size");
        if (view.id <= st.role->view_id || view.secret != st.role->view_secret)
          return actor_error(actor_errc::rejected, "view " + std::to_string(view.id) +
                                                       " is not after view " +
                                                       std::to_string(st.role->view_id));
        st.recovery = bytes;
        forget_replaced(st, view);
        if (st.log) st.log("view " + std::to_string(view.id) + " announced by node 0");
        return true;
      },
      [self](recovery_atom, const std::string& key) -> caf::result<std::vector<char>> {
        if (!from_this_process(self, key))
          return actor_error(actor_errc::rejected, "asked outside this node's process");
        return std::exchange(self->state.recovery, {});
      },
      [self](replace_atom, std::vector<std::string>& taken,
             const std::string& key) -> caf::result<std::vector<char>> {
        auto& st = self->state;
        if (!from_this_process(self, key) || !st.seed)
          return actor_error(actor_errc::rejected, "asked outside the seed's process");
        st.taken = std::move(taken);
        if (st.replacing) st.replacing->deliver(actor_error(actor_errc::rejected, "asked again"));
        st.replacing = self->make_response_promise<std::vector<char>>();
        return *st.replacing;
      },
      [self](place_atom, const std::vector<char>& bytes,
             const std::string& key) -> caf::result<bool> {
        auto& st = self->state;
        if (!from_this_process(self, key) || !st.seed)
          return actor_error(actor_errc::rejected, "asked outside the seed's process");
        wire::membership_view view;
        try {
          view = wire::decode_membership_view(st.ctx, bytes);
        } catch (const wire::wire_error& e) {
          return actor_error(actor_errc::rejected, e.what());
        }
        forget_replaced(st, view);
        for (auto& [k, pj] : st.joins)
          pj.reply.deliver(bytes);
        st.joins.clear();
        return true;
      },
      [self](offer_atom, const std::string& path, const std::string& key) -> caf::result<bool> {
        auto& st = self->state;
        if (!from_this_process(self, key) || !st.seed || st.seed->checkpoints.empty())
          return actor_error(actor_errc::rejected, "asked outside the seed's process");
        try {
          wire::file_entry e = entry_of(st.seed->checkpoints, path);
          e.path = kSeedCheckpointPrefix + path;
          auto& files = st.seed->files.files;
          std::erase_if(files, [&](const wire::file_entry& f) { return f.path == e.path; });
          files.push_back(std::move(e));
          return true;
        } catch (const std::exception& e) {
          return actor_error(actor_errc::internal, e.what());
        }
      },
      [self](gone_atom, const std::string& key) -> caf::result<std::vector<std::int32_t>> {
        if (!from_this_process(self, key))
          return actor_error(actor_errc::rejected, "asked outside this node's process");
        const auto& gone = self->state.gone;
        return std::vector<std::int32_t>(gone.begin(), gone.end());
      },
      [self](farewell_atom, const std::string& key) -> caf::result<bool> {
        if (!from_this_process(self, key))
          return actor_error(actor_errc::rejected, "asked outside this node's process");
        return self->state.farewell;
      },
  };
}

}  // namespace

node_actor spawn_node_actor(caf::actor_system& sys, const wire::context& ctx,
                            std::vector<std::string> identity, std::optional<seed_role> seed,
                            std::function<void(const std::string&)> log, std::string local_key,
                            std::optional<console_role> console, std::string kill_token,
                            std::shared_ptr<fault_counters> cut) {
  return sys.spawn(node_behavior, ctx, std::move(identity), std::move(seed), std::move(log),
                   std::move(local_key), std::move(console), std::move(kill_token), std::move(cut));
}

void add_runtime_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::degnn_runtime>();
}

}  // namespace degnn
