// Tests of model/gat_push.hpp: a GAT layer computed piecewise (the targets' owner with their own
// rows and edges, 1 to 4 shards with the neighbour edges split among them) against gat_layer's
// forward and backward on the whole block: outputs, every parameter's gradient and the input
// rows' gradients, with and without attention dropout, concatenated and averaged heads.
#include "model/gat_push.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>

#include "tests/model/grad_check.hpp"

using namespace degnn;
using namespace degnn::testing;

namespace {

constexpr std::int32_t kTargets = 15, kSources = 40, kIn = 6;

/// Targets 0..14 are the first sources; each has 0..7 neighbours among the other sources,
/// other targets included (a shard then holds a copy of a target's row as a neighbour row).
block target_block(std::uint32_t seed) {
  std::mt19937 rng(seed);
  block b;
  b.num_dst_nodes = kTargets;
  for (std::int32_t i = 0; i < kSources; ++i)
    b.src_nodes.push_back(500 + 3 * i);
  for (std::int32_t v = 0; v < kTargets; ++v) {
    std::vector<std::int32_t> all;
    for (std::int32_t u = 0; u < kSources; ++u)
      if (u != v) all.push_back(u);
    std::shuffle(all.begin(), all.end(), rng);
    all.resize(rng() % 8);
    b.indices.insert(b.indices.end(), all.begin(), all.end());
    b.indptr.push_back(static_cast<std::int32_t>(b.indices.size()));
  }
  b.src_degree.assign(kSources, 1);
  return b;
}

double max_diff(const Matrix& a, const Matrix& b) {
  return a.size() == 0 ? 0.0 : (a - b).cwiseAbs().maxCoeff();
}

struct piecewise_result {
  Matrix out;
  Matrix grad_self;  ///< (targets, in) the owner's own rows
  Matrix grad_rows;  ///< (sources, in) the shards' rows, every source (targets too)
};

/// The layer as the decentralized pipeline would run it: edge e goes to shard e % shards.
piecewise_result piecewise(gat_layer& layer, const block& b, const Matrix& x, const Matrix& g,
                           int shards, const std::uint64_t* seed) {
  const std::span<const node_id> ids(b.src_nodes);
  const auto target_ids = ids.first(kTargets);
  const auto row_ids = ids;  // the shards hold every source's row, targets' too
  gat_top_state top;
  const Matrix er = gat_top_begin(layer, x.topRows(kTargets), top);
  std::vector<gat_push_cache> caches(static_cast<size_t>(shards));
  std::optional<attention_partial> merged;
  for (int s = 0; s < shards; ++s) {
    std::vector<std::int64_t> indptr{0};
    std::vector<std::int32_t> src;
    for (std::int32_t v = 0; v < kTargets; ++v) {
      for (std::int32_t e = b.indptr[v]; e < b.indptr[v + 1]; ++e)
        if (e % shards == s) src.push_back(b.indices[static_cast<size_t>(e)]);
      indptr.push_back(static_cast<std::int64_t>(src.size()));
    }
    attention_partial p =
        gat_push_forward(layer, std::move(indptr), std::move(src), x, er, target_ids, row_ids, seed,
                         caches[static_cast<size_t>(s)]);
    if (!merged)
      merged = std::move(p);
    else
      merge_partials(*merged, p);
  }
  piecewise_result r;
  r.out = gat_top_finish(layer, target_ids, merged ? &*merged : nullptr, seed, top);
  const Matrix grad_heads = gat_top_backward(layer, g);
  Matrix grad_er = Matrix::Zero(kTargets, layer.heads());
  r.grad_rows = Matrix::Zero(kSources, kIn);
  for (int s = 0; s < shards; ++s) {
    Matrix grad_rows, shard_er;
    gat_push_backward(layer, caches[static_cast<size_t>(s)], top.merged, top.heads_out, grad_heads,
                      grad_rows, shard_er);
    r.grad_rows += grad_rows;
    grad_er += shard_er;
  }
  gat_top_backward_finish(layer, top, grad_heads, grad_er, r.grad_self);
  return r;
}

}  // namespace

