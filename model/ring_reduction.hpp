// The ring all-reduce's arithmetic (docs/design.md section 4): one worker's gradient cut into a
// chunk per worker, summed around the ring (reduce-scatter), then passed on whole (all-gather), so
// each worker sends and receives 2(P-1)/P of the gradient whatever P. Actors only move the chunks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace degnn {

/// Worker `me`'s side of a ring all-reduce over `workers` workers, worker w sending to w+1. Round
/// k (0 <= k < 2(P-1)) sends one chunk to the next worker and takes one from the previous; rounds
/// below P-1 add what comes (reduce-scatter), the later ones copy it (all-gather). Each worker's
/// `count` (1 if its batch had seeds) is summed with the values: the average divides by it.
/// Chunk c is summed in ring order from worker c: ((g_c + g_c+1) + g_c+2) + ..., the same on
/// every worker, so every replica applies the very same bits.
class ring_reduction {
 public:
  ring_reduction(int me, int workers, std::vector<float> values, std::uint32_t count);

  struct bounds {
    std::size_t begin = 0, end = 0;
  };
  struct outgoing {
    std::uint32_t round = 0;
    std::span<const float> values;  ///< valid until the next receive
    std::uint32_t count = 0;
  };

  std::uint32_t rounds() const { return rounds_; }
  /// Chunk c's values: chunks differ in size by at most one value.
  bounds chunk(int c) const;
  int sent_chunk(std::uint32_t round) const;
  int received_chunk(std::uint32_t round) const;
  /// Whether the next round may be sent: every earlier round's chunk came in.
  bool can_send() const { return sent_ < rounds_ && received_ >= sent_; }
  /// The next round's chunk (call only when can_send()).
  outgoing send();
  /// The chunk of round `round` from the previous worker; rounds come in order. Throws
  /// std::invalid_argument, changing nothing, for a round out of order or a chunk of the wrong
  /// size.
  void receive(std::uint32_t round, std::span<const float> values, std::uint32_t count);
  std::uint32_t next_receive() const { return received_; }
  /// Every round sent and received.
  bool complete() const { return sent_ == rounds_ && received_ == rounds_; }
  /// The workers that counted (once complete).
  std::uint32_t count() const;
  /// The sum divided by count() when more than one counted (once complete); leaves it empty.
  std::vector<float> take_average();

 private:
  int chunk_sent_by(int worker, std::uint32_t round) const;

  int me_, workers_;
  std::uint32_t rounds_;
  std::vector<float> values_;
  std::vector<std::uint32_t> counts_;  ///< per chunk: the workers summed into it so far
  std::uint32_t sent_ = 0, received_ = 0;
};

}  // namespace degnn
