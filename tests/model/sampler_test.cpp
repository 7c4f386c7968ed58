// Tests of model/sampler.hpp: fanout and uniqueness per row, block chaining and relabelling,
// determinism across runs and OpenMP thread counts, uniformity (chi-square), seed batching.
#include "model/sampler.hpp"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <set>
#include <stdexcept>

using namespace degnn;

namespace {

// Random symmetric graph with skewed degrees (a few hubs) and some isolated nodes.
csr_graph random_graph(node_id n, std::int64_t m, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<node_id> src, dst;
  for (std::int64_t i = 0; i < m; ++i) {
    const auto a = static_cast<node_id>(rng() % n);
    // Every 8th edge lands on one of 4 hubs, so some rows far exceed the fanouts.
    const auto b = static_cast<node_id>(i % 8 == 0 ? rng() % 4 : rng() % (n - n / 10));
    src.push_back(a);
    dst.push_back(b);
  }
  return build_in_csr(n, src, dst);
}

// Node 0 with in-neighbours 1..deg, nothing else.
csr_graph star(node_id deg) {
  std::vector<node_id> src, dst;
  for (node_id u = 1; u <= deg; ++u) {
    src.push_back(u);
    dst.push_back(0);
  }
  return build_in_csr(deg + 1, src, dst, {.symmetrize = false});
}

std::vector<node_id> first_nodes(node_id count) {
  std::vector<node_id> v(static_cast<size_t>(count));
  for (node_id i = 0; i < count; ++i)
    v[i] = i;
  return v;
}

std::vector<node_id> dst_nodes(const block& b) {
  return {b.src_nodes.begin(), b.src_nodes.begin() + b.num_dst()};
}

// Global ids of the sampled in-neighbours of dst row i.
std::vector<node_id> row_globals(const block& b, std::int32_t i) {
  std::vector<node_id> out;
  for (std::int32_t e = b.indptr[i]; e < b.indptr[i + 1]; ++e)
    out.push_back(b.src_nodes[b.indices[e]]);
  return out;
}

bool same_batch(const sampled_batch& a, const sampled_batch& b) {
  if (a.blocks.size() != b.blocks.size() || a.output_nodes != b.output_nodes) return false;
  for (size_t l = 0; l < a.blocks.size(); ++l) {
    const block &x = a.blocks[l], &y = b.blocks[l];
    if (x.src_nodes != y.src_nodes || x.num_dst_nodes != y.num_dst_nodes || x.indptr != y.indptr ||
        x.indices != y.indices || x.src_degree != y.src_degree)
      return false;
  }
  return true;
}

// Chi-square statistic of how often each neighbour of a star's centre is picked over `steps`.
double star_chi_square(node_id deg, int k, int steps) {
  const csr_graph g = star(deg);
  neighbor_sampler sampler(g);
  const std::vector<node_id> seeds{0};
  const std::vector<int> fanouts{k};
  std::vector<double> count(static_cast<size_t>(deg) + 1, 0);
  for (int s = 0; s < steps; ++s) {
    const sampled_batch batch = sampler.sample(seeds, fanouts, 42, static_cast<std::uint64_t>(s));
    for (const node_id u : row_globals(batch.blocks[0], 0))
      ++count[u];
  }
  const double expected = static_cast<double>(steps) * k / deg;
  double chi2 = 0;
  for (node_id u = 1; u <= deg; ++u)
    chi2 += (count[u] - expected) * (count[u] - expected) / expected;
  std::printf("deg %d, k %d, %d steps: chi-square %.2f (%d dof)\n", deg, k, steps, chi2, deg - 1);
  return chi2;
}

}  // namespace

TEST(NeighborSampler, RespectsTheFanoutInEveryRow) {
  const csr_graph g = random_graph(3000, 30000, 1);
  const std::vector<node_id> seeds = first_nodes(200);
  const std::vector<int> fanouts{5, 10};
  const sampled_batch batch = sample_blocks(g, seeds, fanouts, 7, 0);
  ASSERT_EQ(batch.blocks.size(), 2u);
  for (size_t l = 0; l < 2; ++l) {
    const block& b = batch.blocks[1 - l];  // fanouts[l] built blocks[1 - l]
    for (std::int32_t i = 0; i < b.num_dst(); ++i) {
      const auto deg = g.in_degree(b.src_nodes[i]);
      EXPECT_EQ(b.indptr[i + 1] - b.indptr[i], std::min<edge_offset>(deg, fanouts[l]));
    }
  }
}

TEST(NeighborSampler, NeverPicksTheSameNeighbourTwiceInARow) {
  const csr_graph g = random_graph(3000, 60000, 2);
  const std::vector<node_id> seeds = first_nodes(500);
  // 40 exercises the bitmap path of the pick, 25 the linear scan; hubs take the complement path.
  for (const int k : {3, 25, 40}) {
    const std::vector<int> fanouts{k, k};
    const sampled_batch batch = sample_blocks(g, seeds, fanouts, 3, 1);
    for (const block& b : batch.blocks) {
      for (std::int32_t i = 0; i < b.num_dst(); ++i) {
        const std::vector<node_id> row = row_globals(b, i);
        EXPECT_EQ(std::set<node_id>(row.begin(), row.end()).size(), row.size());
      }
    }
  }
}

