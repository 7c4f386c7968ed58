// Fault injection in the program (DESIGN.md section 8), for fault-injection test runs without
// root: a node that crashes at a named point. The runtime hands these to the worker actors.
#pragma once

#include <cstdint>
#include <functional>

namespace degnn {

/// A step observer (worker_settings::on_step) that kills this process with SIGKILL, as a crash
/// would, when a step after global step `last` reaches it; it says so on stderr first.
std::function<void(std::uint64_t)> crash_after_step(std::uint64_t last);

}  // namespace degnn
