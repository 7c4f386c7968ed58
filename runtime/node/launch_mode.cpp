// A node's launch mode checked against its partition set.
#include "runtime/node/launch_mode.hpp"

#include <string>

#include "runtime/process/config_error.hpp"

namespace degnn {

void launch_mode::fit_partitions(int partitions) {
  if (kind == static_peers) {
    if (static_cast<int>(peers.size()) != partitions) {
      throw config_error("node: the partition set has " + std::to_string(partitions) +
                         " partitions but --peers names " + std::to_string(peers.size()) +
                         " nodes");
    }
    return;
  }
  if (nodes.first == 0) nodes = {partitions, partitions};
  if (nodes.second > partitions) {
    throw config_error("node: --nodes allows " + std::to_string(nodes.second) +
                       " nodes but the partition set has " + std::to_string(partitions) +
                       " partitions (a node serves one or more)");
  }
}

}  // namespace degnn
