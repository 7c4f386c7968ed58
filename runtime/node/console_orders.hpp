// What a console command returns, and the orders node 0's node actor carries out itself
// because they need its connections (`kill`, `cut`, `heal`); every other command is answered by
// the answerer the node actor is handed (runtime/console/console_commands.hpp).
#pragma once

#include <optional>
#include <string>

namespace degnn {

struct console_answer {
  bool ok = false;
  std::string text;
  bool changes = false;  ///< the command changed the run (the coordinator's node logs it)
};

/// `kill RANK [--signal KILL|STOP]`: which node, and SIGSTOP (true) or SIGKILL.
struct kill_order {
  int rank = 0;
  bool stop = false;
};
/// A node's rank written in full as a whole number >= 0; nothing for anything else.
std::optional<int> parse_rank(const std::string& text);
/// The order a kill command gives; nothing (and the error) when it is malformed.
std::optional<kill_order> parse_kill(const std::string& command, std::string& error);

}  // namespace degnn
