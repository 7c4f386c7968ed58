// A CAF process outside the cluster, inside a test: its own actor system with DEGNN's message
// types and the middleman, to reach a node's actors as a stranger would (and be refused).
#pragma once

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <cstdint>

#include "actors/messages.hpp"
#include "runtime/node/node_actor.hpp"

namespace degnn::test {

struct outside_peer {
  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scoped_actor self;

  outside_peer() : sys(configured(cfg)), self(sys) {}
  /// The node actor published on 127.0.0.1:port.
  caf::expected<node_actor> node_at(std::uint16_t port) {
    return sys.middleman().remote_actor<node_actor>("127.0.0.1", port);
  }

 private:
  static caf::actor_system_config& configured(caf::actor_system_config& c) {
    add_actor_types(c);
    add_runtime_types(c);
    c.load<caf::io::middleman>();
    return c;
  }
};

}  // namespace degnn::test
