// What every actor answers about itself: its counters (traffic, rejected requests, work, time
// per stage, mailbox) as one traffic report, and its stage spans as Chrome trace events.
#pragma once

#include <algorithm>
#include <array>
#include <optional>
#include <stdexcept>

#include "actors/compute_counters.hpp"
#include "actors/messages.hpp"
#include "actors/stage_log.hpp"
#include "serialization/traffic.hpp"

namespace degnn {

/// Messages waiting in an actor's mailbox (requests, replies and timeouts alike): when it answered
/// the report, and the most seen when it began serving a request (sampled there, since start).
struct mailbox_counts {
  std::uint64_t now = 0;
  std::uint64_t peak = 0;
};

/// A control message whose counts are the traffic report (wire::traffic::to_report), then, for
/// actors that compute, the work counters, the time per stage and each stage's median and 95th
/// percentile per step over the recent steps, and last the mailbox counts (parse_report tells
/// the layouts apart by length).
inline wire_message counters_report(int part, const wire::context& ctx, const wire::traffic& sent,
                                    std::uint64_t rejected, mailbox_counts mailbox,
                                    const compute_counters* work = nullptr,
                                    const stage_log* stages = nullptr) {
  wire::control out{.h = {0, part}, .what = wire::control_kind::result};
  out.counts = sent.to_report(rejected);
  if (stages) {
    const auto w = (work ? *work : compute_counters{}).to_list();
    out.counts.insert(out.counts.end(), w.begin(), w.end());
    const auto& stage_us = stages->total_us();
    out.counts.insert(out.counts.end(), stage_us.begin(), stage_us.end());
    const auto spread = stages->recent_spread();
    out.counts.insert(out.counts.end(), spread.begin(), spread.end());
  }
  out.counts.push_back(mailbox.now);
  out.counts.push_back(mailbox.peak);
  return pack(wire::kind::control, wire::encode(ctx, out));
}

/// Called as an actor begins serving a request: keeps the queue behind it, and its peak.
inline void note_mailbox(mailbox_counts& m, std::size_t queued) {
  m.now = queued;
  m.peak = std::max<std::uint64_t>(m.peak, queued);
}

/// One actor's report split back into its parts.
struct parsed_report {
  wire::traffic sent;
  std::uint64_t rejected = 0;
  std::optional<compute_counters> work;
  std::array<std::uint64_t, kNumStages> stage_us{};
  /// Workers: per stage, median then 95th percentile of its time per step over recent steps.
  std::array<std::uint64_t, 2 * kNumStages> stage_spread_us{};
  mailbox_counts mailbox;
};

/// Throws std::invalid_argument for a report of neither layout.
inline parsed_report parse_report(const std::vector<std::uint64_t>& counts) {
  constexpr size_t traffic_size = 2 * wire::kNumKinds + 1;
  constexpr size_t work_end = traffic_size + compute_counters::kSize;
  const bool worker = counts.size() == work_end + 3 * kNumStages + 2;
  if (!worker && counts.size() != traffic_size + 2)
    throw std::invalid_argument("an actor's report has " + std::to_string(counts.size()) +
                                " counts, which is no report layout");
  parsed_report r;
  r.rejected = r.sent.add_report({counts.begin(), counts.begin() + traffic_size});
  if (worker) {
    r.work =
        compute_counters::from_list({counts.begin() + traffic_size, counts.begin() + work_end});
    std::copy_n(counts.begin() + work_end, kNumStages, r.stage_us.begin());
    std::copy_n(counts.begin() + work_end + kNumStages, 2 * kNumStages, r.stage_spread_us.begin());
  }
  r.mailbox = {counts[counts.size() - 2], counts.back()};
  return r;
}

/// A worker's answer to trace_atom: a settings control starts (counts {1}: earlier spans
/// dropped) or stops (counts {0}) keeping spans and is answered with an empty result; any other
/// control is answered with the spans (trace_reply). Throws wire_error on anything else.
wire_message answer_trace(int part, const wire::context& ctx, stage_log& stages,
                          const wire_message& m);

/// The stage spans of partition `part`'s actor, as Chrome trace events in a control message.
inline wire_message trace_reply(int part, const wire::context& ctx, const stage_log& stages) {
  wire::control out{
      .h = {0, part}, .what = wire::control_kind::result, .text = stages.chrome_events(part)};
  return pack(wire::kind::control, wire::encode(ctx, out));
}

}  // namespace degnn
