// Registration of the actor protocol's types and the rendering of its errors.
#include "actors/messages.hpp"

#include <algorithm>

#include "model/crc32.hpp"

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
    case actor_errc::damaged:
      return "damaged";
    case actor_errc::superseded:
      return "superseded";
  }
  return "unknown error";
}

namespace {

// The CRC-32 of the envelope's head: little-endian kind and number, the same on every node.
std::uint32_t head_crc(std::uint16_t kind, std::uint64_t seq) {
  unsigned char head[10];
  for (int i = 0; i < 2; ++i)
    head[i] = static_cast<unsigned char>(kind >> (8 * i));
  for (int i = 0; i < 8; ++i)
    head[2 + i] = static_cast<unsigned char>(seq >> (8 * i));
  return crc32_update(0, head, sizeof head);
}

}  // namespace

std::uint32_t message_crc(const wire_message& m) {
  return crc32_concat(head_crc(m.kind, m.seq), crc32_update(0, m.bytes.data(), m.bytes.size()),
                      m.bytes.size());
}

void renumber(wire_message& m, std::uint64_t seq) {
  // crc(head + bytes) is linear in crc(head): only the head's share changes, so the bytes (which
  // pack() summed already) are not read again.
  const std::uint32_t change = head_crc(m.kind, m.seq) ^ head_crc(m.kind, seq);
  m.seq = seq;
  m.crc ^= crc32_concat(change, 0, m.bytes.size());
}

wire::allreduce_chunk decode_average(const wire::context& ctx, const wire_message& m,
                                     std::size_t num_parameters, int own_part) {
  auto avg = wire::decode_allreduce_chunk(ctx, m.bytes);
  if (avg.round != 1 || (avg.h.sender != 0 && avg.h.sender != own_part))
    throw wire::wire_error(
        "allreduce_chunk is not an averaged gradient of the coordinator or of "
        "this worker's ring");
  if (avg.values.size() != num_parameters) {
    throw wire::wire_error("averaged gradient has " + std::to_string(avg.values.size()) +
                           " values, the model " + std::to_string(num_parameters));
  }
  return avg;
}

std::vector<caf::node_id> member_nodes(const peer_view& v) {
  std::vector<caf::node_id> out;
  for (const auto* list : {&v.batchers, &v.shards, &v.stores}) {
    for (const auto& a : *list) {
      if (a && std::find(out.begin(), out.end(), a->node()) == out.end()) out.push_back(a->node());
    }
  }
  return out;
}

std::string outsider(const caf::strong_actor_ptr& sender, const caf::node_id& here,
                     const std::vector<caf::node_id>& members) {
  if (!sender) return "an anonymous message";
  const caf::node_id from = sender->node();
  if (members.empty() ? from == here
                      : std::find(members.begin(), members.end(), from) != members.end())
    return {};
  return "a message from " + caf::to_string(from) + ", which is " +
         (members.empty() ? "not this node (no view yet)" : "not a member of the cluster");
}

std::string sender_name(const caf::strong_actor_ptr& sender) {
  if (!sender) return "an anonymous sender";
  return "actor " + std::to_string(sender->id()) + " on node " + caf::to_string(sender->node());
}

void log_refusal(const std::function<void(const std::string&)>& log, const std::string& actor,
                 const wire_message& m, const caf::strong_actor_ptr& sender,
                 const std::string& why) {
  if (!log) return;
  log(actor + " refused a " + wire::kind_name(static_cast<wire::kind>(m.kind)) + " of " +
      sender_name(sender) + ": " + why);
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
