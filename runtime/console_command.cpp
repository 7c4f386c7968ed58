// degnn console HOST:PORT: an operator's console attached to node 0 of a running cluster, with
// line editing, history and tab completion (GNU readline), or one command with -c for scripts.
// With --tls DIR --tls-name operator-K every command carries a proof over node 0's challenge.
#include <readline/history.h>
#include <readline/readline.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "runtime/cli_options.hpp"
#include "runtime/commands.hpp"
#include "runtime/console_commands.hpp"
#include "runtime/node_actor.hpp"
#include "runtime/node_membership.hpp"
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
  std::string address, command, tls_dir, tls_name;
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
          "usage: degnn console HOST:PORT [-c CMD] [--json] [--tls DIR --tls-name operator-K]\n\n"
          "Attaches to node 0 of a running cluster (its --listen address). Without -c it reads\n"
          "commands with line editing, history and tab completion; `help` lists them.\n");
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
    // Measured with CAF 0.17.6: when any TLS connection to a node closes, that node loses its
    // routes to the other nodes and the run stops ("partition 1's batch actor is gone"). A
    // console that attaches and detaches would stop the training, so it refuses to.
    if (!std::getenv("DEGNN_CONSOLE_TLS_ANYWAY")) {
      throw config_error(
          "console: attaching to a TLS cluster is refused: with CAF 0.17.6, closing a TLS "
          "connection to node 0 drops its routes to the other nodes and stops the run (see "
          "README); use node 0's --http endpoint, or set DEGNN_CONSOLE_TLS_ANYWAY=1 to try");
    }
    tls = tls_files{tls_dir, tls_name};
    tls->check();
  }
  caf::actor_system_config cfg;
  add_actor_types(cfg);
  add_runtime_types(cfg);
  cfg.load<caf::io::middleman>();
  if (tls) use_tls(cfg, *tls);
  caf::actor_system sys{cfg};
  const auto node = connect<node_actor>(
      sys, where, std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s), "node",
      tls.has_value());
  caf::scoped_actor self{sys};
  const auto limit = std::chrono::seconds(timeout_s);
  // One command: true when node 0 answered it.
  auto run_one = [&](const std::string& line) {
    wire::console_request req{line, {}, {}, {}};
    std::string failure;
    if (tls) {
      std::vector<char> challenge;
      self->request(node, limit, challenge_atom_v)
          .receive([&](std::vector<char>& c) { challenge = std::move(c); },
                   [&](caf::error& e) { failure = sys.render(e); });
      if (challenge.empty()) {
        std::fprintf(stderr, "error: node 0 gave no challenge: %s\n", failure.c_str());
        return false;
      }
      join_proof p = prove(*tls, std::vector<std::uint8_t>(challenge.begin(), challenge.end()));
      req.certificate = std::move(p.certificate);
      req.signature = std::move(p.signature);
      req.token_mac = std::move(p.token_mac);
    }
    std::optional<wire::console_reply> reply;
    self->request(node, limit, console_atom_v, wire::encode(wire::context{}, req))
        .receive(
            [&](std::vector<char>& b) {
              try {
                reply = wire::decode_console_reply(wire::context{}, b);
              } catch (const wire::wire_error& e) {
                failure = e.what();
              }
            },
            [&](caf::error& e) { failure = sys.render(e); });
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
