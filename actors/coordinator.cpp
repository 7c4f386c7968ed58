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

#include <deque>
#include <functional>
#include <memory>
#include <optional>

#include "actors/gather.hpp"
#include "actors/worker_settings.hpp"

namespace degnn {

namespace {

struct coordinator_state {
  static constexpr const char* name = "degnn.coordinator";
  std::vector<batch_actor> batchers;
  std::vector<shard_actor> shards;
  std::vector<store_actor> stores;
  wire::context ctx;
  std::chrono::milliseconds timeout{60000};
  wire::traffic sent;
  stage_log stages;
  bool pipelined = false;
  struct unreduced_step {
    std::uint64_t step;
    int contributors;
  };
  std::optional<unreduced_step> unreduced;  ///< a step whose gradient phase has not run yet
  coordinator_status status;
  std::deque<std::function<void()>> queue;  ///< commands behind the running one
  bool busy = false;
};

using self_ptr = coordinator_actor::stateful_pointer<coordinator_state>;

// A failed coordinator stays failed: a chain still running after its command failed (the other
// half of a pipelined step) must not make it look busy or idle again.
void enter(coordinator_state& st, coordinator_phase p) {
  if (st.status.phase() != coordinator_phase::failed) st.status.set_phase(p);
}
using done_fn = std::function<void()>;
using fail_fn = std::function<void(const std::string&)>;

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
  if (st.status.phase() != coordinator_phase::failed) enter(st, coordinator_phase::idle);
  run_next(self);
}

/// Queues a command; run(rp, fail) delivers its answer and calls command_done (fail does both).
template <class T, class Run>
caf::result<T> enqueue(self_ptr self, Run run) {
  auto rp = self->make_response_promise<T>();
  self->state.queue.push_back([self, rp, run]() mutable {
    auto& st = self->state;
    if (st.status.phase() == coordinator_phase::failed) {
      rp.deliver(actor_error(actor_errc::internal, st.status.error));
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
    run(rp, fail);
  });
  run_next(self);
  return rp;
}

// -- talking to one role's actors --

std::vector<wire_message> control_messages(coordinator_state& st, const wire::control& c) {
  std::vector<wire_message> out;
  for (size_t p = 0; p < st.batchers.size(); ++p) {
    out.push_back(pack(wire::kind::control, wire::encode(st.ctx, c)));
    // The coordinator runs on partition 0's node: messages to the others cross the network.
    if (p != kCoordinatorPart) st.sent.add(wire::kind::control, out.back().bytes.size());
  }
  return out;
}

/// Sends message p to actor p of one role at once; then(replies in partition order), or fail
/// naming the partition whose request failed.
template <class Handle, class Atom, class Then>
void all(self_ptr self, const std::vector<Handle>& to, Atom atom, std::vector<wire_message> msgs,
         const char* what, Then then, fail_fn fail) {
  std::vector<wire_request<Handle, Atom>> requests;
  for (size_t p = 0; p < to.size(); ++p)
    requests.push_back({to[p], std::move(msgs[p])});
  // A reply that cannot be read (a malformed or hostile peer) fails the command.
  auto guarded = [then = std::move(then), fail, what](std::vector<wire_message>& replies) mutable {
    try {
      then(replies);
    } catch (const std::exception& e) {
      fail(std::string(what) + ": " + e.what());
    }
  };
  gather(self, atom, std::move(requests), self->state.timeout, std::move(guarded),
         [self, what, fail](std::size_t p, const caf::error& e) {
           fail(std::string(what) + " on partition " + std::to_string(p) +
                " failed: " + self->system().render(e));
         });
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
        st.stages.add(stage::allreduce, step, began_us, stage_log::now_us());
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
  all(
      self, st.batchers, gradient_atom_v,
      control_messages(st, {.h = {u.step, 0}, .what = wire::control_kind::gradient}), "gradient",
      [self, u, done, fail, began = stage_log::now_us()](std::vector<wire_message>& replies) {
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
  all(
      self, st.batchers, step_atom_v,
      control_messages(st, {.h = {step, 0},
                            .what = wire::control_kind::step,
                            .epoch = epoch,
                            .value = static_cast<double>(index)}),
      "step",
      [self, rp, fail, step, began](std::vector<wire_message>& replies) mutable {
        auto& st = self->state;
        st.stages.add(stage::step_phase, step, began, stage_log::now_us());
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
            self, std::move(sum), contributors, step, stage_log::now_us(),
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
  if (st.unreduced) {
    const auto u = *st.unreduced;
    all(
        self, st.batchers, gradient_atom_v,
        control_messages(st, {.h = {u.step, 0}, .what = wire::control_kind::gradient}), "gradient",
        [self, u, pr, both_done, fail,
         began = stage_log::now_us()](std::vector<wire_message>& replies) mutable {
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
  all(
      self, st.batchers, step_atom_v,
      control_messages(st, {.h = {step, 0},
                            .what = wire::control_kind::step,
                            .epoch = epoch,
                            .value = static_cast<double>(index),
                            .counts = {needs}}),
      "step",
      [self, pr, both_done, step,
       began = stage_log::now_us()](std::vector<wire_message>& replies) mutable {
        self->state.stages.add(stage::step_phase, step, began, stage_log::now_us());
        pr->step_replies = std::move(replies);
        pr->stepped = true;
        both_done();
      },
      fail);
}

// -- evaluation and history --

void evaluate_layers(self_ptr self, int layer, int layers, std::uint64_t step,
                     std::function<void(const eval_result&)> done, fail_fn fail) {
  auto& st = self->state;
  enter(st, coordinator_phase::evaluating);
  all(
      self, st.shards, eval_atom_v,
      control_messages(st, {.h = {step, 0},
                            .what = wire::control_kind::evaluate,
                            .epoch = static_cast<std::uint32_t>(layer)}),
      "evaluate",
      [self, layer, layers, step, done, fail](std::vector<wire_message>& replies) {
        if (layer < layers) {
          evaluate_layers(self, layer + 1, layers, step, done, fail);
          return;
        }
        eval_result result;
        for (const auto& m : replies) {
          const auto r = wire::decode_control(self->state.ctx, m.bytes);
          if (r.counts.size() != 6) {
            fail("evaluate: malformed accuracy counts");
            return;
          }
          for (size_t s = 0; s < 3; ++s) {
            result.correct[s] += r.counts[2 * s];
            result.total[s] += r.counts[2 * s + 1];
          }
        }
        done(result);
      },
      fail);
}

void evaluate(self_ptr self, int layers, std::uint64_t step,
              std::function<void(const eval_result&)> done, fail_fn fail) {
  // Evaluate the weights every step so far produced.
  finish_steps(
      self,
      [self, layers, step, done, fail] { evaluate_layers(self, 1, layers, step, done, fail); },
      fail);
}

void init_history(self_ptr self, caf::typed_response_promise<bool> rp, fail_fn fail, int layers,
                  std::uint64_t step) {
  evaluate(
      self, layers, step,
      [self, rp, fail, step](const eval_result&) mutable {
        auto& st = self->state;
        enter(st, coordinator_phase::history);
        all(
            self, st.shards, init_hist_atom_v,
            control_messages(st, {.h = {step, 0}, .what = wire::control_kind::init_history}),
            "init history",
            [self, rp, fail, step](std::vector<wire_message>&) mutable {
              // Halo features (once: they never change) and the initial history, before the
              // first step.
              auto& st = self->state;
              all(
                  self, st.shards, refresh_atom_v,
                  control_messages(st, {.h = {step, 0}, .what = wire::control_kind::refresh}),
                  "halo refresh",
                  [self, rp](std::vector<wire_message>&) mutable {
                    rp.deliver(true);
                    command_done(self);
                  },
                  fail);
            },
            fail);
      },
      fail);
}

// -- reports --

// A report is the traffic counters, then (workers) the work counters and the time per stage.
void add_counts(cluster_traffic& t, std::vector<std::uint64_t> counts) {
  constexpr size_t traffic_size = 2 * wire::kNumKinds + 1;
  constexpr size_t work_end = traffic_size + compute_counters::kSize;
  if (counts.size() == work_end + kNumStages) {
    t.work += compute_counters::from_list(
        std::vector<std::uint64_t>(counts.begin() + traffic_size, counts.begin() + work_end));
    for (int k = 0; k < kNumStages; ++k)
      t.stage_us[static_cast<size_t>(k)] += counts[work_end + static_cast<size_t>(k)];
    counts.resize(traffic_size);
  }
  t.rejected += t.sent.add_report(counts);
}

void report(self_ptr self, caf::typed_response_promise<cluster_report> rp, fail_fn fail) {
  auto& st = self->state;
  enter(st, coordinator_phase::reporting);
  // Reports stay uncounted: they measure the traffic, they are not part of it.
  const wire::control c{.h = {0, 0}, .what = wire::control_kind::result};
  const std::vector<wire_message> asks(st.batchers.size(),
                                       pack(wire::kind::control, wire::encode(st.ctx, c)));
  auto t = std::make_shared<cluster_traffic>();
  auto add = [self, t](std::vector<wire_message>& replies) {
    for (const auto& m : replies)
      add_counts(*t, wire::decode_control(self->state.ctx, m.bytes).counts);
  };
  all(
      self, st.batchers, report_atom_v, asks, "traffic report",
      [self, rp, fail, asks, add, t](std::vector<wire_message>& replies) mutable {
        add(replies);
        all(
            self, self->state.shards, report_atom_v, asks, "traffic report of a shard",
            [self, rp, fail, asks, add, t](std::vector<wire_message>& replies) mutable {
              add(replies);
              all(
                  self, self->state.stores, report_atom_v, asks, "traffic report of a store",
                  [self, rp, add, t](std::vector<wire_message>& replies) mutable {
                    add(replies);
                    t->sent += self->state.sent;
                    rp.deliver(cluster_report::from(*t));
                    command_done(self);
                  },
                  fail);
            },
            fail);
      },
      fail);
}

std::string trace_header(int parts) {
  std::string events;
  for (int p = 0; p <= parts; ++p) {
    const std::string name = p < parts ? "partition " + std::to_string(p) : "coordinator";
    if (!events.empty()) events += ',';
    events += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + std::to_string(p) +
              ",\"args\":{\"name\":\"" + name + "\"}}";
    for (int lane = 1; lane <= 3; ++lane) {
      static const char* lanes[] = {"", "compute", "waits", "phases"};
      events += ",{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + std::to_string(p) +
                ",\"tid\":" + std::to_string(lane) + ",\"args\":{\"name\":\"" + lanes[lane] +
                "\"}}";
    }
  }
  return events;
}

void trace(self_ptr self, caf::typed_response_promise<std::string> rp, fail_fn fail) {
  auto& st = self->state;
  enter(st, coordinator_phase::reporting);
  const wire::control c{.h = {0, 0}, .what = wire::control_kind::trace};
  auto events = std::make_shared<std::string>(trace_header(static_cast<int>(st.batchers.size())));
  auto add = [self, events](std::vector<wire_message>& replies) {
    for (const auto& m : replies) {
      const auto text = wire::decode_control(self->state.ctx, m.bytes).text;
      if (!text.empty()) *events += "," + text;
    }
  };
  all(
      self, st.batchers, trace_atom_v, control_messages(st, c), "trace",
      [self, rp, fail, c, add, events](std::vector<wire_message>& replies) mutable {
        add(replies);
        auto& st = self->state;
        all(
            self, st.shards, trace_atom_v, control_messages(st, c), "trace",
            [self, rp, add, events](std::vector<wire_message>& replies) mutable {
              add(replies);
              auto& st = self->state;
              const auto own = st.stages.chrome_events(static_cast<int>(st.batchers.size()));
              if (!own.empty()) *events += "," + own;
              rp.deliver("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[" + *events + "]}\n");
              command_done(self);
            },
            fail);
      },
      fail);
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
