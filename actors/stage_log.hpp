// Per-actor timeline of pipeline stages: running totals per stage (the epoch-time split in the
// metrics), each stage's time in each of the last steps (the console's percentiles) and, when
// tracing, the spans themselves for a Chrome trace event file (--trace).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace degnn {

enum class stage : std::uint8_t {
  sample,        ///< sampling: the owner's hop 0 (decentralized) or every hop with its waits
  push_wait,     ///< owner: pushes out until every partial sum is back
  top_layer,     ///< owner: top layer, loss and its backward
  grad_wait,     ///< owner: gradient returns out until every shard took them
  expand,        ///< shard: planning and local expansion of the step's sub-graphs
  history_pull,  ///< shard: waiting for stale historical rows
  forward,       ///< shard: local layers forward
  backward,      ///< shard: local layers backward (at the gradient phase)
  feature_pull,  ///< centralized: waiting for remote input features
  compute,       ///< centralized: forward and backward of the batch
  weights_wait,  ///< decentralized: prepared work waiting for the previous step's all-reduce
  step_phase,    ///< coordinator: every worker's step, wall time
  allreduce,     ///< coordinator: gradient collection, averaging and apply, wall time;
                 ///< worker: its ring all-reduce, from its gradient to the average
};
inline constexpr int kNumStages = 13;

const char* stage_name(stage s);

class stage_log {
 public:
  /// Microseconds on the system clock, so that processes on one host share a time line.
  static std::int64_t now_us();
  /// Microseconds on the steady clock: for durations that must add up (overlap_clock).
  static std::int64_t steady_us();

  void add(stage s, std::uint64_t step, std::int64_t begin_us, std::int64_t end_us);
  /// Keeps spans (for a trace) from now on, at most max_spans of them.
  void keep_spans(std::size_t max_spans = 2'000'000) { max_spans_ = max_spans; }
  /// A trace from now on only (the console's `trace start`): earlier spans are dropped.
  void restart_spans() {
    spans_.clear();
    spans_dropped_ = 0;
    keep_spans();
  }
  /// Keeps no more spans and drops those kept (the console's `trace stop`, once written).
  void stop_spans() {
    max_spans_ = 0;
    spans_.clear();
    spans_dropped_ = 0;
  }

  const std::array<std::uint64_t, kNumStages>& total_us() const { return total_us_; }
  /// Steps whose stage times are kept for recent_spread().
  static constexpr std::size_t kRecentSteps = 100;
  /// Per stage, the median then the 95th percentile (nearest rank) of its time in each of the
  /// last kRecentSteps steps this actor logged (0 in a step without it); all 0 before any step.
  std::array<std::uint64_t, 2 * kNumStages> recent_spread() const;
  /// Chrome trace events ("ph":"X", microseconds) of the kept spans, comma-separated, for process
  /// `pid`; ends with an instant event saying how many spans did not fit, if any.
  std::string chrome_events(int pid) const;

 private:
  struct span {
    stage s;
    std::uint64_t step;
    std::int64_t begin_us, end_us;
  };
  struct step_times {
    std::uint64_t step;
    std::array<std::uint64_t, kNumStages> us{};
  };
  std::array<std::uint64_t, kNumStages> total_us_{};
  std::deque<step_times> recent_;  ///< by step, ascending
  std::vector<span> spans_;
  std::size_t max_spans_ = 0;
  std::uint64_t spans_dropped_ = 0;
};

/// Wall time of two activities that may overlap (the coordinator's step phases and all-reduces),
/// split into exclusive parts: only the first running, only the second, both. Their sum is the time
/// either ran, so an epoch's split adds up to its length.
class overlap_clock {
 public:
  void begin(int which, std::int64_t at_us) { change(which, +1, at_us); }
  void end(int which, std::int64_t at_us) { change(which, -1, at_us); }
  std::uint64_t only_us(int which) const { return only_[which]; }
  std::uint64_t both_us() const { return both_; }

 private:
  void change(int which, int delta, std::int64_t at_us) {
    // Begins are stamped when a request leaves and may be reported after a later event.
    if (at_us > last_us_) {
      const auto d = static_cast<std::uint64_t>(at_us - last_us_);
      if (open_[0] > 0 && open_[1] > 0)
        both_ += d;
      else if (open_[0] > 0)
        only_[0] += d;
      else if (open_[1] > 0)
        only_[1] += d;
      last_us_ = at_us;
    }
    open_[which] += delta;
  }
  std::int64_t last_us_ = 0;
  int open_[2] = {0, 0};
  std::uint64_t only_[2] = {0, 0};
  std::uint64_t both_ = 0;
};

/// Adds the span from construction to destruction (or to end()) to a log.
class stage_timer {
 public:
  stage_timer(stage_log& log, stage s, std::uint64_t step)
      : log_(&log), s_(s), step_(step), begin_(stage_log::now_us()) {}
  stage_timer(const stage_timer&) = delete;
  stage_timer& operator=(const stage_timer&) = delete;
  ~stage_timer() { end(); }
  void end() {
    if (log_) log_->add(s_, step_, begin_, stage_log::now_us());
    log_ = nullptr;
  }

 private:
  stage_log* log_;
  stage s_;
  std::uint64_t step_;
  std::int64_t begin_;
};

}  // namespace degnn
