// Whether this process stopped running for a while (SIGSTOP, a starved machine): a thread notes
// the time every 50 ms, and a longer gap between two notes is a time this process did not run,
// which its peers saw as silence. A node uses it before it trusts what it found while away.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

namespace degnn {

class run_gaps {
 public:
  using clock = std::chrono::steady_clock;

  run_gaps() : last_(clock::now()), thread_([this] { note(); }) {}
  ~run_gaps() {
    {
      std::lock_guard lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  run_gaps(const run_gaps&) = delete;
  run_gaps& operator=(const run_gaps&) = delete;

  /// The longest time this process did not run that ended at or after `since`, the one going on
  /// now included (asked right after a SIGCONT, before the thread noted the time again).
  clock::duration longest_since(clock::time_point since) const {
    std::lock_guard lock(m_);
    clock::duration longest = clock::now() - last_;
    for (const auto& [end, gap] : gaps_)
      if (end >= since) longest = std::max(longest, gap);
    return longest;
  }

 private:
  static constexpr std::chrono::milliseconds kTick{50};
  static constexpr std::chrono::milliseconds kNoted{250};  ///< shorter gaps are not kept
  static constexpr std::size_t kKept = 64;

  void note() {
    std::unique_lock lock(m_);
    while (!cv_.wait_for(lock, kTick, [this] { return stop_; })) {
      const auto now = clock::now();
      if (now - last_ > kNoted) {
        gaps_.emplace_back(now, now - last_);
        if (gaps_.size() > kKept) gaps_.pop_front();
      }
      last_ = now;
    }
  }

  mutable std::mutex m_;
  std::condition_variable cv_;
  bool stop_ = false;
  clock::time_point last_;
  std::deque<std::pair<clock::time_point, clock::duration>> gaps_;  ///< (end, length)
  std::thread thread_;  ///< last: starts once the members above exist
};

}  // namespace degnn
