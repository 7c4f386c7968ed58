// The console's `actors`: every worker actor's own counters at an epoch end (role, partition,
// bytes and messages sent by kind, messages per second over the epoch, refusals, stage times,
// mailbox now and at its peak), as JSON from the coordinator's per-actor report.
#pragma once

#include <string>

#include "actors/coordinator.hpp"

namespace degnn {

/// One JSON array entry per actor of `now` (batch actors, shards, stores of `parts` partitions);
/// messages per second against `before` (the previous epoch end's report; null: none) over
/// `seconds`.
std::string actor_table_json(const cluster_report& now, const cluster_report* before,
                             double seconds, std::size_t parts);

}  // namespace degnn
