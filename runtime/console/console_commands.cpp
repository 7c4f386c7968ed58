// The console's commands, answered from the status board's JSON.
#include "runtime/console/console_commands.hpp"

#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/train/status_board.hpp"

namespace degnn {

const std::vector<std::pair<std::string, std::string>>& console_command_list() {
  static const std::vector<std::pair<std::string, std::string>> list = {
      {"nodes",
       "every member: rank, state (serving or lost), name, address, partitions, peak memory, "
       "seconds since node 0 last heard from it"},
      {"view", "the membership view, its id and the ranks a recovery gave to new nodes"},
      {"trace",
       "trace start FILE: every actor keeps its stage spans from the next step on; trace stop: "
       "they go into FILE (Chrome trace format) in node 0's --trace-dir"},
      {"actors",
       "actors [RANK]: every worker actor (of node RANK) at the last epoch end: role, "
       "partition, node, bytes and messages sent (by kind), messages per second over the "
       "epoch, refused requests, time per stage"},
      {"stages",
       "where the step time goes: median and 95th percentile over the last 100 steps of the "
       "time from one step's end to the next's (evaluations and checkpoints between included) "
       "and of its parts (step phase only, all-reduce only, both at once), and each worker "
       "stage's mean time per step in the last epoch"},
      {"progress", "epoch, steps, loss, last validation accuracy, steps per second, ETA"},
      {"status", "all of the above, with the run's phase, traffic and node 0's memory"},
      {"metrics", "the Prometheus text that GET /metrics serves"},
      {"history",
       "decentralized: history bits, staleness, rows pulled in the last epoch and per "
       "step"},
      {"pause", "stop training at the next step boundary (heartbeats go on)"},
      {"resume", "go on training after pause"},
      {"checkpoint", "a coordinated checkpoint at the next step boundary (needs --checkpoint-dir)"},
      {"set",
       "set staleness K: decentralized, halo rows confirmed within K steps are reused, from "
       "the next step boundary (the only setting safe to change between steps)"},
      {"faults", "whether fault commands are allowed, node 0's fault policy and what it injected"},
      {"kill",
       "kill RANK [--signal KILL|STOP]: a test run's fault, refused unless every node "
       "was started with --allow-faults"},
      {"cut",
       "cut RANK: a test run's fault: every message between RANK's partitions and the others "
       "is held until heal (a request held longer than --timeout fails the run); refused "
       "unless every node was started with --allow-faults"},
      {"heal", "end a cut: the held messages go on"},
      {"help", "this list (help CMD: one command)"},
  };
  return list;
}

console_answer answer_console(status_board& board, const std::string& command) {
  std::istringstream in(command);
  std::string word, arg, extra;
  in >> word >> arg >> extra;
  if (word.empty()) return {false, "empty command (try help)"};
  const auto& list = console_command_list();
  if (word == "help") {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [name, text] : list)
      if (arg.empty() || arg == name) j[name] = text;
    if (j.empty()) return {false, "no command '" + arg + "' (try help)"};
    return {true, j.dump()};
  }
  if (word == "set") {
    std::string value, more;
    std::istringstream rest(command);
    rest >> word >> arg >> value >> more;
    if (arg != "staleness" || value.empty() || !more.empty())
      return {false, "usage: set staleness K (the only setting safe to change between steps)"};
    int k = 0;
    try {
      std::size_t used = 0;
      k = std::stoi(value, &used);
      if (used != value.size()) throw std::invalid_argument(value);
    } catch (const std::exception&) {
      return {false, "staleness '" + value + "' is not a number"};
    }
    if (k < 1 || k > 1'000'000) return {false, "staleness must be in [1, 1000000]"};
    if (!board.request_staleness(k))
      return {false, "this run has no history (its pipeline is not decentralized)"};
    return {true, nlohmann::json{{"staleness", k}, {"at", "the next step boundary"}}.dump(), true};
  }
  if (word == "trace") {
    const bool start = arg == "start";
    if ((arg != "start" && arg != "stop") || (start == extra.empty())) {
      return {false, "usage: trace start FILE | trace stop"};
    }
    std::string more;
    std::istringstream rest(command);
    rest >> word >> arg >> extra >> more;
    if (!more.empty()) return {false, "usage: trace start FILE | trace stop"};
    if (auto why = board.request_trace(start, extra); !why.empty()) return {false, why};
    return {true,
            nlohmann::json{{"trace", start ? "start" : "stop"}, {"at", "the next step boundary"}}
                .dump(),
            true};
  }
  if (word == "kill") {
    std::string error;
    if (!parse_kill(command, error)) return {false, error};
    return {false, "kill is carried out by node 0's node actor"};
  }
  if (word == "cut" || word == "heal")
    return {false, word + " is carried out by node 0's node actor"};
  if (word == "actors") {
    if (!extra.empty()) return {false, "usage: actors [RANK]"};
    int rank = -1;
    if (!arg.empty()) {
      const auto r = parse_rank(arg);
      if (!r) return {false, "usage: actors [RANK] (RANK a node's rank, not '" + arg + "')"};
      rank = *r;
    }
    std::string table = board.actors_json(rank);
    if (table.empty()) return {false, "no node " + arg + " in the view"};
    return {true, table};
  }
  if (!arg.empty()) return {false, "'" + word + "' takes no argument"};
  if (word == "faults") return {true, board.faults_json()};
  if (word == "history") return {true, board.history_json()};
  if (word == "stages") return {true, board.stages_json()};
  if (word == "metrics") return {true, board.prometheus()};
  if (word == "pause" || word == "resume") {
    const bool pause = word == "pause";
    if (!board.set_paused(pause))
      return {false, pause ? "already paused" : "not paused (nothing to resume)"};
    return {true, nlohmann::json{{"paused", pause}, {"at", "the next step boundary"}}.dump(), true};
  }
  if (word == "checkpoint") {
    if (!board.request_checkpoint())
      return {false, "checkpoints are off: the run was started without --checkpoint-dir"};
    return {true, nlohmann::json{{"checkpoint", "asked"}, {"at", "the next step boundary"}}.dump(),
            true};
  }
  const auto status = nlohmann::json::parse(board.status_json());
  if (word == "status") return {true, status.dump()};
  if (word == "view") return {true, status["view"].dump()};
  if (word == "nodes") return {true, status["view"]["members"].dump()};
  if (word == "progress") {
    auto p = status["progress"];
    p["phase"] = status["phase"];
    return {true, p.dump()};
  }
  return {false, "unknown command '" + word + "' (try help)"};
}

}  // namespace degnn
