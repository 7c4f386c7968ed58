// Tests of model/halo_rank.hpp: the expected reads of halo rows against sampled expansions and a
// plain reference, and which rows a byte budget keeps.
#include "model/halo_rank.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "model/dataset.hpp"
#include "model/local_cg.hpp"
#include "model/partitioner.hpp"

using namespace degnn;

namespace {

struct cora_parts {
  dataset d;
  partition_book book;
  graph_partition part;
};

cora_parts cora_part0() {
  dataset d =
      load_dataset(std::filesystem::path(DEGNN_SOURCE_DIR) / "data" / "cora", {.use_cache = false});
  partition_book book(partition_graph(d.graph, d.train, 3, partition_method::metis, 1), 3);
  graph_partition part = extract_partition(d, book, 0);
  return {std::move(d), std::move(book), std::move(part)};
}

}  // namespace

// Two layers: level 0's score of a halo node is the expected number of times the local
// expansion of every owned node picks it, which the mean over many sampled expansions measures.
TEST(HaloRank, LevelZeroScoresAreTheExpectedPicksOfSampledExpansions) {
  const auto c = cora_part0();
  const int fanouts[] = {3, 2};
  const auto scores = halo_read_scores(c.part, fanouts, 1);
  ASSERT_EQ(scores.size(), 1u);
  ASSERT_EQ(scores[0].size(), c.part.halo.size());
  std::vector<node_id> targets(c.part.owned.begin(), c.part.owned.end());
  std::vector<double> picks(c.part.halo.size(), 0.0);
  std::vector<std::int32_t> scratch(static_cast<size_t>(c.d.num_nodes()), -1);
  constexpr int kSteps = 400;
  for (int step = 0; step < kSteps; ++step) {
    const local_cg cg = expand_local(c.part, c.book, targets, 1, fanouts, 7, step, scratch);
    const block& b = cg.blocks[0];
    for (std::int32_t e : b.indices) {
      const node_id u = b.src_nodes[static_cast<size_t>(e)];
      if (c.book.owner(u) == 0) continue;
      const auto at = std::lower_bound(c.part.halo.begin(), c.part.halo.end(), u);
      picks[static_cast<size_t>(at - c.part.halo.begin())] += 1.0 / kSteps;
    }
  }
  double total = 0, measured = 0;
  for (size_t i = 0; i < picks.size(); ++i) {
    EXPECT_NEAR(picks[i], scores[0][i], 0.25 + 0.15 * scores[0][i]) << "halo row " << i;
    total += scores[0][i];
    measured += picks[i];
  }
  EXPECT_NEAR(measured, total, 0.02 * total);
}

// Three layers: the owned nodes' reach propagates hop by hop (a plain dense reference here).
TEST(HaloRank, DeeperLevelsPropagateTheReachOfOwnedNodes) {
  const auto c = cora_part0();
  const int fanouts[] = {4, 3, -1};
  const auto scores = halo_read_scores(c.part, fanouts, 2);
  ASSERT_EQ(scores.size(), 2u);
  const auto n = static_cast<size_t>(c.part.num_owned());
  const size_t h = c.part.halo.size();
  // reach over owned, reads over halo, one hop at a time from every target once.
  std::vector<double> reach(n, 1.0);
  for (int k = 1; k >= 0; --k) {
    const int f = fanouts[3 - (k + 1)];  // hop 0 is the pushing owner's
    std::vector<double> next(n, 0.0), reads(h, 0.0);
    for (size_t l = 0; l < n; ++l) {
      const auto row = c.part.in_neighbors_global(static_cast<node_id>(l));
      if (row.empty()) continue;
      const double p = f < 0 ? 1.0 : std::min(1.0, double(f) / double(row.size()));
      for (node_id g : row) {
        if (c.book.owner(g) == 0) {
          next[static_cast<size_t>(c.book.local_id(g))] += reach[l] * p;
        } else {
          const auto at = std::lower_bound(c.part.halo.begin(), c.part.halo.end(), g);
          reads[static_cast<size_t>(at - c.part.halo.begin())] += reach[l] * p;
        }
      }
    }
    for (size_t i = 0; i < h; ++i)
      EXPECT_NEAR(scores[static_cast<size_t>(k)][i], reads[i], 1e-9) << "level " << k;
    reach = next;
  }
  EXPECT_EQ(halo_read_scores(c.part, fanouts, 3).size(), 3u) << "from the seeds' hop 0";
  EXPECT_THROW(halo_read_scores(c.part, fanouts, 4), std::invalid_argument);
}

TEST(HaloRank, TheBudgetKeepsTheMostReadRowsPerByte) {
  // Level 0 rows cost 10 bytes, level 1 rows 4.
  const std::vector<std::vector<double>> scores{{5.0, 0.0, 1.0, 3.0}, {1.0, 2.0, 0.5}};
  const std::size_t bytes[] = {10, 4};
  // Per byte: L1r1 0.5, L0r0 0.5, L0r3 0.3, L1r0 0.25, L1r2 0.125, L0r2 0.1; L0r1 never read.
  auto keep = choose_resident(scores, bytes, 14);
  EXPECT_EQ(keep[0], std::vector<std::uint32_t>{0});
  EXPECT_EQ(keep[1], std::vector<std::uint32_t>{1});
  keep = choose_resident(scores, bytes, 26);  // then L0r3 (24 bytes); L1r0 no longer fits
  EXPECT_EQ(keep[0], (std::vector<std::uint32_t>{0, 3}));
  EXPECT_EQ(keep[1], std::vector<std::uint32_t>{1});
  keep = choose_resident(scores, bytes, 1000);
  EXPECT_EQ(keep[0], (std::vector<std::uint32_t>{0, 2, 3})) << "a row never read is not kept";
  EXPECT_EQ(keep[1], (std::vector<std::uint32_t>{0, 1, 2}));
  keep = choose_resident(scores, bytes, 0);
  EXPECT_TRUE(keep[0].empty() && keep[1].empty());
  const std::size_t one[] = {10};
  EXPECT_THROW(choose_resident(scores, one, 100), std::invalid_argument);
}
