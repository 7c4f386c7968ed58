// Tests of model/csr_graph.hpp: in-edge CSR construction and degree statistics.
#include "model/csr_graph.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

using namespace degnn;

TEST(InCsr, ListsSourcesOfInEdgesSortedPerRow) {
  const std::vector<node_id> src{2, 0, 1, 0};
  const std::vector<node_id> dst{1, 1, 2, 2};
  const csr_graph g = build_in_csr(3, src, dst, {.symmetrize = false});
  EXPECT_EQ(g.num_edges(), 4);
  EXPECT_EQ(g.in_degree(0), 0);
  EXPECT_EQ(std::vector<node_id>(g.in_neighbors(1).begin(), g.in_neighbors(1).end()),
            (std::vector<node_id>{0, 2}));
  EXPECT_EQ(std::vector<node_id>(g.in_neighbors(2).begin(), g.in_neighbors(2).end()),
            (std::vector<node_id>{0, 1}));
}

TEST(InCsr, SymmetrizesDeduplicatesAndDropsSelfLoops) {
  const std::vector<node_id> src{0, 1, 0, 2, 2};
  const std::vector<node_id> dst{1, 0, 1, 2, 0};
  const csr_graph g =
      build_in_csr(3, src, dst, {.symmetrize = true, .deduplicate = true, .drop_self_loops = true});
  // Undirected pairs {0,1} and {0,2} -> 4 directed edges.
  EXPECT_EQ(g.num_edges(), 4);
  EXPECT_EQ(g.in_degree(0), 2);
  EXPECT_EQ(g.in_degree(1), 1);
  EXPECT_EQ(g.in_degree(2), 1);
}

TEST(InCsr, MatchesAReferenceSetOnARandomGraph) {
  std::mt19937 rng(7);
  const node_id n = 500;
  std::vector<node_id> src(5000), dst(5000);
  std::set<std::pair<node_id, node_id>> expected;  // (dst, src)
  for (size_t i = 0; i < src.size(); ++i) {
    src[i] = static_cast<node_id>(rng() % n);
    dst[i] = static_cast<node_id>(rng() % n);
    if (src[i] == dst[i]) continue;
    expected.insert({dst[i], src[i]});
    expected.insert({src[i], dst[i]});
  }
  const csr_graph g = build_in_csr(n, src, dst);
  std::set<std::pair<node_id, node_id>> got;
  for (node_id v = 0; v < n; ++v) {
    auto row = g.in_neighbors(v);
    EXPECT_TRUE(std::is_sorted(row.begin(), row.end()));
    for (node_id u : row)
      got.insert({v, u});
  }
  EXPECT_EQ(static_cast<size_t>(g.num_edges()), expected.size());
  EXPECT_EQ(got, expected);
}

TEST(InCsr, RejectsAnEdgeOutsideTheNodeRange) {
  const std::vector<node_id> src{0, 5};
  const std::vector<node_id> dst{1, 1};
  EXPECT_THROW(build_in_csr(3, src, dst), std::out_of_range);
}

TEST(DegreeStats, SummarisesInDegrees) {
  const std::vector<node_id> src{1, 2, 3, 2};
  const std::vector<node_id> dst{0, 0, 0, 1};
  const degree_stats s = in_degree_stats(build_in_csr(5, src, dst, {.symmetrize = false}));
  EXPECT_EQ(s.max, 3);
  EXPECT_EQ(s.min, 0);
  EXPECT_EQ(s.isolated, 3);
  EXPECT_DOUBLE_EQ(s.mean, 4.0 / 5.0);
}
