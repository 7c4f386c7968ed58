// Fault decisions are a hash of the seed, the link, the message's content checksum and the
// attempt, never of timing or arrival order, so the same run meets the same faults.
#include "actors/faults/link_faults.hpp"

#include <algorithm>

#include "actors/messages.hpp"
#include "model/crc32.hpp"
#include "model/hashing.hpp"

namespace degnn {

namespace {

// A uniform number in [0, 1) from a hash.
double unit(std::uint64_t h) {
  return static_cast<double>(h >> 11) * (1.0 / 9007199254740992.0);
}

}  // namespace

bool fault_policy::applies(int from, int to, std::uint16_t kind) const {
  if (from < 0 || to < 0 || from == to) return false;  // a message within a node crosses no link
  if (!kinds.empty() && (kind >= kinds.size() || !kinds[kind])) return false;
  return links.empty() ||
         std::find(links.begin(), links.end(), std::pair<int, int>{from, to}) != links.end();
}

link_sender::link_sender(int part, std::shared_ptr<const fault_policy> policy,
                         std::shared_ptr<fault_counters> counts)
    : part_(part), policy_(std::move(policy)), counts_(std::move(counts)) {}

void link_sender::number(wire_message& m) {
  renumber(m, next_seq_++);
}

link_sender::fate link_sender::decide(const wire_message& m, int to, int attempt) const {
  if (!policy_ || !policy_->any() || !policy_->applies(part_, to, m.kind)) return {};
  // The content checksum without the sequence number: the same message in a replayed run.
  const std::uint32_t body = crc32_update(0, m.bytes.data(), m.bytes.size());
  std::uint64_t h = mix64(policy_->seed ^ mix64(static_cast<std::uint64_t>(part_) << 32 |
                                                static_cast<std::uint32_t>(to)));
  h = mix64(h ^ (static_cast<std::uint64_t>(body) << 16 | m.kind));
  h = mix64(h ^ static_cast<std::uint64_t>(attempt));
  fate f;
  f.corrupt = unit(h) < policy_->corrupt;
  f.duplicate = unit(mix64(h ^ 0x64757021)) < policy_->duplicate;
  if (unit(mix64(h ^ 0x64656c61)) < policy_->delay)
    f.delay_ms =
        1 + static_cast<std::uint32_t>(mix64(h ^ 0x6d73) % std::max(1u, policy_->delay_ms));
  return f;
}

void link_sender::damage(wire_message& m) const {
  if (m.bytes.empty()) {
    m.kind ^= 0x4000;  // nothing to flip: the kind itself goes wrong
    return;
  }
  const std::uint64_t h = mix64(policy_ ? policy_->seed : 0) ^ mix64(m.seq);
  m.bytes[h % m.bytes.size()] ^= static_cast<char>(1 + (h >> 32) % 255);
}

}  // namespace degnn
