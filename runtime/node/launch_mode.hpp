// How a `degnn node` process takes part in a cluster (runtime/cli/node_options.cpp reads it): a
// static --peers list with --id, the seed (--is-seed), or a joiner (--join HOST:PORT or --join
// auto, which asks the environment); the addresses, the name, TLS files and the node-count range.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/transport/cluster_certificates.hpp"
#include "runtime/transport/endpoint.hpp"

namespace degnn {

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

}  // namespace degnn
