// The node actor's behaviour: one line per message, the handlers by concern in node_joins.cpp,
// node_files.cpp, node_peers.cpp, node_faults.cpp, node_views.cpp and node_console.cpp. Phases:
// joining (the seed takes joins; greetings are not_ready) -> serving (after serve: greetings,
// workers, view) -> viewed (after view: ready, bye); after a recovery the runtime serves the next
// view's role, and serving and viewed come again.
#include "runtime/node/node_actor.hpp"
#include "runtime/node/node_state.hpp"

#include <algorithm>
#include <memory>

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

// A greeted peer's node actor went down; a joiner that goes away before the view is forgotten
// (after the view, the mesh finds out).
void on_down(node_pointer self, const caf::down_msg& d) {
  auto& st = self->state;
  for (const auto& [rank, g] : st.greeted)
    if (g.node && g.node->address() == d.source) st.gone.insert(rank);
  for (const auto& [rank, addr] : st.watched)
    if (addr == d.source) st.gone.insert(rank);
  if (!st.seed || st.seed->joins.closed()) return;
  for (auto it = st.joins.begin(); it != st.joins.end(); ++it) {
    if (it->second.asker != d.source) continue;
    st.seed->joins.remove(it->first);
    if (st.log) st.log("a joiner went away before the cluster formed: " + caf::to_string(d.reason));
    st.joins.erase(it);
    return;
  }
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
  self->set_down_handler([self](caf::down_msg& d) { on_down(self, d); });
  if (self->state.seed && self->state.seed->joins.full()) form(self);  // a cluster of one
  return {
      [self](manifest_atom) { return give_manifest(self); },
      [self](chunk_atom, const std::vector<char>& b) { return serve_file_chunk(self, b); },
      [self](challenge_atom) { return give_challenge(self); },
      [self](join_atom, const std::vector<char>& b) { return take_join(self, b); },
      [self](console_atom, const std::vector<char>& b) { return answer_operator(self, b); },
      [self](console_atom, const std::string& key, const std::string& name,
             const std::string& command) {
        return answer_verified_operator(self, key, name, command);
      },
      [self](formed_atom, const std::string& key) { return await_formed_view(self, key); },
      [self](last_call_atom, const std::string& key) { take_last_call(self, key); },
      [self](fetching_atom, const std::string& status, const std::string& key) {
        if (from_this_process(self, key)) self->state.fetching = status;
      },
      [self](serve_atom, node_role& role, const std::string& key) {
        return take_role(self, role, key);
      },
      [self](greet_atom, const node_greeting& g) { return take_greeting(self, g); },
      [self](greeted_atom, std::int32_t peer) { return give_greeting_of(self, peer); },
      [self](workers_atom, std::uint64_t view_id) { return give_workers(self, view_id); },
      [self](view_atom, const peer_view& all, const std::string& key) {
        return take_view(self, all, key);
      },
      [self](ready_atom, const peer_view& all) { return answer_ready(self, all); },
      [self](bye_atom, const std::string& secret, std::string& failure) {
        return take_bye(self, secret, failure);
      },
      [self](kill_atom, const std::string& token, std::int32_t signal) {
        return take_kill_order(self, token, signal);
      },
      [self](cut_atom, const std::string& token, std::uint64_t parts) {
        return take_cut_order(self, token, parts);
      },
      [self](node_stats_atom) { return give_node_stats(self); },
      [self](stats_poll_atom, const std::string& key) { poll_member_stats(self, key); },
      [self](kill_now_atom, const std::string& key, std::int32_t signal) {
        kill_now(self, key, signal);
      },
      [self](recover_atom, const std::vector<char>& bytes, const std::string& secret) {
        return take_new_view(self, bytes, secret);
      },
      [self](recovery_atom, const std::string& key) { return give_recovery(self, key); },
      [self](replace_atom, std::vector<std::string>& taken, const std::string& key) {
        return await_replacement(self, taken, key);
      },
      [self](place_atom, const std::vector<char>& bytes, const std::string& key) {
        return place_replacement(self, bytes, key);
      },
      [self](offer_atom, const std::string& path, const std::string& key) {
        return offer_checkpoint_file(self, path, key);
      },
      [self](gone_atom, const std::string& key) { return give_gone(self, key); },
      [self](validation_atom, std::vector<validation_point>& points, const std::string& secret) {
        take_validation(self, points, secret);
      },
      [self](validation_atom, const std::string& key) { return give_validation(self, key); },
      [self](watch_atom, std::int32_t rank, caf::strong_actor_ptr& node, const std::string& key) {
        return watch_peer(self, rank, node, key);
      },
      [self](farewell_atom, const std::string& key) { return give_farewell(self, key); },
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
