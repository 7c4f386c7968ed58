// degnn bench: benchmarks that print human-readable lines and one JSON line per result.
//   degnn bench data   load (CSV and cache) and partition times, Pubmed and a 1M-node graph
//   degnn bench train  single-process training speed on a synthetic 1M-node graph
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include "model/dataset.hpp"
#include "model/partitioner.hpp"
#include "model/synthetic_graph.hpp"
#include "runtime/cli_options.hpp"
#include "runtime/commands.hpp"
#include "runtime/process_stats.hpp"

namespace degnn {

namespace fs = std::filesystem;

/// Makes (once) the synthetic benchmark graph in DIR and returns DIR.
fs::path ensure_synthetic(const fs::path& dir, node_id nodes, edge_offset edges, int features, std::uint64_t seed) {
  if (fs::exists(dir / "num-node-list.csv.gz")) return dir;
  synthetic_options o;
  o.num_nodes = nodes;
  o.num_edges = edges;
  o.num_features = features;
  o.num_classes = 16;
  o.seed = seed;
  std::fprintf(stderr, "bench: generating %s (%d nodes, %lld edges, %d features) ...\n", dir.c_str(), nodes,
               static_cast<long long>(edges), features);
  write_ogb_dataset(generate_synthetic(o), dir, true);
  return dir;
}

namespace {

void bench_one_dataset(const fs::path& dir, int parts, int repeats) {
  const fs::path cache = fs::temp_directory_path() / "degnn-bench.cache";
  fs::remove(cache);
  stopwatch clock;
  dataset d = load_dataset(dir, {.use_cache = false, .cache_path = {}, .verbose = false});
  const double csv_s = clock.seconds();
  write_dataset_cache(d, cache, dataset_source_stamp(dir));
  clock.reset();
  load_dataset(dir, {.use_cache = true, .cache_path = cache, .verbose = false});
  const double cache_s = clock.seconds();
  fs::remove(cache);
  // Median of `repeats` runs for each method (these machines are noisy).
  auto median_time = [&](partition_method m, partition_quality& q) {
    std::vector<double> t;
    for (int r = 0; r < repeats; ++r) {
      clock.reset();
      const auto owner = partition_graph(d.graph, d.train, parts, m, 1);
      t.push_back(clock.seconds());
      if (r == 0) q = evaluate_partition(d.graph, d.train, owner, parts);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  partition_quality qm, qr;
  const double metis_s = median_time(partition_method::metis, qm);
  const double random_s = median_time(partition_method::random, qr);
  std::printf("%s: %d nodes, %lld in-edges: load csv %.3f s, cache %.3f s; %d-part metis %.3f s (cut %.2f%%), "
              "random %.3f s (cut %.2f%%)\n",
              d.name.c_str(), d.num_nodes(), static_cast<long long>(d.graph.num_edges()), csv_s, cache_s, parts,
              metis_s, 100 * qm.cut_fraction, random_s, 100 * qr.cut_fraction);
  std::printf(
      "{\"bench\":\"data\",\"dataset\":\"%s\",\"nodes\":%d,\"edges\":%lld,\"load_csv_s\":%.4f,\"load_cache_s\":%.4f,"
      "\"parts\":%d,\"metis_s\":%.4f,\"metis_cut\":%.5f,\"metis_node_imbalance\":%.4f,\"metis_train_imbalance\":%.4f,"
      "\"random_s\":%.4f,\"random_cut\":%.5f,\"peak_rss_mib\":%.1f}\n",
      d.name.c_str(), d.num_nodes(), static_cast<long long>(d.graph.num_edges()), csv_s, cache_s, parts, metis_s,
      qm.cut_fraction, qm.node_imbalance, qm.train_imbalance, random_s, qr.cut_fraction, peak_rss_mib());
  std::fflush(stdout);
}

int bench_data(int argc, char** argv) {
  option_set opts("bench", "degnn bench data [--nodes N --edges E --work DIR]",
                  {{"data", "data/pubmed", "real dataset to measure"},
                   {"nodes", "1000000", "synthetic graph nodes"},
                   {"edges", "10000000", "synthetic undirected edges (20M directed in-edges)"},
                   {"features", "128", "synthetic feature dimension"},
                   {"parts", "4", "partitions"},
                   {"repeats", "3", "partitioning runs per method (median reported)"},
                   {"work", "/tmp/degnn-bench", "where the synthetic graph is generated (reused)"}});
  if (!opts.parse(argc, argv, 0)) return 0;
  const int parts = static_cast<int>(opts.integer("parts", 1, 1024));
  const int repeats = static_cast<int>(opts.integer("repeats", 1, 100));
  bench_one_dataset(opts.str("data"), parts, repeats);
  const auto nodes = static_cast<node_id>(opts.integer("nodes", 2, 2'000'000'000));
  const auto edges = opts.integer("edges", 1);
  const auto features = static_cast<int>(opts.integer("features", 1, 100000));
  const fs::path dir = fs::path(opts.str("work")) /
                       ("synth-" + std::to_string(nodes) + "-" + std::to_string(edges) + "-" + std::to_string(features));
  bench_one_dataset(ensure_synthetic(dir, nodes, edges, features, 1), parts, repeats);
  return 0;
}

}  // namespace

int run_bench(int argc, char** argv) {
  const std::string what = argc > 0 ? argv[0] : "";
  if (what == "data") return bench_data(argc - 1, argv + 1);
  if (what == "train") return bench_train(argc - 1, argv + 1);
  throw config_error("bench: say what to measure: `degnn bench data` or `degnn bench train`");
}

}  // namespace degnn
