// The receiving side of the message envelope: a request is served only if it arrived as sealed
// and its sender's number was not seen before, so a damaged or duplicated message is refused (and
// counted by the actor) and never applied. The checksum has no key: against a forger who can
// reach the port, TLS and the members-only checks protect, not this.
#pragma once

#include <caf/all.hpp>

#include <map>
#include <optional>
#include <string>

#include "actors/messages.hpp"

namespace degnn {

class message_guard {
 public:
  struct refusal {
    actor_errc code;  ///< damaged (the sender may send it again) or rejected (seen before)
    std::string why;
  };
  /// Nothing when m may be served. A numbered message is remembered per sender (unless
  /// `remember` is false: a query anyone may send, whose repeat does no harm): a number seen
  /// before, or older than the last kWindow numbers of that sender, is refused.
  std::optional<refusal> admit(const caf::strong_actor_ptr& sender, const wire_message& m,
                               bool remember = true);
  static constexpr std::uint64_t kWindow = 64;

 private:
  struct window {
    std::uint64_t highest = 0;
    std::uint64_t seen = 0;  ///< bit d: number highest - d was seen
  };
  std::map<caf::actor_addr, window> senders_;
};

}  // namespace degnn
