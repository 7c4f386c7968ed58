// The node actor's state and the handlers its source files share (runtime/node/node_actor.cpp: its
// behaviour; node_joins.cpp: the seed's joins; node_console.cpp: the operator console;
// node_files.cpp, node_peers.cpp, node_faults.cpp, node_views.cpp). Not an interface.
#pragma once

#include <chrono>
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
  /// The coordinator's CAF node first: the one serving partition 0 in the view (node 0 until it
  /// is lost; see membership_view::coordinator). Named node0 for the rank it starts at. After it,
  /// the coordinators of earlier views: one that asks again was left behind (a pause, a cut).
  std::vector<caf::node_id> node0;
  std::vector<caf::node_id> part_nodes;           ///< each partition's CAF node, from the view
  std::map<std::int32_t, node_greeting> greeted;  ///< peers whose connection to this node is set up
  std::map<std::int32_t, std::string> refused;    ///< peers whose settings differ, and how
  std::set<std::int32_t> gone;  ///< greeted or watched peers whose node actor went down
  std::map<std::int32_t, caf::actor_addr> watched;  ///< lower ranks this node connected to
  bool has_view = false;                            ///< the local workers know every peer
  std::string local_key;                            ///< see spawn_node_actor
  std::optional<console_role> console;              ///< node 0
  std::string fetching;  ///< "12.0 of 96.3 MB" while this node downloads its partitions
  /// --allow-faults: node 0 may kill or stop this node by showing this random token, which this
  /// node gave node 0 alone in its greeting (empty: never).
  std::string kill_token;
  /// --allow-faults: this process's fault counters, whose cut mask the console's cut and heal
  /// set (every sender of the process holds messages across it).
  std::shared_ptr<fault_counters> cut;
  bool polling = false;  ///< node 0: asking the members their figures each second
  /// Node 0: when each member last answered the poll, and those silent for kSilenceLogged (said
  /// once, and again when they answer); when this node last polled (a late poll: it was paused).
  std::map<std::int32_t, std::chrono::steady_clock::time_point> last_heard;
  std::set<std::int32_t> silent;
  std::chrono::steady_clock::time_point last_poll{};
  /// The run's evaluated epochs, as the coordinator last gave them.
  std::vector<validation_point> validation;
  bool farewell = false;         ///< the coordinator said bye: its going away is the end of the run
  std::string farewell_failure;  ///< with its bye: "" or why it stopped the run
  /// A newer view node 0 announced after losing a member, until this node's runtime takes it.
  std::vector<char> recovery;
  /// The newest view id a coordinator announced to this node (taken or not yet): an announce of
  /// it or an earlier one comes from a coordinator left behind.
  std::uint64_t announced_view = 0;
  std::vector<char> announced_bytes;  ///< that view's announcement: a repeat is taken as the first
  /// The seed, after a member was lost: node 0's runtime waits for a replacement to join.
  std::optional<caf::typed_response_promise<std::vector<char>>> replacing;
  std::vector<std::string> taken;  ///< live members' names and addresses: no replacement's
  /// The CAF nodes of accepted joiners and replacements: the only askers served checkpoint/
  /// files (a joiner restores a damaged copy from the seed's, a replacement starts from it).
  std::set<caf::node_id> accepted;

  std::string me() const {
    return role ? "node " + std::to_string(role->rank) : std::string(seed ? "the seed" : "node");
  }
};

using node_pointer = node_actor::stateful_pointer<node_state>;

/// How long a member (or node 0 itself) may go unheard before node 0 logs it: a few heartbeats
/// of the default 500 ms, well inside the connection time-out that declares a member lost.
inline constexpr std::chrono::seconds kSilenceLogged{3};

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

// The handlers of the node actor's behaviour (runtime/node/node_actor.cpp), by concern:
// node_files.cpp, node_peers.cpp, node_faults.cpp, node_views.cpp, node_joins.cpp.
/// A chunk of a partition file, or of a checkpoint file offered to accepted members.
caf::result<std::vector<char>> serve_file_chunk(node_pointer self, const std::vector<char>& b);
/// The seed offers a checkpoint file (under checkpoint/) to the members it accepted.
caf::result<bool> offer_checkpoint_file(node_pointer self, const std::string& path,
                                        const std::string& key);
