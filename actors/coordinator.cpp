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

// -- the all-reduce --

// Averages the summed gradients over the contributors and has every replica apply the average.
void apply_average(self_ptr self, std::vector<float> sum, int contributors, std::uint64_t step,
                   std::int64_t began_us, done_fn done, fail_fn fail) {
  auto& st = self->state;
  enter(st, coordinator_phase::reducing);
  // Each worker's gradient is of its mean loss; the average over workers is what DistDGL's
  // synchronous data parallelism applies.
  if (contributors > 1) {
    const float inv = 1.0f / static_cast<float>(contributors);
    for (auto& v : sum)
      v *= inv;
  }
  const wire::allreduce_chunk avg{.h = {step, 0}, .round = 1, .values = std::move(sum)};
  const auto encoded = wire::encode(st.ctx, avg);
  std::vector<wire_message> out;
  for (size_t p = 0; p < st.batchers.size(); ++p) {
    out.push_back(pack(wire::kind::allreduce_chunk, encoded));
    if (p != kCoordinatorPart) st.sent.add(wire::kind::allreduce_chunk, encoded.size());
  }
  all(
      self, st.batchers, apply_atom_v, std::move(out), "apply gradient",
      [self, step, began_us, done](std::vector<wire_message>&) {
        auto& st = self->state;
        const auto now = stage_log::now_us();
        st.stages.add(stage::allreduce, step, began_us, now);
        st.activity.end(kReduceActivity, stage_log::steady_us());
        ++st.status.applies;
        done();
      },
      fail);
}

// Every worker's gradient holds its own batch and the pushes it served for the others.
void reduce_and_apply(self_ptr self, const std::vector<wire_message>& gradients, int contributors,
                      std::uint64_t step, std::int64_t began_us, done_fn done, fail_fn fail) {
  std::vector<float> sum;
  try {
    for (const auto& g : chunks(self->state, gradients, "gradient")) {
      if (sum.empty()) sum.assign(g.values.size(), 0.0f);
      if (g.values.size() != sum.size())
        throw std::runtime_error("gradient: replicas of different sizes");
      for (size_t i = 0; i < sum.size(); ++i)
        sum[i] += g.values[i];
    }
  } catch (const std::exception& e) {
    fail(e.what());
    return;
  }
  apply_average(self, std::move(sum), contributors, step, began_us, std::move(done),
                std::move(fail));
}

// The gradient phase of a decentralized step still in flight, if any.
void finish_steps(self_ptr self, done_fn done, fail_fn fail) {
  auto& st = self->state;
  if (!st.unreduced) {
    done();
    return;
  }
  enter(st, coordinator_phase::reducing);
  const auto u = *st.unreduced;
  const auto began = stage_log::now_us();
  st.activity.begin(kReduceActivity, stage_log::steady_us());
  all(
      self, st.batchers, gradient_atom_v,
      control_messages(st, {.h = {u.step, 0}, .what = wire::control_kind::gradient}), "gradient",
      [self, u, done, fail, began](std::vector<wire_message>& replies) {
        reduce_and_apply(
            self, replies, u.contributors, u.step, began,
            [self, done] {
              self->state.unreduced.reset();
              done();
            },
            fail);
      },
      fail);
}

// -- steps --

step_result sum_steps(const std::vector<wire::allreduce_chunk>& replies, int& contributors) {
  step_result r;
  contributors = 0;
  for (const auto& g : replies) {
    r.loss_sum += g.loss;
    r.seeds += g.seeds;
    r.correct += g.correct;
    contributors += g.seeds > 0;
  }
  return r;
}

void step_done(self_ptr self, const step_result& r) {
  auto& st = self->state;
  ++st.status.steps_done;
  st.status.last_loss = r.seeds ? r.loss_sum / static_cast<double>(r.seeds) : 0.0;
}

void centralized_step(self_ptr self, caf::typed_response_promise<step_result> rp, fail_fn fail,
                      std::uint32_t epoch, std::uint64_t index, std::uint64_t step) {
  auto& st = self->state;
  const std::int64_t began = stage_log::now_us();
  st.activity.begin(kStepActivity, stage_log::steady_us());
  all(
      self, st.batchers, step_atom_v,
      control_messages(st, {.h = {step, 0},
                            .what = wire::control_kind::step,
                            .epoch = epoch,
                            .value = static_cast<double>(index)}),
      "step",
      [self, rp, fail, step, began](std::vector<wire_message>& replies) mutable {
        auto& st = self->state;
        const auto stepped = stage_log::now_us();
        st.stages.add(stage::step_phase, step, began, stepped);
        st.activity.end(kStepActivity, stage_log::steady_us());
        st.activity.begin(kReduceActivity, stage_log::steady_us());
        step_result r;
        std::vector<float> sum;
        int contributors = 0;
        try {
          const auto grads = chunks(st, replies, "step");
          r = sum_steps(grads, contributors);
          for (const auto& g : grads) {
            if (sum.empty()) sum.assign(g.values.size(), 0.0f);
            if (g.values.size() != sum.size())
              throw std::runtime_error("step: gradients of different sizes");
            if (g.seeds == 0) continue;
            for (size_t i = 0; i < sum.size(); ++i)
              sum[i] += g.values[i];
          }
        } catch (const std::exception& e) {
          fail(e.what());
          return;
        }
        apply_average(
            self, std::move(sum), contributors, step, stepped,
            [self, rp, r]() mutable {
              step_done(self, r);
              rp.deliver(r);
              command_done(self);
            },
            fail);
      },
      fail);
}

