// What a fault-injection run reports: one line of what the policy injected on this process's
// sends (also when it met none, so a test run's faults are never silent), and the check that its
// links name partitions the run has. The policy itself is actors/faults/link_faults.hpp.
#pragma once

#include <memory>
#include <string>

#include "actors/faults/link_faults.hpp"

namespace degnn {

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

/// Throws std::invalid_argument when a --faults-links pair names a partition outside [0, parts).
void check_fault_links(const fault_policy* policy, int parts);
/// "faults injected on this process's sends: ..." under a policy (also when it met none), else "".
std::string fault_summary(const fault_policy* policy, const fault_counters& counts);

}  // namespace degnn