/// A fresh challenge for the sender to sign (joiners and operators with TLS).
caf::result<std::vector<char>> give_challenge(node_pointer self);
/// This node's role in a view, from its own runtime (again after a recovery).
caf::result<bool> take_role(node_pointer self, node_role& role, const std::string& key);
/// A peer greets this node once per view, with its node actor and settings.
caf::result<std::int32_t> take_greeting(node_pointer self, const node_greeting& g);
/// This node's workers, to a peer of the same view.
caf::result<peer_view> give_workers(node_pointer self, std::uint64_t view_id);
/// Every peer's workers, from this node's runtime: handed to the local workers.
caf::result<bool> take_view(node_pointer self, const peer_view& all, const std::string& key);
/// Ready once every other node's actors answered a traffic report: the training sizes.
caf::result<std::vector<std::int64_t>> answer_ready(node_pointer self, const peer_view& all);
/// This process's peak RSS, for node 0's console.
caf::result<std::vector<std::int64_t>> give_node_stats(node_pointer self);
/// Node 0 asks every member its figures each second, for the console.
void poll_member_stats(node_pointer self, const std::string& key);
/// The console's kill or stop, relayed by node 0 with this node's token.
caf::result<bool> take_kill_order(node_pointer self, const std::string& token, std::int32_t signal);
/// The console's cut or heal of a set of partitions, relayed by node 0.
caf::result<bool> take_cut_order(node_pointer self, const std::string& token, std::uint64_t parts);
/// Carries out a kill order, after its answer went out.
void kill_now(node_pointer self, const std::string& key, std::int32_t signal);
/// A newer view node 0 announced after losing a member, kept for this node's runtime.
caf::result<bool> take_new_view(node_pointer self, const std::vector<char>& bytes,
                                const std::string& secret);
/// The seed's runtime waits for a replacement to join (a lost member's rank).
caf::result<std::vector<char>> await_replacement(node_pointer self, std::vector<std::string>& taken,
                                                 const std::string& key);
/// The seed gives the replacements the view they take part in.
caf::result<bool> place_replacement(node_pointer self, const std::vector<char>& bytes,
                                    const std::string& key);

/// The seed's partition file manifest, to a joiner.
caf::result<std::vector<char>> give_manifest(node_pointer self);
/// The seed's runtime waits for the formed view (at once if it is formed).
caf::result<std::vector<char>> await_formed_view(node_pointer self, const std::string& key);
/// The seed's last call for joiners: form with the nodes that joined, if enough.
void take_last_call(node_pointer self, const std::string& key);
/// A peer's greeting as this node took it (or why it refused it); empty if none came yet.
caf::result<node_greeting> give_greeting_of(node_pointer self, std::int32_t peer);
/// This node's runtime connected to a lower rank's node actor: watch it go down.
caf::result<bool> watch_peer(node_pointer self, std::int32_t rank, caf::strong_actor_ptr& node,
                             const std::string& key);
/// The greeted or watched peers whose node actor went down, to this node's runtime.
caf::result<std::vector<std::int32_t>> give_gone(node_pointer self, const std::string& key);
/// The newer view kept for this node's runtime (taken once; empty if none).
caf::result<std::vector<char>> give_recovery(node_pointer self, const std::string& key);
/// The coordinator's bye at the end of the run (with why it stopped, if it did).
caf::result<bool> take_bye(node_pointer self, const std::string& secret, std::string& failure);
/// Whether the coordinator said bye: {} if not, else {why it stopped ("" if it did not)}.
caf::result<std::vector<std::string>> give_farewell(node_pointer self, const std::string& key);
/// The run's evaluated epochs from the coordinator, kept for a successor.
void take_validation(node_pointer self, std::vector<validation_point>& points,
                     const std::string& secret);
/// The evaluated epochs this node keeps, to its runtime.
caf::result<std::vector<validation_point>> give_validation(node_pointer self,
                                                           const std::string& key);

}  // namespace degnn::node_detail
