// Crashing at a named point: SIGKILL, so nothing of the process runs after it (no destructor, no
// goodbye to the peers), exactly as the kernel's OOM killer or a power cut would leave it.
#include "runtime/fault_injection.hpp"

#include <csignal>
#include <cstdio>

namespace degnn {

std::function<void(std::uint64_t)> crash_after_step(std::uint64_t last) {
  return [last](std::uint64_t step) {
    if (step <= last) return;
    std::fprintf(stderr, "node: crashing before step %llu (--crash-after-step %llu)\n",
                 static_cast<unsigned long long>(step), static_cast<unsigned long long>(last));
    std::fflush(stderr);
    std::raise(SIGKILL);
  };
}

}  // namespace degnn