TEST(GatPush, OwnerAndShardsComputeTheWholeLayerAndItsGradients) {
  const block b = target_block(1);
  const Matrix x = random_matrix(kSources, kIn, 2);
  for (bool concat : {true, false})
    for (float p : {0.0f, 0.5f})
      for (int shards : {1, 2, 4}) {
        const std::string what = std::string(concat ? "concat" : "mean") + " p " +
                                 std::to_string(p) + " shards " + std::to_string(shards);
        gat_layer whole(kIn, concat ? 8 : 3, concat ? 4 : 2, concat, p);
        whole.init(9);
        whole.attn_l = random_matrix(whole.heads(), whole.head_width(), 3, 1.5f);
        whole.attn_r = random_matrix(whole.heads(), whole.head_width(), 4, 1.5f);
        whole.bias = random_matrix(1, whole.out_dim(), 5);
        gat_layer parts = whole;
        const Matrix g = random_matrix(kTargets, whole.out_dim(), 6);
        const std::uint64_t seed = 77;

        layer_cache cache;
        cache.attention_seed = seed;
        Matrix out, grad_src;
        whole.apply(b, x, out, &cache);
        whole.backward(b, cache, g, &grad_src);
        const piecewise_result r = piecewise(parts, b, x, g, shards, &seed);

        EXPECT_LT(max_diff(r.out, out), 1e-5) << what;
        // A target's row gets gradient as itself (owner) and as others' neighbour (shards).
        const Matrix target_rows = r.grad_self + r.grad_rows.topRows(kTargets);
        EXPECT_LT(max_diff(target_rows, grad_src.topRows(kTargets)), 1e-5) << what;
        EXPECT_LT(max_diff(r.grad_rows.bottomRows(kSources - kTargets),
                           grad_src.bottomRows(kSources - kTargets)),
                  1e-5)
            << what;
        const auto want = whole.gradients();
        const auto have = parts.gradients();
        for (std::size_t k = 0; k < want.size(); ++k)
          EXPECT_LT(max_diff(*have[k], *want[k]), 1e-4) << what << " gradient " << k;
      }
}

TEST(GatPush, WithoutASeedNothingIsDroppedAsInInference) {
  const block b = target_block(7);
  const Matrix x = random_matrix(kSources, kIn, 8);
  gat_layer layer(kIn, 8, 2, true, 0.6f);
  layer.init(10);
  Matrix inference;
  layer.apply(b, x, inference, nullptr);
  gat_layer parts = layer;
  const piecewise_result r = piecewise(parts, b, x, Matrix::Zero(kTargets, 8), 3, /*seed=*/nullptr);
  EXPECT_LT(max_diff(r.out, inference), 1e-5);
}

TEST(GatPush, InputDropoutIsRefusedRatherThanSplitWrongly) {
  const block b = target_block(3);
  const Matrix x = random_matrix(kSources, kIn, 4);
  gat_layer layer(kIn, 8, 2, true, 0.0f, /*input_dropout=*/0.3f);
  layer.init(5);
  gat_top_state top;
  EXPECT_THROW(gat_top_begin(layer, x.topRows(kTargets), top), std::invalid_argument);
  gat_push_cache cache;
  const std::uint64_t seed = 1;
  const std::span<const node_id> ids(b.src_nodes);
  EXPECT_THROW(
      gat_push_forward(layer, {0, 0}, {}, x, Matrix::Zero(1, 2), ids.first(1), ids, &seed, cache),
      std::invalid_argument);
}

TEST(GatPush, EdgesFromAnotherProcessAreCheckedBeforeAnyRead) {
  const block b = target_block(6);
  const Matrix x = random_matrix(kSources, kIn, 7);
  gat_layer layer(kIn, 8, 2, true, 0.0f);
  layer.init(8);
  const std::span<const node_id> ids(b.src_nodes);
  const Matrix er = Matrix::Zero(2, 2);
  gat_push_cache cache;
  // A source row past the rows, an indptr that decreases, an indptr past the edges.
  EXPECT_THROW(
      gat_push_forward(layer, {0, 1, 1}, {kSources}, x, er, ids.first(2), ids, nullptr, cache),
      std::invalid_argument);
  EXPECT_THROW(gat_push_forward(layer, {0, 2, 1, 2}, {0, 1}, x, Matrix::Zero(3, 2), ids.first(3),
                                ids, nullptr, cache),
               std::invalid_argument);
  EXPECT_THROW(gat_push_forward(layer, {0, 1, 5}, {0, 1}, x, er, ids.first(2), ids, nullptr, cache),
               std::invalid_argument);
}

