// Scatter-gather of encoded requests from an event-based actor: send them all at once (or a
// window at a time), continue when every reply is in, fail once on the first error or timeout.
// Replies keep request order, or are taken one by one as they come (gather_stream).
// Every request goes out numbered through the actor's link_sender (state.link), meeting the
// faults of its policy; one the receiver found damaged is sent again, a damaged reply fails.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include "actors/faults/delayed_relay.hpp"
#include "actors/faults/link_faults.hpp"
#include "actors/messages.hpp"

namespace degnn {

template <class Handle, class Atom>
struct wire_request {
  Handle to;
  wire_message msg;
  int part = -1;  ///< the receiver's partition, for the fault policy's links (-1: not faulted)
};

/// Whether a request failed because its receiver found it damaged (and did not apply it).
inline bool damaged_error(const caf::error& e) {
  return e.category() == caf::atom("degnn") &&
         e.code() == static_cast<std::uint8_t>(actor_errc::damaged);
}

/// A gather that takes each reply as it comes (and keeps none) and keeps at most `window`
/// requests out at once (0: all at once): bounded memory for a transfer of many chunks.
/// `each` may throw; the gather then fails with the request's index and a rejected error.
struct gather_stream {
  std::size_t window = 0;
  std::function<void(std::size_t, wire_message&)> each;
};

/// Sends one numbered request as its fate says (gather's send): held while its link is cut
/// (the console's `cut`) until the heal or the time-out, held back by a relay when delayed, else
/// at once; a duplicate copy follows the original (a held one has none) and is answered nowhere.
template <class Self, class Handle, class Atom, class OnReply, class OnError>
void send_on_link(Self* self, Atom atom, const Handle& to, int part, wire_message msg,
                  std::optional<wire_message> again, const link_sender::fate& fate,
                  std::chrono::milliseconds timeout, OnReply on_reply, OnError on_error) {
  link_sender& link = self->state.link;
  // A cut link (the console's `cut`): held until the heal, or until the time-out.
  const bool held = link.counts() && link.counts()->cut_between(link.part(), part);
  if (held) {
    ++link.counts()->held;
    auto counts = link.shared_counts();
    const int from = link.part();
    auto relay = spawn_held_relay(
        self->home_system(), caf::actor_cast<caf::actor>(to),
        caf::make_message(atom, std::move(msg)),
        [counts, from, part] { return counts->cut_between(from, part); }, timeout);
    self->request(relay, timeout, relay_atom_v).then(std::move(on_reply), std::move(on_error));
  } else if (fate.delay_ms > 0) {
    // Held back by a relay that then sends it as this request: the time-out runs from now.
    if (auto* c = link.counts()) ++c->delayed;
    auto relay = spawn_delayed_relay(self->home_system(), caf::actor_cast<caf::actor>(to),
                                     caf::make_message(atom, std::move(msg)),
                                     std::chrono::milliseconds(fate.delay_ms));
    self->request(relay, timeout, relay_atom_v).then(std::move(on_reply), std::move(on_error));
  } else {
    self->request(to, timeout, atom, std::move(msg)).then(std::move(on_reply), std::move(on_error));
  }
  if (again && !held) {
    if (auto* c = link.counts()) ++c->duplicated;
    if (fate.delay_ms > 0) {
      // Behind a delayed original, held back a little longer: the copy must stay the one refused.
      auto relay = spawn_delayed_relay(self->home_system(), caf::actor_cast<caf::actor>(to),
                                       caf::make_message(atom, std::move(*again)),
                                       std::chrono::milliseconds(fate.delay_ms + 5));
      self->request(relay, timeout, relay_atom_v).then([](wire_message&) {}, [](caf::error&) {});
    } else {
      self->request(to, timeout, atom, std::move(*again))
          .then([](wire_message&) {}, [](caf::error&) {});
    }
  }
}

/// fail is called once, with (index of the request, error) when it takes them, else (error).
/// Without a stream, done gets every reply in request order; with one, an empty vector.
template <class Self, class Handle, class Atom, class Done, class Fail>
void gather(Self* self, Atom atom, std::vector<wire_request<Handle, Atom>> requests,
            std::chrono::milliseconds timeout, Done done, Fail fail, gather_stream stream = {}) {
  struct pending;
  using pending_ptr = std::shared_ptr<pending>;
  struct pending {
    std::vector<wire_message> replies;
    size_t left = 0;
    bool failed = false;
    Done done;
    Fail fail;
    gather_stream stream;
    std::vector<wire_request<Handle, Atom>> requests;  ///< those from `next` on not sent yet
    size_t next = 0;
    // Takes the pending state as an argument: stored in it, it must not own it.
    std::function<void(const pending_ptr&, size_t, const Handle&, int, wire_message, int)> send;
  };
  const size_t n = requests.size();
  auto p = std::make_shared<pending>(pending{{},
                                             n,
                                             false,
                                             std::move(done),
                                             std::move(fail),
                                             std::move(stream),
                                             std::move(requests),
                                             0,
                                             {}});
  if (!p->stream.each) p->replies.resize(n);
  if (n == 0) {
    p->done(p->replies);
    return;
  }
  auto fail_with = [](pending& q, size_t i, const caf::error& err) {
    q.failed = true;
    if constexpr (std::is_invocable_v<Fail&, std::size_t, const caf::error&>)
      q.fail(i, err);
    else
      q.fail(err);
  };
  p->send = [self, atom, timeout, fail_with](const pending_ptr& p, size_t i, const Handle& to,
                                             int part, wire_message msg, int attempt) {
    link_sender& link = self->state.link;
    // Every attempt gets a number of its own: a retry must not carry a number the receiver may
    // already have left behind its window (a damaged copy's number was never recorded).
    link.number(msg);
    const auto fate = link.decide(msg, part, attempt);
    std::shared_ptr<wire_message> pristine;  // what a damaged message is sent again as
    if (fate.corrupt) {
      pristine = std::make_shared<wire_message>(msg);
      link.damage(msg);
      if (auto* c = link.counts()) ++c->corrupted;
    }
    // The very bytes sent, again, behind the original: the receiver must refuse the second one.
    std::optional<wire_message> again;
    if (fate.duplicate) again = msg;
    auto on_reply = [p, i, fail_with](wire_message& reply) {
      if (p->failed) return;
      if (!intact(reply)) {
        fail_with(*p, i,
                  actor_error(actor_errc::damaged, "a damaged reply (its CRC-32 does not match)"));
        return;
      }
      if (p->stream.each) {
        try {
          p->stream.each(i, reply);
        } catch (const std::exception& e) {
          fail_with(*p, i, actor_error(actor_errc::rejected, e.what()));
          return;
        }
      } else {
        p->replies[i] = std::move(reply);
      }
      if (--p->left == 0) {
        p->done(p->replies);
      } else if (p->next < p->requests.size()) {
        auto& r = p->requests[p->next];
        p->send(p, p->next++, r.to, r.part, std::move(r.msg), 1);
      }
    };
    auto on_error = [self, p, i, to, part, attempt, pristine, fail_with](caf::error& err) {
      if (p->failed) return;
      if (pristine && damaged_error(err) && attempt < link_sender::kMaxAttempts) {
        if (auto* c = self->state.link.counts()) ++c->retried;
        p->send(p, i, to, part, *pristine, attempt + 1);
        return;
      }
      fail_with(*p, i, err);
    };
    send_on_link(self, atom, to, part, std::move(msg), std::move(again), fate, timeout,
                 std::move(on_reply), std::move(on_error));
  };
  const size_t first = p->stream.window == 0 ? n : std::min(n, p->stream.window);
  while (p->next < first) {
    auto& r = p->requests[p->next];
    p->send(p, p->next++, r.to, r.part, std::move(r.msg), 1);
  }
}

}  // namespace degnn
