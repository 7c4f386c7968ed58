// Crashing at a named point: SIGKILL, so nothing of the process runs after it (no destructor, no
// goodbye to the peers), exactly as the kernel's OOM killer or a power cut would leave it.
#include "runtime/cli/fault_options.hpp"

#include <csignal>
#include <cstdio>
#include <sstream>

#include "serialization/wire.hpp"

namespace degnn {

std::vector<option_spec> fault_option_specs() {
  return {
      {"faults-seed", "1",
       "fault injection: seed of the fault decisions (a run replays its faults)"},
      {"faults-corrupt", "0",
       "fault injection: probability that a message to another node has a byte flipped (the "
       "receiver refuses it, the sender sends it again)"},
      {"faults-duplicate", "0",
       "fault injection: probability that a message to another node is delivered twice (the "
       "receiver refuses the second)"},
      {"faults-delay", "0",
       "fault injection: probability that a message to another node is held back 1 to "
       "--faults-delay-ms ms (later messages overtake it: reordered)"},
      {"faults-delay-ms", "20", "fault injection: the longest hold-back of a delayed message"},
      {"faults-kinds", "",
       "fault injection: only messages of these kinds (comma-separated, e.g. "
       "computation_push,embedding_get); empty = all"},
      {"faults-links", "",
       "fault injection: only these links FROM-TO between partitions (e.g. 1-2,2-0); empty = "
       "all"},
  };
}

std::shared_ptr<const fault_policy> read_fault_policy(const option_set& opts) {
  auto p = std::make_shared<fault_policy>();
  p->seed = static_cast<std::uint64_t>(opts.integer("faults-seed", 0));
  // Below 1: a message that is always damaged could never get through.
  p->corrupt = opts.real("faults-corrupt", 0, 0.999);
  p->duplicate = opts.real("faults-duplicate", 0, 1);
  p->delay = opts.real("faults-delay", 0, 1);
  // A message held back while its sender numbers 64 more may fall behind the receiver's window
  // and be refused as stale: short holds only.
  p->delay_ms = static_cast<std::uint32_t>(opts.integer("faults-delay-ms", 1, 200));
  auto items = [](const std::string& list) {
    std::vector<std::string> out;
    std::stringstream in(list);
    for (std::string item; std::getline(in, item, ',');)
      if (!item.empty()) out.push_back(item);
    return out;
  };
  // The requests workers send each other: replies and the coordinator's commands are not faulted.
  const wire::kind faultable[] = {wire::kind::sample_request,  wire::kind::feature_request,
                                  wire::kind::halo_request,    wire::kind::computation_push,
                                  wire::kind::gradient_return, wire::kind::embedding_get,
                                  wire::kind::attention_push,  wire::kind::attention_return};
  for (const std::string& name : items(opts.str("faults-kinds"))) {
    int found = -1;
    std::string known;
    for (wire::kind k : faultable) {
      if (name == wire::kind_name(k)) found = static_cast<int>(k);
      known += std::string(known.empty() ? "" : ", ") + wire::kind_name(k);
    }
    if (found < 0)
      throw config_error("--faults-kinds: '" + name +
                         "' is not a message the fault policy reaches (it reaches: " + known + ")");
    p->kinds.resize(wire::kNumKinds, false);
    p->kinds[static_cast<size_t>(found)] = true;
  }
  for (const std::string& link : items(opts.str("faults-links"))) {
    int from = -1, to = -1;
    char dash = 0, extra = 0;
    std::istringstream in(link);
    if (!(in >> from >> dash >> to) || dash != '-' || in >> extra || from < 0 || to < 0 ||
        from == to)
      throw config_error("--faults-links: '" + link +
                         "' is not FROM-TO with two different partitions (e.g. 1-2)");
    p->links.emplace_back(from, to);
  }
  if (!p->any()) {
    for (const char* key : {"faults-kinds", "faults-links", "faults-delay-ms"})
      if (opts.given(key))
        throw config_error(std::string("--") + key +
                           " without --faults-corrupt, --faults-duplicate or --faults-delay "
                           "injects nothing");
    return nullptr;
  }
  return p;
}

std::function<void(std::uint64_t)> crash_after_step(std::uint64_t last) {
  return [last](std::uint64_t step) {
    if (step <= last) return;
    std::fprintf(stderr, "node: crashing before step %llu (--crash-after-step %llu)\n",
                 static_cast<unsigned long long>(step), static_cast<unsigned long long>(last));
    std::fflush(stderr);
    std::raise(SIGKILL);
  };
}

}  // namespace degnn
