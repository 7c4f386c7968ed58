// Tests of model/halo_cache.hpp: the staleness test, and what an owner's answer may and may not
// write into a shard's cached rows.
#include "model/halo_cache.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <stdexcept>

#include "model/dataset.hpp"
#include "model/partitioner.hpp"
#include "model/sparse_input.hpp"

using namespace degnn;

namespace {

halo_cache two_levels() {
  halo_cache c({3, 8, 20, 41});
  const Eigen::Index widths[] = {2, 3};
  c.ensure_levels(widths);
  return c;
}

Matrix rows(Eigen::Index n, Eigen::Index cols, float base) {
  Matrix m(n, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i)
    m.data()[i] = base + static_cast<float>(i);
  return m;
}

}  // namespace

TEST(HaloCache, ARowIsFreshForStalenessStepsAfterItsOwnerConfirmedIt) {
  halo_cache c = two_levels();
  EXPECT_FALSE(c.fresh(1, 0, 0, 1)) << "a row never received is never fresh";
  const node_id asked[] = {3, 20};
  const node_id sent[] = {20};
  const std::uint64_t versions[] = {6};
  c.store(1, asked, sent, versions, rows(1, 3, 1), 10);
  // Both asked rows are confirmed at step 10; only node 20's came with a new value.
  EXPECT_TRUE(c.fresh(1, c.index(3), 10, 1));
  EXPECT_FALSE(c.fresh(1, c.index(3), 11, 1));
  EXPECT_TRUE(c.fresh(1, c.index(20), 13, 4));
  EXPECT_FALSE(c.fresh(1, c.index(20), 14, 4));
  EXPECT_EQ(c.version(1, c.index(20)), 6u);
  EXPECT_EQ(c.version(1, c.index(3)), halo_cache::kNoVersion);
  EXPECT_FALSE(c.fresh(1, c.index(8), 10, 1)) << "a row not asked is not confirmed";
}

TEST(HaloCache, LeafRowsReadTheCachedValuesOfEachLevel) {
  halo_cache c = two_levels();
  const node_id asked[] = {8, 41};
  const std::uint64_t versions[] = {0, 0};
  c.store(0, asked, asked, versions, rows(2, 2, 100), 0);
  c.store(1, asked, asked, versions, rows(2, 3, 200), 0);
  local_cg cg;
  cg.remote_leaves = {{41}, {8, 41}};
  const auto leaves = c.leaf_rows(cg);
  ASSERT_EQ(leaves.size(), 2u);
  EXPECT_EQ(leaves[0], rows(2, 2, 100).row(1));
  EXPECT_EQ(leaves[1], rows(2, 3, 200));
}

TEST(HaloCache, RefusesAnswersThatWereNotAskedForAndChangesNothing) {
  halo_cache c = two_levels();
  const node_id asked[] = {3, 8, 20};
  const std::uint64_t one[] = {1};
  const std::uint64_t two[] = {1, 1};
  const node_id foreign[] = {41};  // in the halo, but not asked
  EXPECT_THROW(c.store(1, asked, foreign, one, rows(1, 3, 0), 5), std::invalid_argument);
  const node_id reversed[] = {20, 3};  // out of the order asked
  EXPECT_THROW(c.store(1, asked, reversed, two, rows(2, 3, 0), 5), std::invalid_argument);
  const node_id repeated[] = {8, 8};
  EXPECT_THROW(c.store(1, asked, repeated, two, rows(2, 3, 0), 5), std::invalid_argument);
  const node_id ok[] = {8};
  const std::uint64_t none[] = {halo_cache::kNoVersion};
  EXPECT_THROW(c.store(1, asked, ok, none, rows(1, 3, 0), 5), std::invalid_argument);
  EXPECT_THROW(c.store(1, asked, ok, one, rows(1, 2, 0), 5), std::invalid_argument)
      << "rows of another width";
  EXPECT_THROW(c.store(2, asked, ok, one, rows(1, 3, 0), 5), std::invalid_argument)
      << "a level the cache does not hold";
  for (node_id u : asked)
    EXPECT_FALSE(c.fresh(1, c.index(u), 5, 1)) << "a refused answer confirmed node " << u;
  EXPECT_THROW(c.index(4), std::invalid_argument);
}