TEST(NeighborSampler, TakesAllWhenFanoutExceedsDegree) {
  const csr_graph g = star(7);
  const std::vector<node_id> seeds{0};
  const std::vector<int> fanouts{7};
  const sampled_batch batch = sample_blocks(g, seeds, fanouts, 1, 0);
  EXPECT_EQ(row_globals(batch.blocks[0], 0), (std::vector<node_id>{1, 2, 3, 4, 5, 6, 7}));
  const std::vector<int> bigger{100};
  EXPECT_EQ(row_globals(sample_blocks(g, seeds, bigger, 1, 0).blocks[0], 0).size(), 7u);
}

TEST(NeighborSampler, TakesAllWhenFanoutIsMinusOne) {
  const csr_graph g = random_graph(2000, 40000, 3);
  const std::vector<node_id> seeds = first_nodes(50);
  const std::vector<int> fanouts{-1, -1};
  const sampled_batch batch = sample_blocks(g, seeds, fanouts, 1, 0);
  for (const block& b : batch.blocks) {
    for (std::int32_t i = 0; i < b.num_dst(); ++i) {
      const auto nbrs = g.in_neighbors(b.src_nodes[i]);
      EXPECT_EQ(row_globals(b, i), std::vector<node_id>(nbrs.begin(), nbrs.end()));
    }
  }
}

TEST(NeighborSampler, SamplesOnlyRealGraphEdges) {
  const csr_graph g = random_graph(3000, 30000, 4);
  const std::vector<node_id> seeds = first_nodes(300);
  const std::vector<int> fanouts{10, 25, 5};
  const sampled_batch batch = sample_blocks(g, seeds, fanouts, 11, 5);
  std::int64_t edges = 0;
  for (const block& b : batch.blocks) {
    ASSERT_EQ(b.indptr.size(), static_cast<size_t>(b.num_dst()) + 1);
    ASSERT_EQ(b.src_degree.size(), b.src_nodes.size());
    for (std::int32_t i = 0; i < b.num_dst(); ++i) {
      const auto nbrs = g.in_neighbors(b.src_nodes[i]);
      for (std::int32_t e = b.indptr[i]; e < b.indptr[i + 1]; ++e) {
        ASSERT_GE(b.indices[e], 0);
        ASSERT_LT(b.indices[e], b.num_src());
        EXPECT_TRUE(std::binary_search(nbrs.begin(), nbrs.end(), b.src_nodes[b.indices[e]]));
        ++edges;
      }
    }
    for (std::int32_t s = 0; s < b.num_src(); ++s)
      EXPECT_EQ(b.src_degree[s], g.in_degree(b.src_nodes[s]));
  }
  EXPECT_GT(edges, 0);
}

TEST(NeighborSampler, ChainsBlocksSoEachBlocksDestinationsAreTheNextBlocksSources) {
  const csr_graph g = random_graph(3000, 30000, 5);
  const std::vector<node_id> seeds{17, 3, 2999, 0, 512};
  const std::vector<int> fanouts{4, 6, 8};
  const sampled_batch batch = sample_blocks(g, seeds, fanouts, 9, 2);
  ASSERT_EQ(batch.blocks.size(), 3u);
  EXPECT_EQ(dst_nodes(batch.blocks.back()), seeds);
  EXPECT_EQ(batch.seeds(), seeds);
  EXPECT_EQ(batch.inputs(), batch.blocks.front().src_nodes);
  for (size_t l = 0; l + 1 < batch.blocks.size(); ++l)
    EXPECT_EQ(dst_nodes(batch.blocks[l]), batch.blocks[l + 1].src_nodes);
  for (const block& b : batch.blocks) {
    EXPECT_EQ(std::set<node_id>(b.src_nodes.begin(), b.src_nodes.end()).size(), b.src_nodes.size());
  }
}

TEST(NeighborSampler, PutsDestinationsFirstThenSourcesInOrderOfFirstAppearance) {
  // 0 <- {2, 3}, 1 <- {3, 4}.
  const std::vector<node_id> src{2, 3, 3, 4}, dst{0, 0, 1, 1};
  const csr_graph g = build_in_csr(5, src, dst, {.symmetrize = false});
  const std::vector<node_id> seeds{1, 0};
  const std::vector<int> fanouts{-1};
  const block b = sample_blocks(g, seeds, fanouts, 0, 0).blocks[0];
  EXPECT_EQ(b.src_nodes, (std::vector<node_id>{1, 0, 3, 4, 2}));
  EXPECT_EQ(b.num_dst(), 2);
  EXPECT_EQ(b.indptr, (std::vector<std::int32_t>{0, 2, 4}));
  EXPECT_EQ(b.indices, (std::vector<std::int32_t>{2, 3, 4, 2}));
  EXPECT_EQ(b.src_degree, (std::vector<std::int32_t>{2, 2, 0, 0, 0}));
}

