// Tests of model/partitioner.hpp: METIS and random partitioning of the bundled Planetoid graphs
// (ownership, balance of nodes and train nodes, edge cut, determinism) and the quality figures.
#include "model/partitioner.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>
#include <string>

#include "model/dataset.hpp"

using namespace degnn;

namespace {

const dataset& bundled(const std::string& name) {
  static std::map<std::string, dataset> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    it = cache.emplace(name, load_dataset(std::filesystem::path(DEGNN_SOURCE_DIR) / "data" / name))
             .first;
  }
  return it->second;
}

// Reference count of cut edges and halo sets, computed edge by edge with std::set.
partition_quality reference_quality(const csr_graph& g, const std::vector<std::int32_t>& owner,
                                    int parts) {
  partition_quality q;
  std::vector<std::set<node_id>> halo(static_cast<size_t>(parts));
  for (node_id v = 0; v < g.num_nodes; ++v) {
    for (node_id u : g.in_neighbors(v)) {
      if (owner[static_cast<size_t>(u)] != owner[static_cast<size_t>(v)]) {
        ++q.cut_edges;
        halo[static_cast<size_t>(owner[static_cast<size_t>(v)])].insert(u);
      }
    }
  }
  for (const auto& h : halo)
    q.halo.push_back(static_cast<node_id>(h.size()));
  return q;
}

void expect_balanced(const dataset& d, const std::vector<std::int32_t>& owner, int parts,
                     const char* what) {
  ASSERT_EQ(owner.size(), static_cast<size_t>(d.num_nodes()));
  for (std::int32_t o : owner)
    ASSERT_TRUE(o >= 0 && o < parts) << what << ": owner " << o;
  const partition_quality q = evaluate_partition(d.graph, d.train, owner, parts);
  const auto node_limit = partition_balance_limit(d.num_nodes(), parts);
  const auto train_limit =
      partition_balance_limit(static_cast<std::int64_t>(d.train.size()), parts);
  std::int64_t nodes = 0, train = 0;
  for (int p = 0; p < parts; ++p) {
    EXPECT_LE(q.nodes[static_cast<size_t>(p)], node_limit) << what << " part " << p;
    EXPECT_LE(q.train_nodes[static_cast<size_t>(p)], train_limit) << what << " part " << p;
    nodes += q.nodes[static_cast<size_t>(p)];
    train += q.train_nodes[static_cast<size_t>(p)];
  }
  // Each node is owned exactly once: the per-part counts add up to the whole.
  EXPECT_EQ(nodes, d.num_nodes());
  EXPECT_EQ(train, static_cast<std::int64_t>(d.train.size()));
  // The limits above, as ratios: 5% over the mean, plus the rounding up to whole nodes.
  EXPECT_LE(q.node_imbalance, static_cast<double>(node_limit) * parts / d.num_nodes() + 1e-9)
      << what;
  EXPECT_LE(q.node_imbalance, 1.06) << what;
  for (node_id c : q.nodes)
    EXPECT_GT(c, 0) << what;
  std::printf("[ %-6s ] %s %s, %d parts: cut %.4f, node imbalance %.4f, train imbalance %.4f\n",
              "info", d.name.c_str(), what, parts, q.cut_fraction, q.node_imbalance,
              q.train_imbalance);
}

}  // namespace

TEST(Partitioner, GivesEveryNodeToPartZeroWithOnePart) {
  const dataset& d = bundled("cora");
  for (auto m : {partition_method::metis, partition_method::random}) {
    const auto owner = partition_graph(d.graph, d.train, 1, m, 1);
    EXPECT_EQ(owner, std::vector<std::int32_t>(static_cast<size_t>(d.num_nodes()), 0));
  }
}

TEST(Partitioner, RejectsPartCountsOutsideOneToNumNodes) {
  const csr_graph g = build_in_csr(3, std::vector<node_id>{0, 1}, std::vector<node_id>{1, 2});
  EXPECT_THROW(partition_graph(g, {}, 0, partition_method::metis, 1), std::invalid_argument);
  EXPECT_THROW(partition_graph(g, {}, -2, partition_method::random, 1), std::invalid_argument);
  try {
    partition_graph(g, {}, 4, partition_method::metis, 1);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("parts must be <= num_nodes"), std::string::npos)
        << e.what();
  }
  const std::vector<node_id> bad_train{5};
  EXPECT_THROW(partition_graph(g, bad_train, 2, partition_method::metis, 1), std::invalid_argument);
}

