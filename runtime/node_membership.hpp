// How a node process learns the cluster: a static --peers list (rank p serves partition p), or
// the view of a seed it joined (or that it formed, on the seed). Blocking calls of the node's
// runtime thread, each bounded by a deadline that ends in an error naming what was waited for.
#pragma once

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>

#include <algorithm>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "runtime/endpoint.hpp"
#include "runtime/node_actor.hpp"
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

/// Makes every connection of this actor system mutual TLS with `tls`'s certificate, key and CA
/// (CAF then requires a certificate of the CA from both sides); after the middleman is loaded.
inline void use_tls(caf::actor_system_config& cfg, const tls_files& tls) {
  cfg.openssl_certificate = tls.certificate().string();
  cfg.openssl_key = tls.key().string();
  cfg.openssl_cafile = tls.ca().string();
  cfg.load<caf::openssl::manager>();
}

/// Retries a connection until it succeeds or the deadline passes: peers start in any order.
/// `tls`: through CAF's OpenSSL module (both sides present a certificate of the cluster CA).
/// Each attempt is a request to the middleman with a time-out: `remote_actor` waits forever
/// when the TCP connection opens but the handshake never completes (a paused peer).
template <class Handle>
Handle connect(caf::actor_system& sys, const endpoint& e, deadline until, const char* what,
               bool tls) {
  caf::scoped_actor self{sys};
  const auto mm = tls ? sys.openssl_manager().actor_handle() : sys.middleman().actor_handle();
  const auto expected = sys.message_types<Handle>();
  std::string failure;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    Handle h;
    self->request(
            mm, std::clamp(left, std::chrono::milliseconds(100), std::chrono::milliseconds(10'000)),
            caf::connect_atom_v, e.host, e.port)
        .receive(
            [&](caf::node_id&, caf::strong_actor_ptr& p, std::set<std::string>& ifs) {
              if (!p) {
                failure = "no actor is published there";
              } else if (ifs != expected) {
                failure = "the actor there speaks another protocol (another DEGNN version?)";
              } else {
                h = caf::actor_cast<Handle>(std::move(p));
              }
            },
            [&](caf::error& err) { failure = sys.render(err); });
    if (h) return h;
    if (std::chrono::steady_clock::now() > until) {
      throw std::runtime_error(std::string("cannot reach the ") + what + " at " + e.str() + ": " +
                               failure);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

/// The coordinator names partitions; the operator wants the node: "... partition 2's ..."
/// gets " [partition 2 is node 2, NAME at HOST:PORT]" appended.
std::string with_node_of_partition(const wire::membership_view& view, std::string what);

}  // namespace degnn
