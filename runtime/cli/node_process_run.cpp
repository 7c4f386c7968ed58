// The node process once its mesh is connected: a member serves until the coordinator says bye
// (moving to each new view a recovery makes); the coordinator (node 0, or its successor) runs the
// epochs, recovers from a lost member and says bye to every member at the end.
#include <algorithm>
#include <cstdio>

#include "model/data_error.hpp"
#include "model/model_file.hpp"
#include "model/replica.hpp"
#include "runtime/cli/node_process_phases.hpp"

namespace degnn::node_process_detail {

// A recovery, on every surviving node: the workers roll back to the commit the view names and
// serve the view's partitions (the ones kept and the ones adopted), then take every member's
// new workers. Steps after that commit are redone exactly (see --recover).
void node_process::move_to(const wire::membership_view& next) {
  for (const auto& w : local_)
    stop_worker(*self_, w);
  local_.clear();
  std::vector<std::int32_t> folders = members_.view.members[static_cast<size_t>(id_)].partitions;
  members_.view = next;
  view_since_ = run_gaps::clock::now();
  if (board_) board_->set_view(next);
  const auto& mine = next.members[static_cast<size_t>(id_)].partitions;
  folders.insert(folders.end(), mine.begin(), mine.end());
  auto load = [&] {
    return load_cluster_start_in(s_.checkpoint_dir, rc_, ws_.run_id, meta_.num_parts,
                                 next.resume_step);
  };
  if (next.resume_step == first_start_.next_step) {
    start_ = first_start_;
  } else {
    try {
      start_ = load();
    } catch (const data_error& e) {
      // Node 0 offers its copy of the commit it rolls back to; a successor offers none.
      if (!seed_files_ || next.coordinator() != 0) throw;
      say(std::string(e.what()) + "; restoring it from the seed's copy");
      say("restored " +
          restore_checkpoint_from_seed(sys_, seed_node_, mode_.seed_address.str(),
                                       s_.checkpoint_dir, folders, next.resume_step) +
          " from the seed at " + mode_.seed_address.str());
      start_ = load();
    }
  }
  ws_.start = start_.state;
  fetch_missing(next);
  served_ = serve(members_);
  say("view " + std::to_string(next.id) + ": serving partition " + served_ +
      ", rolled back to step " + std::to_string(next.resume_step));
  mesh_->rewire(members_, std::chrono::steady_clock::now() + connect_time_);
}

// A member: serves until the coordinator goes away; it said bye first if the run ended (every
// node stays until then, so no connection closes while the coordinator still says bye to the
// others). Without a bye, a member that recovers fails over (cli/node_process_failover.cpp).
int node_process::serve_until_stopped() {
  auto& self = *self_;
  self->monitor(node_);
  int coord = members_.view.coordinator();
  self->monitor(mesh_->node_of(static_cast<size_t>(coord)));
  while (true) {
    // A view announced by a successor (this node had not noticed the coordinator's loss yet)
    // names another coordinator.
    if (const int now = members_.view.coordinator(); now != coord) {
      coord = now;
      self->monitor(mesh_->node_of(static_cast<size_t>(coord)));
    }
    bool own_gone = false, coord_gone = false;
    self->receive(
        [&](caf::down_msg& d) {
          own_gone = d.source == node_.address();
          coord_gone = d.source == mesh_->node_of(static_cast<size_t>(coord)).address();
        },
        caf::after(std::chrono::milliseconds(100)) >> [] {});
    if (own_gone) throw std::runtime_error(me_name_ + ": its node actor stopped; stopping");
    if (!coord_gone) {
      if (recovers_) take_announced_view();
      continue;
    }
    std::vector<std::string> bye;
    self->request(node_, std::chrono::seconds(10), farewell_atom_v, local_key_)
        .receive([&](std::vector<std::string>& said) { bye = std::move(said); },
                 [](caf::error&) {});
    if (!bye.empty() && bye.front().empty()) {
      say("stopped by the coordinator");
      return 0;
    }
    const std::string who = "the coordinator (node " + std::to_string(coord) + ")";
    if (!bye.empty()) throw std::runtime_error(me_name_ + ": " + who + " stopped: " + bye.front());
    if (!recovers_) throw std::runtime_error(me_name_ + ": lost " + who + "; stopping");
    bool coordinates = false;
    try {
      coordinates = fail_over();
    } catch (const left_behind& e) {
      stop_left_behind(e);
    }
    if (coordinates) return coordinate();
  }
}

void node_process::observe_epochs() {
  report_->observe([this](const epoch_record& r) {
    if (board_) board_->on_epoch(r);
    if (!r.evaluated || !mesh_) return;
    std::vector<validation_point> v = report_->history();
    v.push_back({r.epoch, r.valid_acc, r.test_acc});  // not in the history before the observers ran
    for (size_t p = 0; p < n_; ++p)
      if (static_cast<int>(p) != id_ && !members_.view.members[p].lost)
        (*self_)->send(mesh_->node_of(p), validation_atom_v, v, members_.view.secret);
  });
}

// Node 0: waits until every node's actors reached every other node's once.
void node_process::wire_coordinator() {
  coord_.reset();
  const auto& h = mesh_->handles();
  coord_.emplace(self_->ptr(), h.batchers, h.shards, h.stores, ctx_, ws_.timeout);
  train_sizes_ = mesh_->wait_ready(std::chrono::steady_clock::now() + connect_time_);
}

int node_process::coordinate() {
  try {
    if (!coord_) wire_coordinator();  // a successor's is wired already
    first_step_ = start_.next_step;
    train_until_done();
  } catch (const std::exception& e) {
    // Its members must not take this for a loss to fail over from.
    stop_members(e.what());
    throw;
  }
  return finish();
}

std::uint64_t node_process::total_steps() const {
  return static_cast<std::uint64_t>(s_.epochs) * batches_per_epoch(train_sizes_, s_.batch_size);
}

void node_process::need_majority(const wire::membership_view& view,
                                 const std::vector<int>& lost) const {
  std::string no = without_majority(view, lost);
  if (no.empty()) return;
  // Only a process that runs can be another side: a lost member whose port refuses connections
  // (a crash, a kill) leaves the count. Silent ones (paused, cut off) still count. But if this
  // node did not run for a while itself, the others may have counted it lost, gone on and ended
  // since: their closed ports then prove nothing.
  const auto away = gaps_.longest_since(view_since_);
  const bool was_away = 2 * away > settings_.silence;
  const std::vector<int> gone =
      was_away ? std::vector<int>{} : no_longer_running(view, lost, std::chrono::seconds(1));
  if (was_away)
    no += " (this node did not run for " + two_places(std::chrono::duration<double>(away).count()) +
          " s, so none of the lost counts as gone: the others may have gone on without it)";
  if (!gone.empty()) {
    no = without_majority(view, lost, gone);
    if (no.empty()) {
      const bool one = gone.size() == 1;
      say("node " + rank_list(gone) +
          (one ? " no longer runs (its port refuses" : " no longer run (their ports refuse") +
          " connections), so " + (one ? "it is" : "they are") + " on no side: the rest of view " +
          std::to_string(view.id) + " is a majority without " + (one ? "it" : "them"));
      return;
    }
  }
  throw std::runtime_error(me_name_ + ": lost node " + rank_list(lost) + ": " + no +
                           "; stopping, so that no second coordinator can go on (start every "
                           "node again with --resume to go on from the last commit)");
}

void node_process::stop_left_behind(const std::exception& e) {
  if (board_) board_->set_phase("failed");
  // Their coordinator counted a strict majority without this node, so this side has none.
  std::string what = e.what();  // the announce's words name this node already
  if (!what.starts_with(me_name_ + ": ")) what = me_name_ + ": " + what;
  throw std::runtime_error(what +
                           ": the other members went on without this node (paused or cut off "
                           "past the time-out), so its side is not a majority; stopping, so that "
                           "no second coordinator can go on");
}

void node_process::train_until_done() {
  if (recoveries_ > 0 &&
      first_step_ >= total_steps()) {  // a successor whose last commit ended the run
    say("the run's last step was committed before the coordinator was lost: nothing to redo");
    return;
  }
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
      try {
        if (!recover(e)) break;
      } catch (const left_behind& behind) {
        stop_left_behind(behind);
      }
    }
  }
}

