// Training on an in-process cluster: a batch actor, a shard and an embedding store per partition in
// one CAF actor system, driven by the coordinator. The same actors run across processes (degnn
// node).
#pragma once

#include <optional>
#include <vector>

#include "actors/coordinator.hpp"
#include "actors/worker_settings.hpp"
#include "model/dataset.hpp"
#include "runtime/train/single_trainer.hpp"
#include "runtime/train/status_board.hpp"
#include "runtime/train/train_settings.hpp"
#include "runtime/train/training_report.hpp"

namespace degnn {

class partition_book;

struct cluster_result {
  std::vector<float> parameters;   ///< replica 0 after training
  bool replicas_identical = true;  ///< every replica held the same parameters after every epoch
  cluster_traffic traffic;         ///< whole run, training and evaluation
  std::vector<std::uint64_t> epoch_bytes;            ///< training bytes per epoch
  std::vector<std::uint64_t> epoch_allreduce_bytes;  ///< of which gradient all-reduce
  std::uint64_t init_bytes = 0;                      ///< decentralized: history initialisation
  double init_s = 0;                                 ///< decentralized: its time
  int parts = 0;                                     ///< partitions (workers) of the run
  /// In-process runs under a fault policy: messages damaged, sent again and duplicated.
  std::uint64_t faults_corrupted = 0, faults_retried = 0, faults_duplicated = 0, faults_delayed = 0;
  std::uint64_t recoveries = 0;  ///< degnn node --recover adopt: members lost and replaced
  /// An inference run (--epochs 0, degnn infer): its one evaluation, no training.
  std::optional<eval_result> inference;
};

/// Partitions d (or loads s.partitions), spawns the cluster, trains. Throws on any failure.
cluster_result train_cluster(const train_settings& s, const dataset& d, training_report& report,
                             const step_hook& on_step = {});

/// The epoch loop over a wired cluster, shared by the in-process cluster and `degnn node`, from
/// global step first_step (a resumed run's; its replicas were restored at spawn). With
/// s.checkpoint_dir: a coordinated checkpoint at each epoch end (the last one waited for) and
/// every s.checkpoint_every steps of an epoch.
/// between_steps (the console's controls): called after every step; may block (a pause); says
/// whether a checkpoint is asked before the next step and a new staleness from it on.
using between_steps_hook = std::function<console_asks()>;
cluster_result drive_training(coordinator& coord, const train_settings& s, const replica_config& rc,
                              std::uint64_t batches_per_epoch, std::uint64_t first_step,
                              training_report& report, const step_hook& on_step,
                              const between_steps_hook& between_steps = {});

/// Node 0's last line, a JSON summary for scripts and the node tests: replica agreement,
/// accuracy, the run's traffic by kind, refusals and the per-step losses.
void print_node_summary(const cluster_result& result, const training_report& report,
                        const std::vector<double>& step_losses);

/// The workers' actors' settings for a training run.
worker_settings make_worker_settings(const train_settings& s);

/// A cluster id both sides of a run can compute from what they share (dataset name and seed).
std::uint64_t cluster_id_for(const std::string& dataset_name, std::uint64_t seed);

/// The run id an in-process cluster's commit records carry: the one a `degnn node` cluster with
/// the same settings and partitions computes (cluster_identity::checkpoint_run_id).
std::uint64_t checkpoint_run_id_for(const train_settings& s, const std::string& dataset_name,
                                    const partition_book& book);

}  // namespace degnn
