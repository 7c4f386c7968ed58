// degnn console HOST:PORT: an operator's console attached to node 0 of a running cluster, with
// line editing, history and tab completion (GNU readline), or one command with -c for scripts.
// With --tls DIR --tls-name operator-K it goes through node 0's HTTPS console gateway (node
// --console) instead of CAF, and every command carries a proof over the gateway's challenge.
#include <readline/history.h>
#include <readline/readline.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "runtime/cli/cli_options.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/console/console_commands.hpp"
#include "runtime/console/console_gateway.hpp"
#include "runtime/node/node_actor.hpp"
#include "runtime/node/node_membership.hpp"
#include "serialization/wire_console.hpp"

namespace degnn {

namespace {

// Tab completion over the command names (readline calls these with C linkage in mind).
char* command_generator(const char* text, int state) {
  static size_t index;
  static std::vector<std::string> names;
  if (state == 0) {
    index = 0;
    names.clear();
    for (const auto& [name, help] : console_command_list())
      names.push_back(name);
    names.push_back("quit");
  }
  const size_t len = std::strlen(text);
  while (index < names.size()) {
    const std::string& n = names[index++];
    if (n.compare(0, len, text) == 0) return ::strdup(n.c_str());
  }
  return nullptr;
}

char** complete_command(const char* text, int start, int) {
  ::rl_attempted_completion_over = 1;  // no file-name completion
  return start == 0 ? ::rl_completion_matches(text, command_generator) : nullptr;
}

}  // namespace

int run_console(int argc, char** argv) {
  std::string address, command, tls_dir, tls_name, server_name = "node-0";
  bool json = false;
  int timeout_s = 10;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw config_error("console: " + a + " needs a value");
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::printf(
          "usage: degnn console HOST:PORT [-c CMD] [--json]\n"
          "                     [--tls DIR --tls-name operator-K [--server-name node-0]]\n\n"
          "Attaches to node 0 of a running cluster: its --listen address, or with --tls its\n"
          "--console address (HTTPS with the operator's certificate; the gateway's certificate\n"
          "must be made out to --server-name). Without -c it reads commands with line editing,\n"
          "history and tab completion; `help` lists them.\n");
      return 0;
    }
    if (a == "-c") {
      command = value();
    } else if (a == "--json") {
      json = true;
    } else if (a == "--tls") {
      tls_dir = value();
    } else if (a == "--tls-name") {
      tls_name = value();
    } else if (a == "--server-name") {
      server_name = value();
    } else if (a == "--timeout") {
      timeout_s = std::max(1, std::atoi(value().c_str()));
    } else if (a.rfind("-", 0) != 0 && address.empty()) {
      address = a;
    } else {
      throw config_error("console: unexpected argument '" + a + "' (see degnn console --help)");
    }
  }
  if (address.empty()) throw config_error("console: give node 0's HOST:PORT");
  const endpoint where = parse_endpoint(address, "console");
  std::optional<tls_files> tls;
  if (!tls_dir.empty() || !tls_name.empty()) {
    if (tls_dir.empty() || tls_name.empty())
      throw config_error("console: --tls DIR and --tls-name operator-K go together");
    // Not through CAF: with CAF 0.17.6, closing a TLS connection to a node drops its routes to
    // every other node, so a console that detached from node 0's CAF port stopped the run.
    tls = tls_files{tls_dir, tls_name};
    tls->check();
  }
  // Without TLS: node 0's node actor over a CAF connection.
  caf::actor_system_config cfg;  // outlives the actor system, which refers to it
  std::optional<caf::actor_system> sys;
  node_actor node;
  if (!tls) {
    add_actor_types(cfg);
    add_runtime_types(cfg);
    cfg.load<caf::io::middleman>();
    sys.emplace(cfg);
    node = connect<node_actor>(
        *sys, where, std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s), "node");
  }
  const auto limit = std::chrono::seconds(timeout_s);
  // One command: true when node 0 answered it.
  auto run_one = [&](const std::string& line) {
    std::string failure;
    std::optional<wire::console_reply> reply;
    if (tls) {
      try {
        reply = ask_console_gateway(where, server_name, *tls, line, timeout_s);
      } catch (const std::exception& e) {
        failure = e.what();
      }
    } else {
      caf::scoped_actor self{*sys};
      const wire::console_request req{line, {}, {}, {}, {}};
      self->request(node, limit, console_atom_v, wire::encode(wire::context{}, req))
          .receive(
              [&](std::vector<char>& b) {
                try {
                  reply = wire::decode_console_reply(wire::context{}, b);
                } catch (const wire::wire_error& e) {
                  failure = e.what();
                }
              },
              [&](caf::error& e) { failure = sys->render(e); });
    }
    if (!reply) {
      std::fprintf(stderr, "error: no answer from node 0: %s\n", failure.c_str());
      return false;
    }
    if (!reply->ok) {
      std::fprintf(stderr, "error: %s\n", reply->text.c_str());
      return false;
    }
    // JSON is printed indented for people, as sent with --json; other text as it is.
    const auto parsed = nlohmann::json::parse(reply->text, nullptr, false);
    std::printf("%s\n",
                json || parsed.is_discarded() ? reply->text.c_str() : parsed.dump(2).c_str());
    return true;
  };
  if (!command.empty()) return run_one(command) ? 0 : 1;

  ::rl_attempted_completion_function = complete_command;
  const std::string prompt = "degnn " + where.str() + "> ";
  const bool interactive = ::isatty(STDIN_FILENO);
  if (interactive)
    std::printf("attached to %s; `help` lists the commands, `quit` ends\n", where.str().c_str());
  while (char* raw = ::readline(interactive ? prompt.c_str() : "")) {
    std::string line = raw;
    std::free(raw);
    line.erase(0, line.find_first_not_of(" \t"));
    line.erase(line.find_last_not_of(" \t") + 1);
    if (line.empty()) continue;
    ::add_history(line.c_str());
    if (line == "quit" || line == "exit") break;
    run_one(line);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace degnn
