// Registration of the actor protocol's types and the rendering of its errors.
#include "actors/messages.hpp"

#include "actors/coordinator.hpp"

namespace degnn {

const char* to_string(actor_errc x) {
  switch (x) {
    case actor_errc::rejected:
      return "rejected";
    case actor_errc::not_ready:
      return "not ready";
    case actor_errc::peer_failed:
      return "peer failed";
    case actor_errc::internal:
      return "failed";
  }
  return "unknown error";
}

wire::allreduce_chunk decode_average(const wire::context& ctx, const wire_message& m,
                                     std::size_t num_parameters) {
  auto avg = wire::decode_allreduce_chunk(ctx, m.bytes);
  if (avg.round != 1 || avg.h.sender != 0)
    throw wire::wire_error("allreduce_chunk is not an averaged gradient of the coordinator");
  if (avg.values.size() != num_parameters) {
    throw wire::wire_error("averaged gradient has " + std::to_string(avg.values.size()) +
                           " values, the model " + std::to_string(num_parameters));
  }
  return avg;
}

void add_actor_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::degnn>();
  cfg.add_message_types<caf::id_block::degnn_coordinator>();
  cfg.add_error_category(caf::atom("degnn"),
                         [](std::uint8_t code, caf::atom_value, const caf::message& ctx) {
                           std::string out = to_string(static_cast<actor_errc>(code));
                           if (ctx.match_elements<std::string>())
                             out += ": " + ctx.get_as<std::string>(0);
                           else if (!ctx.empty())
                             out += ": " + caf::to_string(ctx);
                           return out;
                         });
}

}  // namespace degnn
