// What a training run shows and records: a live progress line per epoch on a terminal, a summary
// line per epoch, JSON metrics lines, and the best-validation bookkeeping behind the final result.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/train/validation_history.hpp"

namespace degnn {

struct epoch_record {
  int epoch = 0;
  double loss = 0;         ///< mean training loss over the epoch's labelled seeds
  double train_acc = 0;    ///< on the training batches (with dropout)
  bool evaluated = false;  ///< exact inference ran this epoch
  double eval_train_acc = 0, valid_acc = 0, test_acc = 0;
  double epoch_s = 0;  ///< training only: evaluation is eval_s, after it
  /// Exclusive parts of epoch_s, in order, that add up to it (what the epoch line prints).
  std::vector<std::pair<std::string, double>> split;
  double sample_s = 0, compute_s = 0, eval_s = 0;  ///< clusters: means over the workers
  /// Clusters: each worker stage's mean seconds per step this epoch (means over the workers;
  /// stages that took no time are left out).
  std::vector<std::pair<std::string, double>> stage_per_step_s;
  /// Workers' stages over their last steps (stage_log::kRecentSteps): name, median and 95th
  /// percentile of the time per step, each the largest over the worker actors (separately).
  struct stage_spread {
    std::string name;
    double median_s = 0, p95_s = 0;
  };
  std::vector<stage_spread> stage_recent;
  double prepare_s = 0;    ///< one process: background sampling and gather (overlaps compute)
  double allreduce_s = 0;  ///< clusters: gradient phase and apply (coordinator wall time)
  double overlap_s = 0;    ///< clusters: time a step phase and an all-reduce ran at once
  std::string work_json;   ///< decentralized: {"nodes":...,"edges":...} computed this epoch
  std::string
      actors_json;  ///< clusters: every worker actor's counters (runtime/train/actor_table.hpp)
  std::uint64_t steps = 0, seeds = 0;
  std::uint64_t rows_pulled = 0;   ///< decentralized: historical rows received from other shards
  std::uint64_t bytes = 0;         ///< sent between nodes during the epoch (training, not eval)
  std::string bytes_by_kind_json;  ///< {"kind":bytes,...}
  std::uint64_t eval_bytes = 0;
  std::uint64_t setup_bytes = 0;  ///< one-time work before this epoch (decentralized history init)
  double setup_s = 0;             ///< its time
};

/// What a run took from its set-up to its last epoch, as the closing line shows it.
struct run_totals {
  int epochs = 0;
  double setup_s = 0, train_s = 0, eval_s = 0;
  std::uint64_t setup_bytes = 0, train_bytes = 0, eval_bytes = 0;
};

class training_report {
 public:
  /// metrics_file: empty for none. progress: live line on stderr when it is a terminal.
  training_report(std::string run_name, const std::string& metrics_file, bool progress);
  ~training_report();

  void batch_progress(int epoch, std::uint64_t done, std::uint64_t total, double loss,
                      double seeds_per_s);
  /// Prints the summary line and writes the metrics line (written, flushed and fsynced: a failed
  /// write, a full disk for one, throws naming the file); returns true when this is the best
  /// validation accuracy so far (the caller then checkpoints).
  bool epoch_done(const epoch_record& r);
  /// "test accuracy X at best validation epoch E" line, and for a cluster the end-to-end line:
  /// set-up plus epochs (plus evaluation), time and bytes.
  void finish();
  const run_totals& totals() const { return totals_; }
  /// Also hands every finished epoch to `f` (node 0's status board).
  void observe(std::function<void(const epoch_record&)> f) { observer_ = std::move(f); }

  /// A resumed run: the evaluated epochs before its first, as the run it resumes recorded them;
  /// they count for the best validation epoch as if this run had evaluated them.
  void restore(const std::vector<validation_point>& earlier);
  /// A rollback to the end of epoch `last_epoch`: the epochs after it are forgotten (they are
  /// trained and evaluated again).
  void rewind(int last_epoch);
  /// Every evaluated epoch so far, restored ones included.
  const std::vector<validation_point>& history() const { return history_; }

  double best_valid() const { return best_valid_; }
  double test_at_best() const { return test_at_best_; }
  int best_epoch() const { return best_epoch_; }

 private:
  /// Records an evaluated epoch; true when it is the best validation so far.
  bool take_validation(const validation_point& p);

  std::string run_;
  std::string metrics_file_;
  std::FILE* metrics_ = nullptr;
  bool live_ = false;
  double best_valid_ = -1, test_at_best_ = 0;
  int best_epoch_ = 0;
  std::vector<validation_point> history_;
  run_totals totals_;
  std::function<void(const epoch_record&)> observer_;
};

}  // namespace degnn
