// Scatter-gather of encoded requests from an event-based actor: send them all at once, continue
// when every reply is in, fail once on the first error or timeout. Replies keep request order.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "actors/messages.hpp"

namespace degnn {

template <class Handle, class Atom>
struct wire_request {
  Handle to;
  wire_message msg;
};

template <class Self, class Handle, class Atom>
void gather(Self* self, Atom atom, std::vector<wire_request<Handle, Atom>> requests,
            std::chrono::milliseconds timeout, std::function<void(std::vector<wire_message>&)> done,
            std::function<void(const caf::error&)> fail) {
  struct pending {
    std::vector<wire_message> replies;
    size_t left = 0;
    bool failed = false;
  };
  auto p = std::make_shared<pending>();
  p->replies.resize(requests.size());
  p->left = requests.size();
  if (requests.empty()) {
    done(p->replies);
    return;
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    self->request(requests[i].to, timeout, atom, std::move(requests[i].msg))
        .then(
            [p, i, done](wire_message& reply) {
              if (p->failed) return;
              p->replies[i] = std::move(reply);
              if (--p->left == 0) done(p->replies);
            },
            [p, fail](caf::error& err) {
              if (p->failed) return;
              p->failed = true;
              fail(err);
            });
  }
}

}  // namespace degnn
