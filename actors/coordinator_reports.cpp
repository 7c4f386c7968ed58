// The coordinator's passes over the whole cluster that are not steps: exact layer-wise
// evaluation, the decentralized history set-up, the counters report and the trace.
#include <memory>

#include "actors/coordinator_internal.hpp"
#include "actors/reports.hpp"

namespace degnn::coordinator_detail {

// -- evaluation and history --

// Layers `layer` to `last` of a layer-wise inference pass; an evaluation runs to the model's
// last layer and sums the accuracy counts, the history set-up (setup) stops at its top level.
void evaluate_layers(self_ptr self, int layer, int last, bool setup, std::uint64_t step,
                     std::function<void(const eval_result&)> done, fail_fn fail) {
  auto& st = self->state;
  enter(st, setup ? coordinator_phase::history : coordinator_phase::evaluating);
  wire::control c{.h = {step, 0},
                  .what = wire::control_kind::evaluate,
                  .epoch = static_cast<std::uint32_t>(layer)};
  if (setup) c.counts = {1};
  all(
      self, st.shards, eval_atom_v, control_messages(st, c), setup ? "history set-up" : "evaluate",
      [self, layer, last, setup, step, done, fail](std::vector<wire_message>& replies) {
        if (layer < last) {
          evaluate_layers(self, layer + 1, last, setup, step, done, fail);
          return;
        }
        eval_result result;
        if (setup) {
          done(result);
          return;
        }
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
      [self, layers, step, done, fail] {
        evaluate_layers(self, 1, layers, false, step, done, fail);
      },
      fail);
}

void init_history(self_ptr self, caf::typed_response_promise<bool> rp, fail_fn fail, int layers,
                  std::uint64_t step) {
  // Only the levels the history keeps, h^(1) .. h^(layers - 2), are computed: the layers above
  // them are the pushes' and the batch owners' in every step.
  auto put_and_pull = [self, rp, fail, step](const eval_result&) mutable {
    auto& st = self->state;
    enter(st, coordinator_phase::history);
    all(
        self, st.shards, init_hist_atom_v,
        control_messages(st, {.h = {step, 0}, .what = wire::control_kind::init_history}),
        "init history",
        [self, rp, fail, step](std::vector<wire_message>&) mutable {
          // Each shard put its initial history rows into its own store; now the halo's
          // features, where the set-up pass brought none (below 3 layers).
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
  };
  const int last = layers - 2;
  finish_steps(
      self,
      [self, last, step, put_and_pull, fail]() mutable {
        if (last >= 1)
          evaluate_layers(self, 1, last, true, step, put_and_pull, fail);
        else
          put_and_pull(eval_result{});
      },
      fail);
}

// -- reports --

// A report is the traffic counters, then (workers) the work counters and the time per stage.
void add_counts(cluster_traffic& t, const std::vector<std::uint64_t>& counts) {
  const parsed_report r = parse_report(counts);
  if (r.work) {
    t.work += *r.work;
    for (size_t k = 0; k < r.stage_us.size(); ++k)
      t.stage_us[k] += r.stage_us[k];
  }
  t.sent += r.sent;
  t.rejected += r.rejected;
}

void report(self_ptr self, caf::typed_response_promise<cluster_report> rp, fail_fn fail) {
  auto& st = self->state;
  enter(st, coordinator_phase::reporting);
  // Reports stay uncounted: they measure the traffic, they are not part of it.
  const wire::control c{.h = {0, 0}, .what = wire::control_kind::result};
  const std::vector<wire_message> asks(st.batchers.size(),
                                       pack(wire::kind::control, wire::encode(st.ctx, c)));
  auto t = std::make_shared<cluster_traffic>();
  auto each = std::make_shared<std::vector<std::vector<std::uint64_t>>>();
  auto add = [self, t, each](std::vector<wire_message>& replies) {
    for (const auto& m : replies) {
      auto counts = wire::decode_control(self->state.ctx, m.bytes).counts;
      add_counts(*t, counts);
      each->push_back(std::move(counts));
    }
  };
  all(
      self, st.batchers, report_atom_v, asks, "traffic report",
      [self, rp, fail, asks, add, t, each](std::vector<wire_message>& replies) mutable {
        add(replies);
        all(
            self, self->state.shards, report_atom_v, asks, "traffic report of a shard",
            [self, rp, fail, asks, add, t, each](std::vector<wire_message>& replies) mutable {
              add(replies);
              all(
                  self, self->state.stores, report_atom_v, asks, "traffic report of a store",
                  [self, rp, add, t, each](std::vector<wire_message>& replies) mutable {
                    add(replies);
                    t->sent += self->state.sent;
                    auto r = cluster_report::from(*t);
                    r.per_actor = std::move(*each);
                    rp.deliver(std::move(r));
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

void set_tracing(self_ptr self, caf::typed_response_promise<bool> rp, fail_fn fail, bool on) {
  auto& st = self->state;
  enter(st, coordinator_phase::reporting);
  wire::control c{.h = {0, 0}, .what = wire::control_kind::settings};
  c.counts = {on ? 1u : 0u};
  all(
      self, st.batchers, trace_atom_v, control_messages(st, c), "trace",
      [self, rp, fail, c, on](std::vector<wire_message>&) mutable {
        auto& st = self->state;
        all(
            self, st.shards, trace_atom_v, control_messages(st, c), "trace",
            [self, rp, on](std::vector<wire_message>&) mutable {
              auto& st = self->state;
              if (on)
                st.stages.restart_spans();
              else
                st.stages.stop_spans();
              rp.deliver(true);
              command_done(self);
            },
            fail);
      },
      fail);
}

}  // namespace degnn::coordinator_detail
