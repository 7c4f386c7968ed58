// degnn info / generate / partition / bench data: the dataset and partitioning commands.
#include <cstdio>
#include <filesystem>

#include "model/dataset.hpp"
#include "model/partition_store.hpp"
#include "model/partitioner.hpp"
#include "model/synthetic_graph.hpp"
#include "runtime/cli/cli_options.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/partition/ptscotch_partition.hpp"
#include "runtime/process/config_error.hpp"
#include "runtime/process/process_stats.hpp"

namespace degnn {

namespace fs = std::filesystem;

namespace {

void describe_dataset(const dataset& d, double load_seconds) {
  const degree_stats s = in_degree_stats(d.graph);
  std::printf("dataset   %s (%s)\n", d.name.c_str(),
              d.directed ? "directed" : "undirected, symmetrized");
  std::printf("nodes     %d\n", d.num_nodes());
  std::printf("edges     %lld stored, %lld directed in-edges after %s\n",
              static_cast<long long>(d.raw_edges), static_cast<long long>(d.graph.num_edges()),
              d.directed ? "de-duplication" : "symmetrizing");
  std::printf("in-degree min %lld  median %.1f  mean %.2f  p99 %.0f  max %lld  isolated %d\n",
              static_cast<long long>(s.min), s.median, s.mean, s.p99, static_cast<long long>(s.max),
              s.isolated);
  std::printf("features  %d\nclasses   %d\n", d.num_features(), d.num_classes);
  std::printf("split     train %zu  valid %zu  test %zu\n", d.train.size(), d.valid.size(),
              d.test.size());
  std::printf("loaded in %.3f s\n", load_seconds);
}

void print_quality(const partition_quality& q) {
  std::printf("edge cut  %lld of %lld in-edges (%.2f%%)\n", static_cast<long long>(q.cut_edges),
              static_cast<long long>(q.num_edges), 100.0 * q.cut_fraction);
  std::printf("balance   nodes max/mean %.3f, train nodes max/mean %.3f\n", q.node_imbalance,
              q.train_imbalance);
  std::printf("%-6s %10s %10s %10s\n", "part", "nodes", "train", "halo");
  for (int p = 0; p < q.num_parts; ++p) {
    std::printf("%-6d %10d %10d %10d\n", p, q.nodes[p], q.train_nodes[p], q.halo[p]);
  }
}

}  // namespace

int describe_partition_set(const char* dir) {
  stopwatch clock;
  const partition_meta meta = load_partition_meta(dir);
  const partition_book book = load_partition_book(dir);
  std::printf("partition set %s of dataset %s\n", dir, meta.dataset_name.c_str());
  std::printf("method    %s (seed %llu), %d parts\n", meta.method.c_str(),
              static_cast<unsigned long long>(meta.seed), meta.num_parts);
  std::printf("nodes     %d, in-edges %lld, features %d, classes %d\n", meta.num_nodes,
              static_cast<long long>(meta.num_edges), meta.num_features, meta.num_classes);
  std::printf("%-6s %10s %12s %10s %10s %10s\n", "part", "nodes", "in-edges", "train", "halo",
              "remote-in");
  for (int p = 0; p < meta.num_parts; ++p) {
    const graph_partition part = load_partition(dir, p, part_loading::map_features);
    edge_offset remote = 0;
    for (auto l : part.src_local)
      remote += l < 0;
    std::printf("%-6d %10d %12lld %10zu %10zu %10lld\n", p, part.num_owned(),
                static_cast<long long>(part.num_edges()), part.train.size(), part.halo.size(),
                static_cast<long long>(remote));
    if (p == 0 && part.sparse_features) std::printf("       (feature rows stored compressed)\n");
  }
  std::printf("read in %.3f s (book has %d nodes)\n", clock.seconds(), book.num_nodes());
  return 0;
}

int run_partition(int argc, char** argv) {
  option_set opts(
      "partition",
      "degnn partition --data DIR --parts K --method metis|random --out DIR\n"
      "       mpirun -n R degnn partition --data DIR --parts K --method ptscotch --out DIR",
      {{"data", "", "dataset directory (any layout; ptscotch: the NumPy layout)"},
       {"parts", "4", "number of partitions"},
       {"method", "metis",
        "metis (min edge cut, node and train-node balance), random, or ptscotch: PT-Scotch over "
        "MPI, each of the R ranks reading 1/R of the edges and writing its share of the parts "
        "(no process holds the whole graph; the balance limits of metis)"},
       {"seed", "1", "random seed (METIS seed or the random deal)"},
       {"strategy", "quality",
        "ptscotch: Scotch's strategy, quality, default, speed or scalability (less memory, a "
        "larger cut)"},
       {"out", "", "output directory (one part-K/ folder per partition + metadata)"},
       {"cache-dir", "",
        "folder of the parsed-dataset cache (default $XDG_CACHE_HOME/degnn or ~/.cache/degnn)"},
       {"sparse-features", "false",
        "store the feature rows compressed (wide, mostly-zero features: smaller files, and a "
        "part is read without a dense copy); runs read either layout",
        true}});
  if (!opts.parse(argc, argv, 0)) return 0;
  if (!opts.given("data")) throw config_error("partition: --data DIR is required");
  if (!opts.given("out")) throw config_error("partition: --out DIR is required");
  const int parts = static_cast<int>(opts.integer("parts", 1, 1 << 20));
  const std::string method_name = opts.choice("method", {"metis", "random", "ptscotch"});
  const auto seed = static_cast<std::uint64_t>(opts.integer("seed", 0));
  if (method_name == "ptscotch") {
    if (opts.flag("sparse-features"))
      throw config_error("partition: --sparse-features is not available with --method ptscotch");
    const ptscotch_report r = run_ptscotch_partition(
        {.data = opts.str("data"),
         .out = opts.str("out"),
         .parts = parts,
         .seed = seed,
         .strategy = opts.choice("strategy", {"quality", "default", "speed", "scalability"})});
    if (r.rank != 0) return 0;
    std::printf("partitioned %s (%d nodes) into %d parts with ptscotch on %d ranks\n",
                r.dataset.c_str(), r.num_nodes, parts, r.ranks);
    print_quality(r.quality);
    std::printf("balancing moved %lld train and %lld other nodes\n",
                static_cast<long long>(r.moved_train), static_cast<long long>(r.moved_other));
    double sum = 0;
    std::printf("peak RSS  ");
    for (std::size_t k = 0; k < r.peak_rss_mib.size(); ++k) {
      std::printf("%srank %zu %.0f MiB", k ? ", " : "", k, r.peak_rss_mib[k]);
      sum += r.peak_rss_mib[k];
    }
    std::printf("; sum %.0f MiB\n", sum);
    std::printf("time      read %.2f s, partition %.2f s, balance %.2f s, write %.2f s -> %s\n",
                r.read_s, r.partition_s, r.balance_s, r.write_s, opts.str("out").c_str());
    return 0;
  }
  stopwatch clock;
  const dataset d = load_dataset(opts.str("data"), {.use_cache = true,
                                                    .cache_path = {},
                                                    .verbose = true,
                                                    .cache_dir = opts.str("cache-dir"),
                                                    .sparse_features = opts.flag("sparse-features"),
                                                    .map_features = true});
  const double load_s = clock.seconds();
  std::fprintf(stderr, "  loaded in %.1f s, peak RSS %.0f MiB; partitioning ...\n", load_s,
               peak_rss_mib());
  clock.reset();
  const auto owner =
      partition_graph(d.graph, d.train, parts, parse_partition_method(method_name), seed);
  const double part_s = clock.seconds();
  std::fprintf(stderr, "  partitioned in %.1f s, peak RSS %.0f MiB; writing ...\n", part_s,
               peak_rss_mib());
  clock.reset();
  write_partitions(d, owner, opts.str("out"), method_name, seed, parts, opts.str("data"));
  const double write_s = clock.seconds();
  std::printf("partitioned %s (%d nodes) into %d parts with %s\n", d.name.c_str(), d.num_nodes(),
              parts, method_name.c_str());
  print_quality(evaluate_partition(d.graph, d.train, owner, parts));
  std::printf("time      load %.2f s, partition %.2f s, write %.2f s -> %s (peak RSS %.0f MiB)\n",
              load_s, part_s, write_s, opts.str("out").c_str(), peak_rss_mib());
  return 0;
}

int run_convert(int argc, char** argv) {
  option_set opts("convert", "degnn convert --data DIR --out DIR",
                  {{"data", "", "dataset directory (any layout: OGB CSV or binary, NumPy)"},
                   {"out", "", "output directory (NumPy layout: edge_index.npy ...)"}});
  if (!opts.parse(argc, argv, 0)) return 0;
  if (!opts.given("data")) throw config_error("convert: --data DIR is required");
  if (!opts.given("out")) throw config_error("convert: --out DIR is required");
  if (fs::weakly_canonical(opts.str("data")) == fs::weakly_canonical(opts.str("out")))
    throw config_error("convert: --out must be another folder than --data");
  stopwatch clock;
  const dataset d = load_dataset(opts.str("data"), {.use_cache = false,
                                                    .cache_path = {},
                                                    .verbose = true,
                                                    .cache_dir = {},
                                                    .sparse_features = false,
                                                    .map_features = true});
  write_numpy_dataset(d, opts.str("out"));
  std::printf(
      "wrote %s: %s, %d nodes, %lld in-edges, %d features as NumPy arrays (%.1f s, peak "
      "RSS %.0f MiB)\n",
      opts.str("out").c_str(), d.name.c_str(), d.num_nodes(),
      static_cast<long long>(d.graph.num_edges()), d.num_features(), clock.seconds(),
      peak_rss_mib());
  return 0;
}

int run_info(int argc, char** argv) {
  option_set opts(
      "info", "degnn info --data DIR   (a dataset directory or a partition set)",
      {{"data", "", "dataset directory (OGB raw layout) or partition output directory"},
       {"no-cache", "false", "do not read or write the binary dataset cache", true},
       {"cache-dir", "",
        "folder of the parsed-dataset cache (default $XDG_CACHE_HOME/degnn or ~/.cache/degnn)"}});
  if (!opts.parse(argc, argv, 0)) return 0;
  if (!opts.given("data")) throw config_error("info: --data DIR is required");
  const fs::path dir = opts.str("data");
  if (fs::exists(dir / "partitions.meta")) return describe_partition_set(dir.c_str());
  stopwatch clock;
  const dataset d = load_dataset(dir, {.use_cache = !opts.flag("no-cache"),
                                       .cache_path = {},
                                       .verbose = false,
                                       .cache_dir = opts.str("cache-dir")});
  describe_dataset(d, clock.seconds());
  return 0;
}

int run_generate(int argc, char** argv) {
  option_set opts(
      "generate", "degnn generate --out DIR [--nodes N --edges E ...]",
      {{"out", "", "output directory"},
       {"nodes", "100000", "number of nodes"},
       {"edges", "1000000", "undirected edges to draw (repeats and self loops are dropped)"},
       {"classes", "10", "number of planted classes"},
       {"features", "64", "feature dimension"},
       {"homophily", "0.7", "probability that an edge stays inside a class"},
       {"degree-exponent", "2.5", "power-law exponent of degree propensities (> 2)"},
       {"signal", "0.35", "class-centroid scale of the features (noise is N(0,1))"},
       {"train-fraction", "0.1", "fraction of nodes in the training split"},
       {"valid-fraction", "0.05", "fraction in the validation split"},
       {"test-fraction", "0.1", "fraction in the test split"},
       {"seed", "1", "random seed"},
       {"format", "npy",
        "npy: NumPy arrays, streamed (memory about 36 bytes a node whatever the edges and "
        "features); csv: OGB's gzip CSV layout, made in memory (features with 6 significant "
        "digits)"}});
  if (!opts.parse(argc, argv, 0)) return 0;
  if (!opts.given("out")) throw config_error("generate: --out DIR is required");
  const std::string format = opts.choice("format", {"npy", "csv"});
  synthetic_options o;
  o.num_nodes = static_cast<node_id>(opts.integer("nodes", 2, 2'000'000'000));
  o.num_edges = opts.integer("edges", 1, int64_t{1} << 40);
  o.num_classes = static_cast<std::int32_t>(opts.integer("classes", 2, 100000));
  o.num_features = static_cast<std::int32_t>(opts.integer("features", 1, 100000));
  o.homophily = opts.real("homophily", 0, 1);
  o.degree_exponent = opts.real("degree-exponent", 2.0001, 100);
  o.feature_signal = opts.real("signal", 0, 1e6);
  o.train_fraction = opts.real("train-fraction", 0, 1);
  o.valid_fraction = opts.real("valid-fraction", 0, 1);
  o.test_fraction = opts.real("test-fraction", 0, 1);
  o.seed = static_cast<std::uint64_t>(opts.integer("seed", 0));
  stopwatch clock;
  std::fprintf(stderr, "generating %d nodes, %lld edges ...\n", o.num_nodes,
               static_cast<long long>(o.num_edges));
  if (format == "npy") {
    double last = -1;
    const auto summary = write_synthetic_arrays(
        o, opts.str("out"), [&](const char* phase, std::int64_t done, std::int64_t total) {
          if (clock.seconds() - last < 2 && done < total) return;  // a line every 2 s at most
          last = clock.seconds();
          std::fprintf(stderr, "  %-8s %5.1f%%  %.0f s  peak RSS %.0f MiB\n", phase,
                       100.0 * static_cast<double>(done) / static_cast<double>(total),
                       clock.seconds(), peak_rss_mib());
        });
    std::printf(
        "wrote %s: %d nodes, %lld edges drawn (self-loops left out; symmetrized on load), %d "
        "features, %d classes as NumPy arrays (%.1f s, peak RSS %.0f MiB)\n",
        opts.str("out").c_str(), o.num_nodes, static_cast<long long>(summary.edges), o.num_features,
        o.num_classes, clock.seconds(), peak_rss_mib());
    return 0;
  }
  if (detect_layout(opts.str("out")) != dataset_layout::ogb_csv)
    throw config_error("generate: " + opts.str("out") +
                       " holds NumPy or npz arrays, which would be read instead of the CSV files: "
                       "remove them or choose another folder");
  dataset d = generate_synthetic(o);
  const double gen = clock.seconds();
  std::fprintf(stderr, "  generated in %.1f s (%lld directed in-edges); writing %s ...\n", gen,
               static_cast<long long>(d.graph.num_edges()), opts.str("out").c_str());
  clock.reset();
  write_ogb_dataset(d, opts.str("out"), true);
  std::printf(
      "wrote %s: %d nodes, %lld undirected edges, %d features, %d classes (generate %.1f s, write "
      "%.1f s, peak RSS %.0f MiB)\n",
      opts.str("out").c_str(), d.num_nodes(), static_cast<long long>(d.raw_edges), d.num_features(),
      d.num_classes, gen, clock.seconds(), peak_rss_mib());
  return 0;
}

}  // namespace degnn