// Pipelined: the previous step's gradient phase and this step's request leave together, so this
// step's sampling, local expansion and history pulls run during the previous step's all-reduce;
// its forward waits for the averaged gradient (`counts[0]`: the applies it needs). At most two
// steps are in flight.
void decentralized_step(self_ptr self, caf::typed_response_promise<step_result> rp, fail_fn fail,
                        std::uint32_t epoch, std::uint64_t index, std::uint64_t step) {
  auto& st = self->state;
  struct progress {
    bool reduced = false, stepped = false;
    std::vector<wire_message> step_replies;
  };
  auto pr = std::make_shared<progress>();
  pr->reduced = !st.unreduced;
  auto both_done = [self, rp, fail, pr, step]() mutable {
    if (!pr->reduced || !pr->stepped) return;
    auto& st = self->state;
    step_result r;
    int contributors = 0;
    try {
      r = sum_steps(chunks(st, pr->step_replies, "step"), contributors);
    } catch (const std::exception& e) {
      fail(e.what());
      return;
    }
    st.unreduced = coordinator_state::unreduced_step{step, contributors};
    auto deliver = [self, rp, r]() mutable {
      step_done(self, r);
      rp.deliver(r);
      command_done(self);
    };
    if (st.pipelined)
      deliver();
    else
      finish_steps(self, deliver, fail);
  };
  const std::uint64_t needs = st.status.applies + (st.unreduced ? 1 : 0);
  const auto began = stage_log::now_us();
  if (st.unreduced) {
    const auto u = *st.unreduced;
    st.activity.begin(kReduceActivity, stage_log::steady_us());
    all(
        self, st.batchers, gradient_atom_v,
        control_messages(st, {.h = {u.step, 0}, .what = wire::control_kind::gradient}), "gradient",
        [self, u, pr, both_done, fail, began](std::vector<wire_message>& replies) mutable {
          reduce_and_apply(
              self, replies, u.contributors, u.step, began,
              [self, pr, both_done]() mutable {
                self->state.unreduced.reset();
                pr->reduced = true;
                both_done();
              },
              fail);
        },
        fail);
  }
  st.activity.begin(kStepActivity, stage_log::steady_us());
  all(
      self, st.batchers, step_atom_v,
      control_messages(st, {.h = {step, 0},
                            .what = wire::control_kind::step,
                            .epoch = epoch,
                            .value = static_cast<double>(index),
                            .counts = {needs}}),
      "step",
      [self, pr, both_done, step, began](std::vector<wire_message>& replies) mutable {
        const auto now = stage_log::now_us();
        self->state.stages.add(stage::step_phase, step, began, now);
        self->state.activity.end(kStepActivity, stage_log::steady_us());
        pr->step_replies = std::move(replies);
        pr->stepped = true;
        both_done();
      },
      fail);
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

coordinator_actor::behavior_type coordinator_behavior(
    self_ptr self, std::vector<batch_actor> batchers, std::vector<shard_actor> shards,
    std::vector<store_actor> stores, wire::context ctx, std::chrono::milliseconds timeout) {
  auto& st = self->state;
  st.batchers = std::move(batchers);
  st.shards = std::move(shards);
  st.stores = std::move(stores);
  st.ctx = ctx;
  st.timeout = timeout;
  // A worker actor that is gone (its node stopped, the connection dropped or timed out) fails the
  // running command and every later one at once, naming it, instead of after the request timeout.
  for (const auto& a : st.batchers)
    self->monitor(a);
  for (const auto& a : st.shards)
    self->monitor(a);
  for (const auto& a : st.stores)
    self->monitor(a);
  self->set_down_handler([self](caf::down_msg& d) {
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
  });
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
              self,
              [self, rp, fail, step]() mutable {
                auto& st = self->state;
                enter(st, coordinator_phase::reporting);
                // The replies are counted by the batch actors.
                all(
                    self, st.batchers, params_atom_v,
                    control_messages(st, {.h = {step, 0}, .what = wire::control_kind::checkpoint}),
                    "parameters",
                    [self, rp](std::vector<wire_message>& replies) mutable {
                      replica_parameters out;
                      for (const auto& m : replies)
                        out.values.push_back(
                            wire::decode_allreduce_chunk(self->state.ctx, m.bytes).values);
                      rp.deliver(std::move(out));
                      command_done(self);
                    },
                    fail);
              },
              fail);
        });
      },
      [self](report_atom) {
        return enqueue<cluster_report>(self,
                                       [self](auto rp, fail_fn fail) { report(self, rp, fail); });
      },
      [self](trace_atom) {
        return enqueue<std::string>(self, [self](auto rp, fail_fn fail) { trace(self, rp, fail); });
      },
      [self](configure_atom, bool pipelined, bool keep_spans) {
        return enqueue<bool>(self, [=](auto rp, fail_fn) mutable {
          self->state.pipelined = pipelined;
          if (keep_spans) self->state.stages.keep_spans();
          rp.deliver(true);
          command_done(self);
        });
      },
      [self](status_atom) {
        auto& st = self->state;
        coordinator_status s = st.status;
        s.queued = st.queue.size();
        s.allreduce_us = st.stages.total_us()[static_cast<size_t>(stage::allreduce)];
        s.step_phase_us = st.stages.total_us()[static_cast<size_t>(stage::step_phase)];
        s.steps_only_us = st.activity.only_us(kStepActivity);
        s.allreduce_only_us = st.activity.only_us(kReduceActivity);
        s.overlap_us = st.activity.both_us();
        return s;
      },
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
