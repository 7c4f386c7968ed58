// How a `degnn node` process takes part in a cluster, read from its options: a static --peers
// list with --id, the seed (--is-seed), or a joiner (--join HOST:PORT or --join auto, which asks
// the environment); the addresses, the name, TLS files and the node-count range.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/cli_options.hpp"
#include "runtime/cluster_certificates.hpp"
#include "runtime/endpoint.hpp"

namespace degnn {

/// The node command's options: the training settings and the cluster options below.
std::vector<option_spec> node_option_specs();

struct launch_mode {
  enum { static_peers, seed, joiner } kind = static_peers;
  std::vector<endpoint> peers;  ///< static
  int id = 0;                   ///< static
  endpoint listen;              ///< where this node publishes
  endpoint seed_address;        ///< joiner
  std::string advertise;
  int rank_hint = -1;
  std::pair<int, int> nodes{0, 0};  ///< seed: MIN, MAX (0: one node per partition)
  std::string found_by;             ///< --join auto: where the seed came from
  std::optional<tls_files> tls;
  std::string name;  ///< --name, or the certificate's with TLS; "" for HOST:PORT

  /// Checks against the partition set (static: one node per partition; --nodes at most the
  /// partitions) and fills the default node count. Throws config_error.
  void fit_partitions(int partitions);
};

/// Throws config_error naming the option.
launch_mode read_launch_mode(const option_set& opts);

struct train_settings;
class status_board;
/// Node 0's console traces go into --trace-dir (which must be a folder); refused when the run
/// traces itself (--trace) or has no --trace-dir.
void enable_console_traces(status_board& board, const option_set& opts, const train_settings& s);

/// --recover: "off" (a lost member stops the cluster), "adopt" (the survivors take over its
/// partitions) or "replace" (a new node joining through the seed does); both roll the cluster
/// back to its last commit, so they need a checkpoint folder, and a seed.
std::string read_recover_mode(const option_set& opts, const train_settings& s,
                              const launch_mode& mode);

}  // namespace degnn
