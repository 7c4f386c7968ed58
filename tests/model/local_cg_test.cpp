// Tests of model/local_cg.hpp's locality-biased pick: fewer remote neighbours than a uniform
// sample, importance weights that keep the neighbour mean unbiased.
#include "model/local_cg.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

using namespace degnn;

namespace {

// Nodes 0..3 on part 0, 4..11 on part 1; a part-0 node whose neighbours are 1..11.
struct fixture {
  partition_book book{{0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1}, 2};
  std::vector<node_id> neighbors{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
};

}  // namespace

TEST(LocalityBiasedPick, TakesFewerRemoteNeighboursWithWeightsThatSumToOne) {
  fixture f;
  row_rng rng(row_seed(1, 2, 3, 0));
  std::vector<node_id> picks;
  std::vector<float> weights;
  // fanout 5: a uniform pick expects 5 * 8/11 = 3.6 remote; bias 0.25 asks for 1, but the 3
  // local neighbours leave 2 picks to the remote stratum.
  ASSERT_EQ(pick_locality_biased(f.neighbors, f.book, 0, 5, 0.25, rng, picks, weights), 5);
  ASSERT_EQ(weights.size(), 5u);
  int remote = 0;
  for (node_id u : picks)
    remote += f.book.owner(u) == 1;
  EXPECT_EQ(remote, 2);
  EXPECT_NEAR(std::accumulate(weights.begin(), weights.end(), 0.0), 1.0, 1e-6);
  // Every neighbour at most once.
  std::vector<node_id> sorted = picks;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end());
}

TEST(LocalityBiasedPick, WeightedSumIsAnUnbiasedEstimateOfTheNeighbourMean) {
  fixture f;
  // x_u = u^2: the full mean over the neighbours.
  double full = 0;
  for (node_id u : f.neighbors)
    full += static_cast<double>(u) * u;
  full /= static_cast<double>(f.neighbors.size());
  for (double bias : {1.0, 0.5, 0.1}) {
    for (int fanout : {3, 6}) {
      const int draws = 40000;
      double sum = 0, sum_sq = 0;
      for (int t = 0; t < draws; ++t) {
        row_rng rng(row_seed(7, static_cast<std::uint64_t>(t), 1, 0));
        std::vector<node_id> picks;
        std::vector<float> weights;
        pick_locality_biased(f.neighbors, f.book, 0, fanout, bias, rng, picks, weights);
        double est = 0;
        for (size_t i = 0; i < picks.size(); ++i)
          est += weights[i] * static_cast<double>(picks[i]) * picks[i];
        sum += est;
        sum_sq += est * est;
      }
      const double mean = sum / draws;
      const double stderr_mean = std::sqrt((sum_sq / draws - mean * mean) / draws);
      EXPECT_NEAR(mean, full, 5 * stderr_mean + 1e-9) << "bias " << bias << " fanout " << fanout;
    }
  }
}

TEST(LocalityBiasedPick, TakesEveryNeighbourWhenTheFanoutCoversThem) {
  fixture f;
  row_rng rng(row_seed(1, 1, 1, 0));
  std::vector<node_id> picks;
  std::vector<float> weights;
  EXPECT_EQ(pick_locality_biased(f.neighbors, f.book, 0, -1, 0.1, rng, picks, weights), 11);
  for (float w : weights)
    EXPECT_FLOAT_EQ(w, 1.0f / 11);
}

TEST(LocalityBiasedPick, KeepsBothStrataOrFallsBackToAUniformPick) {
  fixture f;
  std::vector<node_id> picks;
  std::vector<float> weights;
  // Fanout 1 cannot hold two strata: one uniform pick of weight 1.
  row_rng one(row_seed(1, 1, 1, 0));
  ASSERT_EQ(pick_locality_biased(f.neighbors, f.book, 0, 1, 0.5, one, picks, weights), 1);
  EXPECT_FLOAT_EQ(weights[0], 1.0f);
  // Fanout 2: one pick per stratum, and the weights still sum to one.
  picks.clear();
  weights.clear();
  row_rng two(row_seed(1, 1, 1, 0));
  ASSERT_EQ(pick_locality_biased(f.neighbors, f.book, 0, 2, 0.99, two, picks, weights), 2);
  EXPECT_EQ(f.book.owner(picks[0]), 0);
  EXPECT_EQ(f.book.owner(picks[1]), 1);
  EXPECT_NEAR(weights[0] + weights[1], 1.0, 1e-6);
}
