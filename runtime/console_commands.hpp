// What node 0 answers to the operator console (`degnn console`): commands over the status board,
// read-only ones and the controls the training loop applies between steps (pause, resume,
// checkpoint). Each answer is JSON (Prometheus text for `metrics`); an unknown or malformed
// command gets an error, and the console goes on.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace degnn {

class status_board;

struct console_answer {
  bool ok = false;
  std::string text;
  bool changes = false;  ///< the command changed the run (the coordinator's node logs it)
};

/// The commands and a line of help each, in the order `help` lists them.
const std::vector<std::pair<std::string, std::string>>& console_command_list();

console_answer answer_console(status_board& board, const std::string& command);

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
