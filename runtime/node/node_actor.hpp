// The node actor: one per `degnn node` process and the only actor it publishes. On the seed it
// takes join requests and answers each with the membership view once the cluster has formed.
// Once this node knows its rank and has spawned its workers (serve), a peer node greets it and
// asks it for this node's worker actors (their handles travel in the reply); node 0 asks it to
// reach every other node's actors once before training and, at the end, to stop the node.
#pragma once

#include <caf/all.hpp>

#include <chrono>
#include <filesystem>
#include <optional>

#include "runtime/node/console_orders.hpp"
#include "runtime/node/node_protocol.hpp"
#include "runtime/node/rendezvous.hpp"
#include "runtime/train/worker_actors.hpp"
#include "runtime/transport/cluster_certificates.hpp"
#include "serialization/wire_files.hpp"

namespace degnn {
class status_board;
}

namespace degnn {

/// The seed's part: its rendezvous, and how long it waits for more nodes once MIN joined.
struct seed_role {
  rendezvous joins;
  std::chrono::milliseconds last_call{0};
  std::optional<tls_files> tls;      ///< set: every joiner must prove its certificate and job token
  std::filesystem::path partitions;  ///< the partition set it serves to nodes that lack files
  wire::file_manifest files;         ///< ... and its manifest
  std::uint64_t resume_step = 0;     ///< resuming: the step of the seed's last commit (view)
  std::filesystem::path checkpoints;  ///< node 0's checkpoint folder (files it offers)
  std::string refusal;  ///< set: why the seed cannot start the run; every joiner is told
};

/// Node 0's part: the status board the console reads, the answerer of every command but the
/// node actor's own orders (runtime/console/console_commands.hpp's, handed in by the node
/// command so that node/ does not depend on console/), and with TLS the files that check an
/// operator's proof.
struct console_role {
  std::shared_ptr<status_board> board;  ///< the console also sets its controls
  std::function<console_answer(const std::string& command)> answer;
  std::optional<tls_files> tls;
};

/// Spawns a node actor. `identity`: this node's cluster identity lines, which every greeting and
/// join must match; `seed`: set on the seed only; `log`: where joins and refusals are reported;
/// `local_key`: what this process's runtime sends with formed, lastcall, serve and view (CAF
/// takes the sender's node id from the peer's own message, so "from this process" cannot be
/// told from the sender alone).
node_actor spawn_node_actor(caf::actor_system& sys, const wire::context& ctx,
                            std::vector<std::string> identity, std::optional<seed_role> seed,
                            std::function<void(const std::string&)> log, std::string local_key,
                            std::optional<console_role> console = std::nullopt,
                            std::string kill_token = {},
                            std::shared_ptr<fault_counters> cut = nullptr);

/// Registers the runtime's message types (after add_actor_types).
void add_runtime_types(caf::actor_system_config& cfg);

}  // namespace degnn
