// How a node process learns the cluster: a static --peers list (rank p serves partition p), or
// the view of a seed it joined (or that it formed, on the seed). Blocking calls of the node's
// runtime thread, each bounded by a deadline that ends in an error naming what was waited for.
#pragma once

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <algorithm>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "runtime/node/node_actor.hpp"
#include "runtime/transport/endpoint.hpp"
#include "runtime/transport/peer_door.hpp"
#include "serialization/wire_membership.hpp"

namespace degnn {

using deadline = std::chrono::steady_clock::time_point;

struct membership {
  wire::membership_view view;
  int rank = 0;
};

/// --peers: rank p at the p-th address, serving partition p.
wire::membership_view static_view(const std::vector<endpoint>& peers);

/// The seed: waits until its node actor formed the cluster.
membership await_formation(caf::scoped_actor& self, const node_actor& node,
                           const wire::context& ctx, deadline until, const std::string& local_key);

/// A joiner: asks the seed's node actor (reached once, see connect) to join as `me` (with TLS:
/// proving its certificate over the seed's challenge) and waits for the view; its rank is the
/// member with its address and name.
membership join_cluster(caf::actor_system& sys, caf::scoped_actor& self, const node_actor& seed,
                        const endpoint& seed_address, wire::join_request me,
                        const std::optional<tls_files>& tls, const wire::context& ctx,
                        deadline until);

/// Retries one connection until it succeeds or the deadline passes (peers start in any order);
/// `attempt` makes one try within the time given and returns what the peer published.
template <class Handle, class Attempt>
Handle connect_with(caf::actor_system& sys, const endpoint& e, deadline until, const char* what,
                    Attempt&& attempt) {
  const auto expected = sys.message_types<Handle>();
  std::string failure;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    caf::expected<remote_published> got = attempt(
        std::clamp(left, std::chrono::milliseconds(100), std::chrono::milliseconds(10'000)));
    if (!got) {
      failure = sys.render(got.error());
    } else if (!got->actor) {
      failure = "no actor is published there";
    } else if (got->interface != expected) {
      failure = "the actor there speaks another protocol (another DEGNN version?)";
    } else {
      return caf::actor_cast<Handle>(std::move(got->actor));
    }
    if (std::chrono::steady_clock::now() > until) {
      throw std::runtime_error(std::string("cannot reach the ") + what + " at " + e.str() + ": " +
                               failure);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

/// A node reaches a peer through its door (with TLS, a certificate made out to `expected_name`,
/// or any node-K when empty).
template <class Handle>
Handle connect(caf::actor_system& sys, peer_door& door, const endpoint& e, deadline until,
               const char* what, const std::string& expected_name = "") {
  return connect_with<Handle>(sys, e, until, what, [&](std::chrono::milliseconds t) {
    return door.connect(e, expected_name, t);
  });
}

/// A process that is no node (the console of a plain cluster) connects through CAF's own
/// middleman. Each attempt is a request with a time-out: `remote_actor` waits forever when the
/// TCP connection opens but the handshake never completes (a paused peer).
template <class Handle>
Handle connect(caf::actor_system& sys, const endpoint& e, deadline until, const char* what) {
  caf::scoped_actor self{sys};
  const auto mm = sys.middleman().actor_handle();
  return connect_with<Handle>(sys, e, until, what, [&](std::chrono::milliseconds t) {
    caf::expected<remote_published> out{caf::sec::cannot_connect_to_node};
    self->request(mm, t, caf::connect_atom_v, e.host, e.port)
        .receive(
            [&](caf::node_id& nid, caf::strong_actor_ptr& p, std::set<std::string>& ifs) {
              out = remote_published{std::move(nid), std::move(p), std::move(ifs)};
            },
            [&](caf::error& err) { out = std::move(err); });
    return out;
  });
}

/// The coordinator names partitions; the operator wants the node: "... partition 2's ..."
/// gets " [partition 2 is node 2, NAME at HOST:PORT]" appended.
std::string with_node_of_partition(const wire::membership_view& view, std::string what);

}  // namespace degnn
