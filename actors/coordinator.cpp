// The coordinator actor. Commands run one at a time in arrival order; each is a chain of
// scatter-gathers over one role's actors (actors/gather.hpp), every request with the timeout:
//
//   idle --runstep--> stepping --(gradients in)--> reducing --(every replica applied)--> idle
//   idle --evaluate--> [reducing: a step still in flight] --> evaluating (layer 1..L) --> idle
//   idle --inithist--> evaluating --> history (init, halo refresh) --> idle
//   idle --params / report / trace--> reporting --> idle
//   any --(a request failed)--> failed: the command and every later one answer the error
//
// status is answered at once in every phase.
#include "actors/coordinator.hpp"

#include <algorithm>
#include <memory>

#include "actors/coordinator_internal.hpp"

namespace degnn {
namespace coordinator_detail {

// -- running commands one at a time --

void run_next(self_ptr self) {
  auto& st = self->state;
  if (st.busy || st.queue.empty()) return;
  st.busy = true;
  auto job = std::move(st.queue.front());
  st.queue.pop_front();
  job();
}

void command_done(self_ptr self) {
  auto& st = self->state;
  st.busy = false;
  st.running_fail = nullptr;
  if (st.status.phase() != coordinator_phase::failed) enter(st, coordinator_phase::idle);
  run_next(self);
}

std::vector<wire_message> control_messages(coordinator_state& st, const wire::control& c) {
  std::vector<wire_message> out;
  for (size_t p = 0; p < st.batchers.size(); ++p) {
    out.push_back(pack(wire::kind::control, wire::encode(st.ctx, c)));
    // The coordinator runs on partition 0's node: messages to the others cross the network.
    if (p != kCoordinatorPart) st.sent.add(wire::kind::control, out.back().bytes.size());
  }
  return out;
}

// Decodes each reply as an allreduce_chunk, refusing any other kind.
std::vector<wire::allreduce_chunk> chunks(const coordinator_state& st,
                                          const std::vector<wire_message>& replies,
                                          const char* what) {
  std::vector<wire::allreduce_chunk> out;
  for (size_t p = 0; p < replies.size(); ++p) {
    if (replies[p].kind != static_cast<std::uint16_t>(wire::kind::allreduce_chunk)) {
      throw std::runtime_error(std::string(what) + ": partition " + std::to_string(p) +
                               " answered with a " +
                               wire::kind_name(static_cast<wire::kind>(replies[p].kind)));
    }
    out.push_back(wire::decode_allreduce_chunk(st.ctx, replies[p].bytes));
  }
  return out;
}

}  // namespace coordinator_detail

namespace {

using namespace coordinator_detail;

std::string lost_actor_name(const coordinator_state& st, const caf::actor_addr& who) {
  auto find = [&](const auto& actors, const char* role) -> std::string {
    for (size_t p = 0; p < actors.size(); ++p)
      if (actors[p].address() == who) return "partition " + std::to_string(p) + "'s " + role;
    return {};
  };
  for (auto name : {find(st.batchers, "batch actor"), find(st.shards, "shard"),
                    find(st.stores, "embedding store")})
    if (!name.empty()) return name;
  return "an actor of the cluster";
}

/// Queues a command; run(rp, fail) delivers its answer and calls command_done (fail does both).
template <class T, class Run>
caf::result<T> enqueue(self_ptr self, Run run) {
  auto rp = self->make_response_promise<T>();
  self->state.queue.push_back([self, rp, run]() mutable {
    auto& st = self->state;
    if (st.status.phase() == coordinator_phase::failed) {
      // Failures that make the coordinator fail are a peer's (a lost actor, a failed request).
      rp.deliver(actor_error(actor_errc::peer_failed, st.status.error));
      command_done(self);
      return;
    }
    // A command answers once: the first failure of any of its chains wins.
    auto answered = std::make_shared<bool>(false);
    fail_fn fail = [self, rp, answered](const std::string& why) mutable {
      if (*answered) return;
      *answered = true;
      self->state.status.set_phase(coordinator_phase::failed);
      self->state.status.error = why;
      rp.deliver(actor_error(actor_errc::peer_failed, why));
      command_done(self);
    };
    self->state.running_fail = fail;
    run(rp, fail);
  });
  run_next(self);
  return rp;
}

// A worker actor that is gone (its node stopped, the connection dropped or timed out) fails the
// running command and every later one at once, naming it, instead of after the request timeout.
void on_worker_down(self_ptr self, const caf::down_msg& d) {
  auto& st = self->state;
  if (st.status.phase() == coordinator_phase::failed) return;
  const std::string why =
      lost_actor_name(st, d.source) + " is gone (" + self->system().render(d.reason) + ")";
  if (st.running_fail) {
    auto fail = st.running_fail;
    fail(why);
  } else {
    st.status.set_phase(coordinator_phase::failed);
    st.status.error = why;
  }
}

// Every replica's parameters after step `step` (the replies are counted by the batch actors).
void collect_parameters(self_ptr self, caf::typed_response_promise<replica_parameters> rp,
                        fail_fn fail, std::uint64_t step) {
  auto& st = self->state;
  enter(st, coordinator_phase::reporting);
  all(
      self, st.batchers, params_atom_v,
      control_messages(st, {.h = {step, 0}, .what = wire::control_kind::checkpoint}), "parameters",
      [self, rp](std::vector<wire_message>& replies) mutable {
        replica_parameters out;
        for (const auto& m : replies)
          out.values.push_back(wire::decode_allreduce_chunk(self->state.ctx, m.bytes).values);
        rp.deliver(std::move(out));
        command_done(self);
      },
      fail);
}

// The shards' staleness from the next step on (after the steps in flight).
void set_staleness(self_ptr self, caf::typed_response_promise<bool> rp, fail_fn fail,
                   std::int32_t staleness) {
  auto& st = self->state;
  wire::control c{.h = {0, 0}, .what = wire::control_kind::settings};
  c.counts = {static_cast<std::uint64_t>(std::max(staleness, 0))};
  all(
      self, st.shards, settings_atom_v, control_messages(st, c), "settings",
      [self, rp](std::vector<wire_message>&) mutable {
        rp.deliver(true);
        command_done(self);
      },
      fail);
}

coordinator_status status_now(const coordinator_state& st) {
  coordinator_status s = st.status;
  s.queued = st.queue.size();
  s.allreduce_us = st.stages.total_us()[static_cast<size_t>(stage::allreduce)];
  s.step_phase_us = st.stages.total_us()[static_cast<size_t>(stage::step_phase)];
  s.steps_only_us = st.activity.only_us(kStepActivity);
  s.allreduce_only_us = st.activity.only_us(kReduceActivity);
  s.overlap_us = st.activity.both_us();
  return s;
}

coordinator_actor::behavior_type coordinator_behavior(
    self_ptr self, std::vector<batch_actor> batchers, std::vector<shard_actor> shards,
    std::vector<store_actor> stores, wire::context ctx, std::chrono::milliseconds timeout) {
  auto& st = self->state;
  st.batchers = std::move(batchers);
  st.shards = std::move(shards);
  st.stores = std::move(stores);
  st.ctx = ctx;
  st.timeout = timeout;
  for (const auto& a : st.batchers)
    self->monitor(a);
  for (const auto& a : st.shards)
    self->monitor(a);
  for (const auto& a : st.stores)
    self->monitor(a);
  self->set_down_handler([self](caf::down_msg& d) { on_worker_down(self, d); });
  return {
      [self](run_step_atom, std::uint32_t epoch, std::uint64_t index, std::uint64_t step,
             bool decentralized) {
        return enqueue<step_result>(self, [=](auto rp, fail_fn fail) {
          auto& st = self->state;
          enter(st, coordinator_phase::stepping);
          st.status.epoch = epoch;
          st.status.step = step;
          (decentralized ? decentralized_step : centralized_step)(self, rp, fail, epoch, index,
                                                                  step);
        });
      },
      [self](finish_atom) {
        return enqueue<bool>(self, [self](auto rp, fail_fn fail) {
          finish_steps(
              self,
              [self, rp]() mutable {
                rp.deliver(true);
                command_done(self);
              },
              fail);
        });
      },
      [self](init_hist_atom, std::int32_t layers, std::uint64_t step) {
        return enqueue<bool>(
            self, [=](auto rp, fail_fn fail) { init_history(self, rp, fail, layers, step); });
      },
      [self](eval_atom, std::int32_t layers, std::uint64_t step) {
        return enqueue<eval_result>(self, [=](auto rp, fail_fn fail) {
          evaluate(
              self, layers, step,
              [self, rp](const eval_result& r) mutable {
                rp.deliver(r);
                command_done(self);
              },
              fail);
        });
      },
      [self](params_atom, std::uint64_t step) {
        return enqueue<replica_parameters>(self, [=](auto rp, fail_fn fail) {
          finish_steps(
              self, [=]() mutable { collect_parameters(self, rp, fail, step); }, fail);
        });
      },
      [self](report_atom) {
        return enqueue<cluster_report>(self,
                                       [self](auto rp, fail_fn fail) { report(self, rp, fail); });
      },
      [self](trace_atom) {
        return enqueue<std::string>(self, [self](auto rp, fail_fn fail) { trace(self, rp, fail); });
      },
      [self](trace_atom, bool on) {
        return enqueue<bool>(
            self, [self, on](auto rp, fail_fn fail) { set_tracing(self, rp, fail, on); });
      },
      [self](save_atom, std::uint64_t next_step, bool wait) {
        return enqueue<std::uint64_t>(
            self, [=](auto rp, fail_fn fail) { checkpoint(self, rp, fail, next_step, wait); });
      },
      [self](configure_atom, bool pipelined, bool ring, bool keep_spans) {
        return enqueue<bool>(self, [=](auto rp, fail_fn) mutable {
          self->state.pipelined = pipelined;
          self->state.ring = ring;
          if (keep_spans) self->state.stages.keep_spans();
          rp.deliver(true);
          command_done(self);
        });
      },
      [self](settings_atom, std::int32_t staleness) {
        return enqueue<bool>(self, [=](auto rp, fail_fn fail) mutable {
          finish_steps(
              self, [=]() mutable { set_staleness(self, rp, fail, staleness); }, fail);
        });
      },
      [self](status_atom) { return status_now(self->state); },
  };
}

}  // namespace

coordinator_actor spawn_coordinator(caf::actor_system& sys, std::vector<batch_actor> batchers,
                                    std::vector<shard_actor> shards,
                                    std::vector<store_actor> stores, wire::context ctx,
                                    std::chrono::milliseconds timeout) {
  return sys.spawn(coordinator_behavior, std::move(batchers), std::move(shards), std::move(stores),
                   ctx, timeout);
}

}  // namespace degnn
