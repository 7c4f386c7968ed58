// The settings every node of a cluster must agree on (dataset, partition set, model, optimiser,
// seed, pipeline, history, protocol): listed as key=value lines that travel in the greeting, so a
// node whose settings differ is refused naming the key, and hashed into the wire cluster id.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/partition_store.hpp"
#include "runtime/train/train_settings.hpp"

namespace degnn {

struct cluster_identity {
  std::vector<std::string> lines;  ///< "key=value", in a fixed order

  /// What the wire layer checks every message against (wire::context::cluster_id).
  std::uint64_t hash() const;
  /// The id commit records carry: the hash of every line but those a resumed run may change
  /// (epochs, evaluation, checkpoint and resume settings). A step limit (--max-batches) stays:
  /// it sets where each epoch ends, so the steps of a resumed run would mean other batches.
  std::uint64_t checkpoint_run_id() const;
  /// Empty when `theirs` agrees; otherwise the first differing key with both values ("lr is 0.01
  /// on node 0 and 0.02 on node 1"), or the key one side lacks.
  std::string difference(const std::vector<std::string>& theirs, const std::string& me = "here",
                         const std::string& them = "the peer") const;
};

cluster_identity identity_of(const train_settings& s, const partition_meta& meta);

}  // namespace degnn
