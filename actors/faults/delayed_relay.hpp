// A delayed or held message of the fault policy (link_faults.hpp): a short-lived actor holds a
// request back, then delegates it to its receiver, whose reply goes straight to the original asker.
#pragma once

#include <caf/all.hpp>

#include <chrono>
#include <functional>

namespace degnn {

/// An actor that, asked relay_atom, sends `what` to `to` after `delay` as the asker's own request
/// (delegated: the asker's time-out and reply handler stay in force), then quits.
caf::actor spawn_delayed_relay(caf::actor_system& sys, caf::actor to, caf::message what,
                               std::chrono::milliseconds delay);

/// The same, held while `holding()` says so (checked every 20 ms): a request across a cut link
/// waits for the heal, as over a network partition that TCP outlasts; the asker's time-out runs.
/// After `limit` (the asker's time-out) it gives up and quits, so that no relay outlives the run
/// (the actor system waits for every actor before the process ends).
caf::actor spawn_held_relay(caf::actor_system& sys, caf::actor to, caf::message what,
                            std::function<bool()> holding, std::chrono::milliseconds limit);

}  // namespace degnn
