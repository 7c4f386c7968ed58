// Per-actor counters as the console shows them.
#include "runtime/train/actor_table.hpp"

#include <nlohmann/json.hpp>

#include "actors/reports.hpp"

namespace degnn {

std::string actor_table_json(const cluster_report& now, const cluster_report* before,
                             double seconds, std::size_t parts) {
  static const char* roles[] = {"batch actor", "shard", "embedding store"};
  auto messages_of = [](const wire::traffic& sent) {
    std::uint64_t n = 0;
    for (auto m : sent.messages)
      n += m;
    return n;
  };
  nlohmann::json table = nlohmann::json::array();
  for (size_t i = 0; i < now.per_actor.size(); ++i) {
    const parsed_report r = parse_report(now.per_actor[i]);
    const wire::traffic& sent = r.sent;
    nlohmann::json by_kind = nlohmann::json::object();
    for (int k = 1; k < wire::kNumKinds; ++k)
      if (sent.bytes[static_cast<size_t>(k)])
        by_kind[wire::kind_name(static_cast<wire::kind>(k))] = sent.bytes[static_cast<size_t>(k)];
    nlohmann::json row{{"role", roles[std::min<size_t>(2, i / std::max<size_t>(1, parts))]},
                       {"partition", parts ? i % parts : 0},
                       {"bytes_sent", sent.total_bytes()},
                       {"messages_sent", messages_of(sent)},
                       {"bytes_by_kind", by_kind},
                       {"rejected", r.rejected},
                       {"mailbox", r.mailbox.now},
                       {"mailbox_peak", r.mailbox.peak}};
    if (before && i < before->per_actor.size() && seconds > 0) {
      const std::uint64_t was = messages_of(parse_report(before->per_actor[i]).sent);
      const std::uint64_t is = messages_of(sent);
      row["messages_per_s"] = static_cast<double>(is >= was ? is - was : 0) / seconds;
    }
    if (r.work) {
      nlohmann::json stage_ms = nlohmann::json::object();
      for (int k = 0; k < kNumStages; ++k)
        if (const auto us = r.stage_us[static_cast<size_t>(k)])
          stage_ms[stage_name(static_cast<stage>(k))] = static_cast<double>(us) / 1e3;
      row["stage_ms_total"] = stage_ms;
    }
    table.push_back(std::move(row));
  }
  return table.dump();
}

}  // namespace degnn
