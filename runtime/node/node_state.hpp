// The node actor's state and the helpers its source files share (runtime/node/node_actor.cpp: its
// behaviour; runtime/node/node_joins.cpp: the seed's joins; runtime/node/node_console.cpp: the
// operator console). Not an interface.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/faults/link_faults.hpp"
#include "runtime/node/node_actor.hpp"

namespace degnn::node_detail {

struct pending_join {
  caf::typed_response_promise<std::vector<char>> reply;
  caf::actor_addr asker;
};

struct node_state {
  static constexpr const char* name = "degnn.node";
  wire::context ctx;
  std::vector<std::string> identity;
  link_sender link;  ///< numbers its report requests (never faulted)
  std::function<void(const std::string&)> log;
  // -- the seed --
  std::optional<seed_role> seed;
  std::map<std::uint64_t, pending_join> joins;  ///< key: the rendezvous's
  std::uint64_t next_key = 0;
  bool last_call_armed = false;
  std::vector<char> view_bytes;  ///< the encoded view, once formed
  /// With TLS: the challenge given to each asker, used once (at most 256 outstanding).
  std::map<caf::actor_addr, std::vector<std::uint8_t>> challenges;
  std::vector<caf::typed_response_promise<std::vector<char>>> formed_waiters;
  // -- serving --
  std::optional<node_role> role;
  std::vector<caf::node_id> node0;                ///< node 0's CAF node, from the view
  std::map<std::int32_t, node_greeting> greeted;  ///< peers whose connection to this node is set up
  std::map<std::int32_t, std::string> refused;    ///< peers whose settings differ, and how
  std::set<std::int32_t> gone;          ///< greeted peers whose node actor went down since
  bool has_view = false;                ///< the local workers know every peer
  std::string local_key;                ///< see spawn_node_actor
  std::optional<console_role> console;  ///< node 0
  std::string fetching;  ///< "12.0 of 96.3 MB" while this node downloads its partitions
  /// --allow-faults: node 0 may kill or stop this node by showing this random token, which this
  /// node gave node 0 alone in its greeting (empty: never).
  std::string kill_token;
  /// --allow-faults: this process's fault counters, whose cut mask the console's cut and heal
  /// set (every sender of the process holds messages across it).
  std::shared_ptr<fault_counters> cut;
  bool polling = false;   ///< node 0: asking the members their figures each second
  bool farewell = false;  ///< node 0 said bye: its going away is the end of the run
  /// A newer view node 0 announced after losing a member, until this node's runtime takes it.
  std::vector<char> recovery;
  /// The seed, after a member was lost: node 0's runtime waits for a replacement to join.
  std::optional<caf::typed_response_promise<std::vector<char>>> replacing;
  std::vector<std::string> taken;  ///< live members' names and addresses: no replacement's
  /// The CAF nodes of accepted replacements: the only askers served checkpoint/ files.
  std::set<caf::node_id> replacements;

  std::string me() const {
    return role ? "node " + std::to_string(role->rank) : std::string(seed ? "the seed" : "node");
  }
};

using node_pointer = node_actor::stateful_pointer<node_state>;

/// Whether the current message carries this process's key (see spawn_node_actor).
bool from_this_process(node_pointer self, const std::string& key);
/// Whether the current message comes from node 0 with the view's secret.
bool from_node0(node_pointer self, const std::string& secret);
/// Checks an operator's or joiner's proof over the challenge this node gave the sender (used
/// once): "" with `who` set to the certificate's name, or why not.
std::string check_proof(node_pointer self, const tls_files& tls, const join_proof& proof,
                        std::string& who);
/// The seed forms the cluster: every waiting joiner gets the same view.
void form(node_pointer self);
/// A join request (see node_actor's join): the view once formed, or why not.
caf::result<std::vector<char>> take_join(node_pointer self, const std::vector<char>& b);
/// A console request (node 0 only): the encoded console_reply.
std::vector<char> answer_operator(node_pointer self, const std::vector<char>& b);
/// The same for a command whose request node 0's TLS console gateway (this process, `key`)
/// decoded and whose proof it checked: `operator_name` is the name on the operator's certificate.
std::vector<char> answer_verified_operator(node_pointer self, const std::string& key,
                                           const std::string& operator_name,
                                           const std::string& command);

}  // namespace degnn::node_detail
