// The batch actor's behaviour: steps (batch_centralized_step.cpp, batch_owner_step.cpp), the
// gradient phase and the averaged gradient handed on to its shard, parameters.
#include "actors/batch_actor.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "actors/batch_internal.hpp"
#include "actors/gather.hpp"
#include "actors/reports.hpp"
#include "model/block_builder.hpp"
#include "model/sampler.hpp"

namespace degnn {

namespace {

using namespace batch_detail;

// The gradient phase of a decentralized step: the shard back-propagates the pushes it served and
// commits their history; its replica's gradient (the layers below the top) plus this replica's
// (the top layer, the only one it trains) is the worker's gradient. For GraphSAGE and GCN the two
// never overlap, so the sum is each one's values exactly; for GAT both hold parts of the top
// layer's weight and attention gradients (the shards' edges there, the owner's self edges). It goes
// to the coordinator, or with Control.ring round the workers' ring, whose average both replicas
// apply before the answer.
caf::result<wire_message> gradient_phase(self_ptr self, const wire_message& m) {
  auto& st = self->state;
  const auto c = wire::decode_control(st.ctx, m.bytes);
  st.weights.forget_upto(c.h.step);
  const bool contributes = st.seeded_steps.count(c.h.step) > 0;
  st.seeded_steps.erase(st.seeded_steps.begin(), st.seeded_steps.upper_bound(c.h.step));
  ++st.gradient_phases_open;
  auto rp = self->make_response_promise<wire_message>();
  // Steps waiting for this phase push once it committed; if it failed, their history would not
  // be the previous step's, so they fail too.
  auto close_phase = [self](bool committed) {
    auto& st = self->state;
    if (--st.gradient_phases_open > 0 && committed) return;
    auto waiting = std::move(st.after_gradient_phase);
    st.after_gradient_phase.clear();
    for (auto& d : waiting) {
      if (committed)
        d.run();
      else
        d.fail("the gradient phase before this step failed");
    }
  };
  self->request(st.shards[static_cast<size_t>(st.part->part)], st.settings.timeout, gradient_atom_v,
                passed_on(m))
      .then(
          [self, rp, close_phase, step = c.h.step, ring = c.ring,
           contributes](wire_message& shard_reply) mutable {
            auto& st = self->state;
            wire::allreduce_chunk g;
            try {
              g = wire::decode_allreduce_chunk(st.ctx, shard_reply.bytes);
              const auto own = st.replica->gradient();
              if (g.values.size() != own.size())
                throw wire::wire_error("the shard's gradient has the wrong size");
              for (size_t i = 0; i < own.size(); ++i)
                g.values[i] += own[i];
            } catch (const std::exception& e) {
              rp.deliver(as_error(st, actor_errc::internal, e.what()));
              close_phase(false);
              return;
            }
            close_phase(true);
            if (!ring) {
              g.h = {step, st.part->part};
              auto msg = pack(wire::kind::allreduce_chunk, wire::encode(st.ctx, g));
              count(st, kCoordinatorPart, msg);
              rp.deliver(std::move(msg));
              return;
            }
            auto fail = [rp](const caf::error& err) mutable { rp.deliver(err); };
            ring_allreduce(
                self, step, std::move(g.values), contributes,
                [self, rp, step, fail](std::vector<float> avg) mutable {
                  apply_average(
                      self, step, std::move(avg), std::nullopt,
                      [self, rp](wire_message done) mutable {
                        count(self->state, kCoordinatorPart, done);
                        rp.deliver(std::move(done));
                      },
                      fail);
                },
                fail);
          },
          [self, rp, close_phase](caf::error& err) mutable {
            rp.deliver(as_error(self->state, actor_errc::peer_failed,
                                "gradient phase of the shard failed: " + caf::to_string(err)));
            close_phase(false);
          });
  return rp;
}

// The coordinator's averaged gradient: applied here, then by the worker's shard.
caf::result<wire_message> apply(self_ptr self, const wire_message& m) {
  auto& st = self->state;
  auto avg = wire::decode_allreduce_chunk(st.ctx, m.bytes);
  // Only the coordinator's averaged gradient (round 1) is applied.
  if (avg.round != 1 || avg.h.sender != kCoordinatorPart)
    throw wire::wire_error("allreduce_chunk is not an averaged gradient of the coordinator");
  if (avg.values.size() != st.replica->parameters().size()) {
    throw wire::wire_error("averaged gradient has " + std::to_string(avg.values.size()) +
                           " values, the model " + std::to_string(st.replica->parameters().size()));
  }
  auto rp = self->make_response_promise<wire_message>();
  apply_average(
      self, avg.h.step, std::move(avg.values), passed_on(m),
      [self, rp](wire_message done) mutable {
        count(self->state, kCoordinatorPart, done);
        rp.deliver(std::move(done));
      },
      [rp](const caf::error& err) mutable { rp.deliver(err); });
  return rp;
}

// Parameters of this replica, after checking the shard's replica holds the same.
caf::result<wire_message> parameters(self_ptr self, const wire_message& m) {
  auto& st = self->state;
  const auto c = wire::decode_control(st.ctx, m.bytes);
  auto rp = self->make_response_promise<wire_message>();
  self->request(st.shards[static_cast<size_t>(st.part->part)], st.settings.timeout, params_atom_v,
                passed_on(m))
      .then(
          [self, rp, step = c.h.step](wire_message& shard_reply) mutable {
            auto& st = self->state;
            wire::allreduce_chunk out{.h = {step, st.part->part},
                                      .values = st.replica->parameters()};
            try {
              const auto shard = wire::decode_allreduce_chunk(st.ctx, shard_reply.bytes);
              if (shard.values != out.values)
                throw std::runtime_error("the shard's replica differs from the batch actor's");
            } catch (const std::exception& e) {
              rp.deliver(as_error(st, actor_errc::internal, e.what()));
              return;
            }
            auto msg = pack(wire::kind::allreduce_chunk, wire::encode(st.ctx, out));
            count(st, kCoordinatorPart, msg);
            rp.deliver(std::move(msg));
          },
          [self, rp](caf::error& err) mutable {
            rp.deliver(as_error(self->state, actor_errc::peer_failed,
                                "the shard's parameters: " + caf::to_string(err)));
          });
  return rp;
}

}  // namespace

namespace batch_detail {

// The shard applies the same average meanwhile; answered once both did.
void apply_average(self_ptr self, std::uint64_t step, std::vector<float> average,
                   std::optional<wire_message> encoded, std::function<void(wire_message)> then,
                   std::function<void(const caf::error&)> fail) {
  auto& st = self->state;
  // A ring's average reaches the shard as its own worker's (the shard takes the coordinator's
  // or its worker's).
  if (!encoded) {
    wire::allreduce_chunk avg{.h = {step, st.part->part}, .round = 1, .values = std::move(average)};
    encoded = pack(wire::kind::allreduce_chunk, wire::encode(st.ctx, avg));
    average = std::move(avg.values);
  }
  self->request(st.shards[static_cast<size_t>(st.part->part)], st.settings.timeout, apply_atom_v,
                std::move(*encoded))
      .then(
          [self, then, step](wire_message&) mutable {
            auto& st = self->state;
            wire::control out{.h = {step, st.part->part}, .what = wire::control_kind::result};
            then(pack(wire::kind::control, wire::encode(st.ctx, out)));
          },
          [self, fail](caf::error& err) mutable {
            fail(as_error(self->state, actor_errc::peer_failed,
                          "the shard did not apply the gradient: " + caf::to_string(err)));
          });
  st.replica->apply_gradient(average);
  if (st.settings.decentralized) st.replica->model().zero_grad();
  st.weights.applied_one();
}

std::uint64_t batch_index(const wire::control& c) {
  if (!(c.value >= 0 && c.value < 9007199254740992.0) || c.value != std::floor(c.value))
    throw wire::wire_error("step control with batch index " + std::to_string(c.value));
  return static_cast<std::uint64_t>(c.value);
}

const std::vector<node_id>& seeds_of(batch_state& st, std::uint32_t epoch, std::uint64_t index) {
  static const std::vector<node_id> none;
  if (st.train_global.empty()) return none;
  if (st.batches_epoch != epoch) {
    st.batches = make_batches(st.train_global, st.settings.batch_size, st.settings.seed, epoch);
    st.batches_epoch = epoch;
  }
  // A part with fewer training nodes than the largest runs out of batches first: it then steps
  // with no seeds (it still serves the others), so an epoch visits every training node once.
  return index < st.batches.size() ? st.batches[index] : none;
}

}  // namespace batch_detail

batch_actor::behavior_type batch_behavior(self_ptr self,
                                          std::shared_ptr<const graph_partition> part,
                                          std::shared_ptr<const partition_book> book,
                                          replica_config model, worker_settings settings,
                                          wire::context ctx) {
  auto& st = self->state;
  worker_detail::init_worker(st, std::move(part), std::move(book), model, std::move(settings), ctx);
  if (st.settings.trace) st.stages.keep_spans();
  for (node_id l : st.part->train)
    st.train_global.push_back(st.part->owned[l]);
  st.scratch.assign(static_cast<size_t>(st.book->num_nodes()), -1);
  st.degree.assign(static_cast<size_t>(st.book->num_nodes()), 0);
  // Only the report (counters) is answered to anyone: it is asked before every view is set.
  auto guarded = [self](wire::kind expected, bool needs_peers, const wire_message& m,
                        auto&& serve) -> caf::result<wire_message> {
    return worker_detail::serve_guarded(self, expected, needs_peers, true, m, serve);
  };
  auto control = [self](const wire_message& m) {
    return wire::decode_control(self->state.ctx, m.bytes);
  };
  return {
      [self, guarded, control](step_atom, const wire_message& m) {
        return guarded(wire::kind::control, true, m, [&] {
          const auto c = control(m);
          if (self->state.settings.on_step) self->state.settings.on_step(c.h.step);
          return self->state.settings.decentralized ? start_decentralized_step(self, c)
                                                    : start_centralized_step(self, c);
        });
      },
      [self, guarded](gradient_atom, const wire_message& m) {
        return guarded(wire::kind::control, true, m, [&] { return gradient_phase(self, m); });
      },
      [self, guarded](apply_atom, const wire_message& m) {
        return guarded(wire::kind::allreduce_chunk, true, m, [&] { return apply(self, m); });
      },
      [self, guarded](ring_atom, const wire_message& m) {
        return guarded(wire::kind::allreduce_chunk, true, m,
                       [&]() -> caf::result<wire_message> { return take_ring_chunk(self, m); });
      },
      [self, guarded](params_atom, const wire_message& m) {
        return guarded(wire::kind::control, true, m, [&] { return parameters(self, m); });
      },
      [self, guarded](save_atom, const wire_message& m) {
        return guarded(wire::kind::control, true, m, [&] { return save_replica(self, m); });
      },
      [self, guarded, control](report_atom, const wire_message& m) {
        return guarded(wire::kind::control, false, m, [&]() -> caf::result<wire_message> {
          control(m);  // only a query of this cluster is answered
          auto& st = self->state;
          return counters_report(st.part->part, st.ctx, st.sent, st.rejected, st.mailbox, nullptr,
                                 &st.stages);
        });
      },
      worker_detail::trace_handler(self),
      worker_detail::view_handler(self,
                                  [](batch_state& st, const peer_view& v) {
                                    st.batchers = handles_of<batch_actor>(v.batchers);
                                    st.shards = handles_of<shard_actor>(v.shards);
                                  }),
  };
}

}  // namespace degnn
