// The fault-injection options (docs/design.md section 9), for test runs without root: the policy
// on the send path (damaged, duplicated, delayed messages between nodes) read from --faults-*
// options or a [faults] config section, and --crash-after-step, a node that kills itself at a
// named point. The policy and its mechanisms live in actors/faults/.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/faults/fault_report.hpp"
#include "runtime/cli/cli_options.hpp"

namespace degnn {

/// --faults-seed, --faults-corrupt, --faults-duplicate, --faults-kinds, --faults-links.
std::vector<option_spec> fault_option_specs();
/// The policy the options give; null when they inject nothing. Throws config_error naming the
/// option for a probability outside [0, 1), an unknown message kind or a malformed link.
std::shared_ptr<const fault_policy> read_fault_policy(const option_set& opts);
/// A step observer (worker_settings::on_step) that kills this process with SIGKILL, as a crash
/// would, when a step after global step `last` reaches it; it says so on stderr first.
std::function<void(std::uint64_t)> crash_after_step(std::uint64_t last);

}  // namespace degnn
