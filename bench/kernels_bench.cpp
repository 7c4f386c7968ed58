// Microbenchmarks of the compute core: plain Eigen GEMM, our dense layer forward+backward, mean
// aggregation forward/backward and a whole SAGE layer, at the shapes of a 1024-seed fanout 10,25
// batch (blocks[0]: ~10k dst rows gathering 25 neighbours each from ~250k sources).
#include <benchmark/benchmark.h>

#include <random>

#include "model/aggregate.hpp"
#include "model/layers.hpp"

namespace {

using degnn::Matrix;

Matrix random_matrix(Eigen::Index rows, Eigen::Index cols, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Matrix m(rows, cols);
  for (Eigen::Index k = 0; k < m.size(); ++k)
    m.data()[k] = u(rng);
  return m;
}

// num_dst rows with `fanout` uniform neighbours each among num_src sources.
degnn::block random_block(std::int32_t num_dst, std::int32_t num_src, std::int32_t fanout) {
  std::mt19937 rng(7);
  degnn::block b;
  b.num_dst_nodes = num_dst;
  b.src_nodes.resize(num_src);
  for (std::int32_t i = 0; i < num_src; ++i)
    b.src_nodes[i] = i;
  for (std::int32_t i = 0; i < num_dst; ++i) {
    for (std::int32_t k = 0; k < fanout; ++k)
      b.indices.push_back(static_cast<std::int32_t>(rng() % num_src));
    b.indptr.push_back(static_cast<std::int32_t>(b.indices.size()));
  }
  b.src_degree.assign(num_src, 2 * fanout);
  return b;
}

void set_flops(benchmark::State& state, double flops_per_iter) {
  state.counters["GFLOP"] =
      benchmark::Counter(flops_per_iter * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// Args: rows, in, out.
void BM_EigenGemm(benchmark::State& state) {
  const Eigen::Index n = state.range(0), in = state.range(1), out = state.range(2);
  const Matrix x = random_matrix(n, in, 1), w = random_matrix(in, out, 2);
  Matrix y(n, out);
  for (auto _ : state) {
    y.noalias() = x * w;
    benchmark::DoNotOptimize(y.data());
  }
  set_flops(state, 2.0 * n * in * out);
}
BENCHMARK(BM_EigenGemm)
    ->Args({4096, 256, 256})
    ->Args({10240, 128, 256})
    ->Args({250000, 128, 128})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// dense_forward + dense_backward (with input gradient): 3 GEMMs of 2 n in out flops.
void BM_DenseForwardBackward(benchmark::State& state) {
  const Eigen::Index n = state.range(0), in = state.range(1), out = state.range(2);
  const Matrix x = random_matrix(n, in, 1), w = random_matrix(in, out, 2),
               b = random_matrix(1, out, 3), g = random_matrix(n, out, 4);
  Matrix y, gw = Matrix::Zero(in, out), gb = Matrix::Zero(1, out), gx;
  for (auto _ : state) {
    degnn::dense_forward(x, w, &b, y);
    degnn::dense_backward(x, w, g, gw, &gb, &gx);
    benchmark::DoNotOptimize(gx.data());
  }
  set_flops(state, 3 * 2.0 * n * in * out);
}
BENCHMARK(BM_DenseForwardBackward)
    ->Args({4096, 256, 256})
    ->Args({10240, 128, 256})
    ->Args({250000, 128, 128})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Args: num_dst, num_src, fanout, F. Reports gathered GB/s (edges * F * 4 bytes) and GFLOP/s.
void BM_MeanAggregate(benchmark::State& state) {
  const auto nd = static_cast<std::int32_t>(state.range(0));
  const auto ns = static_cast<std::int32_t>(state.range(1));
  const auto k = static_cast<std::int32_t>(state.range(2));
  const Eigen::Index f = state.range(3);
  const degnn::block b = random_block(nd, ns, k);
  const Matrix h = random_matrix(ns, f, 5);
  Matrix out;
  for (auto _ : state) {
    degnn::mean_aggregate(b, h, out);
    benchmark::DoNotOptimize(out.data());
  }
  const double e = static_cast<double>(b.num_edges());
  set_flops(state, e * f);
  state.counters["gather_GB"] =
      benchmark::Counter(e * f * 4 * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_MeanAggregate)
    ->Args({10240, 250000, 25, 128})
    ->Args({1024, 10240, 10, 256})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Backward including the transpose (rebuilt every step, as the layer does).
void BM_MeanAggregateBackward(benchmark::State& state) {
  const auto nd = static_cast<std::int32_t>(state.range(0));
  const auto ns = static_cast<std::int32_t>(state.range(1));
  const auto k = static_cast<std::int32_t>(state.range(2));
  const Eigen::Index f = state.range(3);
  const degnn::block b = random_block(nd, ns, k);
  const Matrix g = random_matrix(nd, f, 6);
  Matrix grad_src(ns, f);
  for (auto _ : state) {
    degnn::mean_aggregate_backward(b, degnn::transpose_block(b), g, grad_src, false);
    benchmark::DoNotOptimize(grad_src.data());
  }
  const double e = static_cast<double>(b.num_edges());
  set_flops(state, 2 * e * f);
  state.counters["gather_GB"] =
      benchmark::Counter(e * f * 4 * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_MeanAggregateBackward)
    ->Args({10240, 250000, 25, 128})
    ->Args({1024, 10240, 10, 256})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Whole SAGE layer forward + backward on a 10,25 batch block. Args: num_dst, num_src, fanout,
// in, out, input gradient (0: none, as for the first layer in training; 1: computed).
void BM_SageLayerForwardBackward(benchmark::State& state) {
  const auto nd = static_cast<std::int32_t>(state.range(0));
  const auto ns = static_cast<std::int32_t>(state.range(1));
  const auto k = static_cast<std::int32_t>(state.range(2));
  const auto in = static_cast<std::int32_t>(state.range(3));
  const auto outd = static_cast<std::int32_t>(state.range(4));
  const bool input_grad = state.range(5) != 0;
  const degnn::block b = random_block(nd, ns, k);
  const Matrix h = random_matrix(ns, in, 8), g = random_matrix(nd, outd, 9);
  degnn::sage_layer layer(in, outd);
  layer.init(1);
  Matrix out, grad_src;
  for (auto _ : state) {
    layer.forward(b, h, out, true);
    layer.backward(b, g, input_grad ? &grad_src : nullptr);
    benchmark::DoNotOptimize(grad_src.data());
  }
  // 2 GEMMs forward, 2 (+2) backward; aggregation forward (+ backward).
  const double e = static_cast<double>(b.num_edges());
  set_flops(state, (input_grad ? 6 : 4) * 2.0 * nd * in * outd + (input_grad ? 3 : 1) * e * in);
}
BENCHMARK(BM_SageLayerForwardBackward)
    ->Args({10240, 250000, 25, 128, 256, 0})
    ->Args({10240, 250000, 25, 128, 256, 1})
    ->Args({1024, 10240, 10, 256, 47, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
