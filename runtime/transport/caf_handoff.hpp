// How an authenticated connection reaches CAF although CAF listens nowhere: the door makes a
// private pair of connected loopback sockets (their listener lives for one accept and takes
// only the door's own connection), keeps one end and hands the other to CAF's BASP broker as a
// connection already open: the server side of the published node actor (a peer connected to us)
// or a client (we connected to a peer).
#pragma once

#include <caf/actor.hpp>
#include <caf/actor_control_block.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>
#include <caf/node_id.hpp>

#include <chrono>
#include <cstdint>
#include <set>
#include <string>

namespace degnn {

struct socket_pair {
  int caf = -1;   ///< handed to CAF
  int door = -1;  ///< kept by the door
};

/// Throws std::runtime_error when the system has no sockets left.
socket_pair private_socket_pair();

/// What a node we connected to published: its node, its actor and that actor's interface.
struct remote_published {
  caf::node_id node;
  caf::strong_actor_ptr actor;
  std::set<std::string> interface;
};

class caf_handoff {
 public:
  explicit caf_handoff(caf::actor_system& sys);

  /// The actor peers find on this node (before the first `serve`).
  void publish(caf::strong_actor_ptr whom, std::set<std::string> interface, std::uint16_t port);

  /// A peer connected to us: CAF serves it on `fd` as it would a connection its own listener
  /// accepted. Thread-safe (an asynchronous message to the broker).
  void serve(int fd);

  /// We connected to a peer: CAF speaks BASP's client side on `fd` and the answer is what the
  /// peer published, or an error after `timeout`.
  caf::expected<remote_published> connect(int fd, std::uint16_t port,
                                          std::chrono::milliseconds timeout);

 private:
  caf::actor_system& sys_;
  caf::actor broker_;
  caf::strong_actor_ptr published_;
  std::set<std::string> interface_;
  std::uint16_t port_ = 0;
};

}  // namespace degnn
