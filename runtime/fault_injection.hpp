// Fault injection in the program (DESIGN.md section 8), for fault-injection test runs without
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
/// "faults injected on this node's sends: ..." when a policy injected anything, else "".
std::string fault_summary(const fault_policy* policy, const fault_counters& counts);

/// A step observer (worker_settings::on_step) that kills this process with SIGKILL, as a crash
/// would, when a step after global step `last` reaches it; it says so on stderr first.
std::function<void(std::uint64_t)> crash_after_step(std::uint64_t last);

}  // namespace degnn