bool node_process::recover(const std::exception& failure) {
  const std::string why = with_node_of_partition(members_.view, failure.what());
  stopwatch clock;
  // A member still busy with the failed step answers late, not never: it counts as lost only
  // after the silence the heartbeat allows.
  const std::vector<int> lost = recovers_ ? lost_members(*self_, node_, local_key_, *mesh_,
                                                         members_.view, settings_.silence, id_)
                                          : std::vector<int>{};
  if (lost.empty()) {
    if (board_) board_->set_phase("failed");
    throw std::runtime_error(me_name_ + ": " + why);
  }
  const coordinator_status st = coord_->status();
  // Back to the last checkpoint every replica wrote (its commit records may be missing where a
  // node was lost during phase 2); before any: where this training started.
  const std::uint64_t back_to = st.durable_next_step > 0 ? st.durable_next_step : first_step_;
  say("lost node " + rank_list(lost) + " at step " + std::to_string(st.step) + " (" + why +
      "; found in " + two_places(clock.seconds()) + " s)");
  try {
    need_majority(members_.view, lost);
  } catch (const std::exception&) {
    if (board_) board_->set_phase("failed");
    throw;
  }
  if (back_to >= total_steps()) {
    say("the run's last step was saved before the loss: nothing to redo");
    return false;
  }
  if (board_) board_->set_phase("recovering");
  move_cluster(lost, back_to, false);
  losses_.resize(std::min<std::size_t>(losses_.size(), back_to - std::min(back_to, losses_from_)));
  first_step_ = back_to;
  ++recoveries_;
  say("recovered in " + two_places(clock.seconds()) + " s: training again from step " +
      std::to_string(back_to) + "; " + std::to_string(st.step - std::min(st.step, back_to)) +
      " steps done since that commit are redone");
  return true;
}

