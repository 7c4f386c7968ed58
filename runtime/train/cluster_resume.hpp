// Where a cluster run starts: step 0 with fresh parameters, or (--resume DIR) the newest
// committed coordinated checkpoint of a checkpoint folder, checked against this run.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "actors/worker_settings.hpp"
#include "runtime/train/cluster_identity.hpp"
#include "runtime/train/train_settings.hpp"

namespace degnn {

struct cluster_start {
  std::uint64_t next_step = 0;                 ///< global step the run starts with
  std::shared_ptr<const replica_start> state;  ///< null: fresh parameters
};

/// Nothing to load without s.resume. Otherwise loads and verifies the newest commit under
/// s.resume (or the checkpoint of s.resume_step); throws config_error when it is of another run
/// (cluster id, partitions, model) and data_error when it is missing or damaged. Prints where it
/// resumes.
cluster_start load_cluster_start(const train_settings& s, const replica_config& rc,
                                 std::uint64_t cluster_id, int parts);

/// A joiner's start: its own copy of the checkpoint before `next_step` (its seed's last commit).
cluster_start load_cluster_start_at(const train_settings& s, const replica_config& rc,
                                    std::uint64_t cluster_id, int parts, std::uint64_t next_step);

/// A recovery's start: this node's copy, under its own checkpoint folder `dir`, of the commit the
/// cluster rolls back to (the checkpoint before `next_step`).
cluster_start load_cluster_start_in(const std::string& dir, const replica_config& rc,
                                    std::uint64_t cluster_id, int parts, std::uint64_t next_step);

/// The nodes must agree on whether checkpoints are written and whether (with a static peer list:
/// from which step) they resume, so the join compares these like any setting.
void add_resume_identity(cluster_identity& identity, const train_settings& s, bool static_peers,
                         const cluster_start& start);

}  // namespace degnn
