// Stage totals and Chrome trace events of one actor.
#include "actors/stage_log.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace degnn {

const char* stage_name(stage s) {
  switch (s) {
    case stage::sample:
      return "sample";
    case stage::push_wait:
      return "push wait";
    case stage::top_layer:
      return "top layer";
    case stage::grad_wait:
      return "gradient return wait";
    case stage::expand:
      return "expand";
    case stage::history_pull:
      return "history pull";
    case stage::forward:
      return "forward";
    case stage::backward:
      return "backward";
    case stage::feature_pull:
      return "feature pull";
    case stage::compute:
      return "compute";
    case stage::weights_wait:
      return "weights wait";
    case stage::step_phase:
      return "step";
    case stage::allreduce:
      return "all-reduce";
  }
  return "?";
}

std::int64_t stage_log::now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::int64_t stage_log::steady_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void stage_log::add(stage s, std::uint64_t step, std::int64_t begin_us, std::int64_t end_us) {
  if (end_us < begin_us) end_us = begin_us;
  const auto us = static_cast<std::uint64_t>(end_us - begin_us);
  total_us_[static_cast<size_t>(s)] += us;
  // Steps arrive nearly in order (two overlap at most), so the search from the back is short.
  auto it = recent_.rbegin();
  while (it != recent_.rend() && it->step > step)
    ++it;
  if (it != recent_.rend() && it->step == step) {
    it->us[static_cast<size_t>(s)] += us;
  } else if (it != recent_.rend() || recent_.size() < kRecentSteps) {
    auto at = recent_.insert(it.base(), step_times{.step = step});
    at->us[static_cast<size_t>(s)] = us;
    if (recent_.size() > kRecentSteps) recent_.pop_front();
  }  // else older than every kept step of a full window: only its total counts
  if (max_spans_ == 0) return;
  if (spans_.size() >= max_spans_) {
    ++spans_dropped_;
    return;
  }
  spans_.push_back({s, step, begin_us, end_us});
}

std::array<std::uint64_t, 2 * kNumStages> stage_log::recent_spread() const {
  std::array<std::uint64_t, 2 * kNumStages> out{};
  if (recent_.empty()) return out;
  std::vector<std::uint64_t> v(recent_.size());
  const auto rank = [&](double q) {
    return std::min(v.size() - 1,
                    static_cast<size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1);
  };
  for (int k = 0; k < kNumStages; ++k) {
    for (size_t i = 0; i < recent_.size(); ++i)
      v[i] = recent_[i].us[static_cast<size_t>(k)];
    std::sort(v.begin(), v.end());
    out[2 * static_cast<size_t>(k)] = v[rank(0.5)];
    out[2 * static_cast<size_t>(k) + 1] = v[rank(0.95)];
  }
  return out;
}

std::string stage_log::chrome_events(int pid) const {
  std::string out;
  // Waits and computation on separate rows (threads) of the process, so overlaps show.
  auto lane = [](stage s) {
    switch (s) {
      case stage::push_wait:
      case stage::grad_wait:
      case stage::history_pull:
      case stage::feature_pull:
      case stage::weights_wait:
        return 2;
      case stage::step_phase:
      case stage::allreduce:
        return 3;
      default:
        return 1;
    }
  };
  for (const auto& sp : spans_) {
    if (!out.empty()) out += ',';
    out += "{\"name\":\"" + std::string(stage_name(sp.s)) +
           "\",\"ph\":\"X\",\"pid\":" + std::to_string(pid) +
           ",\"tid\":" + std::to_string(lane(sp.s)) + ",\"ts\":" + std::to_string(sp.begin_us) +
           ",\"dur\":" + std::to_string(sp.end_us - sp.begin_us) +
           ",\"args\":{\"step\":" + std::to_string(sp.step) + "}}";
  }
  if (spans_dropped_) {
    if (!out.empty()) out += ',';
    out += "{\"name\":\"" + std::to_string(spans_dropped_) +
           " spans not recorded (limit reached)\",\"ph\":\"i\",\"s\":\"p\",\"pid\":" +
           std::to_string(pid) +
           ",\"tid\":1,\"ts\":" + std::to_string(spans_.empty() ? 0 : spans_.back().end_us) + "}";
  }
  return out;
}

}  // namespace degnn
