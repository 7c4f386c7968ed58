// The coordinator's blocking client and the conversions of its reply types.
#include <optional>
#include <stdexcept>

#include "actors/coordinator.hpp"

namespace degnn {

const char* to_string(coordinator_phase p) {
  switch (p) {
    case coordinator_phase::idle:
      return "idle";
    case coordinator_phase::stepping:
      return "stepping";
    case coordinator_phase::reducing:
      return "reducing";
    case coordinator_phase::evaluating:
      return "evaluating";
    case coordinator_phase::history:
      return "history";
    case coordinator_phase::reporting:
      return "reporting";
    case coordinator_phase::failed:
      return "failed";
  }
  return "unknown";
}

cluster_report cluster_report::from(const cluster_traffic& t) {
  cluster_report r;
  r.counts = t.sent.to_report(t.rejected);
  const auto work = t.work.to_list();
  r.counts.insert(r.counts.end(), work.begin(), work.end());
  r.counts.insert(r.counts.end(), t.stage_us.begin(), t.stage_us.end());
  return r;
}

cluster_traffic cluster_report::traffic() const {
  constexpr size_t traffic_size = 2 * wire::kNumKinds + 1;
  constexpr size_t work_end = traffic_size + compute_counters::kSize;
  if (counts.size() != work_end + kNumStages)
    throw std::runtime_error("coordinator: a cluster report of the wrong size");
  cluster_traffic t;
  t.rejected = t.sent.add_report({counts.begin(), counts.begin() + traffic_size});
  t.work = compute_counters::from_list({counts.begin() + traffic_size, counts.begin() + work_end});
  for (size_t k = 0; k < t.stage_us.size(); ++k)
    t.stage_us[k] = counts[work_end + k];
  return t;
}

coordinator::coordinator(caf::blocking_actor* self, std::vector<batch_actor> batchers,
                         std::vector<shard_actor> shards, std::vector<store_actor> stores,
                         wire::context ctx, std::chrono::milliseconds timeout)
    : self_(self), parts_(batchers.size()), timeout_(timeout) {
  actor_ = spawn_coordinator(self->system(), std::move(batchers), std::move(shards),
                             std::move(stores), ctx, timeout);
}

coordinator::~coordinator() {
  self_->send_exit(actor_, caf::exit_reason::user_shutdown);
}

// A command makes at most `rounds` rounds of requests, each bounded by the timeout.
template <class T, class... Ts>
T coordinator::ask(int rounds, Ts&&... xs) {
  std::optional<T> out;
  std::string failure;
  self_->request(actor_, timeout_ * rounds + std::chrono::seconds(5), std::forward<Ts>(xs)...)
      .receive([&](T& x) { out = std::move(x); },
               [&](caf::error& e) { failure = self_->system().render(e); });
  if (!out) throw std::runtime_error(failure.empty() ? "the coordinator did not answer" : failure);
  return std::move(*out);
}

step_result coordinator::step(std::uint32_t epoch, std::uint64_t index, std::uint64_t global_step) {
  return ask<step_result>(3, run_step_atom_v, epoch, index, global_step, false);
}

step_result coordinator::step_decentralized(std::uint32_t epoch, std::uint64_t index,
                                            std::uint64_t global_step) {
  return ask<step_result>(5, run_step_atom_v, epoch, index, global_step, true);
}

void coordinator::set_pipelined(bool on) {
  pipelined_ = on;
  ask<bool>(1, configure_atom_v, pipelined_, ring_, false);
}

void coordinator::set_ring(bool on) {
  ring_ = on;
  ask<bool>(1, configure_atom_v, pipelined_, ring_, false);
}

void coordinator::keep_spans() {
  ask<bool>(1, configure_atom_v, pipelined_, ring_, true);
}

void coordinator::finish_steps() {
  ask<bool>(3, finish_atom_v);
}

void coordinator::init_history(int num_layers, std::uint64_t global_step) {
  ask<bool>(num_layers + 5, init_hist_atom_v, static_cast<std::int32_t>(num_layers), global_step);
}

eval_result coordinator::evaluate(int num_layers, std::uint64_t global_step) {
  return ask<eval_result>(num_layers + 3, eval_atom_v, static_cast<std::int32_t>(num_layers),
                          global_step);
}

std::vector<std::vector<float>> coordinator::parameters(std::uint64_t global_step) {
  return ask<replica_parameters>(4, params_atom_v, global_step).values;
}

void coordinator::checkpoint(std::uint64_t next_step, bool wait) {
  // Waiting: a step in flight, the snapshot, the write and the commit (and a checkpoint before).
  ask<std::uint64_t>(8, save_atom_v, next_step, wait);
}

void coordinator::set_staleness(int staleness) {
  ask<bool>(4, settings_atom_v, static_cast<std::int32_t>(staleness));
}

void coordinator::set_tracing(bool on) {
  ask<bool>(3, trace_atom_v, on);
}

cluster_traffic coordinator::traffic() {
  return report().traffic();
}

cluster_report coordinator::report() {
  return ask<cluster_report>(3, report_atom_v);
}

std::string coordinator::chrome_trace() {
  return ask<std::string>(2, trace_atom_v);
}

coordinator_status coordinator::status() {
  return ask<coordinator_status>(1, status_atom_v);
}

}  // namespace degnn
