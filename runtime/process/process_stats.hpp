// Figures about this process for progress lines and benchmark JSON: peak resident memory, clock.
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>

namespace degnn {

/// A size field of /proc/self/status in MiB (VmHWM: the peak resident set; VmRSS: now), 0 when
/// unavailable.
inline double status_mib(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == field) {
      std::int64_t kib = 0;
      in >> kib;
      return static_cast<double>(kib) / 1024.0;
    }
    in.ignore(1 << 12, '\n');
  }
  return 0;
}
inline double peak_rss_mib() {
  return status_mib("VmHWM:");
}
inline double rss_mib() {
  return status_mib("VmRSS:");
}

class stopwatch {
 public:
  stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  void reset() { start_ = std::chrono::steady_clock::now(); }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace degnn
