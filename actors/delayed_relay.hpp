// A delayed message of the fault policy (link_faults.hpp): a short-lived actor holds a request
// back, then delegates it to its receiver, whose reply goes straight to the original asker.
#pragma once

#include <caf/all.hpp>

#include <chrono>

namespace degnn {

/// An actor that, asked relay_atom, sends `what` to `to` after `delay` as the asker's own request
/// (delegated: the asker's time-out and reply handler stay in force), then quits.
caf::actor spawn_delayed_relay(caf::actor_system& sys, caf::actor to, caf::message what,
                               std::chrono::milliseconds delay);

}  // namespace degnn