TEST(Partitioner, ParsesAndPrintsMethodNames) {
  EXPECT_EQ(parse_partition_method("metis"), partition_method::metis);
  EXPECT_EQ(parse_partition_method(to_string(partition_method::random)), partition_method::random);
  EXPECT_THROW(parse_partition_method("hash"), std::invalid_argument);
}

TEST(Partitioner, BalanceLimitIsFivePercentOverTheMeanRoundedUp) {
  EXPECT_EQ(partition_balance_limit(60, 4), 16);   // mean 15 -> 15.75 -> 16
  EXPECT_EQ(partition_balance_limit(140, 4), 37);  // mean 35 -> 36.75 -> 37
  EXPECT_EQ(partition_balance_limit(7, 4), 2);     // mean 1.75 -> 1.84 -> 2
  EXPECT_EQ(partition_balance_limit(8, 4), 3);     // mean 2 -> 2.1 -> 3
  EXPECT_EQ(partition_balance_limit(0, 4), 0);
}

TEST(Partitioner, MetisBalancesNodesAndTrainNodesOnPubmedAndCora) {
  for (const char* name : {"pubmed", "cora"}) {
    const dataset& d = bundled(name);
    const auto start = std::chrono::steady_clock::now();
    const auto owner = partition_graph(d.graph, d.train, 4, partition_method::metis, 42);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::printf("[ %-6s ] %s METIS 4-way partition took %.1f ms\n", "info", name, ms);
    expect_balanced(d, owner, 4, "metis");
  }
}

TEST(Partitioner, RandomBalancesNodesAndTrainNodesOnPubmedAndCora) {
  for (const char* name : {"pubmed", "cora"}) {
    const dataset& d = bundled(name);
    expect_balanced(d, partition_graph(d.graph, d.train, 4, partition_method::random, 42), 4,
                    "random");
  }
}

TEST(Partitioner, BalancesEightPartsToo) {
  const dataset& d = bundled("pubmed");
  expect_balanced(d, partition_graph(d.graph, d.train, 8, partition_method::metis, 3), 8, "metis");
  expect_balanced(d, partition_graph(d.graph, d.train, 8, partition_method::random, 3), 8,
                  "random");
}

TEST(Partitioner, MetisCutsFarFewerEdgesThanRandomOnPubmed) {
  const dataset& d = bundled("pubmed");
  const auto metis = evaluate_partition(
      d.graph, d.train, partition_graph(d.graph, d.train, 4, partition_method::metis, 42), 4);
  const auto random = evaluate_partition(
      d.graph, d.train, partition_graph(d.graph, d.train, 4, partition_method::random, 42), 4);
  std::printf("[ %-6s ] pubmed 4 parts: METIS cuts %lld of %lld edges (%.4f), random %lld (%.4f)\n",
              "info", static_cast<long long>(metis.cut_edges),
              static_cast<long long>(metis.num_edges), metis.cut_fraction,
              static_cast<long long>(random.cut_edges), random.cut_fraction);
  EXPECT_LT(metis.cut_edges * 2, random.cut_edges);
  // A uniform 4-way deal cuts about 3/4 of the edges.
  EXPECT_NEAR(random.cut_fraction, 0.75, 0.02);
}

TEST(Partitioner, IsDeterministicForASeed) {
  const dataset& d = bundled("cora");
  for (auto m : {partition_method::metis, partition_method::random}) {
    EXPECT_EQ(partition_graph(d.graph, d.train, 4, m, 7),
              partition_graph(d.graph, d.train, 4, m, 7))
        << to_string(m);
  }
  EXPECT_NE(partition_graph(d.graph, d.train, 4, partition_method::random, 7),
            partition_graph(d.graph, d.train, 4, partition_method::random, 8));
}

TEST(Partitioner, AcceptsDirectedGraphsWithSelfLoopsAndNoTrainNodes) {
  // Directed ring with self loops: METIS must see a symmetric graph without them.
  const node_id n = 40;
  std::vector<node_id> src, dst;
  for (node_id v = 0; v < n; ++v) {
    src.push_back(v);
    dst.push_back((v + 1) % n);
    src.push_back(v);
    dst.push_back(v);
  }
  const csr_graph g = build_in_csr(
      n, src, dst, {.symmetrize = false, .deduplicate = true, .drop_self_loops = false});
  const auto owner = partition_graph(g, {}, 4, partition_method::metis, 1);
  const auto q = evaluate_partition(g, {}, owner, 4);
  for (node_id c : q.nodes)
    EXPECT_LE(c, partition_balance_limit(n, 4));
  // A ring in 4 balanced arcs needs only 4 cut edges; allow METIS some slack.
  EXPECT_LE(q.cut_edges, 8);
}

