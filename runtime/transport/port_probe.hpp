// Whether a process still listens at an address, told by the kernel there: a refused connection
// (RST) means no process listens on that port, which silence (a pause, a cut link) never shows.
#pragma once

#include <chrono>
#include <vector>

#include "runtime/transport/endpoint.hpp"

namespace degnn {

/// For each address, whether a TCP connection to it was refused within `wait` (all tried at
/// once). An accepted connection, a time-out or an unreachable network is not a refusal; the
/// connection is closed at once without a byte sent.
std::vector<bool> refused_connections(const std::vector<endpoint>& at,
                                      std::chrono::milliseconds wait);

}  // namespace degnn
