// The operator console at node 0's node actor: a console_request is checked (with TLS, a fresh
// proof over an operator certificate), answered from the status board, and every command that
// changes the run is logged with the view and who gave it; `kill` goes to the target's node actor,
// `cut` and `heal` to every member's.
#include <nlohmann/json.hpp>

#include <csignal>
#include <sstream>

#include "runtime/node/console_orders.hpp"
#include "runtime/node/node_state.hpp"
#include "runtime/train/status_board.hpp"
#include "serialization/wire_console.hpp"

namespace degnn::node_detail {

namespace {

// `kill RANK [--signal KILL|STOP]` from the console: a test run's fault, carried out by the node
// actor of that rank (which refuses unless it too was started with --allow-faults).
console_answer kill_from_console(node_pointer self, const std::string& command,
                                 const std::string& who) {
  auto& st = self->state;
  std::string error;
  const auto k = parse_kill(command, error);
  if (!k) return {false, error};
  if (!st.console->board->fault_commands_allowed())
    return {false, "fault commands are refused: the cluster was started without --allow-faults"};
  if (!st.role || k->rank >= st.role->nodes)
    return {false, "no rank " + std::to_string(k->rank) + " in this cluster of " +
                       std::to_string(st.role ? st.role->nodes : 0) + " nodes"};
  const std::int32_t signal = k->stop ? SIGSTOP : SIGKILL;
  const std::string name = k->stop ? "STOP" : "KILL";
  if (k->rank == st.role->rank) {
    self->delayed_send(self, std::chrono::milliseconds(100), kill_now_atom_v, st.local_key, signal);
  } else {
    const auto it = st.greeted.find(k->rank);
    if (it == st.greeted.end() || !it->second.node)
      return {false, "rank " + std::to_string(k->rank) + " is not connected to node 0"};
    const int rank = k->rank;
    self->request(caf::actor_cast<node_actor>(it->second.node), std::chrono::seconds(10),
                  kill_atom_v, it->second.kill_token, signal)
        .then([](bool) {},
              [self, rank](caf::error& e) {
                if (self->state.log)
                  self->state.log("console: kill of node " + std::to_string(rank) +
                                  " refused: " + self->system().render(e));
              });
  }
  if (st.log)
    st.log("console: '" + command + "' from " + who + " (view " +
           std::to_string(st.console->board->view_id()) + "): SIG" + name + " to node " +
           std::to_string(k->rank));
  return {true, nlohmann::json{{"kill", k->rank}, {"signal", name}}.dump(), true};
}

// `cut RANK` / `heal` from the console: every member's senders hold what they send between
// RANK's partitions and the others until the heal, like a network partition that TCP outlasts
// (a request held past --timeout fails the run as a lost link would). Each node actor takes the
// order only from node 0 with its token, and only when started with --allow-faults.
console_answer cut_from_console(node_pointer self, const std::string& command,
                                const std::string& who) {
  auto& st = self->state;
  std::istringstream in(command);
  std::string word, rank_text, extra;
  in >> word >> rank_text >> extra;
  const bool heal = word == "heal";
  if (heal ? !rank_text.empty() : (rank_text.empty() || !extra.empty()))
    return {false, heal ? "usage: heal" : "usage: cut RANK"};
  if (!st.console->board->fault_commands_allowed())
    return {false, "fault commands are refused: the cluster was started without --allow-faults"};
  if (!st.cut) return {false, "node 0 has no fault counters"};
  std::uint64_t mask = 0;
  int rank = -1;
  std::vector<std::int32_t> parts;
  if (!heal) {
    const auto r = parse_rank(rank_text);
    if (!r) return {false, "usage: cut RANK (RANK a node's rank, not '" + rank_text + "')"};
    rank = *r;
    parts = st.console->board->partitions_of(rank);
    if (parts.empty()) return {false, "no serving member of rank " + rank_text + " in the view"};
    for (auto p : parts) {
      if (p >= fault_counters::kMaxCutParts)
        return {false, "cut covers partitions below " +
                           std::to_string(fault_counters::kMaxCutParts) + ", not " +
                           std::to_string(p)};
      mask |= std::uint64_t{1} << p;
    }
  }
  for (const auto& [peer, g] : st.greeted) {
    if (!g.node) continue;
    self->request(caf::actor_cast<node_actor>(g.node), std::chrono::seconds(10), cut_atom_v,
                  g.kill_token, mask)
        .then([](bool) {},
              [self, peer = peer, word](caf::error& e) {
                if (self->state.log)
                  self->state.log("console: " + word + " on node " + std::to_string(peer) +
                                  " refused: " + self->system().render(e));
              });
  }
  st.cut->cut_parts = mask;
  if (st.log)
    st.log("console: '" + command + "' from " + who + " (view " +
           std::to_string(st.console->board->view_id()) + ")");
  if (heal) return {true, nlohmann::json{{"healed", true}}.dump(), true};
  return {true, nlohmann::json{{"cut", rank}, {"partitions", parts}}.dump(), true};
}

}  // namespace

namespace {

// `who` names the operator in the log of a refusal (empty: the sender).
std::vector<char> console_reply_bytes(node_pointer self, bool ok, std::string text,
                                      const std::string& who = "") {
  auto& st = self->state;
  if (!ok && st.log)
    st.log("console: refused " + (who.empty() ? sender_name(self->current_sender()) : who) + ": " +
           text);
  return wire::encode(wire::context{}, wire::console_reply{ok, std::move(text)});
}

// An operator's command once it is admitted; `who` names the operator in the log.
std::vector<char> run_operator_command(node_pointer self, const std::string& command,
                                       const std::string& who) {
  auto& st = self->state;
  std::string first;
  std::istringstream(command) >> first;
  if (first == "kill") {
    const console_answer a = kill_from_console(self, command, who);
    return console_reply_bytes(self, a.ok, a.text, who);
  }
  if (first == "cut" || first == "heal") {
    const console_answer a = cut_from_console(self, command, who);
    return console_reply_bytes(self, a.ok, a.text, who);
  }
  // An operator's command must never end the node actor.
  console_answer a;
  try {
    a = st.console->answer(command);
  } catch (const std::exception& e) {
    return console_reply_bytes(self, false, std::string("the command failed: ") + e.what(), who);
  }
  // Every command that changes the run is logged with the view and who gave it.
  if (a.ok && a.changes && st.log) {
    st.log("console: '" + command + "' from " + who + " (view " +
           std::to_string(st.console->board->view_id()) + ")");
  }
  return console_reply_bytes(self, a.ok, a.text, who);
}

}  // namespace

// An operator's console command: with TLS only with a fresh proof over an operator certificate.
std::vector<char> answer_operator(node_pointer self, const std::vector<char>& b) {
  auto& st = self->state;
  if (!st.console) return console_reply_bytes(self, false, "only node 0 answers the console");
  wire::console_request r;
  try {
    r = wire::decode_console_request(wire::context{.max_bytes = 64 << 10}, b);
  } catch (const wire::wire_error& e) {
    return console_reply_bytes(self, false, e.what());
  }
  std::string operator_name;
  if (st.console->tls) {
    std::string& who = operator_name;
    const std::string why =
        check_proof(self, *st.console->tls, {r.certificate, r.signature, r.token_mac}, who);
    if (!why.empty()) return console_reply_bytes(self, false, "the console's " + why);
    if (who.rfind("operator-", 0) != 0)
      return console_reply_bytes(
          self, false, "'" + who + "' is not an operator certificate (degnn certs --operators)");
  }
  return run_operator_command(
      self, r.command,
      st.console->tls ? operator_name : "an operator at " + sender_name(self->current_sender()));
}

std::vector<char> answer_verified_operator(node_pointer self, const std::string& key,
                                           const std::string& operator_name,
                                           const std::string& command) {
  if (!from_this_process(self, key))
    return console_reply_bytes(self, false, "a verified console command from outside this process");
  if (!self->state.console)
    return console_reply_bytes(self, false, "only node 0 answers the console");
  return run_operator_command(self, command, operator_name + " (TLS console)");
}

}  // namespace degnn::node_detail