TEST(HaloCache, CompressedFeaturesAreKeptAsTheyCameAndReadInLeafOrder) {
  halo_cache c({3, 8, 20, 41});
  const Eigen::Index widths[] = {5, 3};
  c.ensure_levels(widths, true);
  ASSERT_TRUE(c.sparse_features());
  Matrix first = Matrix::Zero(2, 5), second = Matrix::Zero(1, 5);
  first(0, 1) = 3;
  first(1, 4) = -1;
  second(0, 0) = 2;
  const node_id asked_a[] = {3, 8}, asked_b[] = {20, 41}, sent_b[] = {41};
  c.store_features(asked_a, asked_a, std::make_shared<const sparse_rows>(to_sparse(first)), 0);
  c.store_features(asked_b, sent_b, std::make_shared<const sparse_rows>(to_sparse(second)), 0);
  EXPECT_TRUE(c.fresh(0, c.index(20), 0, 1)) << "every asked row is confirmed";
  local_cg cg;
  cg.remote_leaves = {{41, 3, 8}, {}};
  const Matrix got = to_dense(c.leaf_features(cg));
  EXPECT_EQ(got.row(0), second.row(0));
  EXPECT_EQ(got.row(1), first.row(0));
  EXPECT_EQ(got.row(2), first.row(1));
  EXPECT_EQ(c.leaf_rows(cg)[0].size(), 0) << "no dense copy of the features";
  cg.remote_leaves = {{20}, {}};
  EXPECT_THROW(c.leaf_features(cg), std::invalid_argument) << "20 was asked but never sent";
  // A dense store at level 0, rows of another width, and rows not asked for are refused.
  const std::uint64_t v[] = {0};
  EXPECT_THROW(c.store(0, asked_b, sent_b, v, Matrix::Zero(1, 5), 1), std::invalid_argument);
  EXPECT_THROW(
      c.store_features(asked_b, sent_b,
                       std::make_shared<const sparse_rows>(to_sparse(Matrix::Zero(1, 4))), 1),
      std::invalid_argument);
  const node_id not_asked[] = {20};
  EXPECT_THROW(c.store_features(asked_a, not_asked,
                                std::make_shared<const sparse_rows>(to_sparse(second)), 1),
               std::invalid_argument);
}

// Shards of one process: the halo's feature rows are read where their owners hold them. An
// answer still confirms its rows (and is checked), but no copy is kept.
TEST(HaloCache, SharedFeaturesAreReadFromTheOwnersRowsWithoutACopy) {
  const dataset d =
      load_dataset(std::filesystem::path(DEGNN_SOURCE_DIR) / "data" / "cora", {.use_cache = false});
  const partition_book book(partition_graph(d.graph, d.train, 2, partition_method::metis, 1), 2);
  for (const bool sparse : {false, true}) {
    std::vector<std::shared_ptr<const graph_partition>> parts;
    for (int p = 0; p < 2; ++p) {
      auto part = std::make_shared<graph_partition>(extract_partition(d, book, p));
      set_feature_layout(*part, sparse);
      parts.push_back(std::move(part));
    }
    const graph_partition& me = *parts[0];
    ASSERT_FALSE(me.halo.empty());
    halo_cache c(me.halo);
    c.share_features(parts, book);
    const Eigen::Index widths[] = {d.num_features(), 16};
    c.ensure_levels(widths, sparse);
    EXPECT_TRUE(c.shares_features());
    local_cg cg;
    cg.remote_leaves = {{me.halo.back(), me.halo.front()}, {}};
    if (sparse)
      EXPECT_THROW(c.leaf_features(cg), std::invalid_argument) << "no answer confirmed them yet";
    else
      EXPECT_THROW(c.leaf_rows(cg), std::invalid_argument) << "no answer confirmed them yet";
    // The set-up's answer: every halo row, in order (its values are the owners' rows).
    const std::vector<std::uint64_t> zeros(me.halo.size(), 0);
    if (sparse) {
      c.store_features(
          me.halo, me.halo,
          std::make_shared<const sparse_rows>(gather_rows(to_sparse(d.features), me.halo)), 0);
    } else {
      Matrix rows(static_cast<Eigen::Index>(me.halo.size()), d.num_features());
      for (size_t i = 0; i < me.halo.size(); ++i)
        rows.row(static_cast<Eigen::Index>(i)) = d.features.row(me.halo[i]);
      c.store(0, me.halo, me.halo, zeros, rows, 0);
      EXPECT_THROW(c.store(0, me.halo, me.halo, zeros, rows.leftCols(5), 0), std::invalid_argument)
          << "a wrong width is refused although no row is kept";
    }
    const Matrix got = sparse ? to_dense(c.leaf_features(cg)) : c.leaf_rows(cg)[0];
    ASSERT_EQ(got.rows(), 2);
    EXPECT_EQ(got.row(0), d.features.row(me.halo.back()));
    EXPECT_EQ(got.row(1), d.features.row(me.halo.front()));
  }
}