TEST(Partitioner, LeavesNoPartEmptyWhenPartsEqualNodes) {
  const csr_graph g =
      build_in_csr(5, std::vector<node_id>{0, 1, 2, 3}, std::vector<node_id>{1, 2, 3, 4});
  const std::vector<node_id> train{0, 2};
  for (auto m : {partition_method::metis, partition_method::random}) {
    auto owner = partition_graph(g, train, 5, m, 9);
    std::sort(owner.begin(), owner.end());
    EXPECT_EQ(owner, (std::vector<std::int32_t>{0, 1, 2, 3, 4})) << to_string(m);
  }
}

TEST(PartitionQuality, CountsCutEdgesAndHalosOfAHandBuiltGraph) {
  // Edges 0->1, 1->2, 2->0, 2->3 (directed); parts {0,1} and {2,3}.
  const csr_graph g = build_in_csr(4, std::vector<node_id>{0, 1, 2, 2},
                                   std::vector<node_id>{1, 2, 0, 3}, {.symmetrize = false});
  const std::vector<std::int32_t> owner{0, 0, 1, 1};
  const std::vector<node_id> train{0, 1, 3};
  const auto q = evaluate_partition(g, train, owner, 2);
  EXPECT_EQ(q.num_edges, 4);
  EXPECT_EQ(q.cut_edges, 2);  // 1->2 and 2->0
  EXPECT_DOUBLE_EQ(q.cut_fraction, 0.5);
  EXPECT_EQ(q.nodes, (std::vector<node_id>{2, 2}));
  EXPECT_EQ(q.train_nodes, (std::vector<node_id>{2, 1}));
  EXPECT_EQ(q.halo, (std::vector<node_id>{1, 1}));  // part 0 reads 2, part 1 reads 1
  EXPECT_DOUBLE_EQ(q.node_imbalance, 1.0);
  EXPECT_DOUBLE_EQ(q.train_imbalance, 2.0 / 1.5);
  EXPECT_THROW(evaluate_partition(g, train, std::vector<std::int32_t>{0, 0, 2, 1}, 2),
               std::invalid_argument);
}

TEST(PartitionQuality, MatchesAnEdgeByEdgeReferenceOnCora) {
  const dataset& d = bundled("cora");
  const auto owner = partition_graph(d.graph, d.train, 4, partition_method::metis, 5);
  const auto q = evaluate_partition(d.graph, d.train, owner, 4);
  const auto ref = reference_quality(d.graph, owner, 4);
  EXPECT_EQ(q.cut_edges, ref.cut_edges);
  EXPECT_EQ(q.halo, ref.halo);
}

TEST(Partitioner, BalancesTrainNodesEvenWhenTheyAllSitInOneCommunity) {
  // Four disconnected 30-cliques, all 24 train nodes in the first: a zero cut would give one part
  // every train node, so balance must win over the cut.
  const node_id n = 120;
  std::vector<node_id> src, dst;
  for (node_id c = 0; c < 4; ++c) {
    for (node_id a = 0; a < 30; ++a) {
      for (node_id b = 0; b < 30; ++b) {
        if (a != b) {
          src.push_back(30 * c + a);
          dst.push_back(30 * c + b);
        }
      }
    }
  }
  const csr_graph g = build_in_csr(n, src, dst);
  std::vector<node_id> train(24);
  for (node_id i = 0; i < 24; ++i)
    train[static_cast<size_t>(i)] = i;
  for (std::uint64_t seed : {1, 2, 3}) {
    const auto owner = partition_graph(g, train, 4, partition_method::metis, seed);
    const auto q = evaluate_partition(g, train, owner, 4);
    for (int p = 0; p < 4; ++p) {
      EXPECT_LE(q.nodes[static_cast<size_t>(p)], partition_balance_limit(n, 4)) << "seed " << seed;
      EXPECT_LE(q.train_nodes[static_cast<size_t>(p)], partition_balance_limit(24, 4))
          << "seed " << seed;
    }
  }
}

TEST(Partitioner, RebalancingSpreadsAPartitionThatPutsEverythingInOnePart) {
  const dataset& d = bundled("cora");
  std::vector<std::int32_t> owner(static_cast<size_t>(d.num_nodes()), 2);
  rebalance_partition(d.graph, d.train, owner, 4);
  expect_balanced(d, owner, 4, "rebalanced");
  // Moving nodes with the most neighbours in the target part keeps some structure: fewer cut edges
  // than a random deal's 3/4 (measured 0.59; the pass is a cheap fix-up, not a partitioner).
  EXPECT_LT(evaluate_partition(d.graph, d.train, owner, 4).cut_fraction, 0.7);
}
