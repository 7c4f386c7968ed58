// The in-program fault policy (docs/design.md section 9): messages between nodes damaged,
// duplicated or delayed (and so reordered), decided from a seed and the message itself so a run
// replays its faults; and the numbering of every message, by which receivers (message_guard.hpp)
// refuse what they must.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace degnn {

struct wire_message;

struct fault_policy {
  std::uint64_t seed = 1;
  double corrupt = 0;    ///< probability that one byte of a message is flipped
  double duplicate = 0;  ///< probability that a message is delivered twice
  /// Probability that a message is held back, 1 to delay_ms ms (messages sent after it overtake
  /// it: this is how messages get reordered).
  double delay = 0;
  std::uint32_t delay_ms = 20;
  std::vector<bool> kinds;  ///< by wire kind: faults apply; empty = every kind
  /// (from, to) partition pairs the faults apply to; empty = every pair of different partitions.
  std::vector<std::pair<int, int>> links;

  bool any() const { return corrupt > 0 || duplicate > 0 || delay > 0; }
  bool applies(int from, int to, std::uint16_t kind) const;
};

/// What a process's actors injected and retried, for the run's summary; and the partitions cut
/// off by the console's `cut` (bit p: partition p), which every sender of the process reads.
struct fault_counters {
  std::atomic<std::uint64_t> corrupted{0}, duplicated{0}, retried{0}, delayed{0}, held{0};
  std::atomic<std::uint64_t> cut_parts{0};
  static constexpr int kMaxCutParts = 64;
  /// Whether messages between partitions a and b are held: one of them is cut off, the other not.
  bool cut_between(int a, int b) const {
    if (a < 0 || b < 0 || a == b || a >= kMaxCutParts || b >= kMaxCutParts) return false;
    const std::uint64_t m = cut_parts.load();
    return ((m >> a) & 1U) != ((m >> b) & 1U);
  }
};

/// One actor's sending side: numbers its messages (the receiver refuses a number it saw), and
/// under a fault policy decides what happens to each.
class link_sender {
 public:
  link_sender() = default;
  link_sender(int part, std::shared_ptr<const fault_policy> policy,
              std::shared_ptr<fault_counters> counts);

  struct fate {
    bool corrupt = false;
    bool duplicate = false;
    std::uint32_t delay_ms = 0;  ///< held back this long first (0: sent at once)
  };
  /// Gives sealed m the next sequence number and its checksum (which covers the number).
  void number(wire_message& m);
  /// The fate of a sealed, numbered message to partition `to` (-1: unknown, never faulted), on
  /// its `attempt`-th sending; the same message, link and attempt always meet the same fate.
  fate decide(const wire_message& m, int to, int attempt) const;
  /// Flips one byte of m (chosen from the seed), leaving its checksum: the receiver must notice.
  void damage(wire_message& m) const;
  fault_counters* counts() const { return counts_.get(); }
  std::shared_ptr<fault_counters> shared_counts() const { return counts_; }
  int part() const { return part_; }
  static constexpr int kMaxAttempts = 4;

 private:
  int part_ = -1;
  std::uint64_t next_seq_ = 1;
  std::shared_ptr<const fault_policy> policy_;
  std::shared_ptr<fault_counters> counts_;
};

}  // namespace degnn
