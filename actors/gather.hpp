// Scatter-gather of encoded requests from an event-based actor: send them all at once, continue
// when every reply is in, fail once on the first error or timeout. Replies keep request order.
#pragma once

#include <functional>
#include <memory>
#include <type_traits>
#include <vector>

#include "actors/messages.hpp"

namespace degnn {

template <class Handle, class Atom>
struct wire_request {
  Handle to;
  wire_message msg;
};

/// fail is called once, with (index of the request, error) when it takes them, else (error).
template <class Self, class Handle, class Atom, class Done, class Fail>
void gather(Self* self, Atom atom, std::vector<wire_request<Handle, Atom>> requests,
            std::chrono::milliseconds timeout, Done done, Fail fail) {
  struct pending {
    std::vector<wire_message> replies;
    size_t left = 0;
    bool failed = false;
    Done done;
    Fail fail;
  };
  auto p = std::make_shared<pending>(
      pending{{}, requests.size(), false, std::move(done), std::move(fail)});
  p->replies.resize(requests.size());
  if (requests.empty()) {
    p->done(p->replies);
    return;
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    self->request(requests[i].to, timeout, atom, std::move(requests[i].msg))
        .then(
            [p, i](wire_message& reply) {
              if (p->failed) return;
              p->replies[i] = std::move(reply);
              if (--p->left == 0) p->done(p->replies);
            },
            [p, i](caf::error& err) {
              if (p->failed) return;
              p->failed = true;
              if constexpr (std::is_invocable_v<Fail&, std::size_t, const caf::error&>)
                p->fail(i, err);
              else
                p->fail(err);
            });
  }
}

}  // namespace degnn