// Bounded: rows without a place are held for the step that pulled them and read by it only;
// kept rows behave as before.
TEST(HaloCache, ABoundedCacheHoldsRowsWithoutAPlaceForTheirStepOnly) {
  halo_cache c({3, 8, 20, 41});
  c.bound({{0, 2}, {1}});  // level 0 keeps 3 and 20, level 1 keeps 8
  const Eigen::Index widths[] = {2, 3};
  c.ensure_levels(widths);
  EXPECT_TRUE(c.resident(0, c.index(20)));
  EXPECT_FALSE(c.resident(0, c.index(8)));
  EXPECT_EQ(c.resident_rows(1), std::vector<std::size_t>{1});
  const node_id all[] = {3, 8, 20, 41};
  const std::uint64_t zeros[] = {0, 0, 0, 0};
  c.store(0, all, all, zeros, rows(4, 2, 100), 5);
  const std::uint64_t versions[] = {7, 9};
  const node_id some[] = {8, 41};
  c.store(1, some, some, versions, rows(2, 3, 200), 5);
  EXPECT_EQ(c.version(1, c.index(8)), 7u);
  EXPECT_EQ(c.version(1, c.index(41)), halo_cache::kNoVersion) << "41 has no place at level 1";
  EXPECT_TRUE(c.fresh(1, c.index(8), 5, 1));
  EXPECT_FALSE(c.fresh(1, c.index(41), 5, 1)) << "a row without a place is never fresh";
  local_cg cg;
  cg.remote_leaves = {{41, 3, 8}, {41, 8}};
  const auto leaves = c.leaf_rows(cg, 5);
  const Matrix features = rows(4, 2, 100), history = rows(2, 3, 200);
  EXPECT_EQ(leaves[0].row(0), features.row(3));
  EXPECT_EQ(leaves[0].row(1), features.row(0));
  EXPECT_EQ(leaves[0].row(2), features.row(1));
  EXPECT_EQ(leaves[1].row(0), history.row(1));
  EXPECT_EQ(leaves[1].row(1), history.row(0));
  EXPECT_THROW(c.leaf_rows(cg, 6), std::invalid_argument) << "8 and 41 were pulled for step 5";
  const std::size_t before = c.bytes();
  c.release(5);
  EXPECT_LT(c.bytes(), before);
  EXPECT_EQ(c.bytes(), (2 * 2 + 1 * 3) * sizeof(float)) << "only the kept rows remain";
  EXPECT_THROW(c.leaf_rows(cg, 5), std::invalid_argument) << "released";
  cg.remote_leaves = {{20, 3}, {8}};
  EXPECT_EQ(c.leaf_rows(cg, 9)[0].row(0), features.row(2)) << "kept rows serve every step";
  EXPECT_THROW(c.bound({{4}}), std::invalid_argument) << "row 4 is outside a halo of 4";
  EXPECT_THROW(c.resident(0, 4), std::invalid_argument);
}

