// degnn bench: benchmarks that print human-readable lines and one JSON line per result.
//   degnn bench data   load (CSV and cache) and partition times, Pubmed and a 1M-node graph
//   degnn bench train  single-process training speed on a synthetic 1M-node graph
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "model/batch_prefetcher.hpp"
#include "model/dataset.hpp"
#include "model/layers.hpp"
#include "model/partitioner.hpp"
#include "model/replica.hpp"
#include "model/sampler.hpp"
#include "model/synthetic_graph.hpp"
#include "runtime/cli/cli_options.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/process/process_stats.hpp"

namespace degnn {

namespace fs = std::filesystem;

/// Makes (once) the synthetic benchmark graph in DIR and returns DIR.
fs::path ensure_synthetic(const fs::path& dir, node_id nodes, edge_offset edges, int features,
                          std::uint64_t seed) {
  if (fs::exists(dir / "num-node-list.csv.gz")) return dir;
  synthetic_options o;
  o.num_nodes = nodes;
  o.num_edges = edges;
  o.num_features = features;
  o.num_classes = 16;
  o.seed = seed;
  std::fprintf(stderr, "bench: generating %s (%d nodes, %lld edges, %d features) ...\n",
               dir.c_str(), nodes, static_cast<long long>(edges), features);
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
  std::printf(
      "%s: %d nodes, %lld in-edges: load csv %.3f s, cache %.3f s; %d-part metis %.3f s (cut "
      "%.2f%%), "
      "random %.3f s (cut %.2f%%)\n",
      d.name.c_str(), d.num_nodes(), static_cast<long long>(d.graph.num_edges()), csv_s, cache_s,
      parts, metis_s, 100 * qm.cut_fraction, random_s, 100 * qr.cut_fraction);
  std::printf(
      "{\"bench\":\"data\",\"dataset\":\"%s\",\"nodes\":%d,\"edges\":%lld,\"load_csv_s\":%.4f,"
      "\"load_cache_s\":%.4f,"
      "\"parts\":%d,\"metis_s\":%.4f,\"metis_cut\":%.5f,\"metis_node_imbalance\":%.4f,\"metis_"
      "train_imbalance\":%.4f,"
      "\"random_s\":%.4f,\"random_cut\":%.5f,\"peak_rss_mib\":%.1f}\n",
      d.name.c_str(), d.num_nodes(), static_cast<long long>(d.graph.num_edges()), csv_s, cache_s,
      parts, metis_s, qm.cut_fraction, qm.node_imbalance, qm.train_imbalance, random_s,
      qr.cut_fraction, peak_rss_mib());
  std::fflush(stdout);
}

// The synthetic graph of --nodes, --edges and --features under --work, made once (seed 1).
fs::path synthetic_dataset(const option_set& opts) {
  const auto nodes = static_cast<node_id>(opts.integer("nodes", 2, 2'000'000'000));
  const auto edges = opts.integer("edges", 1);
  const auto features = static_cast<int>(opts.integer("features", 1, 100000));
  const fs::path dir =
      fs::path(opts.str("work")) / ("synth-" + std::to_string(nodes) + "-" + std::to_string(edges) +
                                    "-" + std::to_string(features));
  return ensure_synthetic(dir, nodes, edges, features, 1);
}

int bench_data(int argc, char** argv) {
  option_set opts(
      "bench", "degnn bench data [--nodes N --edges E --work DIR]",
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
  bench_one_dataset(synthetic_dataset(opts), parts, repeats);
  return 0;
}

// Seconds per GEMM of (rows x in) * (in x out), the best of a few runs: the machine's reference.
double gemm_seconds(Eigen::Index rows, Eigen::Index in, Eigen::Index out) {
  Matrix a = Matrix::Random(rows, in), b = Matrix::Random(in, out), c(rows, out);
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    stopwatch clock;
    c.noalias() = a * b;
    best = std::min(best, clock.seconds());
  }
  return best + 0 * c(0, 0);
}

// Two modes timed epoch by epoch: serial (sample, gather, compute one after the other) and
// prefetched (the next batch sampled and gathered in the background during compute). Same
// batches, same steps; the dense work and sampled edges are counted in the prefetched mode.
class train_bench {
 public:
  struct mode_stats {
    std::unique_ptr<model_replica> replica;
    std::vector<double> epoch_s, sample_s, compute_s;
  };

  train_bench(const dataset& d, std::vector<int> fanouts, int batch_size, replica_config rc)
      : d_(d),
        fanouts_(std::move(fanouts)),
        batch_size_(batch_size),
        rc_(rc),
        sampler_(d.graph),
        serial_{std::make_unique<model_replica>(rc), {}, {}, {}},
        prefetched_{std::make_unique<model_replica>(rc), {}, {}, {}} {}

  // Both modes over the same batches, alternating which goes first, so the machine's drift
  // affects both.
  void epoch(int epoch, std::uint64_t max_batches) {
    auto batches = make_batches(d_.train, batch_size_, 1, static_cast<std::uint64_t>(epoch));
    if (max_batches && batches.size() > max_batches) batches.resize(max_batches);
    const std::uint64_t first_step = static_cast<std::uint64_t>(epoch) * batches.size();
    if (epoch % 2 == 0) {
      serial_epoch(batches, first_step);
      prefetched_epoch(batches, first_step);
    } else {
      prefetched_epoch(batches, first_step);
      serial_epoch(batches, first_step);
    }
    std::fprintf(stderr,
                 "  epoch %d, %zu batches: serial %.2f s (sample %.2f, compute %.2f), prefetched "
                 "%.2f s (waiting for batches %.2f, compute %.2f)\n",
                 epoch + 1, batches.size(), serial_.epoch_s.back(), serial_.sample_s.back(),
                 serial_.compute_s.back(), prefetched_.epoch_s.back(), prefetched_.sample_s.back(),
                 prefetched_.compute_s.back());
  }

  // The medians, against plain Eigen GEMMs of the same shapes as the first layer's products
  // (the same run): a line for people and a JSON line.
  void report(int epochs) {
    const auto& epoch_s = prefetched_.epoch_s;
    const auto& sample_s = prefetched_.sample_s;
    const auto& compute_s = prefetched_.compute_s;
    const auto probe =
        sampler_.sample(make_batches(d_.train, batch_size_, 7, 0).front(), fanouts_, 7, 0);
    const auto rows = probe.blocks.front().num_dst();
    const double gemm_s = gemm_seconds(rows, d_.num_features(), rc_.hidden);
    const double gemm_gflops = 2.0 * rows * d_.num_features() * rc_.hidden / gemm_s / 1e9;
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    double total_compute = 0, total_epoch = 0;
    for (double t : compute_s)
      total_compute += t;
    for (double t : epoch_s)
      total_epoch += t;
    const double train_gflops = flops_ / total_compute / 1e9;
    const auto& serial = serial_;
    std::printf(
        "bench train %s: median epoch %.3f s prefetched (waiting for batches %.3f, compute %.3f), "
        "%.3f s serial (sample %.3f, compute %.3f): %.2fx; %.2f M sampled edges/s; "
        "dense work %.1f GFLOP/s over all compute time vs plain Eigen GEMM %.1f GFLOP/s (%.0f%%); "
        "peak RSS %.0f MiB\n",
        d_.name.c_str(), median(epoch_s), median(sample_s), median(compute_s),
        median(serial.epoch_s), median(serial.sample_s), median(serial.compute_s),
        median(serial.epoch_s) / median(epoch_s), edges_ / total_epoch / 1e6, train_gflops,
        gemm_gflops, 100 * train_gflops / gemm_gflops, peak_rss_mib());
    std::printf(
        "{\"bench\":\"train\",\"dataset\":\"%s\",\"nodes\":%d,\"edges\":%lld,\"batch_size\":%d,"
        "\"hidden\":%d,"
        "\"epochs\":%d,\"median_epoch_s\":%.4f,\"median_sample_s\":%.4f,\"median_compute_s\":%.4f,"
        "\"median_epoch_serial_s\":%.4f,\"median_sample_serial_s\":%.4f,\"prefetch_speedup\":%.3f,"
        "\"sampled_edges_per_s\":%.0f,\"dense_gflops\":%.2f,\"gemm_gflops\":%.2f,\"dense_vs_gemm\":"
        "%.3f,"
        "\"peak_rss_mib\":%.1f}\n",
        d_.name.c_str(), d_.num_nodes(), static_cast<long long>(d_.graph.num_edges()), batch_size_,
        rc_.hidden, epochs, median(epoch_s), median(sample_s), median(compute_s),
        median(serial.epoch_s), median(serial.sample_s), median(serial.epoch_s) / median(epoch_s),
        edges_ / total_epoch, train_gflops, gemm_gflops, train_gflops / gemm_gflops,
        peak_rss_mib());
  }

 private:
  void train(model_replica& replica, const prepared_batch& p, std::uint64_t step, bool count) {
    replica.train_step(p.batch, feature_table{&d_.features}, p.labels, step);
    replica.apply_own_gradient();
    if (!count) return;
    // Dense work of a SAGE layer: two (num_dst x in) * (in x out) products forward, and twice
    // that backward (weight and input gradients; the first layer skips the input gradient).
    for (size_t l = 0; l < p.batch.blocks.size(); ++l) {
      const double in = l == 0 ? d_.num_features() : rc_.hidden;
      const double out = l + 1 == p.batch.blocks.size() ? d_.num_classes : rc_.hidden;
      const double rows = p.batch.blocks[l].num_dst();
      flops_ += 2 * rows * in * out * 2 * (l == 0 ? 2 : 3);
      edges_ += static_cast<double>(p.batch.blocks[l].num_edges());
    }
  }

  void serial_epoch(const std::vector<std::vector<node_id>>& batches, std::uint64_t first_step) {
    double ts = 0, tc = 0;
    stopwatch epoch_clock;
    for (size_t i = 0; i < batches.size(); ++i) {
      stopwatch clock;
      const prepared_batch p =
          prepare_batch(sampler_, d_, batches[i], fanouts_, 1, first_step + i, false);
      ts += clock.seconds();
      clock.reset();
      train(*serial_.replica, p, first_step + i, false);
      tc += clock.seconds();
    }
    serial_.epoch_s.push_back(epoch_clock.seconds());
    serial_.sample_s.push_back(ts);
    serial_.compute_s.push_back(tc);
  }

  void prefetched_epoch(const std::vector<std::vector<node_id>>& batches,
                        std::uint64_t first_step) {
    double ts = 0, tc = 0;
    stopwatch epoch_clock;
    std::vector<batch_prefetcher::job> jobs;
    for (size_t i = 0; i < batches.size(); ++i)
      jobs.push_back({batches[i], first_step + i});
    batch_prefetcher prefetch(d_, fanouts_, 1, std::move(jobs), 1, false);
    for (size_t i = 0; i < batches.size(); ++i) {
      stopwatch clock;
      const prepared_batch p = prefetch.next();
      ts += clock.seconds();
      clock.reset();
      train(*prefetched_.replica, p, first_step + i, true);
      tc += clock.seconds();
    }
    prefetched_.epoch_s.push_back(epoch_clock.seconds());
    prefetched_.sample_s.push_back(ts);
    prefetched_.compute_s.push_back(tc);
  }

  const dataset& d_;
  std::vector<int> fanouts_;
  int batch_size_;
  replica_config rc_;
  neighbor_sampler sampler_;
  mode_stats serial_, prefetched_;
  double edges_ = 0, flops_ = 0;
};

}  // namespace

int bench_train(int argc, char** argv) {
  option_set opts(
      "bench", "degnn bench train [--nodes N --edges E --epochs N]",
      {{"nodes", "1000000", "synthetic graph nodes"},
       {"edges", "10000000", "synthetic undirected edges (20M directed in-edges)"},
       {"features", "128", "feature dimension"},
       {"data", "", "benchmark this dataset instead of the synthetic graph"},
       {"fanouts", "10,25", "seed-first fanouts"},
       {"hidden", "128", "hidden width"},
       {"batch-size", "1024", "seeds per batch"},
       {"epochs", "3", "epochs timed (median reported)"},
       {"max-batches", "0", "stop each epoch after this many batches (0 = all)"},
       {"work", "/tmp/degnn-bench", "where the synthetic graph is generated (reused)"}});
  if (!opts.parse(argc, argv, 0)) return 0;
  const fs::path dir =
      opts.str("data").empty() ? synthetic_dataset(opts) : fs::path(opts.str("data"));
  const dataset d = load_dataset(dir, {.use_cache = true, .cache_path = {}, .verbose = true});
  const auto fanouts = opts.int_list("fanouts");
  const int batch_size = static_cast<int>(opts.integer("batch-size", 1, 1 << 24));
  const int epochs = static_cast<int>(opts.integer("epochs", 1, 1000));
  const auto max_batches = static_cast<std::uint64_t>(opts.integer("max-batches", 0));
  const replica_config rc{.model = "sage",
                          .in_dim = d.num_features(),
                          .hidden = static_cast<std::int32_t>(opts.integer("hidden", 1, 1 << 16)),
                          .num_classes = d.num_classes,
                          .num_layers = static_cast<std::int32_t>(fanouts.size()),
                          .dropout = 0.5f,
                          .lr = 0.003f,
                          .weight_decay = 0.0f,
                          .seed = 1};
  train_bench bench(d, fanouts, batch_size, rc);
  for (int epoch = 0; epoch < epochs; ++epoch)
    bench.epoch(epoch, max_batches);
  bench.report(epochs);
  return 0;
}

int run_bench(int argc, char** argv) {
  const std::string what = argc > 0 ? argv[0] : "";
  if (what == "data") return bench_data(argc - 1, argv + 1);
  if (what == "train") return bench_train(argc - 1, argv + 1);
  throw config_error("bench: say what to measure: `degnn bench data` or `degnn bench train`");
}

}  // namespace degnn
