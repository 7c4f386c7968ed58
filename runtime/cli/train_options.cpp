// Option schema and validation of the training settings.
#include "runtime/cli/train_options.hpp"

#include <filesystem>

#include "model/quantizer.hpp"
#include "runtime/cli/fault_options.hpp"

namespace degnn {

std::vector<option_spec> train_option_specs() {
  std::vector<option_spec> specs = {
      {"data", "data/pubmed", "dataset directory (OGB raw layout)"},
      {"partitions", "", "partition set made by `degnn partition` (default: partition in memory)"},
      {"cache-dir", "",
       "folder of the parsed-dataset cache (default $XDG_CACHE_HOME/degnn or ~/.cache/degnn)"},
      {"pipeline", "",
       "single (one process, no actors), centralized (DistDGL-style) or decentralized; "
       "default single for --parts 1, centralized otherwise"},
      {"parts", "1", "number of partitions / workers of the in-process cluster"},
      {"partition-method", "metis", "metis or random, when partitioning in memory"},
      {"model", "sage", "sage (GraphSAGE-mean), gcn or gat (graph attention)"},
      {"heads", "8", "gat: attention heads of each hidden layer (they divide --hidden)"},
      {"output-heads", "1", "gat: attention heads of the last layer, averaged"},
      {"attention-dropout", "0.6", "gat: drop probability of each attention weight in training"},
      {"input-dropout", "0",
       "gat: drop probability of each input feature in training (the GAT "
       "paper's 0.6 measured no better on the bundled graphs)"},
      {"layers", "2", "number of GNN layers"},
      {"fanouts", "10,25", "sampled in-neighbours per layer, seed-first (-1 = all)"},
      // The defaults are configs/pubmed_sage.conf (the default --data): a bare `degnn train`
      // gives that config's accuracy. Large graphs want larger batches (e.g. --batch-size 1024).
      {"hidden", "256", "hidden width"},
      {"epochs", "50", "training epochs"},
      {"batch-size", "32", "seeds per mini-batch and worker (large graphs: e.g. 1024)"},
      {"global-batch-size", "",
       "seeds per step over all workers (each takes B / workers), instead of --batch-size: the "
       "same number of updates per epoch whatever the number of parts"},
      {"lr", "0.005", "Adam learning rate"},
      {"weight-decay", "0.005", "L2 weight decay"},
      {"dropout", "0.6", "dropout between layers"},
      {"normalize-features", "none",
       "none, or row: divide each node's features by their sum (raw counts otherwise start the "
       "loss far above ln(classes))"},
      {"sparse-features", "false",
       "keep the input features as compressed rows and run the first layer on them; in a "
       "cluster they also travel compressed (bag-of-words graphs: much faster and smaller when "
       "most entries are zero)",
       true},
      {"partition-in-memory", "false",
       "with a partition set (--partitions): read each part's feature rows into memory "
       "instead of mapping its file (mapped, a process holds the rows it touches; the page "
       "cache keeps the rest)",
       true},
      {"seed", "1", "seed of initialisation, batching, sampling and dropout"},
      {"eval-every", "1",
       "evaluate (exact layer-wise inference) every N epochs, and after the last; 0 = never"},
      {"compare-with", "",
       "after training, run the other pipeline (centralized|decentralized) on the same "
       "partitions and seed and compare the bytes sent per epoch"},
      {"max-batches", "0",
       "stop each epoch after N steps (0 = all), for measurements on large graphs"},
      {"metrics", "", "append one JSON line per epoch to this file"},
      {"trace", "",
       "clusters: write every worker's pipeline stages to this Chrome trace event file "
       "(open in Perfetto or chrome://tracing)"},
      {"checkpoint", "", "write the best-validation model here"},
      {"init", "",
       "start from the weights of this model file (degnn export, --save-model, or PyTorch in the "
       "same layout, docs/model_use.md) with a fresh optimiser"},
      {"predictions", "",
       "write every node's predictions, probabilities and logits as .npy files at each "
       "evaluation (the last one stays): into DIR in one process, DIR/part-K per partition in a "
       "cluster (docs/model_use.md)"},
      {"embeddings", "0",
       "with --predictions: also write hidden layer L's output (1 .. layers-1) as "
       "embeddings.npy"},
      {"save-model", "",
       "write the final model to this file when training ends (safetensors; npz when the name "
       "ends in .npz)"},
      {"resume", "",
       "start from this checkpoint: a file (single), or a --checkpoint-dir folder (clusters: its "
       "newest committed checkpoint; steps, parameters and optimiser state)"},
      {"resume-step", "",
       "clusters, with --resume: start from the checkpoint before this step instead of the "
       "newest commit (each node reads its own copy)"},
      {"checkpoint-dir", "",
       "clusters: coordinated checkpoints of every replica into this folder (on each node its "
       "own), at each epoch end and every --checkpoint-every steps"},
      {"checkpoint-every", "0", "clusters: also checkpoint every N steps of an epoch (0 = no)"},
      {"no-progress", "false", "no live progress line", true},
      {"timeout", "120", "seconds any request between actors may take"},
      {"history-bits", "8",
       "decentralized: bits per historical embedding value: 32 (off), 16, 8, 4, 2"},
      {"history-setup", "exact",
       "decentralized: the pass that fills the history before the first step exchanges the "
       "halo rows of its hidden layers exact or quantized (at --history-bits; only 4+ layers "
       "have such rows)"},
      {"staleness", "1",
       "decentralized: a historical row used at step t was confirmed by its owner after step t-S"},
      {"halo-cache-mb", "",
       "clusters: MiB of halo rows (remote in-neighbours) each worker keeps, those it reads "
       "most under the fanouts; a step pulls the others it reads from their owners (counted "
       "bytes). Decentralized: feature and history rows (empty: every halo row); centralized: "
       "feature rows, kept as steps pull them (empty: none)"},
      {"fusion", "2",
       "decentralized CG fusion: 2 = nodes shared within a push and across a step's pushes "
       "computed once, 1 = within a push only, 0 = none"},
      {"stochastic-rounding", "false", "decentralized: quantize history with stochastic rounding",
       true},
      {"local-bias", "1",
       "decentralized: below 1, a shard's local expansion gives remote neighbours this fraction "
       "of their share of the fanout (importance-weighted, unbiased); 1 = uniform"},
      {"threads", "0",
       "OpenMP threads per worker (0: the cores divided among the in-process workers; all cores "
       "for degnn node)"},
      {"allreduce", "ring",
       "clusters: ring = the workers reduce the gradient among themselves (each link carries "
       "2(P-1)/P of it each way), star = through the coordinator on partition 0's node (its "
       "link carries P-1 gradients each way)"},
      {"no-overlap", "false",
       "decentralized: finish each step's all-reduce before the next step starts preparing "
       "(same results, no pipelining)",
       true},
  };
  for (auto& f : fault_option_specs())
    specs.push_back(std::move(f));
  return specs;
}

namespace {

// GAT's options (--heads and the rest), after --model, --hidden, --pipeline and
// --sparse-features: refused for the other models, checked against the run for GAT.
void read_attention_settings(const option_set& opts, train_settings& s) {
  if (s.model.model == "gat") {
    s.model.heads = static_cast<std::int32_t>(opts.integer("heads", 1, 1024));
    s.model.output_heads = static_cast<std::int32_t>(opts.integer("output-heads", 1, 1024));
    s.model.attention_dropout = static_cast<float>(opts.real("attention-dropout", 0, 0.99));
    s.model.input_dropout = static_cast<float>(opts.real("input-dropout", 0, 0.99));
    if (s.model.hidden % s.model.heads != 0)
      throw config_error("--heads " + std::to_string(s.model.heads) + " must divide --hidden " +
                         std::to_string(s.model.hidden) + " (the heads are concatenated)");
    if (s.pipeline == "decentralized" && s.model.num_layers == 1 && s.model.input_dropout > 0.0f)
      throw config_error(
          "--input-dropout with one layer and the decentralized pipeline: the push computes the "
          "last layer apart, which drops no input (use 2 layers or leave it at 0)");
  } else {
    for (const char* key : {"heads", "output-heads", "attention-dropout", "input-dropout"})
      if (opts.given(key))
        throw config_error(std::string("--") + key + " applies to --model gat only");
  }
  if (s.sparse_features && s.model.model == "gat" && s.model.input_dropout > 0.0f)
    throw config_error(
        "--input-dropout drops entries of dense rows; with --sparse-features "
        "leave it at 0");
}

}  // namespace

train_settings read_train_settings(const option_set& opts) {
  train_settings s;
  s.data = opts.str("data");
  s.partitions = opts.str("partitions");
  s.cache_dir = opts.str("cache-dir");
  s.parts = static_cast<int>(opts.integer("parts", 1, 4096));
  s.partition_method = opts.choice("partition-method", {"metis", "random"});
  if (opts.str("pipeline").empty()) {
    s.pipeline = s.parts == 1 && s.partitions.empty() ? "single" : "centralized";
  } else {
    s.pipeline = opts.choice("pipeline", {"single", "centralized", "decentralized"});
  }
  if (s.pipeline == "single" && s.parts != 1) {
    throw config_error("--pipeline single trains in one process: it takes no --parts (got " +
                       std::to_string(s.parts) + ")");
  }
  s.model.model = opts.choice("model", {"sage", "gcn", "gat"});
  s.model.num_layers = static_cast<std::int32_t>(opts.integer("layers", 1, 16));
  s.model.hidden = static_cast<std::int32_t>(opts.integer("hidden", 1, 1 << 16));
  s.model.lr = static_cast<float>(opts.real("lr", 0, 10));
  s.model.weight_decay = static_cast<float>(opts.real("weight-decay", 0, 10));
  s.model.dropout = static_cast<float>(opts.real("dropout", 0, 0.99));
  s.normalize_features = opts.choice("normalize-features", {"none", "row"});
  s.sparse_features = opts.flag("sparse-features");
  read_attention_settings(opts, s);
  s.partition_in_memory = opts.flag("partition-in-memory");
  s.seed = static_cast<std::uint64_t>(opts.integer("seed", 0));
  s.model.seed = s.seed;
  s.fanouts = opts.int_list("fanouts");
  if (static_cast<int>(s.fanouts.size()) != s.model.num_layers) {
    throw config_error("--fanouts lists " + std::to_string(s.fanouts.size()) +
                       " values but --layers is " + std::to_string(s.model.num_layers) +
                       " (one fanout per layer, seed-first)");
  }
  for (int f : s.fanouts) {
    if (f == 0 || f < -1)
      throw config_error("--fanouts: each value must be positive or -1 (all), got " +
                         std::to_string(f));
  }
  s.epochs = static_cast<int>(opts.integer("epochs", 1, 1'000'000));
  s.batch_size = static_cast<int>(opts.integer("batch-size", 1, 1 << 24));
  if (opts.given("global-batch-size")) {
    if (opts.given("batch-size"))
      throw config_error("--global-batch-size and --batch-size: give one of them");
    s.global_batch_size = static_cast<int>(opts.integer("global-batch-size", 1, 1 << 30));
  }
  s.eval_every = static_cast<int>(opts.integer("eval-every", 0, 1'000'000));
  s.max_batches = static_cast<std::uint64_t>(opts.integer("max-batches", 0));
  s.metrics = opts.str("metrics");
  s.trace = opts.str("trace");
  s.checkpoint = opts.str("checkpoint");
  s.resume = opts.str("resume");
  s.init = opts.str("init");
  s.save_model = opts.str("save-model");
  s.predictions = opts.str("predictions");
  s.predictions_embeddings =
      static_cast<std::int32_t>(opts.integer("embeddings", 0, s.model.num_layers - 1));
  if (s.predictions_embeddings > 0 && s.predictions.empty())
    throw config_error("--embeddings writes with --predictions DIR only");
  if (!s.init.empty() && !s.resume.empty())
    throw config_error("--init and --resume: give one of them (--resume restores the weights too)");
  if (opts.given("resume-step")) {
    if (s.resume.empty() || s.pipeline == "single")
      throw config_error("--resume-step needs a cluster --resume folder (which checkpoint of it)");
    s.resume_step = static_cast<std::uint64_t>(opts.integer("resume-step", 0));
  }
  s.faults = read_fault_policy(opts);
  s.checkpoint_dir = opts.str("checkpoint-dir");
  s.checkpoint_every = static_cast<std::uint64_t>(opts.integer("checkpoint-every", 0));
  if (s.checkpoint_every > 0 && s.checkpoint_dir.empty())
    throw config_error("--checkpoint-every needs --checkpoint-dir (where to write them)");
  // An option the run would ignore is an error, not a surprise after training.
  if (s.pipeline != "decentralized") {
    for (const char* key : {"history-bits", "history-setup", "staleness", "fusion",
                            "stochastic-rounding", "local-bias", "no-overlap"}) {
      if (opts.given(key)) {
        throw config_error(std::string("--") + key +
                           " applies to the decentralized pipeline only (this run's pipeline is " +
                           s.pipeline + ")");
      }
    }
  }
  if (s.pipeline == "single") {
    for (const char* key :
         {"trace", "compare-with", "partition-method", "checkpoint-dir", "checkpoint-every",
          "allreduce", "faults-corrupt", "faults-duplicate", "faults-delay"}) {
      if (opts.given(key)) {
        throw config_error(std::string("--") + key +
                           " applies to clusters only (this run's pipeline is single)");
      }
    }
  }
  if (opts.given("compare-with") && opts.given("resume")) {
    throw config_error(
        "--compare-with trains the whole run again with the other pipeline, so its figures would "
        "not compare with a run resumed from --resume; leave one of them out");
  }
  if (s.sparse_features && s.pipeline == "decentralized" && s.model.num_layers < 2) {
    throw config_error(
        "--sparse-features with the decentralized pipeline needs at least 2 layers (a 1-layer "
        "model's partial sums are sums of feature rows, which travel dense)");
  }
  if (!s.partitions.empty() && s.pipeline == "single") {
    throw config_error(
        "--partitions needs a cluster pipeline (centralized or decentralized); "
        "--pipeline single trains on the whole --data in one process");
  }
  if (!s.partitions.empty() && opts.given("partition-method")) {
    throw config_error(
        "--partition-method is not used with --partitions (the set was cut by "
        "degnn partition already)");
  }
  // Refused here, before any work: otherwise the error would come only after training.
  for (const char* key : {"metrics", "trace", "checkpoint", "save-model"}) {
    const std::filesystem::path file = opts.str(key);
    if (file.empty() || !file.has_parent_path()) continue;
    if (!std::filesystem::is_directory(file.parent_path())) {
      throw config_error(std::string("--") + key + ": folder '" + file.parent_path().string() +
                         "' does not exist");
    }
  }
  if (!s.resume.empty() && s.pipeline != "single" && !std::filesystem::is_directory(s.resume)) {
    throw config_error("--resume " + s.resume + ": a " + s.pipeline +
                       " cluster resumes from a --checkpoint-dir folder, and this is none");
  }
  s.progress = !opts.flag("no-progress");
  s.timeout_s = static_cast<int>(opts.integer("timeout", 1, 86400));
  s.history_bits = static_cast<int>(opts.integer("history-bits", 2, 32));
  if (!quantizer::valid_bits(s.history_bits)) {
    throw config_error("--history-bits must be 32, 16, 8, 4 or 2, got " +
                       std::to_string(s.history_bits));
  }
  s.history_setup = opts.choice("history-setup", {"exact", "quantized"});
  s.allreduce = opts.choice("allreduce", {"ring", "star"});
  s.staleness = static_cast<int>(opts.integer("staleness", 1, 1'000'000));
  if (opts.given("halo-cache-mb") && s.pipeline == "single")
    throw config_error("--halo-cache-mb applies to clusters (a single process has no halo)");
  if (opts.given("halo-cache-mb"))
    s.halo_cache_bytes = opts.integer("halo-cache-mb", 0, std::int64_t{1} << 30) << 20;
  s.fusion = static_cast<int>(opts.integer("fusion", 0, 2));
  s.stochastic_rounding = opts.flag("stochastic-rounding");
  s.overlap = !opts.flag("no-overlap");
  s.threads = static_cast<int>(opts.integer("threads", 0, 1024));
  s.local_bias = opts.real("local-bias", 0.01, 1);
  if (s.local_bias < 1 && s.model.model != "sage") {
    // The stratified picks carry importance weights that only the weighted GraphSAGE mean uses.
    throw config_error("--local-bias below 1 needs --model sage (GCN would ignore its weights)");
  }
  return s;
}

}  // namespace degnn
