// A worker's answer to the coordinator's trace commands (reports.hpp).
#include "actors/reports.hpp"

namespace degnn {

wire_message answer_trace(int part, const wire::context& ctx, stage_log& stages,
                          const wire_message& m) {
  const auto c = wire::decode_control(ctx, m.bytes);
  if (c.what != wire::control_kind::settings) return trace_reply(part, ctx, stages);
  if (c.counts.size() != 1 || c.counts[0] > 1)
    throw wire::wire_error("a trace setting is one count, 1 (start) or 0 (stop)");
  if (c.counts[0] == 1)
    stages.restart_spans();
  else
    stages.stop_spans();
  wire::control out{.h = {c.h.step, part}, .what = wire::control_kind::result};
  return pack(wire::kind::control, wire::encode(ctx, out));
}

}  // namespace degnn