TEST(GatPush, ATargetWhoseNeighboursAllLieElsewhereStillAttendsToItself) {
  // Shards with no edge of a target leave it to the owner's self edge: with zero shards the
  // layer is z_v W's own row for every target (softmax over one edge).
  const block b = target_block(11);
  const Matrix x = random_matrix(kSources, kIn, 12);
  gat_layer layer(kIn, 8, 2, true, 0.0f);
  layer.init(13);
  gat_top_state top;
  gat_top_begin(layer, x.topRows(kTargets), top);
  const std::span<const node_id> ids(b.src_nodes);
  const Matrix out = gat_top_finish(layer, ids.first(kTargets), nullptr, nullptr, top);
  const Matrix want = (x.topRows(kTargets) * layer.weight).rowwise() + layer.bias.row(0);
  EXPECT_LT(max_diff(out, want), 1e-5);
  EXPECT_THROW(gat_top_finish(layer, ids.first(3), nullptr, nullptr, top), std::invalid_argument);
}

// What a shard checks of the merged softmax an owner returns (from another process) before its
// backward divides by the sum and exponentiates against the max; and its gradient share kept
// apart equals what gat_push_backward adds to the layer.
TEST(GatPush, AShardTakesOnlyAMergedSoftmaxItsEdgesCanBePartOf) {
  const block b = target_block(3);
  const Matrix x = random_matrix(kSources, kIn, 4);
  gat_layer layer(kIn, 8, 4, true, 0.0f);
  layer.init(5);
  const std::span<const node_id> ids(b.src_nodes);
  gat_top_state top;
  const Matrix er = gat_top_begin(layer, x.topRows(kTargets), top);
  std::vector<std::int64_t> indptr(b.indptr.begin(), b.indptr.end());
  std::vector<std::int32_t> src(b.indices.begin(), b.indices.end());
  gat_push_cache cache;
  const attention_partial part =
      gat_push_forward(layer, indptr, src, x, er, ids.first(kTargets), ids, nullptr, cache);
  gat_top_finish(layer, ids.first(kTargets), &part, nullptr, top);
  EXPECT_TRUE(merged_softmax_fits(cache, top.merged));

  attention_partial low_sum = top.merged;
  low_sum.sum(3, 1) = 0.5f;
  EXPECT_FALSE(merged_softmax_fits(cache, low_sum));
  attention_partial nan_sum = top.merged;
  nan_sum.sum(0, 0) = std::nanf("");
  EXPECT_FALSE(merged_softmax_fits(cache, nan_sum));
  // A maximum below a score of one of the shard's edges (a target with edges, head 2).
  std::int32_t with_edges = 0;
  while (b.indptr[with_edges + 1] == b.indptr[with_edges])
    ++with_edges;
  attention_partial low_max = top.merged;
  low_max.max(with_edges, 2) = cache.score(b.indptr[with_edges], 2) - 1.0f;
  EXPECT_FALSE(merged_softmax_fits(cache, low_max));
  attention_partial short_rows = top.merged;
  short_rows.sum.conservativeResize(kTargets - 1, Eigen::NoChange);
  EXPECT_FALSE(merged_softmax_fits(cache, short_rows));

  const Matrix grad_heads = random_matrix(kTargets, 8, 6);
  const auto apart = gat_push_backward_apart(layer, cache, top.merged, top.heads_out, grad_heads);
  gat_layer direct = layer;
  direct.grad_weight.setZero();
  direct.grad_attn_l.setZero();
  Matrix grad_rows, grad_er;
  gat_push_backward(direct, cache, top.merged, top.heads_out, grad_heads, grad_rows, grad_er);
  EXPECT_TRUE(apart.weight == direct.grad_weight);
  EXPECT_TRUE(apart.attn_l == direct.grad_attn_l);
  EXPECT_TRUE(apart.rows == grad_rows);
  EXPECT_TRUE(apart.er == grad_er);
  EXPECT_GT(apart.weight.cwiseAbs().maxCoeff(), 0.0f);
}
