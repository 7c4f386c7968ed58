// Tests of model/ring_reduction.hpp: P workers run the ring's rounds through in-memory links,
// delivered in a shuffled order (each link in order, as the actors buffer them), and must end
// with the same average, bit for bit, equal to summing each chunk in ring order from its index.
#include "model/ring_reduction.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <random>

using namespace degnn;

namespace {

struct message {
  std::uint32_t round, count;
  std::vector<float> values;
};

// Runs the ring; each worker's inbox holds what its predecessor sent, taken in round order. The
// workers move in a random order so that some run rounds ahead of the others.
std::vector<std::vector<float>> run_ring(const std::vector<std::vector<float>>& grads,
                                         const std::vector<std::uint32_t>& counts,
                                         std::uint64_t seed, std::vector<std::uint32_t>* totals) {
  const int p = static_cast<int>(grads.size());
  std::vector<ring_reduction> w;
  for (int i = 0; i < p; ++i)
    w.emplace_back(i, p, grads[static_cast<size_t>(i)], counts[static_cast<size_t>(i)]);
  std::vector<std::deque<message>> inbox(static_cast<size_t>(p));
  std::mt19937_64 rng(seed);
  for (int moves = 0; moves < 100000; ++moves) {
    bool all_done = true;
    for (auto& x : w)
      all_done = all_done && x.complete();
    if (all_done) break;
    const int i = static_cast<int>(rng() % static_cast<std::uint64_t>(p));
    auto& x = w[static_cast<size_t>(i)];
    auto& in = inbox[static_cast<size_t>(i)];
    if (x.can_send() && (in.empty() || rng() % 2)) {
      const auto out = x.send();
      inbox[static_cast<size_t>((i + 1) % p)].push_back(
          {out.round, out.count, std::vector<float>(out.values.begin(), out.values.end())});
    } else if (!in.empty()) {
      x.receive(in.front().round, in.front().values, in.front().count);
      in.pop_front();
    }
  }
  std::vector<std::vector<float>> out;
  for (auto& x : w) {
    EXPECT_TRUE(x.complete());
    if (totals) totals->push_back(x.count());
    out.push_back(x.take_average());
  }
  return out;
}

std::vector<std::vector<float>> random_gradients(int p, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<std::vector<float>> g(static_cast<size_t>(p), std::vector<float>(n));
  for (auto& v : g)
    for (auto& x : v)
      x = d(rng) * std::pow(10.0f, static_cast<float>(rng() % 7) - 3.0f);
  return g;
}

TEST(RingReduction, EveryWorkerEndsWithTheRingOrderSumBitForBit) {
  for (int p : {1, 2, 3, 4, 5, 8}) {
    for (std::size_t n : {std::size_t{0}, std::size_t{3}, std::size_t{17}, std::size_t{1000}}) {
      SCOPED_TRACE("workers " + std::to_string(p) + ", values " + std::to_string(n));
      const auto g = random_gradients(p, n, 7 + static_cast<std::uint64_t>(p * 1000 + n));
      std::vector<std::uint32_t> counts(static_cast<size_t>(p), 1);
      if (p > 2) counts[1] = 0;  // a worker without seeds still adds its (zero or not) values
      std::uint32_t want_count = 0;
      for (auto c : counts)
        want_count += c;
      std::vector<std::uint32_t> totals;
      const auto got = run_ring(g, counts, 42, &totals);
      // The reference: chunk c summed from worker c on around the ring, then averaged.
      ring_reduction layout(0, p, std::vector<float>(n), 0);
      std::vector<float> want(n);
      for (int c = 0; c < p; ++c) {
        const auto b = layout.chunk(c);
        for (std::size_t i = b.begin; i < b.end; ++i) {
          float s = g[static_cast<size_t>(c)][i];
          for (int k = 1; k < p; ++k)
            s = s + g[static_cast<size_t>((c + k) % p)][i];
          want[i] = want_count > 1 ? s * (1.0f / static_cast<float>(want_count)) : s;
        }
      }
      for (int i = 0; i < p; ++i) {
        EXPECT_EQ(totals[static_cast<size_t>(i)], want_count);
        ASSERT_EQ(got[static_cast<size_t>(i)].size(), n);
        for (std::size_t j = 0; j < n; ++j)
          ASSERT_EQ(got[static_cast<size_t>(i)][j], want[j]) << "worker " << i << " value " << j;
      }
      // Chunks cover the values once, in order, sizes differing by at most one.
      std::size_t next = 0;
      for (int c = 0; c < p; ++c) {
        const auto b = layout.chunk(c);
        EXPECT_EQ(b.begin, next);
        EXPECT_LE(b.end - b.begin, n / static_cast<std::size_t>(p) + 1);
        next = b.end;
      }
      EXPECT_EQ(next, n);
    }
  }
}

TEST(RingReduction, TheOrderOfDeliveryDoesNotChangeTheResult) {
  const auto g = random_gradients(4, 501, 3);
  const std::vector<std::uint32_t> counts{1, 1, 1, 1};
  const auto first = run_ring(g, counts, 1, nullptr);
  for (std::uint64_t seed : {2, 3, 4, 5})
    EXPECT_EQ(run_ring(g, counts, seed, nullptr), first) << "delivery order " << seed;
}

TEST(RingReduction, EachWorkerSendsTwicePMinusOneChunksOfAboutNOverP) {
  const int p = 4;
  ring_reduction w(2, p, std::vector<float>(1000, 1.0f), 1);
  EXPECT_EQ(w.rounds(), 6u);
  std::size_t sent = 0;
  for (std::uint32_t k = 0; k < w.rounds(); ++k) {
    ASSERT_TRUE(w.can_send());
    sent += w.send().values.size();
    EXPECT_FALSE(w.can_send()) << "round " << k + 1 << " before round " << k << " came in";
    const auto b = w.chunk(w.received_chunk(k));
    w.receive(k, std::vector<float>(b.end - b.begin, 1.0f), 1);
  }
  EXPECT_TRUE(w.complete());
  EXPECT_EQ(sent, 2u * 3u * 1000u / 4u);
}

TEST(RingReduction, RefusesARoundOutOfOrderOrOfTheWrongSizeAndChangesNothing) {
  ring_reduction w(0, 3, std::vector<float>(9, 2.0f), 1);
  w.send();
  EXPECT_THROW(w.receive(1, std::vector<float>(3, 1.0f), 1), std::invalid_argument);
  EXPECT_THROW(w.receive(0, std::vector<float>(4, 1.0f), 1), std::invalid_argument);
  EXPECT_EQ(w.next_receive(), 0u);
  EXPECT_THROW(ring_reduction(3, 3, {}, 1), std::invalid_argument);
  EXPECT_THROW(w.count(), std::logic_error);
}

}  // namespace
