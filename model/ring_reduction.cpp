// The ring all-reduce's schedule and sums; see ring_reduction.hpp.
#include "model/ring_reduction.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace degnn {

namespace {
int wrap(int x, int n) {
  return ((x % n) + n) % n;
}
}  // namespace

ring_reduction::ring_reduction(int me, int workers, std::vector<float> values, std::uint32_t count)
    : me_(me),
      workers_(workers),
      rounds_(static_cast<std::uint32_t>(2 * (workers - 1))),
      values_(std::move(values)),
      counts_(static_cast<std::size_t>(workers), count) {
  if (workers < 1 || me < 0 || me >= workers)
    throw std::invalid_argument("ring all-reduce: worker " + std::to_string(me) + " of " +
                                std::to_string(workers));
}

ring_reduction::bounds ring_reduction::chunk(int c) const {
  const std::size_t n = values_.size(), p = static_cast<std::size_t>(workers_);
  const auto at = [&](std::size_t i) { return i * (n / p) + std::min(i, n % p); };
  return {at(static_cast<std::size_t>(c)), at(static_cast<std::size_t>(c) + 1)};
}

// Reduce-scatter round k: worker w sends chunk w-k, so the chunk it just summed goes on; after
// P-1 rounds worker w holds chunk w+1 whole. All-gather round P-1+j: w sends chunk w+1-j. What a
// worker receives is what the one before it sends.
int ring_reduction::chunk_sent_by(int worker, std::uint32_t round) const {
  const int k = static_cast<int>(round), last = workers_ - 1;
  return k < last ? wrap(worker - k, workers_) : wrap(worker + 1 - (k - last), workers_);
}

int ring_reduction::sent_chunk(std::uint32_t round) const {
  return chunk_sent_by(me_, round);
}

int ring_reduction::received_chunk(std::uint32_t round) const {
  return chunk_sent_by(me_ - 1, round);
}

ring_reduction::outgoing ring_reduction::send() {
  if (!can_send()) throw std::logic_error("ring all-reduce: round sent out of turn");
  const int c = sent_chunk(sent_);
  const auto b = chunk(c);
  outgoing out{.round = sent_,
               .values = std::span<const float>(values_).subspan(b.begin, b.end - b.begin),
               .count = counts_[static_cast<std::size_t>(c)]};
  ++sent_;
  return out;
}

void ring_reduction::receive(std::uint32_t round, std::span<const float> values,
                             std::uint32_t count) {
  if (round != received_)
    throw std::invalid_argument("ring all-reduce: round " + std::to_string(round) +
                                " came while round " + std::to_string(received_) + " was due");
  const int c = received_chunk(round);
  const auto b = chunk(c);
  if (values.size() != b.end - b.begin)
    throw std::invalid_argument("ring all-reduce: round " + std::to_string(round) + " carries " +
                                std::to_string(values.size()) + " values, chunk " +
                                std::to_string(c) + " has " + std::to_string(b.end - b.begin));
  auto& n = counts_[static_cast<std::size_t>(c)];
  if (round + 1 < static_cast<std::uint32_t>(workers_)) {
    for (std::size_t i = 0; i < values.size(); ++i)
      values_[b.begin + i] = values[i] + values_[b.begin + i];
    n += count;
  } else {
    std::copy(values.begin(), values.end(), values_.begin() + static_cast<std::ptrdiff_t>(b.begin));
    n = count;
  }
  ++received_;
}

std::uint32_t ring_reduction::count() const {
  if (!complete()) throw std::logic_error("ring all-reduce: not complete");
  return counts_.front();
}

std::vector<float> ring_reduction::take_average() {
  const std::uint32_t n = count();
  if (n > 1) {
    const float inv = 1.0f / static_cast<float>(n);
    for (auto& v : values_)
      v *= inv;
  }
  return std::move(values_);
}

}  // namespace degnn
