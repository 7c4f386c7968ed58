// Tests of model/synthetic_graph.hpp: determinism, planted structure, and the written layout.
#include "model/synthetic_graph.hpp"

#include <gtest/gtest.h>
#include <omp.h>

#include <filesystem>

using namespace degnn;
namespace fs = std::filesystem;

namespace {
synthetic_options small() {
  synthetic_options o;
  o.num_nodes = 5000;
  o.num_edges = 40000;
  o.num_classes = 5;
  o.num_features = 16;
  o.homophily = 0.8;
  o.seed = 42;
  return o;
}
}  // namespace

TEST(SyntheticGraph, IsDeterministicForASeedWhateverTheThreadCount) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const dataset a = generate_synthetic(small());
  omp_set_num_threads(2);
  const dataset b = generate_synthetic(small());
  omp_set_num_threads(threads);
  EXPECT_EQ(a.graph.indices, b.graph.indices);
  EXPECT_TRUE(a.features == b.features);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.train, b.train);
  auto other = small();
  other.seed = 43;
  EXPECT_NE(generate_synthetic(other).graph.indices, a.graph.indices);
}

TEST(SyntheticGraph, PlantsTheRequestedHomophily) {
  const dataset d = generate_synthetic(small());
  edge_offset same = 0;
  for (node_id v = 0; v < d.num_nodes(); ++v) {
    for (node_id u : d.graph.in_neighbors(v))
      same += d.labels[u] == d.labels[v];
  }
  const double h = static_cast<double>(same) / static_cast<double>(d.graph.num_edges());
  std::printf("measured homophily %.3f (asked 0.8)\n", h);
  EXPECT_NEAR(h, 0.8, 0.03);
}

TEST(SyntheticGraph, HasAHeavyTailedDegreeDistribution) {
  const dataset d = generate_synthetic(small());
  const degree_stats s = in_degree_stats(d.graph);
  std::printf("degree median %.1f mean %.2f max %lld\n", s.median, s.mean,
              static_cast<long long>(s.max));
  EXPECT_GT(static_cast<double>(s.max), 8 * s.mean);
  EXPECT_LT(s.median, s.mean);
}

TEST(SyntheticGraph, CorrelatesFeaturesWithClasses) {
  const dataset d = generate_synthetic(small());
  // Nearest-centroid accuracy from the training nodes is far above chance (1/5).
  Matrix centroid = Matrix::Zero(d.num_classes, d.num_features());
  std::vector<int> count(static_cast<size_t>(d.num_classes), 0);
  for (node_id v : d.train) {
    centroid.row(d.labels[v]) += d.features.row(v);
    ++count[d.labels[v]];
  }
  for (int k = 0; k < d.num_classes; ++k)
    centroid.row(k) /= static_cast<float>(std::max(1, count[k]));
  int correct = 0;
  for (node_id v : d.test) {
    Eigen::Index best = 0;
    (centroid.rowwise() - d.features.row(v)).rowwise().squaredNorm().minCoeff(&best);
    correct += best == d.labels[v];
  }
  const double acc = static_cast<double>(correct) / static_cast<double>(d.test.size());
  std::printf("nearest-centroid test accuracy %.3f\n", acc);
  EXPECT_GT(acc, 0.4);
}

TEST(SyntheticGraph, WritesTheOgbLayoutThatTheLoaderReadsBack) {
  const fs::path dir = fs::temp_directory_path() / ("degnn-synth-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const dataset a = generate_synthetic(small());
  write_ogb_dataset(a, dir);
  const dataset b = load_ogb_csv(dir);
  fs::remove_all(dir);
  EXPECT_EQ(a.graph.indptr, b.graph.indptr);
  EXPECT_EQ(a.graph.indices, b.graph.indices);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.train, b.train);
  EXPECT_EQ(a.valid, b.valid);
  EXPECT_EQ(a.test, b.test);
  EXPECT_EQ(a.name, b.name);
  EXPECT_LT((a.features - b.features).cwiseAbs().maxCoeff(), 1e-5f);  // 6 significant digits
}

TEST(SyntheticGraph, RejectsNonsensicalOptions) {
  auto o = small();
  o.homophily = 1.5;
  EXPECT_THROW(generate_synthetic(o), std::invalid_argument);
  o = small();
  o.train_fraction = 0.9;
  o.test_fraction = 0.5;
  EXPECT_THROW(generate_synthetic(o), std::invalid_argument);
}
