// JSON and Prometheus renderings of the status board.
#include "runtime/train/status_board.hpp"

#include <utility>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "runtime/process/process_stats.hpp"
#include "serialization/wire.hpp"

namespace degnn {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A Prometheus label value: backslash, double quote and newline escaped.
std::string label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

status_board::status_board(std::string dataset, std::string pipeline, int epochs)
    : dataset_(std::move(dataset)), pipeline_(std::move(pipeline)), epochs_(epochs) {}

void status_board::set_phase(std::string phase) {
  std::lock_guard lock(mu_);
  phase_ = std::move(phase);
}

void status_board::enable_checkpoints(bool on) {
  std::lock_guard lock(mu_);
  checkpoints_ = on;
}

bool status_board::set_paused(bool paused) {
  {
    std::lock_guard lock(mu_);
    if (paused_ == paused) return false;
    paused_ = paused;
  }
  resumed_.notify_all();
  return true;
}

bool status_board::request_checkpoint() {
  std::lock_guard lock(mu_);
  if (!checkpoints_) return false;
  checkpoint_asked_ = true;
  return true;
}

console_asks status_board::between_steps(const std::function<void()>& check) {
  std::unique_lock lock(mu_);
  if (paused_) {
    const std::string before = phase_;
    phase_ = "paused";
    while (!resumed_.wait_for(lock, std::chrono::seconds(1), [&] { return !paused_; })) {
      lock.unlock();
      try {
        check();
      } catch (...) {
        lock.lock();
        phase_ = before;
        throw;
      }
      lock.lock();
    }
    phase_ = before;
  }
  console_asks asks{std::exchange(checkpoint_asked_, false), std::exchange(staleness_asked_, {}),
                    std::exchange(trace_start_asked_, {}), std::exchange(trace_stop_asked_, false)};
  if (asks.staleness) staleness_ = *asks.staleness;
  return asks;
}

void status_board::heard_from(int rank, double peak_mib) {
  std::lock_guard lock(mu_);
  members_heard_[rank] = {peak_mib, now_s()};
}

void status_board::set_history(int bits, int staleness) {
  std::lock_guard lock(mu_);
  history_bits_ = bits;
  staleness_ = staleness;
}

void status_board::enable_traces(std::string dir, std::string why_not) {
  std::lock_guard lock(mu_);
  trace_dir_ = std::move(dir);
  if (!why_not.empty()) trace_refusal_ = std::move(why_not);
}

std::string status_board::request_trace(bool start, const std::string& file) {
  std::lock_guard lock(mu_);
  if (trace_dir_.empty()) return trace_refusal_;
  if (!start) {
    if (tracing_to_.empty() || trace_stop_asked_) return "no trace is running (trace start FILE)";
    trace_stop_asked_ = true;
    tracing_to_.clear();
    return "";
  }
  if (!tracing_to_.empty()) return "a trace into " + tracing_to_ + " runs (trace stop first)";
  if (trace_stop_asked_) return "the last trace is still being written (ask again after a step)";
  // A short plain name in the trace folder: an operator writes nothing elsewhere on node 0.
  const bool plain =
      file.size() > 5 && file.size() <= 128 && file[0] != '.' && file.ends_with(".json") &&
      std::all_of(file.begin(), file.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
      });
  if (!plain)
    return "a trace file is a plain name of letters, digits, '.', '_' and '-' ending in .json "
           "(at most 128 characters; written in the trace folder)";
  const std::string path = trace_dir_ + "/" + file;
  std::error_code ec;
  if (std::filesystem::exists(path, ec) || ec) return path + " exists already or cannot be checked";
  trace_start_asked_ = path;
  tracing_to_ = path;
  return "";
}

bool status_board::drop_trace() {
  std::lock_guard lock(mu_);
  const bool ran = !tracing_to_.empty() || !trace_start_asked_.empty();
  tracing_to_.clear();
  trace_start_asked_.clear();
  trace_stop_asked_ = false;
  return ran;
}

bool status_board::request_staleness(int k) {
  std::lock_guard lock(mu_);
  if (history_bits_ == 0) return false;
  staleness_asked_ = k;
  return true;
}