TEST(NeighborSampler, ReplaysIdenticallyAcrossRunsAndDiffersAcrossSteps) {
  const csr_graph g = random_graph(3000, 30000, 6);
  const std::vector<node_id> seeds = first_nodes(400);
  const std::vector<int> fanouts{10, 25};
  neighbor_sampler sampler(g);
  const sampled_batch a = sampler.sample(seeds, fanouts, 5, 3);
  const sampled_batch b = sampler.sample(seeds, fanouts, 5, 3);  // reused scratch
  EXPECT_TRUE(same_batch(a, b));
  EXPECT_TRUE(same_batch(a, sample_blocks(g, seeds, fanouts, 5, 3)));
  EXPECT_FALSE(same_batch(a, sampler.sample(seeds, fanouts, 5, 4)));
  EXPECT_FALSE(same_batch(a, sampler.sample(seeds, fanouts, 6, 3)));
}

TEST(NeighborSampler, ReplaysIdenticallyWhateverTheThreadCount) {
  const csr_graph g = random_graph(20000, 200000, 7);
  const std::vector<node_id> seeds = first_nodes(2000);
  const std::vector<int> fanouts{10, 25};
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const sampled_batch one = sample_blocks(g, seeds, fanouts, 8, 1);
  omp_set_num_threads(2);
  const sampled_batch two = sample_blocks(g, seeds, fanouts, 8, 1);
  omp_set_num_threads(4);
  const sampled_batch four = sample_blocks(g, seeds, fanouts, 8, 1);
  omp_set_num_threads(saved);
  EXPECT_TRUE(same_batch(one, two));
  EXPECT_TRUE(same_batch(one, four));
}

TEST(NeighborSampler, PicksEachNeighbourWithEqualProbability) {
  // Fixed seed, so the statistic is a constant; critical values are chi-square at p = 0.001.
  EXPECT_LT(star_chi_square(20, 5, 8000), 43.82);     // Floyd with linear scan
  EXPECT_LT(star_chi_square(20, 15, 8000), 43.82);    // complement: drop 5
  EXPECT_LT(star_chi_square(100, 40, 4000), 148.23);  // Floyd with bitmap
}

TEST(NeighborSampler, RejectsBadArgumentsAndStaysUsableAfterwards) {
  const csr_graph g = random_graph(1000, 5000, 8);
  neighbor_sampler sampler(g);
  const std::vector<int> fanouts{5};
  const std::vector<node_id> dup{1, 2, 3, 2}, out_of_range{1, 1000};
  EXPECT_THROW(sampler.sample(dup, fanouts, 0, 0), std::invalid_argument);
  EXPECT_THROW(sampler.sample(out_of_range, fanouts, 0, 0), std::out_of_range);
  const std::vector<node_id> seeds{1, 2, 3};
  EXPECT_THROW(sampler.sample(seeds, std::vector<int>{}, 0, 0), std::invalid_argument);
  EXPECT_THROW(sampler.sample(seeds, std::vector<int>{-2}, 0, 0), std::invalid_argument);
  // The failed duplicate must not leave stale labels in the scratch.
  EXPECT_TRUE(
      same_batch(sampler.sample(seeds, fanouts, 0, 0), sample_blocks(g, seeds, fanouts, 0, 0)));
}

TEST(MakeBatches, CoversEachNodeExactlyOnce) {
  std::vector<node_id> nodes;
  for (node_id v = 0; v < 1000; ++v)
    nodes.push_back(v * 3);
  const auto batches = make_batches(nodes, 64, 1, 0);
  ASSERT_EQ(batches.size(), 16u);
  std::vector<node_id> seen;
  for (size_t i = 0; i < batches.size(); ++i) {
    EXPECT_EQ(batches[i].size(), i + 1 < batches.size() ? 64u : 1000u - 15 * 64);
    seen.insert(seen.end(), batches[i].begin(), batches[i].end());
  }
  EXPECT_NE(seen, nodes);  // shuffled
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, nodes);
}

TEST(MakeBatches, ReplaysPerEpochAndReshufflesAcrossEpochs) {
  const std::vector<node_id> nodes = first_nodes(500);
  EXPECT_EQ(make_batches(nodes, 100, 4, 2), make_batches(nodes, 100, 4, 2));
  EXPECT_NE(make_batches(nodes, 100, 4, 2), make_batches(nodes, 100, 4, 3));
  EXPECT_NE(make_batches(nodes, 100, 4, 2), make_batches(nodes, 100, 5, 2));
  EXPECT_TRUE(make_batches(std::vector<node_id>{}, 10, 0, 0).empty());
  EXPECT_THROW(make_batches(nodes, 0, 0, 0), std::invalid_argument);
}
