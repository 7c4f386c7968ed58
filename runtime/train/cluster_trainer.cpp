// In-process cluster wiring and the coordinator-driven epoch loop.
#include "runtime/train/cluster_trainer.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "actors/coordinator.hpp"
#include "actors/faults/fault_report.hpp"
#include "actors/reports.hpp"
#include "model/checkpoint.hpp"
#include "model/durable_file.hpp"
#include "model/feature_transform.hpp"
#include "model/partition_store.hpp"
#include "model/partitioner.hpp"
#include "model/sampler.hpp"
#include "runtime/process/compute_threads.hpp"
#include "runtime/process/config_error.hpp"
#include "runtime/process/process_stats.hpp"
#include "runtime/process/progress_ticker.hpp"
#include "runtime/train/actor_table.hpp"
#include "runtime/train/cluster_identity.hpp"
#include "runtime/train/cluster_resume.hpp"
#include "runtime/train/worker_actors.hpp"

namespace degnn {

namespace fs = std::filesystem;

std::uint64_t cluster_id_for(const std::string& dataset_name, std::uint64_t seed) {
  std::uint64_t h = mix64(seed);
  for (unsigned char c : dataset_name)
    h = mix64(h ^ c);
  return h;
}

// The same settings and the same partitions are the same run, in-process or as `degnn node`s.
std::uint64_t checkpoint_run_id_for(const train_settings& s, const std::string& dataset_name,
                                    const partition_book& book) {
  return identity_of(s, {.dataset_name = dataset_name,
                         .num_parts = book.num_parts(),
                         .owner_checksum = owner_checksum(book.owners())})
      .checkpoint_run_id();
}

worker_settings make_worker_settings(const train_settings& s) {
  return worker_settings{
      .decentralized = s.pipeline == "decentralized",
      .fanouts = s.fanouts,
      .batch_size = s.batch_size,
      .seed = s.seed,
      .timeout = std::chrono::milliseconds(1000LL * s.timeout_s),
      .history_bits = s.history_bits,
      .setup = s.history_setup == "quantized" ? history_setup::quantized : history_setup::exact,
      .max_row_payload_bytes = s.max_row_payload_bytes,
      .evaluation_range = s.evaluation_range,
      .stochastic_rounding = s.stochastic_rounding,
      .staleness = s.staleness,
      .halo_cache_bytes = s.halo_cache_bytes,
      .fusion = s.fusion,
      .local_bias = s.local_bias,
      .trace = !s.trace.empty(),
      .checkpoint_dir = s.checkpoint_dir,
      .predictions_dir = s.predictions,
      .predictions_embeddings = s.predictions_embeddings,
      .faults = s.faults};
}

namespace {

// History starts from one layer-wise inference pass of its levels before the first step (also
// after a resume: the history is not checkpointed, this pass rebuilds it from the parameters).
void set_up_history(coordinator& coord, const train_settings& s, const replica_config& rc,
                    std::uint64_t first_step, cluster_result& result) {
  stopwatch clock;
  const std::uint64_t before = coord.traffic().sent.total_bytes();
  {
    const progress_ticker ticker("history set-up", std::chrono::seconds(30));
    coord.init_history(rc.num_layers, first_step);
  }
  result.init_bytes = coord.traffic().sent.total_bytes() - before;
  result.init_s = clock.seconds();
  // Only a set-up with hidden layers (4+ layers) has rows to quantize.
  const bool quantized =
      s.history_setup == "quantized" && rc.num_layers >= 4 && s.history_bits < 32;
  std::printf("history set up (%s) in %.2f s (%.2f MB)\n",
              quantized ? "inference, hidden halo rows quantized" : "exact inference",
              result.init_s, static_cast<double>(result.init_bytes) / 1e6);
}

/// A trace the console started: where it goes and from which step.
struct console_trace {
  std::string file;
  std::uint64_t from = 0;
};

// What the console asked between two steps, after global step `step` (step `i` of the epoch's
// `steps`): a staleness, a trace stopped or started, a checkpoint before the next step.
void carry_out(const console_asks& asks, coordinator& coord, const train_settings& s,
               console_trace& trace, std::uint64_t step, std::uint64_t i, std::uint64_t steps,
               std::uint64_t epoch_end) {
  if (asks.staleness) {
    coord.set_staleness(*asks.staleness);
    std::printf("staleness %d set from the console: from step %llu on\n", *asks.staleness,
                static_cast<unsigned long long>(step + 1));
  }
  // A stop first: a start asked right after it is for a new trace.
  if (asks.trace_stop && !trace.file.empty()) {
    const std::string json = coord.chrome_trace();
    coord.set_tracing(false);
    try {
      write_file_durably(trace.file, json);
      std::printf("trace of steps %llu to %llu written to %s (%.1f MB)\n",
                  static_cast<unsigned long long>(trace.from),
                  static_cast<unsigned long long>(step), trace.file.c_str(),
                  static_cast<double>(json.size()) / 1e6);
    } catch (const std::exception& e) {  // the training goes on
      std::fprintf(stderr, "the console's trace was not written: %s\n", e.what());
    }
    trace.file.clear();
  }
  if (!asks.trace_start.empty()) {
    coord.set_tracing(true);
    trace.file = asks.trace_start;
    trace.from = step + 1;
    std::printf("trace asked from the console: the steps from %llu on, into %s\n",
                static_cast<unsigned long long>(step + 1), trace.file.c_str());
  }
  if (asks.checkpoint)
    std::printf("checkpoint asked from the console: taken before step %llu\n",
                static_cast<unsigned long long>(i + 1 < steps ? step + 1 : epoch_end));
  // Not at the epoch's last step: the epoch end checkpoints anyway.
  if (!s.checkpoint_dir.empty() && i + 1 < steps &&
      (asks.checkpoint || (s.checkpoint_every > 0 && (i + 1) % s.checkpoint_every == 0)))
    coord.checkpoint(step + 1, false);
}

/// What the coordinator and the workers counted, at an epoch's start and end.
struct epoch_counts {
  coordinator_status status;
  cluster_traffic totals;
};

// The epoch's split of the coordinator's wall time and the workers' stage figures (means over
// the `parts` workers, and the slowest worker's recent median and p95 per stage).
void record_split(epoch_record& rec, const epoch_counts& before, const epoch_counts& after,
                  const cluster_report& actors_now, const train_settings& s, double parts) {
  // Only step phases running, only an all-reduce (decentralized: with the shards' backward
  // feeding it), both at once (pipelined), and the rest (the driver between commands).
  // Sampling and compute are the workers' means inside.
  auto wall_s = [&](std::uint64_t coordinator_status::*field) {
    return static_cast<double>(after.status.*field - before.status.*field) / 1e6;
  };
  const double steps_s = wall_s(&coordinator_status::steps_only_us);
  const double reduce_s = wall_s(&coordinator_status::allreduce_only_us);
  rec.overlap_s = wall_s(&coordinator_status::overlap_us);
  // A centralized step's ring all-reduce runs inside the step phase (the workers reduce before
  // they answer): the split says so, and the all-reduce figure is the workers' mean.
  const bool ring_in_steps = s.allreduce == "ring" && s.pipeline != "decentralized";
  const double between = std::max(0.0, rec.epoch_s - steps_s - reduce_s - rec.overlap_s);
  if (ring_in_steps)
    rec.split = {{"steps with ring all-reduce", steps_s}, {"between", between}};
  else
    rec.split = {{"steps", steps_s},
                 {"all-reduce", reduce_s},
                 {"overlapped", rec.overlap_s},
                 {"between", between}};
  auto stage_s = [&](std::initializer_list<stage> which) {
    double us = 0;
    for (stage k : which)
      us += static_cast<double>(after.totals.stage_us[static_cast<size_t>(k)] -
                                before.totals.stage_us[static_cast<size_t>(k)]);
    return us / 1e6 / parts;
  };
  rec.sample_s = stage_s({stage::sample});
  rec.compute_s =
      stage_s({stage::top_layer, stage::expand, stage::forward, stage::backward, stage::compute});
  rec.allreduce_s =
      ring_in_steps ? stage_s({stage::allreduce}) : wall_s(&coordinator_status::allreduce_us);
  for (int k = 0; k < kNumStages; ++k) {
    const auto which = static_cast<stage>(k);
    if (which == stage::step_phase) continue;  // the coordinator's
    const double per_step =
        stage_s({which}) / static_cast<double>(std::max<std::uint64_t>(1, rec.steps));
    if (per_step > 0) rec.stage_per_step_s.emplace_back(stage_name(which), per_step);
  }
  // Each figure maximised separately over the worker actors.
  std::array<std::uint64_t, 2 * kNumStages> slowest{};
  for (const auto& counts : actors_now.per_actor) {
    const parsed_report r = parse_report(counts);
    for (size_t i = 0; i < slowest.size(); ++i)
      slowest[i] = std::max(slowest[i], r.stage_spread_us[i]);
  }
  for (int k = 0; k < kNumStages; ++k) {
    const auto median = static_cast<double>(slowest[2 * static_cast<size_t>(k)]) / 1e6;
    const auto p95 = static_cast<double>(slowest[2 * static_cast<size_t>(k) + 1]) / 1e6;
    if (p95 > 0) rec.stage_recent.push_back({stage_name(static_cast<stage>(k)), median, p95});
  }
  if (s.pipeline == "decentralized") {
    const compute_counters w = after.totals.work - before.totals.work;
    rec.rows_pulled = w.rows_pulled;
    rec.work_json = "{\"nodes\":" + std::to_string(w.nodes) +
                    ",\"edges\":" + std::to_string(w.edges) +
                    ",\"kernel_calls\":" + std::to_string(w.kernel_calls) +
                    ",\"graphs\":" + std::to_string(w.graphs) +
                    ",\"rows_pulled\":" + std::to_string(w.rows_pulled) + "}";
  }
}

// The epoch's bytes by message kind (training only: before its evaluation and checkpoint).
void record_traffic(epoch_record& rec, const wire::traffic& before, const wire::traffic& after,
                    cluster_result& result) {
  wire::traffic epoch_kinds;
  for (int k = 0; k < wire::kNumKinds; ++k) {
    epoch_kinds.bytes[k] = after.bytes[k] - before.bytes[k];
    epoch_kinds.messages[k] = after.messages[k] - before.messages[k];
  }
  rec.bytes = after.total_bytes() - before.total_bytes();
  rec.bytes_by_kind_json = epoch_kinds.bytes_json();
  result.epoch_bytes.push_back(rec.bytes);
  result.epoch_allreduce_bytes.push_back(
      epoch_kinds.bytes[static_cast<int>(wire::kind::allreduce_chunk)]);
}

}  // namespace

cluster_result drive_training(coordinator& coord, const train_settings& s, const replica_config& rc,
                              std::uint64_t nb, std::uint64_t first_step, training_report& report,
                              const step_hook& on_step, const between_steps_hook& between_steps) {
  cluster_result result;
  if (s.epochs == 0) {  // inference: one exact evaluation of the starting parameters, no step
    result.inference = coord.evaluate(rc.num_layers, first_step);
    return result;
  }
  if (first_step >= static_cast<std::uint64_t>(s.epochs) * nb) {
    throw config_error("the checkpoint resumes at step " + std::to_string(first_step) +
                       ", after the last step of " + std::to_string(s.epochs) + " epochs of " +
                       std::to_string(nb) + " steps: nothing to train (raise --epochs)");
  }
  const bool decentralized = s.pipeline == "decentralized";
  if (decentralized) set_up_history(coord, s, rc, first_step, result);
  if (!s.trace.empty()) coord.keep_spans();
  coord.set_pipelined(decentralized && s.overlap);
  coord.set_ring(s.allreduce == "ring");
  std::optional<cluster_report> actors_before = coord.report();  ///< per actor, the baseline
  cluster_traffic totals_before = actors_before->traffic();
  const auto parts = static_cast<double>(std::max<size_t>(1, coord.num_parts()));
  const auto first_epoch = static_cast<int>(first_step / nb);
  // The best validation epoch is the whole run's: a resumed process takes the evaluated epochs
  // before its commit from the run it resumes; a rollback inside the run forgets those after it.
  const fs::path validation_file = fs::path(s.checkpoint_dir) / kValidationFileName;
  if (!s.checkpoint_dir.empty()) {
    std::error_code ec;  // a folder that cannot be made fails the first write, naming it
    fs::create_directories(s.checkpoint_dir, ec);
  }
  if (!s.resume.empty() && report.history().empty())
    report.restore(read_validation_history(fs::path(s.resume) / kValidationFileName, first_epoch));
  report.rewind(first_epoch);
  console_trace trace;
  for (int epoch = first_epoch; epoch < s.epochs; ++epoch) {
    epoch_record rec;
    rec.epoch = epoch + 1;
    if (epoch == first_epoch) {  // a resumed run sets its history up again
      rec.setup_bytes = result.init_bytes;
      rec.setup_s = result.init_s;
    }
    const std::uint64_t epoch_end = static_cast<std::uint64_t>(epoch + 1) * nb;
    stopwatch epoch_clock;
    const epoch_counts before{coord.status(), totals_before};
    double loss_sum = 0;
    std::uint64_t correct = 0;
    const std::uint64_t steps = s.max_batches ? std::min(nb, s.max_batches) : nb;
    for (std::uint64_t i = epoch == first_epoch ? first_step % nb : 0; i < steps; ++i) {
      const std::uint64_t step = static_cast<std::uint64_t>(epoch) * nb + i;
      const step_result r =
          decentralized ? coord.step_decentralized(static_cast<std::uint32_t>(epoch), i, step)
                        : coord.step(static_cast<std::uint32_t>(epoch), i, step);
      loss_sum += r.loss_sum;
      correct += r.correct;
      rec.seeds += r.seeds;
      ++rec.steps;
      if (on_step) on_step(step, r.seeds ? r.loss_sum / static_cast<double>(r.seeds) : 0.0);
      report.batch_progress(rec.epoch, i + 1, steps, rec.seeds ? loss_sum / rec.seeds : 0,
                            rec.seeds / std::max(1e-9, epoch_clock.seconds()));
      carry_out(between_steps ? between_steps() : console_asks{}, coord, s, trace, step, i, steps,
                epoch_end);
    }
    coord.finish_steps();  // the epoch's last all-reduce belongs to it
    rec.epoch_s = epoch_clock.seconds();
    rec.loss = rec.seeds ? loss_sum / rec.seeds : 0;
    rec.train_acc = rec.seeds ? static_cast<double>(correct) / rec.seeds : 0;
    const cluster_report actors_now = coord.report();
    const epoch_counts after{coord.status(), actors_now.traffic()};
    rec.actors_json = actor_table_json(actors_now, actors_before ? &*actors_before : nullptr,
                                       rec.epoch_s, coord.num_parts());
    record_split(rec, before, after, actors_now, s, parts);
    record_traffic(rec, totals_before.sent, after.totals.sent, result);
    const auto params = coord.parameters(epoch_end);
    for (const auto& p : params)
      result.replicas_identical = result.replicas_identical && p == params.front();
    if (s.eval_every > 0 && ((epoch + 1) % s.eval_every == 0 || epoch + 1 == s.epochs)) {
      stopwatch clock;
      const eval_result ev = coord.evaluate(rc.num_layers, epoch_end);
      rec.evaluated = true;
      rec.eval_train_acc = ev.accuracy(0);
      rec.valid_acc = ev.accuracy(1);
      rec.test_acc = ev.accuracy(2);
      rec.eval_s = clock.seconds();
    }
    // The epoch-end checkpoint's messages count with the evaluation's, outside the epoch's bytes;
    // the run's last one is waited for, so a finished run has it committed. The validation
    // history first: a commit never lacks its epochs' (a line past the commit is ignored).
    if (!s.checkpoint_dir.empty()) {
      std::vector<validation_point> history = report.history();
      if (rec.evaluated) history.push_back({rec.epoch, rec.valid_acc, rec.test_acc});
      write_validation_history(validation_file, history);
      coord.checkpoint(epoch_end, epoch + 1 == s.epochs);
    }
    // The next epoch's baselines: after this one's evaluation and checkpoint.
    actors_before = coord.report();
    totals_before = actors_before->traffic();
    rec.eval_bytes = totals_before.sent.total_bytes() - after.totals.sent.total_bytes();
    if (report.epoch_done(rec) && !s.checkpoint.empty()) {
      // Parameters of replica 0 (all replicas agree); the optimiser state stays with the workers.
      model_replica snapshot(rc);
      snapshot.set_parameters(params.front());
      save_checkpoint(s.checkpoint, snapshot.model(), snapshot.optimizer());
    }
    result.parameters = params.front();
  }
  result.traffic = coord.traffic();
  if (!s.trace.empty()) {
    const std::string json = coord.chrome_trace();
    write_file_durably(s.trace, json);
    std::printf("trace of the pipeline stages written to %s (%.1f MB)\n", s.trace.c_str(),
                static_cast<double>(json.size()) / 1e6);
  }
  return result;
}

void print_node_summary(const cluster_result& result, const training_report& report,
                        const std::vector<double>& step_losses) {
  std::printf(
      "{\"node_summary\":true,\"replicas_identical\":%s,\"test_acc\":%.6f,\"valid_acc\":%.6f,"
      "\"bytes\":%llu,"
      "\"bytes_by_kind\":%s,\"rejected\":%llu,\"recoveries\":%llu,\"step_losses\":[",
      result.replicas_identical ? "true" : "false", report.test_at_best(), report.best_valid(),
      static_cast<unsigned long long>(result.traffic.sent.total_bytes()),
      result.traffic.sent.bytes_json().c_str(),
      static_cast<unsigned long long>(result.traffic.rejected),
      static_cast<unsigned long long>(result.recoveries));
  for (size_t i = 0; i < step_losses.size(); ++i)
    std::printf("%s%.9g", i ? "," : "", step_losses[i]);
  std::printf("]}\n");
  std::fflush(stdout);
}

cluster_result train_cluster(const train_settings& s, const dataset& d, training_report& report,
                             const step_hook& on_step) {
  // -- partitions: from disk, or cut in memory --
  std::shared_ptr<const partition_book> book;
  std::vector<std::shared_ptr<const graph_partition>> parts;
  if (!s.partitions.empty()) {
    const partition_meta meta = load_partition_meta(s.partitions);
    if (meta.num_nodes != d.num_nodes()) {
      throw config_error(s.partitions + " was cut from a graph of " +
                         std::to_string(meta.num_nodes) + " nodes, but " + s.data + " has " +
                         std::to_string(d.num_nodes()));
    }
    book = std::make_shared<partition_book>(load_partition_book(s.partitions));
    for (int p = 0; p < meta.num_parts; ++p) {
      // Files hold the raw features, in the layout the set was cut with; d's were transformed
      // by the caller.
      auto part = std::make_shared<graph_partition>(load_partition(
          s.partitions, p,
          part_loading_for(s.partition_in_memory, s.sparse_features, s.normalize_features)));
      apply_feature_settings(*part, s.sparse_features, s.normalize_features);
      parts.push_back(std::move(part));
    }
  } else {
    stopwatch clock;
    auto owner = partition_graph(d.graph, d.train, s.parts,
                                 parse_partition_method(s.partition_method), s.seed);
    book = std::make_shared<partition_book>(std::move(owner), s.parts);
    for (int p = 0; p < s.parts; ++p)
      parts.push_back(std::make_shared<graph_partition>(extract_partition(d, *book, p)));
    std::printf("partitioned into %d parts with %s in %.2f s\n", s.parts,
                s.partition_method.c_str(), clock.seconds());
  }
  replica_config rc = s.model;
  rc.in_dim = d.num_features();
  rc.num_classes = d.num_classes;
  const wire::context ctx{.cluster_id = cluster_id_for(d.name, s.seed)};
  worker_settings ws = make_worker_settings(s);
  ws.run_id = checkpoint_run_id_for(s, d.name, *book);
  check_fault_links(s.faults.get(), book->num_parts());
  const cluster_start start = load_cluster_start(s, rc, ws.run_id, book->num_parts());
  ws.start = start.state;
  // Every shard is in this process: halo caches read the owners' feature rows instead of copies.
  ws.shared_parts =
      std::make_shared<const std::vector<std::shared_ptr<const graph_partition>>>(parts);

  caf::actor_system_config cfg;
  // The in-process workers share this machine's cores.
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  use_compute_threads(cfg, s.threads > 0 ? s.threads : std::max(1, cores / book->num_parts()));
  add_actor_types(cfg);
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  std::vector<worker_actors> workers;
  cluster_handles handles;
  std::vector<std::size_t> train_sizes;
  for (const auto& part : parts) {
    workers.push_back(spawn_worker(sys, part, book, rc, ws, ctx));
    handles.batchers.push_back(workers.back().batch);
    handles.shards.push_back(workers.back().shard);
    handles.stores.push_back(workers.back().store);
    train_sizes.push_back(part->train.size());
  }
  const peer_view view = handles.view();
  for (const auto& w : workers)
    send_view(self, w, view);
  auto stop_all = [&] {
    for (const auto& w : workers)
      stop_worker(self, w);
  };
  cluster_result result;
  try {
    coordinator coord(self.ptr(), handles.batchers, handles.shards, handles.stores, ctx,
                      ws.timeout);
    result = drive_training(coord, s, rc, batches_per_epoch(train_sizes, s.batch_size),
                            start.next_step, report, on_step);
  } catch (...) {
    stop_all();
    throw;
  }
  stop_all();
  result.parts = static_cast<int>(parts.size());
  result.faults_corrupted = ws.fault_counts->corrupted;
  result.faults_retried = ws.fault_counts->retried;
  result.faults_duplicated = ws.fault_counts->duplicated;
  result.faults_delayed = ws.fault_counts->delayed;
  if (auto line = fault_summary(s.faults.get(), *ws.fault_counts); !line.empty())
    std::printf("%s; the receivers refused %llu messages\n", line.c_str(),
                static_cast<unsigned long long>(result.traffic.rejected));
  if (!result.replicas_identical)
    throw std::runtime_error("replicas diverged: the all-reduce is broken");
  return result;
}

}  // namespace degnn
