// The coordinator's steps and all-reduce: a centralized step (every worker's batch, then the
// average of their gradients), a decentralized step (pipelined with the previous step's gradient
// phase), and the averaging and apply both end with.
#include <memory>

#include "actors/coordinator_internal.hpp"

namespace degnn::coordinator_detail {

// -- the all-reduce --

// Every replica applied the average of step's gradients: the all-reduce that began then is over.
void applied(self_ptr self, std::uint64_t step, std::int64_t began_us) {
  auto& st = self->state;
  st.stages.add(stage::allreduce, step, began_us, stage_log::now_us());
  st.activity.end(kReduceActivity, stage_log::steady_us());
  ++st.status.applies;
}

// Throws unless every reply is a worker's control result: in the ring the workers reduced and
// applied the gradient themselves and only say so.
void expect_results(const coordinator_state& st, const std::vector<wire_message>& replies,
                    const char* what) {
  for (size_t p = 0; p < replies.size(); ++p) {
    const auto& m = replies[p];
    if (m.kind != static_cast<std::uint16_t>(wire::kind::control) ||
        wire::decode_control(st.ctx, m.bytes).what != wire::control_kind::result) {
      throw std::runtime_error(std::string(what) + ": partition " + std::to_string(p) +
                               " did not answer with a result");
    }
  }
}

// Star: averages the summed gradients over the contributors and has every replica apply the
// average.
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
        applied(self, step, began_us);
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

// Every worker's gradient phase of decentralized step u. Star: the gradients come here and the
// average goes back; ring: the workers reduce it among themselves and apply it before answering.
void gradient_phase(self_ptr self, coordinator_state::unreduced_step u, done_fn done,
                    fail_fn fail) {
  auto& st = self->state;
  const auto began = stage_log::now_us();
  st.activity.begin(kReduceActivity, stage_log::steady_us());
  all(
      self, st.batchers, gradient_atom_v,
      control_messages(st,
                       {.h = {u.step, 0}, .what = wire::control_kind::gradient, .ring = st.ring}),
      "gradient",
      [self, u, done, fail, began](std::vector<wire_message>& replies) {
        auto finished = [self, done] {
          self->state.unreduced.reset();
          done();
        };
        if (!self->state.ring) {
          reduce_and_apply(self, replies, u.contributors, u.step, began, finished, fail);
          return;
        }
        try {
          expect_results(self->state, replies, "gradient");
        } catch (const std::exception& e) {
          fail(e.what());
          return;
        }
        applied(self, u.step, began);
        finished();
      },
      fail);
}

// The gradient phase of a decentralized step still in flight, if any.
void finish_steps(self_ptr self, done_fn done, fail_fn fail) {
  auto& st = self->state;
  if (!st.unreduced) {
    done();
    return;
  }
  enter(st, coordinator_phase::reducing);
  gradient_phase(self, *st.unreduced, std::move(done), std::move(fail));
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

// Every worker's step request, timed as a step phase; then(replies) once all answered.
void send_step(self_ptr self, std::uint32_t epoch, std::uint64_t index, std::uint64_t step,
               std::vector<std::uint64_t> counts,
               std::function<void(std::vector<wire_message>&)> then, fail_fn fail) {
  auto& st = self->state;
  const std::int64_t began = stage_log::now_us();
  st.activity.begin(kStepActivity, stage_log::steady_us());
  all(
      self, st.batchers, step_atom_v,
      control_messages(st, {.h = {step, 0},
                            .what = wire::control_kind::step,
                            .epoch = epoch,
                            .value = static_cast<double>(index),
                            .counts = std::move(counts),
                            .ring = st.ring}),
      "step",
      [self, step, began, then = std::move(then)](std::vector<wire_message>& replies) {
        auto& st = self->state;
        st.stages.add(stage::step_phase, step, began, stage_log::now_us());
        st.activity.end(kStepActivity, stage_log::steady_us());
        then(replies);
      },
      std::move(fail));
}

void centralized_step(self_ptr self, caf::typed_response_promise<step_result> rp, fail_fn fail,
                      std::uint32_t epoch, std::uint64_t index, std::uint64_t step) {
  send_step(
      self, epoch, index, step, {},
      [self, rp, fail, step](std::vector<wire_message>& replies) mutable {
        auto& st = self->state;
        if (st.ring) {
          // The workers' answers came after their ring: the average is applied everywhere.
          step_result r;
          try {
            int contributors = 0;
            r = sum_steps(chunks(st, replies, "step"), contributors);
          } catch (const std::exception& e) {
            fail(e.what());
            return;
          }
          ++st.status.applies;
          step_done(self, r);
          rp.deliver(r);
          command_done(self);
          return;
        }
        const auto stepped = stage_log::now_us();
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
  if (st.unreduced) {
    gradient_phase(
        self, *st.unreduced,
        [pr, both_done]() mutable {
          pr->reduced = true;
          both_done();
        },
        fail);
  }
  send_step(
      self, epoch, index, step, {needs},
      [pr, both_done](std::vector<wire_message>& replies) mutable {
        pr->step_replies = std::move(replies);
        pr->stepped = true;
        both_done();
      },
      fail);
}

}  // namespace degnn::coordinator_detail
