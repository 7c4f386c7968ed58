// degnn train: single-process training, or an in-process cluster running a pipeline.
//   degnn train --data data/pubmed --model sage --layers 2 --fanouts 10,25 --hidden 128 --epochs 50
//   degnn train --parts 4 --pipeline centralized ...
#include <cstdio>
#include <optional>

#include "model/dataset.hpp"
#include "model/feature_transform.hpp"
#include "model/model_file.hpp"
#include "model/partition_store.hpp"
#include "model/replica.hpp"
#include "model/sparse_input.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/cli/train_options.hpp"
#include "runtime/train/cluster_trainer.hpp"
#include "runtime/train/single_trainer.hpp"

namespace degnn {

namespace {

// --save-model: the final parameters (replica 0's in a cluster) as a model file.
void save_final_model(const train_settings& s, const dataset& d, const std::vector<float>& params) {
  if (s.save_model.empty()) return;
  replica_config rc = s.model;
  rc.in_dim = d.num_features();
  rc.num_classes = d.num_classes;
  model_replica r(rc);
  r.set_parameters(params);
  save_model_file(s.save_model, r.model(), {r.model().config(), s.normalize_features, 0},
                  format_for(s.save_model));
  std::printf("saved the final model to %s\n", s.save_model.c_str());
}

// --normalize-features on the dataset, and a word on its features' density.
void prepare_features(dataset& d, const train_settings& s) {
  apply_feature_transform(s.normalize_features, d.features);
  if (d.sparse_features) {
    if (s.normalize_features == "row") {
      auto rows = std::make_shared<sparse_rows>(*d.sparse_features);
      normalize_rows(*rows);
      d.sparse_features = std::move(rows);
    }
    const double cells = static_cast<double>(d.num_nodes()) * d.num_features();
    const auto nnz = static_cast<double>(d.sparse_features->m.nonZeros());
    std::printf(
        "features as compressed rows: %.2f%% of %lld x %d entries are non-zero (%.1f MB "
        "instead of %.1f MB dense)\n",
        100 * nnz / cells, static_cast<long long>(d.num_nodes()), d.num_features(),
        (nnz * 8 + 4.0 * (d.num_nodes() + 1)) / 1e6, cells * 4 / 1e6);
  } else if (d.num_features() >= 1000 && d.features.rows() > 0) {
    if (const double kept = density(d.features); kept <= 0.05) {
      std::printf(
          "note: only %.2f%% of the feature values (%d columns) are non-zero; "
          "--sparse-features trains on compressed rows (faster, smaller)\n",
          100 * kept, d.num_features());
    }
  }
}

// The run's one-line description.
void print_run(const dataset& d, const train_settings& s, const std::optional<partition_meta>& meta,
               int workers) {
  std::printf(
      "%s: %d nodes, %lld in-edges, %d features, %d classes; %s pipeline, %d part%s, %s %d layers, "
      "fanouts",
      d.name.c_str(), d.num_nodes(),
      static_cast<long long>(meta ? meta->num_edges : d.graph.num_edges()), d.num_features(),
      d.num_classes, s.pipeline.c_str(), meta ? meta->num_parts : s.parts, "(s)",
      s.model.model.c_str(), s.model.num_layers);
  for (size_t i = 0; i < s.fanouts.size(); ++i)
    std::printf("%s%d", i ? "," : " ", s.fanouts[i]);
  std::printf(", hidden %d, batch %d", s.model.hidden, s.batch_size);
  if (workers > 1) std::printf(" per worker (%d per step)", s.batch_size * workers);
  std::printf(", seed %llu\n", static_cast<unsigned long long>(s.seed));
}

// --compare-with: the same run (partitions, seed, batches) with the other pipeline `other`, to
// count what it sends; prints both runs' bytes, times and accuracy side by side.
void compare_with(const std::string& other, const train_settings& s, const dataset& d,
                  const cluster_result& main_run, const training_report& report) {
  train_settings t = s;
  t.pipeline = other;
  t.metrics.clear();
  t.checkpoint.clear();
  t.checkpoint_dir.clear();
  t.checkpoint_every = 0;
  t.resume.clear();
  t.progress = false;
  std::printf("comparing with the %s pipeline (same partitions and seed) ...\n",
              t.pipeline.c_str());
  training_report quiet(d.name + "/" + t.pipeline, "", false);
  const cluster_result other_run = train_cluster(t, d, quiet);
  auto mean_mb = [](const std::vector<std::uint64_t>& v) {
    double sum = 0;
    for (auto b : v)
      sum += static_cast<double>(b);
    return v.empty() ? 0.0 : sum / static_cast<double>(v.size()) / 1e6;
  };
  const double mine = mean_mb(main_run.epoch_bytes), theirs = mean_mb(other_run.epoch_bytes);
  // The gradient all-reduce is the same in both pipelines; what differs is the batch traffic.
  const double mine_ar = mean_mb(main_run.epoch_allreduce_bytes);
  const double theirs_ar = mean_mb(other_run.epoch_allreduce_bytes);
  std::printf("bytes per epoch between nodes (counted): %s %.3f MB, %s %.3f MB -> %.2fx\n",
              s.pipeline.c_str(), mine, t.pipeline.c_str(), theirs, mine > 0 ? theirs / mine : 0.0);
  std::printf(
      "  without the gradient all-reduce (%.3f MB in both): %s %.3f MB, %s %.3f MB -> %.3gx\n",
      mine_ar, s.pipeline.c_str(), mine - mine_ar, t.pipeline.c_str(), theirs - theirs_ar,
      mine - mine_ar > 0 ? (theirs - theirs_ar) / (mine - mine_ar) : 0.0);
  // Measured in this process, where no byte crosses a wire; the link time is what the counted
  // bytes need at least on 1 Gbit/s links, one per node, if spread evenly over them.
  const auto mean_s = [](const run_totals& r) { return r.epochs ? r.train_s / r.epochs : 0.0; };
  const double my_epoch = mean_s(report.totals()), their_epoch = mean_s(quiet.totals());
  const int nodes = std::max(1, main_run.parts);
  const auto wire_s = [nodes](double mb) {
    return mb * 1e6 / (static_cast<double>(nodes) * 125e6);
  };
  std::printf(
      "epoch time (mean, in one process: no network): %s %.2f s, %s %.2f s -> %.2fx; the counted "
      "bytes alone need at least %.2f s and %.2f s per epoch on 1 Gbit/s links (one per node)\n",
      s.pipeline.c_str(), my_epoch, t.pipeline.c_str(), their_epoch,
      my_epoch > 0 ? their_epoch / my_epoch : 0.0, wire_s(mine), wire_s(theirs));
  // Set-up plus every epoch (evaluation left out: both pipelines evaluate alike).
  const auto end_to_end = [](const run_totals& r) {
    return std::pair{r.setup_s + r.train_s,
                     static_cast<double>(r.setup_bytes + r.train_bytes) / 1e6};
  };
  const auto [mine_s, mine_mb] = end_to_end(report.totals());
  const auto [theirs_s, theirs_mb] = end_to_end(quiet.totals());
  std::printf(
      "end to end (set-up + %d epochs, without evaluation): %s %.2f s %.3f MB, %s %.2f s %.3f MB "
      "-> %.2fx bytes, %.2fx time\n",
      report.totals().epochs, s.pipeline.c_str(), mine_s, mine_mb, t.pipeline.c_str(), theirs_s,
      theirs_mb, mine_mb > 0 ? theirs_mb / mine_mb : 0.0, mine_s > 0 ? theirs_s / mine_s : 0.0);
  std::printf("test accuracy: %s %.4f, %s %.4f\n", s.pipeline.c_str(), report.test_at_best(),
              t.pipeline.c_str(), quiet.test_at_best());
}

}  // namespace

int run_train(int argc, char** argv) {
  option_set opts("train",
                  "degnn train [--config-file=F] [--data DIR --model sage|gcn --epochs N ...]",
                  train_option_specs());
  if (!opts.parse(argc, argv, 0)) return 0;
  train_settings s = read_train_settings(opts);
  int workers = s.pipeline == "single" ? 1 : s.parts;
  std::optional<partition_meta> meta;
  if (!s.partitions.empty()) {
    // The partition set names its dataset and its number of parts: --data and --parts may only
    // repeat them.
    meta = load_partition_meta(s.partitions);
    if (opts.given("parts") && s.parts != meta->num_parts) {
      throw config_error("--parts " + std::to_string(s.parts) + " but " + s.partitions + " has " +
                         std::to_string(meta->num_parts) + " parts (leave --parts out)");
    }
    // Without --data the dataset is not read (dataset_outline below), so even a set that does not
    // record its folder needs none.
    if (!opts.given("data")) s.data = meta->source;
    workers = meta->num_parts;
  }
  resolve_batch_size(s, workers);
  // A cluster on a partition set reads every part's rows from the set's files, as degnn node
  // does, so the dataset itself is not loaded (it would be one more copy of every feature); an
  // explicit --data is loaded, to be checked against the set.
  dataset d = meta && !opts.given("data")
                  ? dataset_outline(*meta)
                  : load_dataset(s.data, {.use_cache = true,
                                          .cache_path = {},
                                          .verbose = false,
                                          .cache_dir = s.cache_dir,
                                          .sparse_features = s.sparse_features});
  prepare_features(d, s);
  print_run(d, s, meta, workers);
  training_report report(d.name + "/" + s.pipeline, s.metrics, s.progress);
  if (s.pipeline == "single") {
    save_final_model(s, d, train_single(s, d, report));
    report.finish();
    return 0;
  }
  const cluster_result main_run = train_cluster(s, d, report);
  save_final_model(s, d, main_run.parameters);
  report.finish();
  if (opts.str("compare-with").empty()) return 0;
  const std::string other = opts.choice("compare-with", {"centralized", "decentralized"});
  if (other == s.pipeline) throw config_error("--compare-with names the pipeline being run");
  compare_with(other, s, d, main_run, report);
  return 0;
}

}  // namespace degnn