std::string status_board::history_json() const {
  std::lock_guard lock(mu_);
  if (history_bits_ == 0) return nlohmann::json{{"history", "none (not decentralized)"}}.dump();
  nlohmann::json j{{"bits", history_bits_},
                   {"staleness", staleness_},
                   {"rows_pulled_last_epoch", epoch_rows_pulled_},
                   {"steps_last_epoch", epoch_steps_}};
  j["rows_pulled_per_step"] =
      epoch_steps_ ? static_cast<double>(epoch_rows_pulled_) / static_cast<double>(epoch_steps_)
                   : 0.0;
  if (staleness_asked_) j["staleness_asked"] = *staleness_asked_;
  return j.dump();
}

std::uint64_t status_board::view_id() const {
  std::lock_guard lock(mu_);
  return view_.id;
}

void status_board::set_view(const wire::membership_view& v) {
  std::lock_guard lock(mu_);
  view_ = v;
}

void status_board::set_steps_per_epoch(std::uint64_t n) {
  std::lock_guard lock(mu_);
  steps_per_epoch_ = n;
}

void status_board::on_step(std::uint64_t, double loss) {
  std::lock_guard lock(mu_);
  const double t = now_s();
  if (steps_ == 0) started_ = t;
  ++steps_;
  last_loss_ = loss;
  last_step_at_ = t;
}

void status_board::on_step_times(std::uint64_t steps_only_us, std::uint64_t allreduce_only_us,
                                 std::uint64_t overlap_us) {
  std::lock_guard lock(mu_);
  const double t = now_s();
  // The first call only sets the baseline (the time before it is the set-up's, not a step's).
  if (times_at_ >= 0) {
    auto grown = [](std::uint64_t now, std::uint64_t before) {
      return static_cast<double>(now >= before ? now - before : 0) / 1e6;
    };
    recent_steps_.push_back({t - times_at_, grown(steps_only_us, steps_only_us_),
                             grown(allreduce_only_us, allreduce_only_us_),
                             grown(overlap_us, overlap_us_)});
    if (recent_steps_.size() > 100) recent_steps_.pop_front();
  }
  times_at_ = t;
  steps_only_us_ = steps_only_us;
  allreduce_only_us_ = allreduce_only_us;
  overlap_us_ = overlap_us;
}

std::string status_board::actors_json(int rank) const {
  std::lock_guard lock(mu_);
  if (rank >= static_cast<int>(view_.members.size())) return "";
  nlohmann::json out = nlohmann::json::array();
  for (auto row : nlohmann::json::parse(actors_)) {
    const int node = view_.rank_of_partition(row["partition"].get<int>());
    if (rank >= 0 && node != rank) continue;
    row["node"] = node;
    out.push_back(std::move(row));
  }
  return out.dump();
}

std::string status_board::stages_json() const {
  std::lock_guard lock(mu_);
  auto ms = [](double s) { return std::round(s * 1e6) / 1e3; };
  // Median and 95th percentile (nearest rank) of one part of the recent steps.
  auto spread = [&](double step_times::*part) {
    std::vector<double> v;
    for (const auto& s : recent_steps_)
      v.push_back(s.*part);
    std::sort(v.begin(), v.end());
    if (v.empty()) return nlohmann::json(nullptr);
    auto at = [&](double q) {
      return v[std::min(v.size() - 1, static_cast<size_t>(std::ceil(q * v.size())) - 1)];
    };
    return nlohmann::json{{"median_ms", ms(at(0.5))}, {"p95_ms", ms(at(0.95))}};
  };
  nlohmann::json j;
  j["steps"] = recent_steps_.size();
  j["coordinator"] = {{"step", spread(&step_times::wall_s)},
                      {"step_phase_only", spread(&step_times::steps_only_s)},
                      {"allreduce_only", spread(&step_times::allreduce_only_s)},
                      {"overlapped", spread(&step_times::overlap_s)}};
  nlohmann::json workers = nlohmann::json::object();
  for (const auto& [name, s] : worker_stages_)
    workers[name] = ms(s);
  j["workers_last_epoch_ms_per_step"] = workers;
  // The worker where each is largest, over its last steps (every step, not one per epoch).
  nlohmann::json recent = nlohmann::json::object();
  for (const auto& s : worker_recent_)
    recent[s.name] = {{"median_ms", ms(s.median_s)}, {"p95_ms", ms(s.p95_s)}};
  j["workers_recent_steps"] = recent;
  return j.dump();
}

