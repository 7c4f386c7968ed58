// Parsing the console's orders to the node actor.
#include "runtime/node/console_orders.hpp"

#include <sstream>

namespace degnn {

std::optional<int> parse_rank(const std::string& text) {
  try {
    std::size_t used = 0;
    const int rank = std::stoi(text, &used);
    if (used == text.size() && rank >= 0) return rank;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

std::optional<kill_order> parse_kill(const std::string& command, std::string& error) {
  std::istringstream in(command);
  std::string word, rank, flag, signal, extra;
  in >> word >> rank >> flag >> signal >> extra;
  const std::string usage = "usage: kill RANK [--signal KILL|STOP]";
  kill_order k;
  if (auto r = parse_rank(rank)) {
    k.rank = *r;
  } else {
    error = "'" + rank + "' is not a rank; " + usage;
    return std::nullopt;
  }
  if (!flag.empty() &&
      (flag != "--signal" || (signal != "KILL" && signal != "STOP") || !extra.empty())) {
    error = usage;
    return std::nullopt;
  }
  k.stop = signal == "STOP";
  return k;
}

}  // namespace degnn
