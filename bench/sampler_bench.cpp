// Neighbour-sampler throughput: fanouts {10, 25}, batches of 1024 seeds, on a synthetic random
// 1M-node, ~20M-edge in-edge CSR. Items are sampled edges, so items_per_second is edges/s.
// Run: build/bench/model_bench --benchmark_filter=Sampler
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <vector>

#include "model/sampler.hpp"

namespace degnn {
namespace {

// Degrees uniform in [0, 40] and sources uniform: no structure, so every probe of the relabel
// scratch is a cache miss, which is the pessimistic case. Built straight into CSR (no edge list).
const csr_graph& bench_graph() {
  static const csr_graph g = [] {
    constexpr node_id n = 1'000'000;
    csr_graph out;
    out.num_nodes = n;
    out.indptr.assign(static_cast<size_t>(n) + 1, 0);
    for (node_id v = 0; v < n; ++v)
      out.indptr[v + 1] = out.indptr[v] + static_cast<edge_offset>(mix64(v) % 41);
    out.indices.resize(static_cast<size_t>(out.indptr[n]));
#pragma omp parallel for schedule(static)
    for (node_id v = 0; v < n; ++v) {
      row_rng rng(mix64(0xbe7c4ULL + static_cast<std::uint64_t>(v)));
      node_id* row = out.indices.data() + out.indptr[v];
      const auto deg = out.indptr[v + 1] - out.indptr[v];
      for (edge_offset e = 0; e < deg; ++e)
        row[e] = static_cast<node_id>(rng.below(n));
      std::sort(row, row + deg);  // duplicates kept: harmless for a throughput figure
    }
    return out;
  }();
  return g;
}

void BM_SamplerFanout10x25Batch1024(benchmark::State& state) {
  const csr_graph& g = bench_graph();
  const int saved = omp_get_max_threads();
  omp_set_num_threads(static_cast<int>(state.range(0)));
  std::vector<node_id> all(static_cast<size_t>(g.num_nodes));
  for (node_id v = 0; v < g.num_nodes; ++v)
    all[v] = v;
  const auto batches = make_batches(all, 1024, 1, 0);
  const std::vector<int> fanouts{10, 25};
  neighbor_sampler sampler(g);
  std::int64_t edges = 0;
  std::uint64_t step = 0;
  for (auto _ : state) {
    const sampled_batch batch = sampler.sample(batches[step % batches.size()], fanouts, 7, step);
    for (const block& b : batch.blocks)
      edges += b.num_edges();
    benchmark::DoNotOptimize(batch.blocks.data());
    ++step;
  }
  omp_set_num_threads(saved);
  state.SetItemsProcessed(edges);
  state.counters["edges_per_batch"] = benchmark::Counter(
      static_cast<double>(edges) / static_cast<double>(std::max<std::uint64_t>(step, 1)));
  state.counters["graph_edges"] = static_cast<double>(g.num_edges());
}
// Wall time: with OpenMP workers, CPU time of the main thread alone would flatter the rate.
BENCHMARK(BM_SamplerFanout10x25Batch1024)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace degnn