void status_board::on_epoch(const epoch_record& r) {
  std::lock_guard lock(mu_);
  worker_stages_ = r.stage_per_step_s;
  worker_recent_ = r.stage_recent;
  if (!r.actors_json.empty()) actors_ = r.actors_json;
  epoch_ = r.epoch;
  epoch_loss_ = r.loss;
  train_acc_ = r.train_acc;
  if (r.evaluated) {
    valid_acc_ = r.valid_acc;
    test_acc_ = r.test_acc;
  }
  epoch_s_ = r.epoch_s;
  bytes_ += r.bytes + r.eval_bytes + r.setup_bytes;
  epoch_rows_pulled_ = r.rows_pulled;
  epoch_steps_ = r.steps;
}

std::string status_board::status_json() const {
  std::lock_guard lock(mu_);
  nlohmann::json j;
  j["dataset"] = dataset_;
  j["pipeline"] = pipeline_;
  j["phase"] = phase_;
  nlohmann::json members = nlohmann::json::array();
  for (const auto& m : view_.members) {
    members.push_back({{"rank", m.rank},
                       {"role", m.rank == view_.coordinator() ? "coordinator" : "worker"},
                       {"state", m.lost ? "lost" : "serving"},
                       {"name", m.name},
                       {"address", m.host + ":" + std::to_string(m.port)},
                       {"partitions", m.partitions}});
    if (auto it = members_heard_.find(m.rank); it != members_heard_.end()) {
      members.back()["peak_rss_mib"] = it->second.peak_mib;
      members.back()["last_heard_s_ago"] = now_s() - it->second.at_s;
    }
  }
  j["view"] = {{"id", view_.id},
               {"coordinator", view_.coordinator()},
               {"members", members},
               {"replaced", view_.replaced}};
  const double elapsed = steps_ > 1 ? last_step_at_ - started_ : 0;
  const double rate = elapsed > 0 ? static_cast<double>(steps_ - 1) / elapsed : 0;
  const std::uint64_t total = steps_per_epoch_ * static_cast<std::uint64_t>(epochs_);
  nlohmann::json progress = {{"epoch", epoch_},
                             {"epochs", epochs_},
                             {"steps", steps_},
                             {"steps_per_epoch", steps_per_epoch_},
                             {"last_step_loss", last_loss_},
                             {"epoch_loss", epoch_loss_},
                             {"train_acc", train_acc_},
                             {"last_epoch_s", epoch_s_},
                             {"steps_per_s", rate}};
  progress["valid_acc"] = valid_acc_ >= 0 ? nlohmann::json(valid_acc_) : nlohmann::json(nullptr);
  progress["test_acc"] = test_acc_ >= 0 ? nlohmann::json(test_acc_) : nlohmann::json(nullptr);
  progress["eta_s"] = rate > 0 && total >= steps_
                          ? nlohmann::json(static_cast<double>(total - steps_) / rate)
                          : nlohmann::json(nullptr);
  j["progress"] = progress;
  j["paused"] = paused_;
  j["checkpoints"] = checkpoints_;
  j["bytes_sent"] = bytes_;
  j["node0_peak_rss_mib"] = peak_rss_mib();
  return j.dump();
}

