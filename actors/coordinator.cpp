// Blocking control flow of the coordinator: send to all batch actors at once, then collect.
#include "actors/coordinator.hpp"

#include <optional>
#include <stdexcept>

namespace degnn {

namespace {

// A report is the traffic counters, then (batch actors only) the work counters and the time
// per stage.
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

}  // namespace

coordinator::coordinator(caf::blocking_actor* self, std::vector<batch_actor> batchers,
                         std::vector<shard_actor> shards, std::vector<store_actor> stores,
                         wire::context ctx, std::chrono::milliseconds timeout)
    : self_(self),
      batchers_(std::move(batchers)),
      shards_(std::move(shards)),
      stores_(std::move(stores)),
      ctx_(ctx),
      timeout_(timeout) {}

void coordinator::count(int part, const wire_message& m) {
  if (part != 0) sent_.add(static_cast<wire::kind>(m.kind), m.bytes.size());
}

template <class Handle, class Atom>
coordinator::in_flight coordinator::send_all(const std::vector<Handle>& to, Atom atom,
                                             const std::vector<wire_message>& messages,
                                             const char* what) {
  in_flight f{.what = what};
  f.handles.reserve(to.size());
  for (size_t p = 0; p < to.size(); ++p)
    f.handles.push_back(self_->request(to[p], timeout_, atom, messages[p]));
  return f;
}

std::vector<wire_message> coordinator::collect(in_flight& f) {
  std::vector<wire_message> replies(f.handles.size());
  std::string failure;
  for (size_t p = 0; p < f.handles.size(); ++p) {
    f.handles[p].receive([&](wire_message& r) { replies[p] = std::move(r); },
                         [&](caf::error& e) {
                           if (failure.empty()) {
                             failure = std::string(f.what) + " on partition " + std::to_string(p) +
                                       " failed: " + self_->system().render(e);
                           }
                         });
  }
  if (!failure.empty()) throw std::runtime_error(failure);
  return replies;
}

template <class Handle, class Atom>
std::vector<wire_message> coordinator::broadcast(const std::vector<Handle>& to, Atom atom,
                                                 const std::vector<wire_message>& messages,
                                                 const char* what) {
  // All requests leave before the first reply is awaited, so the workers run concurrently.
  auto f = send_all(to, atom, messages, what);
  return collect(f);
}

step_result coordinator::step(std::uint32_t epoch, std::uint64_t index, std::uint64_t global_step) {
  wire::control c{.h = {global_step, 0},
                  .what = wire::control_kind::step,
                  .epoch = epoch,
                  .value = static_cast<double>(index)};
  const auto out = control_messages(c);
  stage_timer phase(stages_, stage::step_phase, global_step);
  const auto replies = broadcast(batchers_, step_atom_v, out, "step");
  phase.end();
  step_result r;
  std::vector<float> sum;
  int contributors = 0;
  for (size_t p = 0; p < replies.size(); ++p) {
    if (replies[p].kind != static_cast<std::uint16_t>(wire::kind::allreduce_chunk)) {
      throw std::runtime_error("step: partition " + std::to_string(p) + " answered with a " +
                               wire::kind_name(static_cast<wire::kind>(replies[p].kind)));
    }
    const auto g = wire::decode_allreduce_chunk(ctx_, replies[p].bytes);
    if (sum.empty()) sum.assign(g.values.size(), 0.0f);
    if (g.values.size() != sum.size())
      throw std::runtime_error("step: gradients of different sizes");
    r.loss_sum += g.loss;
    r.seeds += g.seeds;
    r.correct += g.correct;
    if (g.seeds == 0) continue;
    ++contributors;
    for (size_t i = 0; i < sum.size(); ++i)
      sum[i] += g.values[i];
  }
  // Each worker's gradient is of its mean loss; the average over workers is what DistDGL's
  // synchronous data parallelism applies.
  stage_timer reduce(stages_, stage::allreduce, global_step);
  apply_average(std::move(sum), contributors, global_step);
  return r;
}

std::vector<wire_message> coordinator::control_messages(const wire::control& c) {
  std::vector<wire_message> out;
  for (size_t p = 0; p < batchers_.size(); ++p) {
    out.push_back(pack(wire::kind::control, wire::encode(ctx_, c)));
    count(static_cast<int>(p), out.back());
  }
  return out;
}

void coordinator::apply_average(std::vector<float> sum, int contributors,
                                std::uint64_t global_step) {
  if (contributors > 1) {
    const float inv = 1.0f / static_cast<float>(contributors);
    for (auto& v : sum)
      v *= inv;
  }
  wire::allreduce_chunk avg{
      .h = {global_step, 0}, .round = 1, .offset = 0, .values = std::move(sum)};
  const auto encoded = wire::encode(ctx_, avg);
  std::vector<wire_message> out;
  for (size_t p = 0; p < batchers_.size(); ++p) {
    out.push_back(pack(wire::kind::allreduce_chunk, encoded));
    count(static_cast<int>(p), out.back());
  }
  broadcast(batchers_, apply_atom_v, out, "apply gradient");
  ++applies_sent_;
}

step_result coordinator::step_decentralized(std::uint32_t epoch, std::uint64_t index,
                                            std::uint64_t global_step) {
  // Pipelined: the gradient phase of the previous step (shard backward, history commit) and this
  // step's request leave together, so this step's sampling, local expansion and history pulls
  // run during the previous step's all-reduce; its forward waits for the averaged gradient
  // (`counts[0]`: the applies it needs). At most two steps are in flight.
  std::optional<in_flight> gradient;
  if (unreduced_) {
    gradient = send_all(
        batchers_, gradient_atom_v,
        control_messages({.h = {unreduced_->step, 0}, .what = wire::control_kind::gradient}),
        "gradient");
  }
  stage_timer phase(stages_, stage::step_phase, global_step);
  const std::uint64_t needs = applies_sent_ + (unreduced_ ? 1 : 0);
  auto step = send_all(batchers_, step_atom_v,
                       control_messages({.h = {global_step, 0},
                                         .what = wire::control_kind::step,
                                         .epoch = epoch,
                                         .value = static_cast<double>(index),
                                         .counts = {needs}}),
                       "step");
  if (gradient) {
    stage_timer reduce(stages_, stage::allreduce, unreduced_->step);
    reduce_and_apply(collect(*gradient), unreduced_->contributors, unreduced_->step);
    unreduced_.reset();
  }
  step_result r;
  int contributors = 0;
  for (const auto& m : collect(step)) {
    if (m.kind != static_cast<std::uint16_t>(wire::kind::allreduce_chunk))
      throw std::runtime_error("step: a worker answered with a " +
                               std::string(wire::kind_name(static_cast<wire::kind>(m.kind))));
    const auto stats = wire::decode_allreduce_chunk(ctx_, m.bytes);
    r.loss_sum += stats.loss;
    r.seeds += stats.seeds;
    r.correct += stats.correct;
    contributors += stats.seeds > 0;
  }
  phase.end();
  unreduced_ = unreduced_step{global_step, contributors};
  if (!pipelined_) finish_steps();
  return r;
}

void coordinator::finish_steps() {
  if (!unreduced_) return;
  stage_timer reduce(stages_, stage::allreduce, unreduced_->step);
  reduce_and_apply(broadcast(batchers_, gradient_atom_v,
                             control_messages({.h = {unreduced_->step, 0},
                                               .what = wire::control_kind::gradient}),
                             "gradient"),
                   unreduced_->contributors, unreduced_->step);
  unreduced_.reset();
}

void coordinator::reduce_and_apply(const std::vector<wire_message>& gradients, int contributors,
                                   std::uint64_t global_step) {
  // Every worker's gradient holds its own batch and the pushes it served for the others.
  std::vector<float> sum;
  for (const auto& m : gradients) {
    if (m.kind != static_cast<std::uint16_t>(wire::kind::allreduce_chunk))
      throw std::runtime_error("gradient: a worker answered with a " +
                               std::string(wire::kind_name(static_cast<wire::kind>(m.kind))));
    const auto g = wire::decode_allreduce_chunk(ctx_, m.bytes);
    if (sum.empty()) sum.assign(g.values.size(), 0.0f);
    if (g.values.size() != sum.size())
      throw std::runtime_error("gradient: replicas of different sizes");
    for (size_t i = 0; i < sum.size(); ++i)
      sum[i] += g.values[i];
  }
  apply_average(std::move(sum), contributors, global_step);
}

void coordinator::init_history(int num_layers, std::uint64_t global_step) {
  finish_steps();
  evaluate(num_layers, global_step);
  broadcast(shards_, init_hist_atom_v,
            control_messages({.h = {global_step, 0}, .what = wire::control_kind::init_history}),
            "init history");
  // Halo features (once: they never change) and the initial history, before the first step.
  broadcast(shards_, refresh_atom_v,
            control_messages({.h = {global_step, 0}, .what = wire::control_kind::refresh}),
            "halo refresh");
}

eval_result coordinator::evaluate(int num_layers, std::uint64_t global_step) {
  finish_steps();  // evaluate the weights every step so far produced
  eval_result result;
  for (int layer = 1; layer <= num_layers; ++layer) {
    wire::control c{.h = {global_step, 0},
                    .what = wire::control_kind::evaluate,
                    .epoch = static_cast<std::uint32_t>(layer)};
    const auto replies = broadcast(shards_, eval_atom_v, control_messages(c), "evaluate");
    if (layer < num_layers) continue;
    for (const auto& m : replies) {
      const auto r = wire::decode_control(ctx_, m.bytes);
      if (r.counts.size() != 6) throw std::runtime_error("evaluate: malformed accuracy counts");
      for (int s = 0; s < 3; ++s) {
        result.correct[s] += r.counts[2 * s];
        result.total[s] += r.counts[2 * s + 1];
      }
    }
  }
  return result;
}

std::vector<std::vector<float>> coordinator::parameters(std::uint64_t global_step) {
  finish_steps();
  wire::control c{.h = {global_step, 0}, .what = wire::control_kind::checkpoint};
  // The request crosses nodes like any other control message; the replies are counted by the
  // batch actors.
  std::vector<std::vector<float>> params;
  for (const auto& m : broadcast(batchers_, params_atom_v, control_messages(c), "parameters"))
    params.push_back(wire::decode_allreduce_chunk(ctx_, m.bytes).values);
  return params;
}

std::string coordinator::chrome_trace() {
  wire::control c{.h = {0, 0}, .what = wire::control_kind::trace};
  std::string events;
  auto add = [&](const std::string& more) {
    if (more.empty()) return;
    if (!events.empty()) events += ',';
    events += more;
  };
  const int parts = static_cast<int>(batchers_.size());
  for (int p = 0; p <= parts; ++p) {
    const std::string name = p < parts ? "partition " + std::to_string(p) : "coordinator";
    add("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + std::to_string(p) +
        ",\"args\":{\"name\":\"" + name + "\"}}");
    for (int lane = 1; lane <= 3; ++lane) {
      static const char* lanes[] = {"", "compute", "waits", "phases"};
      add("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + std::to_string(p) +
          ",\"tid\":" + std::to_string(lane) + ",\"args\":{\"name\":\"" + lanes[lane] + "\"}}");
    }
  }
  for (const auto& m : broadcast(batchers_, trace_atom_v, control_messages(c), "trace"))
    add(wire::decode_control(ctx_, m.bytes).text);
  for (const auto& m : broadcast(shards_, trace_atom_v, control_messages(c), "trace"))
    add(wire::decode_control(ctx_, m.bytes).text);
  add(stages_.chrome_events(parts));
  return "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[" + events + "]}\n";
}

cluster_traffic coordinator::traffic() {
  cluster_traffic t;
  wire::control c{.h = {0, 0}, .what = wire::control_kind::result};
  // Reports stay uncounted: they measure the traffic, they are not part of it.
  const std::vector<wire_message> asks(batchers_.size(),
                                       pack(wire::kind::control, wire::encode(ctx_, c)));
  for (const auto& m : broadcast(batchers_, report_atom_v, asks, "traffic report"))
    add_counts(t, wire::decode_control(ctx_, m.bytes).counts);
  for (const auto& m : broadcast(shards_, report_atom_v, asks, "traffic report of a shard"))
    add_counts(t, wire::decode_control(ctx_, m.bytes).counts);
  for (const auto& m : broadcast(stores_, report_atom_v, asks, "traffic report of a store"))
    add_counts(t, wire::decode_control(ctx_, m.bytes).counts);
  t.sent += sent_;
  return t;
}

}  // namespace degnn
