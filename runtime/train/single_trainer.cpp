// The single-process training loop: sample, gather inputs, train, step; exact evaluation.
#include "runtime/train/single_trainer.hpp"

#include <thread>

#include "model/batch_prefetcher.hpp"
#include "model/checkpoint.hpp"
#include "model/inference.hpp"
#include "model/model_file.hpp"
#include "model/prediction_files.hpp"
#include "model/sampler.hpp"
#include "runtime/process/config_error.hpp"
#include "runtime/process/process_stats.hpp"

namespace degnn {

std::uint64_t batches_per_epoch(std::span<const std::size_t> train_per_part, int batch_size) {
  std::uint64_t most = 0;
  for (auto n : train_per_part)
    most = std::max<std::uint64_t>(most, (n + batch_size - 1) / batch_size);
  return most;
}

namespace {

// --predictions in one process: every node's rows of this evaluation.
void write_all_predictions(const train_settings& s, const dataset& d, const Matrix& logits,
                           const Matrix& hidden) {
  std::vector<node_id> nodes(static_cast<std::size_t>(d.num_nodes()));
  for (node_id v = 0; v < d.num_nodes(); ++v)
    nodes[static_cast<std::size_t>(v)] = v;
  write_predictions(
      s.predictions,
      {nodes, &logits, s.predictions_embeddings > 0 ? &hidden : nullptr, s.predictions_embeddings},
      {{"format", "degnn-inference 1"}, {"dataset", d.name}});
}

}  // namespace

std::vector<float> train_single(const train_settings& s, const dataset& d, training_report& report,
                                const step_hook& on_step) {
  const std::size_t prefetch_depth = std::thread::hardware_concurrency() >= 4 ? 1 : 0;
  replica_config rc = s.model;
  rc.in_dim = d.num_features();
  rc.num_classes = d.num_classes;
  model_replica replica(rc);
  if (!s.resume.empty()) {
    checkpoint ck = load_checkpoint(s.resume);
    if (!(ck.model.config() == replica.model().config())) {
      throw config_error(s.resume +
                         ": checkpoint holds a different model than the options describe");
    }
    replica.model() = std::move(ck.model);
    replica.optimizer().set_state(ck.optimizer.state());
  }
  if (!s.init.empty()) init_from_model_file(replica.model(), s.init, s.normalize_features);
  const std::size_t train_count = d.train.size();
  const std::uint64_t nb = batches_per_epoch(std::span(&train_count, 1), s.batch_size);
  for (int epoch = 0; epoch < s.epochs; ++epoch) {
    epoch_record rec;
    rec.epoch = epoch + 1;
    stopwatch epoch_clock;
    auto batches = make_batches(d.train, s.batch_size, s.seed, static_cast<std::uint64_t>(epoch));
    if (s.max_batches && batches.size() > s.max_batches) batches.resize(s.max_batches);
    // Batch i+1 is sampled (and compressed features gathered; dense ones are read in place by
    // the first layer) in the background while batch i trains, when there are cores to spare: on 2
    // cores the sampling thread only takes them from the kernels (bench train on synthetic-1M: 4.27
    // s prefetched against 3.30 s serial), so it prepares in turn.
    std::vector<batch_prefetcher::job> jobs;
    for (std::uint64_t i = 0; i < batches.size(); ++i)
      jobs.push_back({std::move(batches[i]), static_cast<std::uint64_t>(epoch) * nb + i});
    const std::uint64_t steps = jobs.size();
    // Dense features are not gathered: the first layer reads them in place (feature_table).
    batch_prefetcher prefetch(d, s.fanouts, s.seed, std::move(jobs), prefetch_depth,
                              /*gather_dense=*/false);
    double loss_sum = 0;
    std::uint64_t correct = 0;
    for (std::uint64_t i = 0; i < steps; ++i) {
      const std::uint64_t step = static_cast<std::uint64_t>(epoch) * nb + i;
      stopwatch clock;
      const prepared_batch p = prefetch.next();
      rec.sample_s += clock.seconds();  // waiting: the part of preparing not hidden by compute
      rec.prepare_s += p.prepare_s;
      clock.reset();
      const std::uint64_t dropout_seed = step_dropout_seed(s.seed, step);
      const step_stats st =
          d.sparse_features
              ? replica.train_step(p.batch, p.xs, p.labels, dropout_seed)
              : replica.train_step(p.batch, feature_table{&d.features}, p.labels, dropout_seed);
      replica.apply_own_gradient();
      rec.compute_s += clock.seconds();
      loss_sum += st.loss_sum;
      correct += st.correct;
      rec.seeds += st.seeds;
      ++rec.steps;
      if (on_step) on_step(step, st.seeds ? st.loss_sum / st.seeds : 0.0);
      report.batch_progress(rec.epoch, i + 1, steps, rec.seeds ? loss_sum / rec.seeds : 0,
                            rec.seeds / std::max(1e-9, epoch_clock.seconds()));
    }
    rec.loss = rec.seeds ? loss_sum / rec.seeds : 0;
    rec.train_acc = rec.seeds ? static_cast<double>(correct) / rec.seeds : 0;
    rec.epoch_s = epoch_clock.seconds();
    // Sampling and the feature gather: in turn, or in the background (prepare_s), where what the
    // loop waited for them is the first part.
    rec.split = {{prefetch_depth == 0 ? "sample+gather" : "waiting for batches", rec.sample_s},
                 {"compute", rec.compute_s},
                 {"other", std::max(0.0, rec.epoch_s - rec.sample_s - rec.compute_s)}};
    if (s.eval_every > 0 && ((epoch + 1) % s.eval_every == 0 || epoch + 1 == s.epochs)) {
      stopwatch clock;
      Matrix hidden;
      const std::int32_t keep = s.predictions_embeddings - 1;  // -1: none
      Matrix logits = d.sparse_features
                          ? layerwise_inference(replica.model(), d.graph, *d.sparse_features, 8192,
                                                keep, keep >= 0 ? &hidden : nullptr)
                          : layerwise_inference(replica.model(), d.graph, d.features, 8192, keep,
                                                keep >= 0 ? &hidden : nullptr);
      rec.evaluated = true;
      rec.eval_train_acc = accuracy(logits, d.labels, d.train);
      rec.valid_acc = accuracy(logits, d.labels, d.valid);
      rec.test_acc = accuracy(logits, d.labels, d.test);
      if (!s.predictions.empty()) write_all_predictions(s, d, logits, hidden);
      rec.eval_s = clock.seconds();
    }
    if (report.epoch_done(rec) && !s.checkpoint.empty()) {
      save_checkpoint(s.checkpoint, replica.model(), replica.optimizer());
    }
  }
  return replica.parameters();
}

}  // namespace degnn
