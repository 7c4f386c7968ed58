// A member's part when the coordinator is lost without a bye (docs/cluster.md, "Losing the
// coordinator"): it probes the view's members and stops itself without a majority; otherwise the
// lowest live rank takes over (adopting the coordinator's partitions, rolling every member back
// to its last commit) and the others move to the view it announces.
#include <algorithm>
#include <cstdio>

#include "model/commit_record.hpp"
#include "runtime/cli/node_process_phases.hpp"

namespace degnn::node_process_detail {

void node_process::take_announced_view() {
  std::vector<char> bytes;
  (*self_)
      ->request(node_, std::chrono::seconds(10), recovery_atom_v, local_key_)
      .receive([&](std::vector<char>& b) { bytes = std::move(b); }, [](caf::error&) {});
  if (bytes.empty()) return;
  const wire::membership_view view = wire::decode_membership_view(ctx_, bytes);
  const auto& replaced = view.replaced;
  if (view.members[static_cast<size_t>(id_)].lost ||
      std::find(replaced.begin(), replaced.end(), id_) != replaced.end())
    throw std::runtime_error(me_name_ + ": the coordinator counted this node lost in view " +
                             std::to_string(view.id) +
                             " (it did not answer within the heartbeat's silence); stopping");
  try {
    move_to(view);
  } catch (const std::exception& e) {
    // A member lost while the view changed: the coordinator makes a further view without it.
    say("view " + std::to_string(view.id) + " did not connect (" + e.what() +
        "); waiting for the coordinator's next view");
  }
}

std::uint64_t node_process::own_commit_step() const {
  // Every member holds the file of any step some member committed (a commit record is written
  // only once every replica confirmed its file) and keeps the commit before its newest, so the
  // newest commit here is a step every survivor can roll back to.
  if (s_.checkpoint_dir.empty()) return first_start_.next_step;
  try {
    const committed_checkpoint c = load_committed_checkpoint(s_.checkpoint_dir);
    if (c.record.cluster_id == ws_.run_id && c.record.next_step >= first_start_.next_step)
      return c.record.next_step;
  } catch (const std::exception& e) {
    say("no commit of this run in " + s_.checkpoint_dir + " (" + e.what() + ")");
  }
  return first_start_.next_step;
}

bool node_process::fail_over() {
  const int old = members_.view.coordinator();
  say("lost the coordinator (node " + std::to_string(old) + ") without its bye; probing view " +
      std::to_string(members_.view.id) + "'s members");
  std::vector<int> known{old};
  for (std::size_t attempt = 0; attempt < n_; ++attempt) {
    stopwatch clock;
    const std::vector<int> lost = lost_members(*self_, node_, local_key_, *mesh_, members_.view,
                                               settings_.silence, id_, known);
    need_majority(members_.view, lost);
    // The coordinator of the view without the lost: the one every member that agrees on them
    // names.
    wire::membership_view without = members_.view;
    for (int r : lost)
      without.members[static_cast<size_t>(r)].lost = true;
    const int successor = without.coordinator();
    if (successor != id_) {
      say("node " + std::to_string(successor) +
          " (the lowest live rank) coordinates now; waiting for its view");
      if (follow(successor)) return false;
      known = lost;
      known.push_back(successor);
      continue;
    }
    const std::uint64_t back_to = own_commit_step();
    say("lost node " + rank_list(lost) + " (found in " + two_places(clock.seconds()) +
        " s): this node coordinates from now on");
    if (recovery_.mode == "replace")
      say("the coordinator's partitions are adopted: a replacement joins through the seed, and "
          "the seed was node " +
          std::to_string(old));
    move_cluster(lost, back_to, true);
    report_.emplace(meta_.dataset_name + "/node-cluster", s_.metrics, s_.progress);
    observe_epochs();
    // The epochs node 0 evaluated: the closing line names the whole run's best (those after the
    // roll-back are forgotten when training starts).
    (*self_)
        ->request(node_, std::chrono::seconds(10), validation_atom_v, local_key_)
        .receive([&](std::vector<validation_point>& earlier) { report_->restore(earlier); },
                 [](caf::error&) {});
    losses_.clear();
    losses_from_ = back_to;
    recoveries_ = 1;
    say("took over in " + two_places(clock.seconds()) + " s: training again from step " +
        std::to_string(back_to));
    return true;
  }
  throw std::runtime_error(me_name_ + ": no member took over as coordinator; stopping");
}

bool node_process::follow(int successor) {
  auto& self = *self_;
  const node_actor& heir = mesh_->node_of(static_cast<size_t>(successor));
  self->monitor(heir);
  // The successor probes for at most the silence, then announces.
  const auto until =
      std::chrono::steady_clock::now() + 2 * settings_.silence + std::chrono::seconds(10);
  const std::uint64_t before = members_.view.id;
  while (std::chrono::steady_clock::now() < until) {
    bool heir_gone = false;
    self->receive([&](caf::down_msg& d) { heir_gone = d.source == heir.address(); },
                  caf::after(std::chrono::milliseconds(100)) >> [] {});
    take_announced_view();
    if (members_.view.id > before) return true;
    if (heir_gone) {
      say("node " + std::to_string(successor) + " went away too");
      return false;
    }
  }
  say("node " + std::to_string(successor) + " announced no view in time");
  return false;
}

}  // namespace degnn::node_process_detail
