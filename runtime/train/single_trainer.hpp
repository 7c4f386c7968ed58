// Training in one process without actors: the reference every pipeline is compared with.
#pragma once

#include <functional>

#include "model/dataset.hpp"
#include "runtime/train/train_settings.hpp"
#include "runtime/train/training_report.hpp"

namespace degnn {

/// Per-step hook for tests and benchmarks: (global step, mean loss of the step).
using step_hook = std::function<void(std::uint64_t, double)>;

/// Trains on d as `s` says, reporting through `report`; returns the final replica parameters.
std::vector<float> train_single(const train_settings& s, const dataset& d, training_report& report,
                                const step_hook& on_step = {});

/// Batches per epoch of data-parallel training: the largest part's batch count, so every worker
/// runs every step (uneven counts deadlock synchronous all-reduce).
std::uint64_t batches_per_epoch(std::span<const std::size_t> train_per_part, int batch_size);

}  // namespace degnn
