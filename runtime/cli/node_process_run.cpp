// The node process once its mesh is connected: a member serves until node 0 says bye (moving to
// each new view a recovery makes); node 0 coordinates the epochs, recovers from a lost member
// and says bye to every member at the end.
#include <algorithm>
#include <cstdio>

#include "runtime/cli/node_process_phases.hpp"

namespace degnn::node_process_detail {

// A recovery, on every surviving node: the workers roll back to the commit the view names and
// serve the view's partitions (the ones kept and the ones adopted), then take every member's
// new workers. Steps after that commit are redone exactly (see --recover).
void node_process::move_to(const wire::membership_view& next) {
  for (const auto& w : local_)
    stop_worker(*self_, w);
  local_.clear();
  members_.view = next;
  start_ = next.resume_step == first_start_.next_step
               ? first_start_
               : load_cluster_start_in(s_.checkpoint_dir, rc_, ws_.run_id, meta_.num_parts,
                                       next.resume_step);
  ws_.start = start_.state;
  fetch_missing(next);
  served_ = serve(members_);
  say("view " + std::to_string(next.id) + ": serving partition " + served_ +
      ", rolled back to step " + std::to_string(next.resume_step));
  mesh_->rewire(members_, std::chrono::steady_clock::now() + connect_time_);
}

// Any node but 0: serves until node 0 goes away; it said bye first if the run ended (every node
// stays until then, so no connection closes while node 0 still says bye to the others).
int node_process::serve_until_stopped() {
  auto& self = *self_;
  self->monitor(node_);
  self->monitor(mesh_->node_of(0));
  bool node0_gone = false, down = false;
  while (!down) {
    self->receive(
        [&](caf::down_msg& d) {
          down = true;
          node0_gone = d.source == mesh_->node_of(0).address();
        },
        caf::after(std::chrono::milliseconds(100)) >> [] {});
    if (down || !recovers_) continue;
    std::vector<char> next;
    self->request(node_, std::chrono::seconds(10), recovery_atom_v, local_key_)
        .receive([&](std::vector<char>& b) { next = std::move(b); }, [](caf::error&) {});
    if (next.empty()) continue;
    const wire::membership_view view = wire::decode_membership_view(ctx_, next);
    const auto& replaced = view.replaced;
    if (view.members[static_cast<size_t>(id_)].lost ||
        std::find(replaced.begin(), replaced.end(), id_) != replaced.end())
      throw std::runtime_error(me_name_ + ": node 0 counted this node lost in view " +
                               std::to_string(view.id) +
                               " (it did not answer within the heartbeat's silence); stopping");
    move_to(view);
  }
  bool clean = false;
  if (node0_gone) {
    self->request(node_, std::chrono::seconds(10), farewell_atom_v, local_key_)
        .receive([&](bool said) { clean = said; }, [](caf::error&) {});
  }
  if (!clean) throw std::runtime_error(me_name_ + ": lost the coordinator (node 0); stopping");
  say("stopped by the coordinator");
  return 0;
}

// Node 0: waits until every node's actors reached every other node's once.
void node_process::wire_coordinator() {
  coord_.reset();
  const auto& h = mesh_->handles();
  coord_.emplace(self_->ptr(), h.batchers, h.shards, h.stores, ctx_, ws_.timeout);
  train_sizes_ = mesh_->wait_ready(std::chrono::steady_clock::now() + connect_time_);
}

int node_process::coordinate() {
  wire_coordinator();
  first_step_ = start_.next_step;
  while (true) {
    try {
      const auto per_epoch = batches_per_epoch(train_sizes_, s_.batch_size);
      if (board_) {
        board_->set_steps_per_epoch(per_epoch);
        board_->set_phase("training");
      }
      result_ = drive_training(
          *coord_, s_, rc_, per_epoch, first_step_, *report_,
          [&](std::uint64_t step, double loss) {
            losses_.push_back(loss);
            if (!board_) return;
            board_->on_step(step, loss);
            const coordinator_status st = coord_->status();  // a local actor: at once
            board_->on_step_times(st.steps_only_us, st.allreduce_only_us, st.overlap_us);
          },
          [&]() -> console_asks {
            if (!board_) return {};
            // A paused run still notices a failed cluster within a second.
            return board_->between_steps([&] {
              const coordinator_status st = coord_->status();
              if (st.phase() == coordinator_phase::failed) throw std::runtime_error(st.error);
            });
          });
      break;
    } catch (const std::exception& e) {
      if (!recover(e)) break;
    }
  }
  return finish();
}

bool node_process::recover(const std::exception& failure) {
  const std::string why = with_node_of_partition(members_.view, failure.what());
  stopwatch clock;
  // A member still busy with the failed step answers late, not never: it counts as lost only
  // after the silence the heartbeat allows.
  const std::vector<int> lost =
      recovers_ ? lost_members(*self_, node_, local_key_, *mesh_, members_.view, settings_.silence)
                : std::vector<int>{};
  if (lost.empty()) {
    if (board_) board_->set_phase("failed");
    throw std::runtime_error(me_name_ + ": " + why);
  }
  const coordinator_status st = coord_->status();
  // Back to the last checkpoint every replica wrote (its commit records may be missing where a
  // node was lost during phase 2); before any: where this training started.
  const std::uint64_t back_to = st.durable_next_step > 0 ? st.durable_next_step : first_step_;
  std::string gone;
  for (int r : lost)
    gone += (gone.empty() ? "" : ", ") + std::to_string(r);
  char probed[32];
  std::snprintf(probed, sizeof probed, "%.2f", clock.seconds());
  say("lost node " + gone + " at step " + std::to_string(st.step) + " (" + why + "; found in " +
      probed + " s)");
  if (back_to >=
      static_cast<std::uint64_t>(s_.epochs) * batches_per_epoch(train_sizes_, s_.batch_size)) {
    say("the run's last step was saved before the loss: nothing to redo");
    return false;
  }
  if (board_) board_->set_phase("recovering");
  const wire::membership_view next =
      next_view(*self_, node_, local_key_, ctx_, members_.view, lost, back_to, recovery_,
                [this](const std::string& line) { say(line); });
  say("view " + std::to_string(next.id) + ": " +
      (next.replaced.empty()
           ? moved_partitions(members_.view, next)
           : "node " + gone + " replaced by " + next.members[static_cast<size_t>(lost[0])].name) +
      "; every node rolls back to step " + std::to_string(back_to) +
      " (the last checkpoint every node wrote)");
  if (board_) board_->set_view(next);
  if (board_ && board_->drop_trace()) say("the console's trace ends unwritten: every actor is new");
  announce_view(*self_, *mesh_, ctx_, members_.view, next);
  coord_.reset();
  move_to(next);
  wire_coordinator();
  losses_.resize(back_to - first_start_.next_step);
  first_step_ = back_to;
  ++recoveries_;
  char took[32];
  std::snprintf(took, sizeof took, "%.2f", clock.seconds());
  say("recovered in " + std::string(took) + " s: training again from step " +
      std::to_string(back_to) + "; " + std::to_string(st.step - std::min(st.step, back_to)) +
      " steps done since that commit are redone");
  return true;
}

// Node 0 after the last step: the summary, then bye to every other node.
int node_process::finish() {
  result_.recoveries = recoveries_;
  report_->finish();
  if (board_) board_->set_phase("finished");
  print_node_summary(result_, *report_, losses_);
  for (size_t p = 1; p < n_; ++p) {
    if (members_.view.members[p].lost) continue;
    (*self_)
        ->request(mesh_->node_of(p), std::chrono::seconds(10), bye_atom_v, members_.view.secret)
        .receive([](bool) {},
                 [&](caf::error& e) {
                   std::fprintf(stderr, "node 0: stopping node %zu: %s\n", p,
                                sys_.render(e).c_str());
                 });
  }
  if (!result_.replicas_identical) {
    throw std::runtime_error(
        "node 0: the replicas' parameters differ after training (the workers applied different "
        "updates; the run's results cannot be trusted)");
  }
  return 0;
}

}  // namespace degnn::node_process_detail
