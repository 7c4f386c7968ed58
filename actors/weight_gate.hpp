// Work of a step that must run with that step's weights: the decentralized pipeline prepares
// step i+1 while step i's gradient is still being averaged, and its forward (on a shard) and top
// layer (on the owner) wait here until every averaged gradient the step names has been applied.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "actors/stage_log.hpp"

namespace degnn {

class weight_gate {
 public:
  /// Averaged gradients applied so far.
  std::uint64_t applied() const { return applied_; }
  /// Step `step` computes with the weights after `applies` averaged gradients. Returns false when
  /// the step was already given a different count.
  bool need(std::uint64_t step, std::uint64_t applies) {
    const auto [it, fresh] = needed_.try_emplace(step, applies);
    return fresh || it->second == applies;
  }
  /// The count step `step` was given, if any.
  const std::uint64_t* needed(std::uint64_t step) const {
    const auto it = needed_.find(step);
    return it == needed_.end() ? nullptr : &it->second;
  }
  bool ready(std::uint64_t step) const {
    const auto* n = needed(step);
    return n && applied_ >= *n;
  }
  /// Runs fn now if the weights of `step` are there, else once they are (the wait is logged as
  /// stage weights_wait). dropped, if given, runs instead when the step is forgotten first.
  void when_ready(std::uint64_t step, stage_log& log, std::function<void()> fn,
                  std::function<void()> dropped = {}) {
    if (ready(step)) {
      fn();
      return;
    }
    waiting_.push_back({step,
                        [&log, step, since = stage_log::now_us(), fn = std::move(fn)] {
                          log.add(stage::weights_wait, step, since, stage_log::now_us());
                          fn();
                        },
                        std::move(dropped)});
  }
  /// One more averaged gradient applied; runs the work that can now run.
  void applied_one() {
    ++applied_;
    run_ready();
  }
  /// Runs waiting work whose weights are there (also after need() raised nothing).
  void run_ready() {
    // Work that runs may queue more: loop until nothing is ready.
    for (bool ran = true; ran;) {
      ran = false;
      for (std::size_t i = 0; i < waiting_.size(); ++i) {
        if (!ready(waiting_[i].step)) continue;
        auto fn = std::move(waiting_[i].run);
        waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));
        fn();
        ran = true;
        break;
      }
    }
  }
  /// Forgets steps up to `upto`: their work can no longer run (their requests failed or ended);
  /// each is told through its `dropped` callback, so that nothing waits for it.
  void forget_upto(std::uint64_t upto) {
    needed_.erase(needed_.begin(), needed_.upper_bound(upto));
    std::vector<item> dropped;
    std::erase_if(waiting_, [&](item& w) {
      if (w.step > upto) return false;
      dropped.push_back(std::move(w));
      return true;
    });
    for (auto& w : dropped) {
      if (w.dropped) w.dropped();
    }
  }

 private:
  std::uint64_t applied_ = 0;
  std::map<std::uint64_t, std::uint64_t> needed_;  ///< by step
  struct item {
    std::uint64_t step;
    std::function<void()> run, dropped;
  };
  std::vector<item> waiting_;
};

}  // namespace degnn