void node_process::move_cluster(std::vector<int> lost, std::uint64_t back_to, bool adopt_only) {
  // `base`: the last view this node decided (its id the last one announced, taken or not).
  wire::membership_view base = members_.view;
  std::vector<int> lost_so_far = lost;  // since members_.view
  for (std::size_t attempt = 0;; ++attempt) {
    const wire::membership_view next =
        adopt_only ? adopted_view(base, lost, back_to)
                   : next_view(*self_, node_, local_key_, ctx_, base, lost, back_to, recovery_,
                               [this](const std::string& line) { say(line); });
    say("view " + std::to_string(next.id) + ": " +
        (next.replaced.empty() ? moved_partitions(base, next)
                               : "node " + rank_list(lost) + " replaced by " +
                                     next.members[static_cast<size_t>(lost[0])].name) +
        "; every node rolls back to step " + std::to_string(back_to) +
        " (the last checkpoint every node wrote)");
    if (board_ && board_->drop_trace())
      say("the console's trace ends unwritten: every actor is new");
    try {
      announce_view(*self_, *mesh_, ctx_, members_.view, next, id_);
      coord_.reset();
      move_to(next);
      wire_coordinator();
      return;
    } catch (const left_behind&) {
      throw;  // another coordinator went on: no further view
    } catch (const std::exception& e) {
      // A member lost while the view changed (a second loss during the recovery) gets a further
      // view without it; anything else, or a loss every member could see, ends the run.
      if (attempt + 1 >= n_) throw;
      const std::vector<int> more =
          lost_members(*self_, node_, local_key_, *mesh_, next, settings_.silence, id_);
      if (more.empty()) throw;
      say("view " + std::to_string(next.id) + " failed (" + e.what() + "): lost node " +
          rank_list(more) + " too");
      // Counted against the view every member took, not the one that failed: a side must not
      // shrink its own count one loss at a time (a 2-2 split found as two losses).
      std::vector<int> all;  // lost since members_.view (moved to it already, if it is `next`)
      for (int r : lost_so_far)
        if (!members_.view.members[static_cast<size_t>(r)].lost) all.push_back(r);
      all.insert(all.end(), more.begin(), more.end());
      std::sort(all.begin(), all.end());
      need_majority(members_.view, all);
      lost_so_far = all;
      base = next;
      lost = more;
    }
  }
}

void node_process::stop_members(const std::string& why) {
  if (!mesh_) return;
  using handle = decltype((*self_)->request(mesh_->node_of(0), std::chrono::seconds(2), bye_atom_v,
                                            std::string(), std::string()));
  std::vector<handle> asked;
  for (size_t p = 0; p < n_; ++p) {
    if (static_cast<int>(p) == id_ || members_.view.members[p].lost) continue;
    asked.push_back((*self_)->request(mesh_->node_of(p), std::chrono::seconds(2), bye_atom_v,
                                      members_.view.secret, why));
  }
  for (auto& h : asked)
    h.receive([](bool) {}, [](caf::error&) {});  // a member gone already needs no word
}

// The coordinator after the last step: the summary, then bye to every other node.
int node_process::finish() {
  result_.recoveries = recoveries_;
  report_->finish();
  if (board_) board_->set_phase("finished");
  print_node_summary(result_, *report_, losses_);
  if (result_.inference) {
    const eval_result& e = *result_.inference;
    say("inference: accuracy train " + four_places(e.accuracy(0)) + ", valid " +
        four_places(e.accuracy(1)) + ", test " + four_places(e.accuracy(2)) +
        "; every node wrote its partitions' predictions under " + s_.predictions);
  }
  for (size_t p = 0; p < n_; ++p) {
    if (static_cast<int>(p) == id_ || members_.view.members[p].lost) continue;
    (*self_)
        ->request(mesh_->node_of(p), std::chrono::seconds(10), bye_atom_v, members_.view.secret,
                  std::string())
        .receive([](bool) {},
                 [&](caf::error& e) {
                   say("stopping node " + std::to_string(p) + ": " + sys_.render(e));
                 });
  }
  if (!result_.replicas_identical) {
    throw std::runtime_error(
        me_name_ +
        ": the replicas' parameters differ after training (the workers applied different "
        "updates; the run's results cannot be trusted)");
  }
  // After the byes and the replicas' check: a model file that cannot be written must not keep the
  // members waiting.
  if (!s_.save_model.empty() && !result_.parameters.empty()) {
    model_replica r(rc_);
    r.set_parameters(result_.parameters);
    save_model_file(s_.save_model, r.model(),
                    {r.model().config(), s_.normalize_features, total_steps()},
                    format_for(s_.save_model));
    say("saved the final model to " + s_.save_model);
  }
  return 0;
}

}  // namespace degnn::node_process_detail