// Two steps in flight: letting go of one step's rows keeps the other's; release_upto sweeps the
// steps that ended without their forward.
TEST(HaloCache, ReleasingAStepKeepsTheRowsOfTheOthers) {
  halo_cache c({3, 8});
  c.bound({{}, {}});  // nothing kept
  const Eigen::Index widths[] = {2, 2};
  c.ensure_levels(widths);
  const node_id both[] = {3, 8};
  const std::uint64_t v[] = {0, 0};
  for (std::uint64_t step : {4, 5, 6})
    c.store(0, both, both, v, rows(2, 2, static_cast<float>(step)), step);
  local_cg cg;
  cg.remote_leaves = {{8}, {}};
  c.release(5);
  EXPECT_EQ(c.leaf_rows(cg, 4)[0], rows(2, 2, 4).row(1)) << "step 4's rows outlive step 5's";
  EXPECT_EQ(c.leaf_rows(cg, 6)[0], rows(2, 2, 6).row(1));
  EXPECT_THROW(c.leaf_rows(cg, 5), std::invalid_argument);
  c.release_upto(5);
  EXPECT_THROW(c.leaf_rows(cg, 4), std::invalid_argument);
  EXPECT_EQ(c.leaf_rows(cg, 6)[0], rows(2, 2, 6).row(1)) << "a later step is not swept";
  c.release_upto(6);
  EXPECT_EQ(c.bytes(), 0u);
}

// A bounded cache and an unbounded one given the same answers read the same leaf rows.
TEST(HaloCache, BoundedAndUnboundedCachesReadTheSameRows) {
  const std::vector<node_id> halo{2, 5, 9, 11, 17, 23, 30, 31};
  halo_cache whole(halo), part(halo);
  part.bound({{1, 4, 7}, {0, 6}});
  const Eigen::Index widths[] = {4, 3};
  whole.ensure_levels(widths);
  part.ensure_levels(widths);
  const std::vector<std::uint64_t> zeros(halo.size(), 0);
  for (std::uint64_t step = 1; step <= 3; ++step) {
    // A step's feature rows: the bounded cache holds those it does not keep for the step.
    for (halo_cache* c : {&whole, &part})
      c->store(0, halo, halo, zeros, rows(8, 4, 1), step);
    const node_id asked[] = {5, 11, 23, 31};
    const std::uint64_t v[] = {step, step, step, step};
    for (halo_cache* c : {&whole, &part})
      c->store(1, asked, asked, v, rows(4, 3, 10.0f * static_cast<float>(step)), step);
    local_cg cg;
    cg.remote_leaves = {{31, 2, 17, 9}, {23, 5, 31}};
    EXPECT_EQ(whole.leaf_rows(cg, step), part.leaf_rows(cg, step)) << "step " << step;
    part.release(step);
  }
}

TEST(HaloCache, BoundedCompressedFeaturesAreHeldForTheirStep) {
  halo_cache c({3, 8, 20});
  c.bound({{1}});
  const Eigen::Index widths[] = {4};
  c.ensure_levels(widths, true);
  Matrix f = Matrix::Zero(3, 4);
  f(0, 1) = 1;
  f(1, 2) = 2;
  f(2, 3) = 3;
  const node_id all[] = {3, 8, 20};
  c.store_features(all, all, std::make_shared<const sparse_rows>(to_sparse(f)), 4);
  local_cg cg;
  cg.remote_leaves = {{20, 8, 3}};
  const Matrix got = to_dense(c.leaf_features(cg, 4));
  EXPECT_EQ(got.row(0), f.row(2));
  EXPECT_EQ(got.row(1), f.row(1));
  EXPECT_EQ(got.row(2), f.row(0));
  c.release(4);
  EXPECT_THROW(c.leaf_features(cg, 4), std::invalid_argument);
  cg.remote_leaves = {{8}};
  EXPECT_EQ(to_dense(c.leaf_features(cg, 7)).row(0), f.row(1));
}