std::string status_board::prometheus() const {
  std::lock_guard lock(mu_);
  std::string out;
  char line[512];
  auto metric = [&](const char* name, const char* type, const char* help, double value) {
    std::snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name,
                  type, name, value);
    out += line;
  };
  metric("degnn_steps_total", "counter", "Training steps done by the cluster.",
         static_cast<double>(steps_));
  metric("degnn_epoch", "gauge", "Last finished epoch.", epoch_);
  metric("degnn_epochs", "gauge", "Epochs the run trains.", epochs_);
  metric("degnn_step_loss", "gauge", "Mean loss of the last step's labelled seeds.", last_loss_);
  metric("degnn_epoch_loss", "gauge", "Mean training loss of the last epoch.", epoch_loss_);
  metric("degnn_train_accuracy", "gauge", "Training accuracy of the last epoch.", train_acc_);
  if (valid_acc_ >= 0) {
    metric("degnn_valid_accuracy", "gauge", "Validation accuracy at the last evaluation.",
           valid_acc_);
    metric("degnn_test_accuracy", "gauge", "Test accuracy at the last evaluation.", test_acc_);
  }
  metric("degnn_epoch_seconds", "gauge", "Training time of the last epoch.", epoch_s_);
  metric("degnn_sent_bytes_total", "counter", "Bytes sent between nodes in finished epochs.",
         static_cast<double>(bytes_));
  metric("degnn_view_id", "gauge", "Membership view id.", static_cast<double>(view_.id));
  metric("degnn_members", "gauge", "Nodes in the membership view.",
         static_cast<double>(view_.members.size()));
  metric("degnn_node0_peak_rss_bytes", "gauge", "Peak resident memory of node 0.",
         peak_rss_mib() * 1024 * 1024);
  out +=
      "# HELP degnn_member_info A member of the view (value 1).\n# TYPE degnn_member_info gauge\n";
  for (const auto& m : view_.members) {
    out += "degnn_member_info{rank=\"" + std::to_string(m.rank) + "\",name=\"" + label(m.name) +
           "\",address=\"" + label(m.host + ":" + std::to_string(m.port)) + "\"} 1\n";
  }
  out += "# HELP degnn_phase The run's phase (value 1).\n# TYPE degnn_phase gauge\n";
  out += "degnn_phase{phase=\"" + label(phase_) + "\"} 1\n";
  return out;
}

void status_board::set_faults(std::shared_ptr<const fault_policy> policy,
                              std::shared_ptr<const fault_counters> counts, bool commands_allowed) {
  std::lock_guard lock(mu_);
  faults_ = std::move(policy);
  fault_counts_ = std::move(counts);
  fault_commands_ = commands_allowed;
}

bool status_board::fault_commands_allowed() const {
  std::lock_guard lock(mu_);
  return fault_commands_;
}

std::vector<std::int32_t> status_board::partitions_of(int rank) const {
  std::lock_guard lock(mu_);
  for (const auto& m : view_.members)
    if (m.rank == rank && !m.lost) return {m.partitions.begin(), m.partitions.end()};
  return {};
}

std::string status_board::faults_json() const {
  std::lock_guard lock(mu_);
  nlohmann::json j{{"fault_commands", fault_commands_ ? "allowed (--allow-faults)" : "refused"}};
  if (!faults_) {
    j["policy_on_node0"] = nullptr;
  } else {
    nlohmann::json links = nlohmann::json::array();
    for (const auto& [from, to] : faults_->links)
      links.push_back(std::to_string(from) + "-" + std::to_string(to));
    nlohmann::json kinds = nlohmann::json::array();
    for (size_t k = 0; k < faults_->kinds.size(); ++k)
      if (faults_->kinds[k]) kinds.push_back(wire::kind_name(static_cast<wire::kind>(k)));
    j["policy_on_node0"] = {{"seed", faults_->seed},
                            {"corrupt", faults_->corrupt},
                            {"duplicate", faults_->duplicate},
                            {"delay", faults_->delay},
                            {"delay_ms", faults_->delay_ms},
                            {"kinds", kinds.empty() ? nlohmann::json("all") : kinds},
                            {"links", links.empty() ? nlohmann::json("all") : links}};
  }
  if (fault_counts_) {
    j["injected_on_node0"] = {{"damaged", fault_counts_->corrupted.load()},
                              {"sent_again", fault_counts_->retried.load()},
                              {"duplicated", fault_counts_->duplicated.load()},
                              {"delayed", fault_counts_->delayed.load()},
                              {"held_by_a_cut", fault_counts_->held.load()}};
    nlohmann::json cut = nlohmann::json::array();
    const std::uint64_t mask = fault_counts_->cut_parts.load();
    for (int p = 0; p < fault_counters::kMaxCutParts; ++p)
      if ((mask >> p) & 1U) cut.push_back(p);
    j["cut_partitions"] = cut;
  }
  return j.dump();
}

}  // namespace degnn
