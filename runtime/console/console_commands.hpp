// What node 0 answers to the operator console (`degnn console`): commands over the status board,
// read-only ones and the controls the training loop applies between steps (pause, resume,
// checkpoint). Each answer is JSON (Prometheus text for `metrics`); an unknown or malformed
// command gets an error, and the console goes on.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "runtime/node/console_orders.hpp"

namespace degnn {

class status_board;

/// The commands and a line of help each, in the order `help` lists them.
const std::vector<std::pair<std::string, std::string>>& console_command_list();

console_answer answer_console(status_board& board, const std::string& command);

}  // namespace degnn
