// The OpenMP team size of every thread of an actor system. Workers in one process (or node
// processes on one machine) should share the cores rather than each take all of them
// (oversubscribed teams spin against each other), and every kernel must run with the same team
// size whatever CAF thread runs it: Eigen picks its GEMM blocking by thread count, so a varying
// count would change rounding and break bit-identical runs.
#pragma once

#include <omp.h>
#include <caf/actor_system_config.hpp>
#include <caf/thread_hook.hpp>

namespace degnn {

class compute_threads_hook final : public caf::thread_hook {
 public:
  explicit compute_threads_hook(int threads) : threads_(threads) {}
  void init(caf::actor_system&) override {}
  void thread_started() override { omp_set_num_threads(threads_); }
  void thread_terminates() override {}

 private:
  int threads_;
};

/// Every thread the actor system starts runs its OpenMP regions with `threads` threads.
inline void use_compute_threads(caf::actor_system_config& cfg, int threads) {
  cfg.add_thread_hook<compute_threads_hook>(threads);
}

}  // namespace degnn
