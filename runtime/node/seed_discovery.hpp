// `degnn node --join auto`: where the seed is, from the environment a cluster scheduler sets.
// DEGNN_SEED=HOST:PORT first; then Slurm (the job's first host, SLURM_PROCID as the rank hint,
// SLURM_NTASKS as the size); then a Kubernetes StatefulSet (pod 0 behind the headless service).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/transport/endpoint.hpp"

namespace degnn {

/// The hosts of a Slurm node list, in order: "gpu[01-03,07],login,r[1-2]-n[1-2]" gives gpu01,
/// gpu02, gpu03, gpu07, login, r1-n1, r1-n2, r2-n1, r2-n2 (zero padding kept). Throws
/// config_error quoting the list on a malformed one.
std::vector<std::string> expand_slurm_nodelist(const std::string& list);

/// A StatefulSet pod's name "NAME-K.SERVICE.NS.svc.cluster.local" (or "NAME-K.SERVICE"): pod 0's
/// name with the same domain, and K. nullopt when the first label does not end in -K.
std::optional<std::pair<std::string, int>> statefulset_seed(const std::string& fqdn);

struct discovered_seed {
  endpoint seed;
  bool is_seed = false;    ///< this process is the seed
  int rank_hint = -1;      ///< -1: none
  int expected_nodes = 0;  ///< 0: not known from the environment
  std::string source;      ///< "DEGNN_SEED", "Slurm" or "Kubernetes", for the log line
  int listen_offset = 0;   ///< added to this node's --listen port (Slurm: the task's local id)
};

/// Reads `env` (getenv in the program, a map in tests). Slurm: SLURM_STEP_NODELIST, else
/// SLURM_JOB_NODELIST. `fqdn` is this host's full name (for
/// Kubernetes), `hostname` its short one; `port` the port every node listens on (the seed's too).
/// Throws config_error saying what was looked for when nothing names a seed.
discovered_seed discover_seed(const std::function<const char*(const char*)>& env,
                              const std::string& hostname, const std::string& fqdn,
                              std::uint16_t port);

/// This host's short name and its canonical (fully qualified) name.
std::pair<std::string, std::string> local_host_names();

}  // namespace degnn
