// The options of `degnn train` (shared by `bench train` and `node`, which add their own) and
// reading them into train_settings, validated with messages that name the option.
#pragma once

#include <vector>

#include "runtime/cli/cli_options.hpp"
#include "runtime/train/train_settings.hpp"

namespace degnn {

/// The options `degnn train` accepts (shared by bench train, which adds its own).
std::vector<option_spec> train_option_specs();
/// Reads and validates the options; throws config_error naming the offending option.
train_settings read_train_settings(const option_set& opts);
}  // namespace degnn
