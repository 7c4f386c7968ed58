// degnn infer / export: using a trained model. infer runs exact layer-wise inference over a
// dataset and writes NumPy arrays (model/prediction_files.hpp); export writes a checkpoint's
// weights as a model file other tools read (model/model_file.hpp). One process.
#include <cstdio>
#include <filesystem>

#include "model/checkpoint.hpp"
#include "model/commit_record.hpp"
#include "model/dataset.hpp"
#include "model/feature_transform.hpp"
#include "model/inference.hpp"
#include "model/model_file.hpp"
#include "model/partition_store.hpp"
#include "model/prediction_files.hpp"
#include "runtime/cli/cli_options.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/process/config_error.hpp"
#include "runtime/process/process_stats.hpp"
#include "runtime/train/cluster_trainer.hpp"

namespace degnn {

namespace fs = std::filesystem;

namespace {

const option_spec kCheckpointSpec = {
    "checkpoint", "",
    "a checkpoint: a file (train --checkpoint) or a cluster's --checkpoint-dir folder (its "
    "newest committed checkpoint)"};
const option_spec kNormalizeSpec = {
    "normalize-features", "",
    "with --checkpoint: the input transform the model was trained with, none or row (default "
    "none); a model file records its own"};

// A checkpoint's model and its step, from a file or a cluster's checkpoint folder.
std::pair<gnn_model, std::uint64_t> read_checkpoint(const std::string& path) {
  checkpoint ck =
      fs::is_directory(path) ? load_committed_checkpoint(path).state : load_checkpoint(path);
  const auto step = static_cast<std::uint64_t>(ck.optimizer.state().step);
  return {std::move(ck.model), step};
}

// --model FILE or --checkpoint FILE (exactly one), and the input transform it goes with.
loaded_model read_model(const option_set& opts) {
  const bool file = !opts.str("model").empty(), ck = !opts.str("checkpoint").empty();
  if (file == ck) throw config_error("give one of --model FILE and --checkpoint FILE");
  const std::string asked =
      opts.given("normalize-features") ? opts.choice("normalize-features", {"none", "row"}) : "";
  if (file) {
    loaded_model m = load_model_file(opts.str("model"));
    if (!asked.empty() && asked != m.settings.normalize_features)
      throw config_error("--normalize-features " + asked + " but " + opts.str("model") +
                         " was trained with " + m.settings.normalize_features +
                         " (leave the option out)");
    return m;
  }
  auto [model, step] = read_checkpoint(opts.str("checkpoint"));
  model_settings s{model.config(), asked.empty() ? "none" : asked, step};
  return {s, std::move(model)};
}

// --partitions: every partition's shard in this process (an in-process cluster that evaluates
// once and trains no step), each writing OUT/part-K.
int infer_on_partitions(const option_set& opts, const loaded_model& m, std::int32_t layer) {
  if (opts.str("model").empty())
    throw config_error(
        "--partitions needs --model FILE (make one from a checkpoint with degnn export "
        "--checkpoint C --out M.safetensors)");
  for (const char* key : {"nodes", "batch-nodes", "cache-dir", "normalize-features"})
    if (opts.given(key))
      throw config_error(std::string("--") + key +
                         " applies to --data only (the partitions hold the features; the model "
                         "file names its input transform)");
  const model_config& c = m.model.config();
  const partition_meta meta = load_partition_meta(opts.str("partitions"));
  if (meta.num_features != c.in_dim || meta.num_classes != c.num_classes)
    throw config_error("the model (" + model_summary(c) + ") does not fit " +
                       opts.str("partitions") + " (" + std::to_string(meta.num_features) +
                       " features, " + std::to_string(meta.num_classes) + " classes)");
  train_settings s;
  s.partitions = opts.str("partitions");
  s.pipeline = "centralized";  // evaluation is the same in both; no history to set up
  s.parts = meta.num_parts;
  s.model.model = model_kind_name(c.kind);
  s.model.heads = c.heads;
  s.model.output_heads = c.output_heads;
  s.model.attention_dropout = c.attention_dropout;
  s.model.input_dropout = c.input_dropout;
  s.model.num_layers = c.num_layers;
  s.model.hidden = c.hidden;
  s.model.dropout = c.dropout;
  s.fanouts.assign(static_cast<std::size_t>(c.num_layers), 10);  // no step samples
  s.epochs = 0;
  s.init = opts.str("model");
  s.normalize_features = m.settings.normalize_features;
  s.predictions = opts.str("out");
  s.predictions_embeddings = layer;
  s.progress = false;
  resolve_batch_size(s, meta.num_parts);
  const dataset d = dataset_outline(meta);
  std::printf("infer: %s, %d partitions of %s, model %s\n", d.name.c_str(), meta.num_parts,
              s.partitions.c_str(), model_summary(c).c_str());
  stopwatch clock;
  training_report report(d.name + "/infer", "", false);
  const cluster_result r = train_cluster(s, d, report);
  const eval_result& e = *r.inference;
  std::printf("inference %.2f s on %d in-process shards, peak RSS %.0f MiB\n", clock.seconds(),
              meta.num_parts, peak_rss_mib());
  std::printf("accuracy from these predictions: train %.4f, valid %.4f, test %.4f\n", e.accuracy(0),
              e.accuracy(1), e.accuracy(2));
  std::printf(
      "wrote %s/part-{0..%d}/{node_ids,predictions,probabilities,logits%s}.npy and "
      "manifest.json\n",
      s.predictions.c_str(), meta.num_parts - 1, layer > 0 ? ",embeddings" : "");
  return 0;
}

}  // namespace

int run_infer(int argc, char** argv) {
  option_set opts(
      "infer",
      "degnn infer (--data DIR | --partitions DIR) (--model FILE | --checkpoint FILE) --out DIR "
      "[--embeddings L] [--nodes FILE]",
      {{"data", "", "dataset directory (OGB raw layout), the one the model was trained on"},
       {"partitions", "",
        "instead of --data: a partition set; each partition's shard (all in this process) "
        "writes OUT/part-K (needs --model)"},
       {"model", "", "a model file (degnn export, train --save-model)"},
       kCheckpointSpec,
       kNormalizeSpec,
       {"out", "",
        "output folder: node_ids, predictions, probabilities, logits [, embeddings] "
        ".npy and manifest.json (created; an earlier run's files are replaced)"},
       {"embeddings", "0",
        "also write the output of hidden layer L (1 .. layers-1) as embeddings.npy (0: none)"},
       {"nodes", "",
        "only these nodes: a text file of node ids (one per line) or a .npy int array "
        "(default: every node)"},
       {"batch-nodes", "8192", "destination nodes per block of the layer-wise pass"},
       {"cache-dir", "", "where dataset caches go (default ~/.cache/degnn)"}});
  if (!opts.parse(argc, argv, 0)) return 0;
  if (opts.str("data").empty() == opts.str("partitions").empty())
    throw config_error("give one of --data DIR and --partitions DIR");
  if (opts.str("out").empty()) throw config_error("--out DIR is required");
  loaded_model m = read_model(opts);
  const model_config& c = m.model.config();
  const auto layer = static_cast<std::int32_t>(opts.integer("embeddings", 0, c.num_layers - 1));
  if (!opts.str("partitions").empty()) return infer_on_partitions(opts, m, layer);
  stopwatch clock;
  dataset d = load_dataset(opts.str("data"), {.use_cache = true,
                                              .cache_path = {},
                                              .verbose = false,
                                              .cache_dir = opts.str("cache-dir"),
                                              .sparse_features = false});
  if (d.num_features() != c.in_dim || d.num_classes != c.num_classes)
    throw config_error("the model (" + model_summary(c) + ") does not fit " + opts.str("data") +
                       " (" + std::to_string(d.num_features()) + " features, " +
                       std::to_string(d.num_classes) + " classes)");
  apply_feature_transform(m.settings.normalize_features, d.features);
  std::vector<node_id> nodes;
  if (!opts.str("nodes").empty()) {
    nodes = read_node_list(opts.str("nodes"), d.num_nodes());
  } else {
    nodes.resize(static_cast<std::size_t>(d.num_nodes()));
    for (node_id v = 0; v < d.num_nodes(); ++v)
      nodes[static_cast<std::size_t>(v)] = v;
  }
  std::printf("infer: %s on %s (%d nodes), %zu nodes asked, model %s, step %llu\n", d.name.c_str(),
              opts.str("data").c_str(), d.num_nodes(), nodes.size(), model_summary(c).c_str(),
              static_cast<unsigned long long>(m.settings.step));
  const double load_s = clock.seconds();
  clock.reset();
  Matrix hidden;
  const auto batch = static_cast<node_id>(opts.integer("batch-nodes", 1, 1 << 24));
  // One line per layer: a large graph's pass takes minutes.
  stopwatch layer_clock;
  const layer_progress progress = [&](std::int32_t l, std::int32_t layers) {
    std::printf("infer: layer %d of %d done in %.2f s\n", l, layers, layer_clock.seconds());
    layer_clock.reset();
  };
  Matrix logits = layerwise_inference(m.model, d.graph, d.features, batch, layer - 1,
                                      layer > 0 ? &hidden : nullptr, progress);
  const double infer_s = clock.seconds();
  const bool every_node = opts.str("nodes").empty();
  std::string accuracies;
  if (every_node) {
    char line[160];
    std::snprintf(line, sizeof line,
                  "accuracy from these predictions: train %.4f, valid %.4f, test %.4f\n",
                  accuracy(logits, d.labels, d.train), accuracy(logits, d.labels, d.valid),
                  accuracy(logits, d.labels, d.test));
    accuracies = line;
  }
  clock.reset();
  // Every node in order: the matrices are the outputs (no copy of a (nodes, hidden) matrix).
  if (!every_node) {
    logits = rows_of(logits, nodes);
    if (layer > 0) hidden = rows_of(hidden, nodes);
  }
  const prediction_outputs out{nodes, &logits, layer > 0 ? &hidden : nullptr, layer};
  const std::string source = opts.str("model").empty() ? opts.str("checkpoint") : opts.str("model");
  write_predictions(opts.str("out"), out,
                    {{"format", "degnn-inference 1"},
                     {"dataset", fs::absolute(opts.str("data")).string()},
                     {"model_source", fs::absolute(source).string()},
                     {"model", model_summary(c)},
                     {"normalize_features", m.settings.normalize_features},
                     {"step", std::to_string(m.settings.step)}});
  std::printf("inference %.2f s (loading %.2f s, writing %.2f s), peak RSS %.0f MiB\n", infer_s,
              load_s, clock.seconds(), peak_rss_mib());
  std::fputs(accuracies.c_str(), stdout);
  std::printf("wrote %s/{node_ids,predictions,probabilities,logits%s}.npy and manifest.json\n",
              opts.str("out").c_str(), layer > 0 ? ",embeddings" : "");
  return 0;
}

int run_export(int argc, char** argv) {
  option_set opts("export",
                  "degnn export --checkpoint FILE --out FILE.safetensors|FILE.npz [--format F]",
                  {kCheckpointSpec,
                   kNormalizeSpec,
                   {"out", "", "the model file to write (whole or not at all)"},
                   {"format", "",
                    "safetensors or npz (default: from --out's extension, .npz -> npz, else "
                    "safetensors)"}});
  if (!opts.parse(argc, argv, 0)) return 0;
  if (opts.str("checkpoint").empty()) throw config_error("--checkpoint FILE is required");
  if (opts.str("out").empty()) throw config_error("--out FILE is required");
  const fs::path out = opts.str("out");
  const model_format format =
      opts.str("format").empty()
          ? format_for(out)
          : (opts.choice("format", {"safetensors", "npz"}) == "npz" ? model_format::npz
                                                                    : model_format::safetensors);
  auto [model, step] = read_checkpoint(opts.str("checkpoint"));
  const std::string transform = opts.given("normalize-features")
                                    ? opts.choice("normalize-features", {"none", "row"})
                                    : "none";
  save_model_file(out, model, {model.config(), transform, step}, format);
  std::printf("wrote %s (%s, %s, step %llu, %zu parameters)\n", out.c_str(),
              format == model_format::npz ? "npz" : "safetensors",
              model_summary(model.config()).c_str(), static_cast<unsigned long long>(step),
              model.num_parameters());
  return 0;
}

}  // namespace degnn
