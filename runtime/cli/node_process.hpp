// The node process of `degnn node`, phase by phase (load, start, publish, form the membership,
// take the partitions, connect, then serve or coordinate), from settings the command has read
// and checked: no option name below node_command.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "runtime/node/launch_mode.hpp"
#include "runtime/train/train_settings.hpp"

namespace degnn {

struct node_process_settings {
  train_settings train;
  launch_mode mode;
  std::chrono::milliseconds heartbeat{0};         ///< --heartbeat-ms
  std::chrono::milliseconds silence{0};           ///< heartbeat x --heartbeat-misses: a peer lost
  std::chrono::seconds join_timeout{0};           ///< --join-timeout
  std::chrono::seconds connect_timeout{0};        ///< --connect-timeout (plus the downloads)
  std::chrono::seconds replace_timeout{0};        ///< --replace-timeout
  std::chrono::milliseconds last_call{0};         ///< the seed's --last-call
  std::optional<std::uint64_t> crash_after_step;  ///< --crash-after-step
  bool allow_faults = false;                      ///< --allow-faults: the console's fault commands
  bool insecure = false;                          ///< --insecure
  std::string recover = "off";                    ///< --recover: off, adopt or replace
  std::optional<std::string> trace_dir;           ///< --trace-dir, checked by node 0
  std::string http;                               ///< --http address, "" = none
  std::string console;                            ///< --console address, "" = none
};

/// Runs the node until the run ends (0) or throws with what stopped it; the local actors are
/// stopped whatever ends it.
int run_node_process(node_process_settings settings);

}  // namespace degnn
