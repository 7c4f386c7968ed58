// Per-actor counters as the console shows them.
#include "runtime/actor_table.hpp"

#include <nlohmann/json.hpp>

namespace degnn {

std::string actor_table_json(const cluster_report& now, const cluster_report* before,
                             double seconds, std::size_t parts) {
  static const char* roles[] = {"batch actor", "shard", "embedding store"};
  constexpr size_t traffic_size = 2 * wire::kNumKinds + 1;
  constexpr size_t stages_at = traffic_size + compute_counters::kSize;
  auto messages_of = [](const std::vector<std::uint64_t>& counts) {
    std::uint64_t n = 0;
    for (int k = 0; k < wire::kNumKinds; ++k)
      n += counts[static_cast<size_t>(wire::kNumKinds + k)];
    return n;
  };
  nlohmann::json table = nlohmann::json::array();
  for (size_t i = 0; i < now.per_actor.size(); ++i) {
    const auto& counts = now.per_actor[i];
    if (counts.size() < traffic_size) continue;
    wire::traffic sent;
    const std::uint64_t rejected =
        sent.add_report({counts.begin(), counts.begin() + static_cast<long>(traffic_size)});
    nlohmann::json by_kind = nlohmann::json::object();
    for (int k = 1; k < wire::kNumKinds; ++k)
      if (sent.bytes[static_cast<size_t>(k)])
        by_kind[wire::kind_name(static_cast<wire::kind>(k))] = sent.bytes[static_cast<size_t>(k)];
    nlohmann::json row{{"role", roles[std::min<size_t>(2, i / std::max<size_t>(1, parts))]},
                       {"partition", parts ? i % parts : 0},
                       {"bytes_sent", sent.total_bytes()},
                       {"messages_sent", messages_of(counts)},
                       {"bytes_by_kind", by_kind},
                       {"rejected", rejected}};
    if (before && i < before->per_actor.size() && before->per_actor[i].size() >= traffic_size &&
        seconds > 0) {
      const std::uint64_t was = messages_of(before->per_actor[i]);
      const std::uint64_t is = messages_of(counts);
      row["messages_per_s"] = static_cast<double>(is >= was ? is - was : 0) / seconds;
    }
    if (counts.size() == stages_at + kNumStages) {
      nlohmann::json stage_ms = nlohmann::json::object();
      for (int k = 0; k < kNumStages; ++k)
        if (const auto us = counts[stages_at + static_cast<size_t>(k)])
          stage_ms[stage_name(static_cast<stage>(k))] = static_cast<double>(us) / 1e3;
      row["stage_ms_total"] = stage_ms;
    }
    table.push_back(std::move(row));
  }
  return table.dump();
}

}  // namespace degnn
