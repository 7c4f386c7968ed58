// The fault orders a node takes from node 0's console (--allow-faults): kill or stop this
// process, cut a set of partitions off or heal the cut.
#include <csignal>
#include <cstdio>

#include "runtime/node/node_state.hpp"

namespace degnn::node_detail {

namespace {

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

}  // namespace

// The console's kill or stop, relayed by node 0 with this node's token.
caf::result<bool> take_kill_order(node_pointer self, const std::string& token,
                                  std::int32_t signal) {
  auto& st = self->state;
  if (signal != SIGKILL && signal != SIGSTOP)
    return actor_error(actor_errc::rejected, "a fault kill is SIGKILL or SIGSTOP");
  if (auto why = refuse_fault_order(self, token, "kill"); !why.empty())
    return actor_error(actor_errc::rejected, why);
  // The answer first: a stopped or killed process answers nothing.
  self->delayed_send(self, std::chrono::milliseconds(50), kill_now_atom_v, st.local_key, signal);
  return true;
}

// The console's cut or heal of a set of partitions, relayed by node 0.
caf::result<bool> take_cut_order(node_pointer self, const std::string& token, std::uint64_t parts) {
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
}

// Carries out a kill order, after its answer went out.
void kill_now(node_pointer self, const std::string& key, std::int32_t signal) {
  auto& st = self->state;
  if (!from_this_process(self, key) || (signal != SIGKILL && signal != SIGSTOP)) return;
  std::fprintf(stderr, "%s: %s by the console (a test run's fault)\n", st.me().c_str(),
               signal == SIGKILL ? "killed with SIGKILL" : "stopped with SIGSTOP");
  std::fflush(stderr);
  ::raise(signal);
}

}  // namespace degnn::node_detail
