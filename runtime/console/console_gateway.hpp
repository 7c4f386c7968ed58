// Node 0's operator console for a TLS cluster: HTTPS with client certificates of the cluster CA,
// served by an http_gate beside CAF (one polling thread, bounded requests, so 200 slow strangers
// do not delay an operator's command), because CAF 0.17.6 drops a node's routes to every peer
// when any TLS connection to it closes, so a console that detached from the CAF port stopped the
// run. Each command is a POST of a Cap'n Proto ConsoleRequest carrying the operator's proof over a
// challenge the gateway issued; the gateway checks it and hands node 0's node actor the command.
#pragma once

#include <memory>
#include <string>

#include "runtime/node/node_actor.hpp"
#include "runtime/transport/cluster_certificates.hpp"
#include "runtime/transport/endpoint.hpp"
#include "serialization/wire_console.hpp"

namespace degnn {

class console_gateway {
 public:
  /// Binds `where` (port 0: any free port) with node 0's certificate `tls`, or throws naming the
  /// address. `key` is this process's key of the node actor (it takes verified commands only
  /// from here).
  console_gateway(const endpoint& where, const tls_files& tls, caf::actor_system& sys,
                  node_actor node, std::string key);
  ~console_gateway();  ///< stops the server and joins its thread
  console_gateway(const console_gateway&) = delete;
  console_gateway& operator=(const console_gateway&) = delete;

  std::uint16_t port() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// degnn node --console ADDR:PORT (`address`, "" for none): node 0's gateway of a TLS cluster, or
/// none (said on stderr) on other nodes; throws config_error for a cluster without TLS.
std::unique_ptr<console_gateway> node_console_gateway(const std::string& address, bool node0,
                                                      const std::optional<tls_files>& tls,
                                                      caf::actor_system& sys, node_actor node,
                                                      const std::string& key);

/// The console's side: one command through a gateway at `where` whose certificate is made out to
/// `server_name`, as the operator `tls` (its name operator-K). Returns the reply, or throws
/// std::runtime_error saying why there is none.
wire::console_reply ask_console_gateway(const endpoint& where, const std::string& server_name,
                                        const tls_files& tls, const std::string& command,
                                        int timeout_s);

}  // namespace degnn
