// The summary of what a fault policy injected, and the check of its links against the run.
#include "actors/faults/fault_report.hpp"

#include <cstdio>
#include <stdexcept>

namespace degnn {

fault_summary_at_exit::~fault_summary_at_exit() {
  if (auto line = fault_summary(policy_.get(), *counts_); !line.empty())
    std::fprintf(stderr, "node: %s\n", line.c_str());
}

void check_fault_links(const fault_policy* policy, int parts) {
  if (!policy) return;
  for (const auto& [from, to] : policy->links)
    if (from >= parts || to >= parts)
      throw std::invalid_argument(
          "--faults-links: " + std::to_string(from) + "-" + std::to_string(to) +
          " names a partition this run does not have (it has " + std::to_string(parts) + ")");
}

std::string fault_summary(const fault_policy* policy, const fault_counters& counts) {
  if (!policy) return {};
  return "faults injected on this process's sends (seed " + std::to_string(policy->seed) +
         "): " + std::to_string(counts.corrupted.load()) + " damaged (sent again " +
         std::to_string(counts.retried.load()) + "), " + std::to_string(counts.duplicated.load()) +
         " duplicated, " + std::to_string(counts.delayed.load()) + " delayed";
}

}  // namespace degnn
