// What node 0 shows about a running cluster to whoever asks (the HTTP endpoint today): the view,
// the phase, progress and traffic. The training loop writes, the server thread reads: every access
// takes the lock, and readers get text, never references into the board.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "actors/faults/link_faults.hpp"
#include "runtime/train/training_report.hpp"
#include "serialization/wire_membership.hpp"

namespace degnn {

/// What the console asked of the training loop, taken between two steps.
struct console_asks {
  bool checkpoint = false;
  std::optional<int> staleness;  ///< decentralized: the history staleness from the next step on
  std::string trace_start;       ///< a trace of the steps from the next one on, into this file
  bool trace_stop = false;       ///< write the trace started before and stop keeping spans
};

class status_board {
 public:
  status_board(std::string dataset, std::string pipeline, int epochs);

  /// "forming", "connecting", "training", "finished", "failed"; on a member that does not
  /// coordinate, "serving" (until it takes over)
  void set_phase(std::string phase);
  void set_view(const wire::membership_view& v);
  void set_steps_per_epoch(std::uint64_t n);
  void on_step(std::uint64_t step, double loss);
  /// After a step: the coordinator's wall-time totals (steps only, all-reduce only, both), whose
  /// growth since the last step the `stages` command shows over the last 100 steps.
  void on_step_times(std::uint64_t steps_only_us, std::uint64_t allreduce_only_us,
                     std::uint64_t overlap_us);
  /// The `stages` command's answer: median and 95th percentile over the last steps of the
  /// coordinator's step split, and the workers' mean time per step and stage in the last epoch.
  std::string stages_json() const;
  /// The `actors [RANK]` command's answer: every worker actor's counters at the last epoch end
  /// (those of RANK's partitions only, when given), with the node serving each; "" when the
  /// view has no such rank.
  std::string actors_json(int rank = -1) const;
  /// A recovery respawned every actor: a trace the console started is gone (true if one ran).
  bool drop_trace();
  void on_epoch(const epoch_record& r);

  // -- the operator's controls (console), applied by the training loop between steps --

  /// Whether `checkpoint` can be asked (the run has a --checkpoint-dir).
  void enable_checkpoints(bool on);
  /// Pause (true) or resume (false) at the next step boundary; false when already so.
  bool set_paused(bool paused);
  /// Asks for a checkpoint at the next step boundary; false when checkpoints are off.
  bool request_checkpoint();
  /// Decentralized runs: the history's bits and staleness (the `history` command shows them,
  /// `set staleness K` changes the staleness).
  void set_history(int bits, int staleness);
  /// Asks for staleness k from the next step boundary on; false when the run has no history.
  bool request_staleness(int k);
  /// Where the console's `trace start FILE` writes (empty: traces are refused, saying `why`).
  void enable_traces(std::string dir, std::string why_not = {});
  /// `trace start FILE` (a plain .json name, new in the trace folder) / `trace stop`: "" when
  /// taken for the next step boundary, else why not.
  std::string request_trace(bool start, const std::string& file);
  /// The `history` command's answer: bits, staleness, rows pulled in the last epoch and per step.
  std::string history_json() const;
  /// The training loop, between steps: waits while paused (the phase reads "paused"), calling
  /// `check` every second meanwhile (it throws when the cluster failed: a pause never hides a
  /// lost node); then what was asked meanwhile (the requests are taken).
  console_asks between_steps(const std::function<void()>& check);
  std::uint64_t view_id() const;
  /// Node 0 heard from member `rank` now, whose peak resident memory is peak_mib (`nodes`).
  void heard_from(int rank, double peak_mib);

  // -- fault injection (test runs) --

  /// Node 0's fault policy (null: none), its counters, and whether the console's fault commands
  /// (kill) are allowed: the cluster was started with --allow-faults.
  void set_faults(std::shared_ptr<const fault_policy> policy,
                  std::shared_ptr<const fault_counters> counts, bool commands_allowed);
  bool fault_commands_allowed() const;
  /// The partitions member `rank` serves in the current view (empty: no such member).
  std::vector<std::int32_t> partitions_of(int rank) const;
  /// The `faults` command's answer: what is allowed, node 0's policy and what it injected.
  std::string faults_json() const;

  /// The whole board as one JSON object (GET /status).
  std::string status_json() const;
  /// Prometheus text exposition format 0.0.4 (GET /metrics).
  std::string prometheus() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable resumed_;
  bool paused_ = false, checkpoint_asked_ = false, checkpoints_ = false;
  std::string dataset_, pipeline_, phase_ = "forming";
  int epochs_ = 0;
  wire::membership_view view_;
  std::uint64_t steps_per_epoch_ = 0, steps_ = 0, bytes_ = 0;
  double last_loss_ = 0;
  int epoch_ = 0;
  double epoch_loss_ = 0, train_acc_ = 0, valid_acc_ = -1, test_acc_ = -1, epoch_s_ = 0;
  double started_ = 0;  ///< steady-clock seconds at the first step
  double last_step_at_ = 0;
  std::shared_ptr<const fault_policy> faults_;
  std::shared_ptr<const fault_counters> fault_counts_;
  bool fault_commands_ = false;
  struct heard {
    double peak_mib = 0, at_s = 0;
  };
  std::map<int, heard> members_heard_;
  int history_bits_ = 0, staleness_ = 0;  ///< 0: no history (not decentralized)
  std::optional<int> staleness_asked_;
  std::string trace_dir_, trace_refusal_ = "start node 0 with --trace-dir DIR to take traces";
  std::string tracing_to_;  ///< the file a started trace goes to ("" when none runs)
  std::string trace_start_asked_;
  bool trace_stop_asked_ = false;
  std::uint64_t epoch_rows_pulled_ = 0, epoch_steps_ = 0;
  struct step_times {
    double wall_s, steps_only_s, allreduce_only_s, overlap_s;
  };
  std::deque<step_times> recent_steps_;  ///< the last 100
  std::uint64_t steps_only_us_ = 0, allreduce_only_us_ = 0, overlap_us_ = 0;
  double times_at_ = -1;                                       ///< when on_step_times last ran
  std::vector<std::pair<std::string, double>> worker_stages_;  ///< last epoch, s per step
  std::vector<epoch_record::stage_spread> worker_recent_;      ///< recent steps, slowest worker
  std::string actors_ = "[]";                                  ///< last epoch end's table
};

}  // namespace degnn
