// The delaying relay of the fault policy.
#include "actors/faults/delayed_relay.hpp"

#include "actors/messages.hpp"

namespace degnn {

caf::actor spawn_delayed_relay(caf::actor_system& sys, caf::actor to, caf::message what,
                               std::chrono::milliseconds delay) {
  return sys.spawn([to, what, delay](caf::event_based_actor* self) -> caf::behavior {
    return {
        [=](relay_atom) {
          // The request is answered by its receiver once delegated, never here.
          auto rp = self->make_response_promise();
          self->become([=](fire_atom) mutable {
            rp.delegate(to, what);
            self->quit();
          });
          self->delayed_send(self, delay, fire_atom_v);
        },
    };
  });
}

caf::actor spawn_held_relay(caf::actor_system& sys, caf::actor to, caf::message what,
                            std::function<bool()> holding, std::chrono::milliseconds limit) {
  return sys.spawn([to, what, holding, limit](caf::event_based_actor* self) -> caf::behavior {
    return {
        [=](relay_atom) {
          auto rp = self->make_response_promise();
          const auto give_up = std::chrono::steady_clock::now() + limit;
          self->become([=](fire_atom) mutable {
            if (holding()) {
              if (std::chrono::steady_clock::now() >= give_up) {
                rp.deliver(caf::make_error(caf::sec::request_timeout,
                                           "held by a cut link past the request's time-out"));
                self->quit();
                return;
              }
              self->delayed_send(self, std::chrono::milliseconds(20), fire_atom_v);
              return;
            }
            rp.delegate(to, what);
            self->quit();
          });
          self->send(self, fire_atom_v);
        },
    };
  });
}

}  // namespace degnn
