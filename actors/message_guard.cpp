// A sliding window per sender, as in IPsec's anti-replay check: CAF keeps the order of one
// sender's messages to one receiver, so a duplicate arrives within the window of its original;
// a message the fault policy held back (at most 200 ms) arrives late but within it.
#include "actors/message_guard.hpp"

namespace degnn {

std::optional<message_guard::refusal> message_guard::admit(const caf::strong_actor_ptr& sender,
                                                           const wire_message& m, bool remember) {
  if (!intact(m))
    return refusal{actor_errc::damaged,
                   "a damaged message (its CRC-32 does not match): not read, not applied"};
  // Unnumbered: a reply, or a command a batch actor passes on to its own shard.
  if (m.seq == 0 || !remember) return std::nullopt;
  window& w = senders_[caf::actor_cast<caf::actor_addr>(sender)];
  if (m.seq > w.highest) {
    const std::uint64_t shift = m.seq - w.highest;
    w.seen = shift >= kWindow ? 0 : w.seen << shift;
    w.seen |= 1;
    w.highest = m.seq;
    return std::nullopt;
  }
  const std::uint64_t age = w.highest - m.seq;
  if (age >= kWindow)
    return refusal{actor_errc::rejected, "a stale message (number " + std::to_string(m.seq) +
                                             ", the sender is at " + std::to_string(w.highest) +
                                             "): not applied"};
  if (w.seen & (std::uint64_t{1} << age))
    return refusal{actor_errc::rejected, "a repeated message (number " + std::to_string(m.seq) +
                                             " came before): not applied"};
  w.seen |= std::uint64_t{1} << age;
  return std::nullopt;
}

}  // namespace degnn
