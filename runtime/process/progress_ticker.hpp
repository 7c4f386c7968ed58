// A progress line every few seconds while a long blocking call runs (the history set-up, which
// at 10M nodes takes minutes with nothing else printed): its elapsed time and the process's
// resident memory now and at its peak.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/process/process_stats.hpp"

namespace degnn {

class progress_ticker {
 public:
  /// Prints "<what>: N s so far, resident R MiB, peak P MiB" to out every `every` until
  /// destroyed; nothing when the call ends sooner.
  progress_ticker(std::string what, std::chrono::milliseconds every, std::FILE* out = stdout)
      : what_(std::move(what)), every_(every), out_(out), thread_([this] { run(); }) {}
  ~progress_ticker() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  progress_ticker(const progress_ticker&) = delete;
  progress_ticker& operator=(const progress_ticker&) = delete;

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!wake_.wait_for(lock, every_, [this] { return done_; })) {
      std::fprintf(out_, "%s: %.0f s so far, resident %.0f MiB, peak %.0f MiB\n", what_.c_str(),
                   clock_.seconds(), rss_mib(), peak_rss_mib());
      std::fflush(out_);
    }
  }

  std::string what_;
  std::chrono::milliseconds every_;
  std::FILE* out_;
  stopwatch clock_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread thread_;  ///< last: starts once the members above are made
};

}  // namespace degnn
