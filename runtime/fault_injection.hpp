// Fault injection in the program (docs/design.md section 9), for fault-injection test runs without
// root: a node that crashes at a named point, and the fault policy on the send path (damaged and
// duplicated messages between nodes) read from --faults-* options or a [faults] config section.
// The runtime hands these to the worker actors.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/link_faults.hpp"
#include "runtime/cli_options.hpp"

namespace degnn {

/// --faults-seed, --faults-corrupt, --faults-duplicate, --faults-kinds, --faults-links.
std::vector<option_spec> fault_option_specs();
/// The policy the options give; null when they inject nothing. Throws config_error naming the
/// option for a probability outside [0, 1), an unknown message kind or a malformed link.
std::shared_ptr<const fault_policy> read_fault_policy(const option_set& opts);
/// Says fault_summary on stderr when it goes out of scope, however the run ends: a test run's
/// faults are never silent.
class fault_summary_at_exit {
 public:
  fault_summary_at_exit(std::shared_ptr<const fault_policy> policy,
                        std::shared_ptr<const fault_counters> counts)
      : policy_(std::move(policy)), counts_(std::move(counts)) {}
  ~fault_summary_at_exit();
  fault_summary_at_exit(const fault_summary_at_exit&) = delete;
  fault_summary_at_exit& operator=(const fault_summary_at_exit&) = delete;

 private:
  std::shared_ptr<const fault_policy> policy_;
  std::shared_ptr<const fault_counters> counts_;
};

/// Throws config_error when a --faults-links pair names a partition outside [0, parts).
void check_fault_links(const fault_policy* policy, int parts);
/// "faults injected on this process's sends: ..." under a policy (also when it met none), else "".
std::string fault_summary(const fault_policy* policy, const fault_counters& counts);

/// A step observer (worker_settings::on_step) that kills this process with SIGKILL, as a crash
/// would, when a step after global step `last` reaches it; it says so on stderr first.
std::function<void(std::uint64_t)> crash_after_step(std::uint64_t last);

}  // namespace degnn
