// Recovery from a lost member inside a running cluster (--recover adopt|replace, docs/design.md
// section 9): node 0 finds the lost members, makes the next view (their partitions go to
// survivors or to replacements that join through the seed) and announces it; every worker rolls
// back to the last checkpoint. A replacement's start comes from the seed.
#pragma once

#include <caf/all.hpp>

#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/node/node_mesh.hpp"
#include "runtime/train/cluster_resume.hpp"
#include "serialization/wire_membership.hpp"

namespace degnn {

/// A member answered that it follows a later view than the one this node acts for: the others
/// went on without this node (paused or cut off past the time-out), and it must stop.
struct left_behind : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Ranks of `view` other than `me` and those in `known_lost` (both counted lost by the caller)
/// whose node actor is known down to this node's (`node`; a killed process's connection closed)
/// or that did not answer within `wait` (a stopped process, a cut link). The result includes
/// `known_lost`, sorted. Throws left_behind if a member follows a later view.
std::vector<int> lost_members(caf::scoped_actor& self, const node_actor& node,
                              const std::string& local_key, const node_mesh& mesh,
                              const wire::membership_view& view, std::chrono::milliseconds wait,
                              int me, const std::vector<int>& known_lost = {});

/// Keep-majority: "" when the members of `view` left after losing `lost` are a strict majority
/// of its live members, otherwise why not (a line for the log). Two sides of a split can never
/// both hold a majority, so at most one goes on. `gone` (among `lost`): members proven to run no
/// more (see no_longer_running); a process that does not run is on no side, so they leave the
/// count, and a crash alone never stops the rest (with 2 members, only a silent loss does).
std::string without_majority(const wire::membership_view& view, const std::vector<int>& lost,
                             const std::vector<int>& gone = {});

/// The members among `lost` whose address refuses connections within `wait`: no process listens
/// there any more (killed, crashed, exited). A paused process or a cut link is silent instead.
std::vector<int> no_longer_running(const wire::membership_view& view, const std::vector<int>& lost,
                                   std::chrono::milliseconds wait);

/// The view after losing `lost`: id + 1, the lost members marked so and their partitions given,
/// one by one, to the survivor serving fewest (ties: the first rank after the lost one, the
/// coordinator last, so losses spread over neighbours), resuming at global step `step`. A lost
/// coordinator's partitions (partition 0 among them) all go to its successor, the lowest live
/// rank, which coordinates the new view.
wire::membership_view adopted_view(const wire::membership_view& view, const std::vector<int>& lost,
                                   std::uint64_t step);

/// Node 0 (the seed), --recover replace: the join request of the next node that joins the
/// formed cluster within `wait` (checked like any joiner: settings, and with TLS its
/// certificate; its name and HOST:PORT may not be among `taken`, the live members'). The joiner
/// waits for its view until `place_replacements`. Throws on time-out.
wire::join_request await_replacement(caf::scoped_actor& self, const node_actor& node,
                                     const std::string& local_key, const wire::context& ctx,
                                     const std::vector<std::string>& taken,
                                     std::chrono::seconds wait);

/// The view after losing `lost[i]`, each served now by `joiners[i]` at the same rank with the
/// same partitions: id + 1, resuming at `step`, the ranks listed as replaced.
wire::membership_view replaced_view(const wire::membership_view& view, const std::vector<int>& lost,
                                    const std::vector<wire::join_request>& joiners,
                                    std::uint64_t step);

/// "partition 2 (node 2) to node 3, ..." for the log.
std::string moved_partitions(const wire::membership_view& before,
                             const wire::membership_view& after);

struct recovery_settings {
  std::string mode;            ///< adopt or replace (--recover)
  std::string checkpoint_dir;  ///< node 0's: the commit a replacement restores is offered there
  std::chrono::seconds replace_wait{120};
  std::string seed_address;  ///< where a replacement joins (for the log)
};

/// The seed offers its copy (under `dir`) of the checkpoint of `step` to the members and
/// replacements it accepted; throws data_error when `dir` holds none, runtime_error when the
/// node actor refuses.
void offer_checkpoint_of_step(caf::scoped_actor& self, const node_actor& node,
                              const std::string& local_key, const std::string& dir,
                              std::uint64_t step);

/// Node 0's next view after losing `lost`, rolling back to global step `step`: adopted_view, or
/// (replace) the checkpoint of `step` offered to joiners, one replacement awaited per lost
/// member, and the view given to them. Logs its progress through `say`.
wire::membership_view next_view(caf::scoped_actor& self, const node_actor& node,
                                const std::string& local_key, const wire::context& ctx,
                                const wire::membership_view& view, const std::vector<int>& lost,
                                std::uint64_t step, const recovery_settings& rs,
                                const std::function<void(const std::string&)>& say);

/// A replacement's start, once it has its view: the checkpoint of view.resume_step its seed
/// offers, fetched into `checkpoint_dir`/from-seed; fresh parameters when the view resumes at
/// step 0 and none is offered.
cluster_start replacement_start(caf::actor_system& sys, const node_actor& seed,
                                const std::string& seed_address, const std::string& checkpoint_dir,
                                const replica_config& rc, std::uint64_t run_id, int parts,
                                std::uint64_t step);

/// A joiner whose own copy of the checkpoint of `step` (under `dir`) is damaged or missing: the
/// seed's copy (offered to the members it accepted), checked, written over the copy of every
/// partition in `partitions`. Returns the file's name; throws naming the seed when it offers
/// none or its copy is damaged too.
std::string restore_checkpoint_from_seed(caf::actor_system& sys, const node_actor& seed,
                                         const std::string& seed_address, const std::string& dir,
                                         const std::vector<std::int32_t>& partitions,
                                         std::uint64_t step);

/// Gives `next` (after `before`) to every survivor other than `me` (its coordinator) and the
/// replacements; throws naming one that refused it or did not answer (left_behind if it is in
/// `next`'s id or a later view already: another coordinator went on). A member `next` counts
/// lost or replaced is told too, without waiting: if it still runs, it stops.
void announce_view(caf::scoped_actor& self, const node_mesh& mesh, const wire::context& ctx,
                   const wire::membership_view& before, const wire::membership_view& next, int me);

}  // namespace degnn
