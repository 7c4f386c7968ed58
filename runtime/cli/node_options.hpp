// The options of `degnn node` (the training settings and the cluster's), and reading them into
// the node's launch mode and recovery mode. Errors name the option.
#pragma once

#include <string>
#include <vector>

#include "runtime/cli/cli_options.hpp"
#include "runtime/node/launch_mode.hpp"

namespace degnn {

/// The node command's options: the training settings and the cluster options below.
std::vector<option_spec> node_option_specs();

/// Throws config_error naming the option.
launch_mode read_launch_mode(const option_set& opts);

struct train_settings;

/// --recover: "off" (a lost member stops the cluster), "adopt" (the survivors take over its
/// partitions) or "replace" (a new node joining through the seed does); both roll the cluster
/// back to its last commit, so they need a checkpoint folder, and a seed.
std::string read_recover_mode(const option_set& opts, const train_settings& s,
                              const launch_mode& mode);

}  // namespace degnn
