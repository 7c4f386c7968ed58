// What every actor answers about itself: its counters (traffic, rejected requests, work, time
// per stage) as one traffic report, and its stage spans as Chrome trace events.
#pragma once

#include "actors/compute_counters.hpp"
#include "actors/messages.hpp"
#include "actors/stage_log.hpp"
#include "serialization/traffic.hpp"

namespace degnn {

/// A control message whose counts are the traffic report (wire::traffic::to_report), then, for
/// actors that compute, the work counters and the time per stage (the coordinator tells the two
/// apart by length).
inline wire_message counters_report(int part, const wire::context& ctx, const wire::traffic& sent,
                                    std::uint64_t rejected, const compute_counters* work = nullptr,
                                    const stage_log* stages = nullptr) {
  wire::control out{.h = {0, part}, .what = wire::control_kind::result};
  out.counts = sent.to_report(rejected);
  if (stages) {
    const auto w = (work ? *work : compute_counters{}).to_list();
    out.counts.insert(out.counts.end(), w.begin(), w.end());
    const auto& stage_us = stages->total_us();
    out.counts.insert(out.counts.end(), stage_us.begin(), stage_us.end());
  }
  return pack(wire::kind::control, wire::encode(ctx, out));
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
