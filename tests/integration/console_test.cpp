// Tests of `degnn console` against a live 2-node cluster (issue 13): every read-only command
// answers well-formed output (valid JSON with --json), a malformed command gets an error and the
// console goes on, the cluster trains on after consoles came and went; pause holds the step
// counter still and resume moves it on, checkpoint commits one at the next step boundary, each
// logged by node 0; and a TLS cluster's console goes through node 0's HTTPS gateway, for
// operators only (CAF 0.17.6 would drop node 0's routes when a console's TLS connection closed).
// The fault commands (kill, cut, recoveries) are in console_faults_test.cpp; the fixture in
// console_cluster.hpp.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <set>
#include <thread>

#include "runtime/console/console_commands.hpp"
#include "runtime/transport/cluster_certificates.hpp"
#include "tests/integration/console_cluster.hpp"
#include "tests/integration/node_processes.hpp"
#include "tests/integration/outside_peer.hpp"

using namespace degnn;
using namespace degnn::test;
using namespace std::chrono_literals;

namespace {

// Connections held open for as long as this lives: `silent` that send nothing and `hello` that
// send a TLS ClientHello and read nothing back.
struct stranger_flood {
  stranger_flood(std::uint16_t port, int silent, int hello)
      : ctx(SSL_CTX_new(TLS_client_method())) {
    auto tcp = [&] {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(port);
      ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
      ::fcntl(fd, F_SETFL, O_NONBLOCK);
      return fd;
    };
    for (int i = 0; i < silent; ++i)
      fds.push_back(tcp());
    for (int i = 0; i < hello; ++i) {
      ssls.push_back(SSL_new(ctx));
      SSL_set_fd(ssls.back(), tcp());
      SSL_connect(ssls.back());  // non-blocking: the hello goes out, nothing more
    }
  }
  ~stranger_flood() {
    for (SSL* s : ssls) {
      ::close(SSL_get_fd(s));
      SSL_free(s);
    }
    for (int fd : fds)
      ::close(fd);
    SSL_CTX_free(ctx);
  }
  SSL_CTX* ctx;
  std::vector<int> fds;
  std::vector<SSL*> ssls;
};

}  // namespace

TEST_F(Console, EachCommandAnswersAndAMalformedOneGetsAnErrorWhileTheConsoleGoesOn) {
  const std::string node0 = start_cluster("plain", {}, {});
  for (const auto& [name, help] : console_command_list()) {
    if (name == "pause" || name == "resume" || name == "checkpoint" || name == "kill" ||
        name == "set" || name == "trace" || name == "cut" || name == "heal")
      continue;  // below
    const auto [rc, out] = console({node0, "-c", name, "--json"});
    ASSERT_EQ(rc, 0) << name << ": " << out;
    if (name == "metrics") {
      EXPECT_TRUE(contains(out, "# TYPE degnn_steps_total counter")) << out;
      continue;
    }
    const auto j = nlohmann::json::parse(out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << name << ": " << out;
    if (name == "progress") {
      EXPECT_GT(j["steps"].get<int>(), 0);
      EXPECT_EQ(j["phase"], "training");
      EXPECT_FALSE(j["valid_acc"].is_null());
    }
    if (name == "nodes") {
      EXPECT_EQ(j.size(), 2u);
    }
    if (name == "view") {
      EXPECT_EQ(j["id"], 1);
    }
    if (name == "actors") {
      ASSERT_EQ(j.size(), 6u) << out;  // a batch actor, a shard and a store per partition
      std::set<std::string> roles;
      for (const auto& a : j) {
        roles.insert(a["role"].get<std::string>());
        EXPECT_EQ(a["node"], a["partition"]) << a.dump();  // node K serves partition K here
      }
      EXPECT_EQ(roles, (std::set<std::string>{"batch actor", "shard", "embedding store"}));
      // The batch actors, then the shards, then the stores, by partition.
      for (size_t i = 0; i < 6; ++i) {
        static const char* role[] = {"batch actor", "shard", "embedding store"};
        EXPECT_EQ(j[i]["role"], role[i / 2]) << out;
        EXPECT_EQ(j[i]["partition"], i % 2) << out;
      }
      EXPECT_GT(j[0]["bytes_sent"].get<double>(), 0) << out;
      EXPECT_TRUE(j[0].contains("messages_per_s")) << out;
      EXPECT_TRUE(j[0].contains("stage_ms_total")) << out;
      for (const auto& a : j) {
        ASSERT_TRUE(a.contains("mailbox") && a.contains("mailbox_peak")) << a.dump();
        EXPECT_GE(a["mailbox_peak"].get<std::uint64_t>(), a["mailbox"].get<std::uint64_t>());
      }
      const auto [one_rc, one] = console({node0, "-c", "actors 1", "--json"});
      ASSERT_EQ(one_rc, 0) << one;
      const auto node1 = nlohmann::json::parse(one, nullptr, false);
      ASSERT_EQ(node1.size(), 3u) << one;
      for (const auto& a : node1)
        EXPECT_EQ(a["node"], 1) << one;
      EXPECT_EQ(console({node0, "-c", "actors one"}).first, 1);
      EXPECT_EQ(console({node0, "-c", "actors 7"}).first, 1);
    }
    if (name == "stages") {
      EXPECT_GT(j["steps"].get<int>(), 0) << out;
      EXPECT_GT(j["coordinator"]["step"]["median_ms"].get<double>(), 0) << out;
      EXPECT_GT(j["workers_last_epoch_ms_per_step"]["sample"].get<double>(), 0) << out;
      // Per step over the recent steps, of the slowest worker: a median no larger than its p95.
      const auto& sample = j["workers_recent_steps"]["sample"];
      ASSERT_TRUE(sample.is_object()) << out;
      EXPECT_GT(sample["p95_ms"].get<double>(), 0) << out;
      EXPECT_LE(sample["median_ms"].get<double>(), sample["p95_ms"].get<double>()) << out;
    }
    if (name == "faults") {
      EXPECT_EQ(j["fault_commands"], "refused");
      EXPECT_TRUE(j["policy_on_node0"].is_null());
    }
  }
  // Node 0 hears from every member each second: its peak memory, and how long ago.
  bool heard = false;
  for (int i = 0; i < 50 && !heard; ++i) {
    const auto [rc, out] = console({node0, "-c", "nodes", "--json"});
    const auto j = nlohmann::json::parse(out, nullptr, false);
    heard = rc == 0 && !j.is_discarded() && j.size() == 2;
    for (const auto& m : j)
      heard = heard && m.contains("peak_rss_mib") && m["peak_rss_mib"].get<double>() > 10 &&
              m["last_heard_s_ago"].get<double>() < 5;
    if (!heard) std::this_thread::sleep_for(200ms);
  }
  EXPECT_TRUE(heard) << console({node0, "-c", "nodes", "--json"}).second;
  const auto [kill_rc, kill] = console({node0, "-c", "kill 1"});
  EXPECT_EQ(kill_rc, 1);
  EXPECT_TRUE(contains(kill, "started without --allow-faults")) << kill;
  const auto [off_rc, off] = console({node0, "-c", "checkpoint"});
  EXPECT_EQ(off_rc, 1);
  EXPECT_TRUE(contains(off, "checkpoints are off")) << off;
  const auto [bad_rc, bad] = console({node0, "-c", "progress now"});
  EXPECT_EQ(bad_rc, 1);
  EXPECT_TRUE(contains(bad, "'progress' takes no argument")) << bad;
  // Interactive (stdin not a terminal): an unknown command, then two good ones, then quit.
  const auto [rc, out] =
      console({node0, "--json"}, "bogus\\nprogress\\n\\nview\\nquit\\nprogress\\n");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_TRUE(contains(out, "error: unknown command 'bogus' (try help)")) << out;
  EXPECT_TRUE(contains(out, "\"steps_per_epoch\"")) << out;
  EXPECT_TRUE(contains(out, "\"members\"")) << out;
  // Nothing after quit was run: one progress answer only.
  EXPECT_EQ(out.find("\"steps_per_epoch\""), out.rfind("\"steps_per_epoch\"")) << out;
  // The consoles came and went; the cluster trains on.
  EXPECT_EQ(nodes_[0]->wait(10ms), -1) << read_file(log("plain0"));
  EXPECT_EQ(nodes_[1]->wait(10ms), -1) << read_file(log("plain1"));
  const auto [gone_rc, gone] = console(
      {"127.0.0.1:" + std::to_string(free_port_pair()), "-c", "progress", "--timeout", "1"});
  EXPECT_EQ(gone_rc, 1);
  EXPECT_TRUE(contains(gone, "cannot reach the node")) << gone;
}

// A TLS cluster's console goes through node 0's HTTPS gateway (node --console), not CAF: with
// CAF 0.17.6 a TLS connection that closed dropped node 0's routes and stopped the run. Consoles
// come and go and the run goes on; only an operator certificate of the cluster's CA is taken, and
// the gateway must hold the certificate the console expects.
TEST_F(Console, OverTlsOnlyAnOperatorAttachesAndTheRunGoesOnAfterConsolesLeave) {
  const std::string certs = (dir_->path / "certs").string();
  const std::string gate = "127.0.0.1:" + std::to_string(free_port_pair());
  start_cluster("tls", {"--tls", certs, "--tls-name", "node-0", "--console", gate},
                {"--tls", certs, "--tls-name", "node-1"});
  EXPECT_TRUE(contains(read_file(log("tls0")), "TLS console on " + gate)) << read_file(log("tls0"));
  const std::vector<std::string> as_operator = {"--tls", certs, "--tls-name", "operator-0"};
  auto steps = [&]() -> std::int64_t {
    std::vector<std::string> args = {gate, "-c", "progress", "--json"};
    args.insert(args.end(), as_operator.begin(), as_operator.end());
    const auto [rc, out] = console(args);
    EXPECT_EQ(rc, 0) << out;
    const auto j = nlohmann::json::parse(out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << out;
    return j.is_discarded() ? -1 : j.value("steps", std::int64_t{-1});
  };
  std::int64_t last = steps();
  // What a command costs here without strangers (the median of three): a sanitized build spends
  // seconds starting the console process alone, so there the bound is on the difference.
  std::vector<double> quiet;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    last = steps();
    quiet.push_back(seconds_since(t0));
  }
  std::sort(quiet.begin(), quiet.end());
#ifdef DEGNN_SANITIZED
  const double bound = quiet[1] + 1.0;
#else
  const double bound = 1.0;
#endif
  {
    // 200 strangers that connect and say nothing and 50 that stop after their TLS hello (the
    // gateway used to give each a thread for 5 s: a command took 5.9-7.1 s): a real command
    // still answers within a second (the median of three, so one scheduling hiccup of a busy
    // machine is not mistaken for that stall).
    const std::uint16_t port =
        static_cast<std::uint16_t>(std::stoi(gate.substr(gate.rfind(':') + 1)));
    stranger_flood flood(port, 200, 50);
    std::vector<double> took;
    for (int i = 0; i < 3; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      const std::int64_t now = steps();
      took.push_back(seconds_since(t0));
      EXPECT_GE(now, last);
      last = now;
    }
    std::sort(took.begin(), took.end());
    EXPECT_LT(took[1], bound) << "slowest " << took[2] << " s, without strangers " << quiet[1];
    std::printf(
        "console command under 250 strangers: median %.3f s, slowest %.3f s (without: %.3f s)\n",
        took[1], took[2], quiet[1]);
  }
  for (int i = 0; i < 3; ++i) {
    std::this_thread::sleep_for(kFewSteps);
    const std::int64_t now = steps();
    EXPECT_GT(now, last) << "the run stopped after a console left (" << i + 1 << ")";
    last = now;
  }
  // A changing command is logged with the operator's certificate name.
  std::vector<std::string> pause = {gate, "-c", "pause"};
  pause.insert(pause.end(), as_operator.begin(), as_operator.end());
  EXPECT_EQ(console(pause).first, 0);
  std::vector<std::string> resume = {gate, "-c", "resume"};
  resume.insert(resume.end(), as_operator.begin(), as_operator.end());
  EXPECT_EQ(console(resume).first, 0);
  EXPECT_TRUE(wait_for(log("tls0"), "'resume' from operator-0 (TLS console)", 10s))
      << read_file(log("tls0"));
  // A node's certificate is not an operator's.
  const auto [rc1, out1] =
      console({gate, "-c", "progress", "--tls", certs, "--tls-name", "node-1"});
  EXPECT_EQ(rc1, 1);
  EXPECT_TRUE(contains(out1, "'node-1' is not an operator certificate")) << out1;
  // The gateway's certificate is node-0's, not the one this console expects.
  std::vector<std::string> wrong_server = {gate, "-c", "progress", "--server-name", "node-1"};
  wrong_server.insert(wrong_server.end(), as_operator.begin(), as_operator.end());
  const auto [rc2, out2] = console(wrong_server);
  EXPECT_EQ(rc2, 1);
  EXPECT_TRUE(contains(out2, "SSLServerVerification")) << out2;
  // A console without TLS cannot talk to the gateway at all.
  const auto [rc3, out3] = console({gate, "-c", "progress", "--timeout", "3"});
  EXPECT_EQ(rc3, 1) << out3;
  // A gateway on a cluster without TLS is refused before anything starts.
  child_process plain(
      small_node_run(dir_->path / "parts",
                     {"--is-seed", "--listen", "127.0.0.1:" + std::to_string(free_port_pair()),
                      "--console", "127.0.0.1:0"}),
      log("plain-console"));
  EXPECT_EQ(plain.wait(30s), 1);
  EXPECT_TRUE(contains(read_file(log("plain-console")), "--console serves the console of a TLS"))
      << read_file(log("plain-console"));
  EXPECT_GT(steps(), last) << "the run goes on after the refused consoles";
}

TEST_F(Console, PauseHoldsTheStepsResumeMovesThemOnAndCheckpointCommitsOne) {
  const fs::path ck0 = dir_->path / "controls-ck0", ck1 = dir_->path / "controls-ck1";
  const std::string node0 = start_cluster("controls", {"--checkpoint-dir", ck0.string()},
                                          {"--checkpoint-dir", ck1.string()});
  auto progress = [&] {
    const auto [rc, out] = console({node0, "-c", "progress", "--json"});
    EXPECT_EQ(rc, 0) << out;
    return nlohmann::json::parse(out, nullptr, false);
  };
  const auto [prc, paused] = console({node0, "-c", "pause", "--json"});
  ASSERT_EQ(prc, 0) << paused;
  EXPECT_TRUE(contains(paused, "\"paused\":true")) << paused;
  std::this_thread::sleep_for(1s);  // the step in flight ends
  const auto held = progress();
  ASSERT_FALSE(held.is_discarded());
  EXPECT_EQ(held["phase"], "paused");
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(progress()["steps"], held["steps"]) << "steps moved while paused";
  const auto [again_rc, again] = console({node0, "-c", "pause"});
  EXPECT_EQ(again_rc, 1);
  EXPECT_TRUE(contains(again, "already paused")) << again;
  const auto [rrc, resumed] = console({node0, "-c", "resume", "--json"});
  ASSERT_EQ(rrc, 0) << resumed;
  bool moved = false;
  for (int i = 0; i < 100 && !moved; ++i) {
    moved = progress()["steps"].get<std::uint64_t>() > held["steps"].get<std::uint64_t>();
    if (!moved) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(moved) << "no step after resume within 10 s";
  const auto [crc, asked] = console({node0, "-c", "checkpoint", "--json"});
  ASSERT_EQ(crc, 0) << asked;
  EXPECT_TRUE(
      wait_for(log("controls0"), "checkpoint asked from the console: taken before step", 30s))
      << read_file(log("controls0"));
  const std::string out0 = read_file(log("controls0"));
  for (const char* cmd : {"'pause' from an operator at", "'resume' from an operator at",
                          "'checkpoint' from an operator at"})
    EXPECT_TRUE(contains(out0, cmd)) << cmd << "\n" << out0;
  EXPECT_TRUE(contains(out0, "(view 1)")) << out0;
  // Both nodes hold a committed checkpoint in their own folders.
  EXPECT_TRUE(fs::exists(ck0 / "part-0" / "COMMIT"));
  EXPECT_TRUE(fs::exists(ck1 / "part-1" / "COMMIT"));
  EXPECT_EQ(nodes_[0]->wait(10ms), -1) << out0;
  EXPECT_EQ(nodes_[1]->wait(10ms), -1) << read_file(log("controls1"));
}

// The interactive console in a terminal (tmux, on a private server socket): tab completion of a
// command name, line editing (a typo erased with backspace), history (arrow up recalls a line).
TEST_F(Console, InATerminalCompletesEditsAndRecallsHistory) {
  if (std::system("command -v tmux >/dev/null") != 0)
    GTEST_SKIP() << "tmux is not installed (scripts/setup.sh installs it)";
  const std::string node0 = start_cluster("tmux", {}, {});
  // A server socket of its own, in the test's folder (removed with it).
  const std::string sock = (dir_->path / "tmux.sock").string();
  const fs::path screen = log("tmux-screen");
  auto tmux = [&](const std::string& args) {
    return std::system(("tmux -S '" + sock + "' " + args + " >/dev/null 2>&1").c_str());
  };
  auto shown = [&] {
    std::system(("tmux -S '" + sock + "' capture-pane -p -t console -S -300 > '" + screen.string() +
                 "' 2>/dev/null")
                    .c_str());
    return read_file(screen);
  };
  auto wait_shown = [&](const std::string& text, int times = 1) {
    for (int i = 0; i < 100; ++i) {
      const std::string s = shown();
      int n = 0;
      for (auto at = s.find(text); at != std::string::npos; at = s.find(text, at + 1))
        ++n;
      if (n >= times) return true;
      std::this_thread::sleep_for(100ms);
    }
    return false;
  };
  struct server {
    std::function<int(const std::string&)> tmux;
    ~server() { tmux("kill-server"); }
  } cleanup{tmux};
  ASSERT_EQ(tmux("new-session -d -s console -x 160 -y 60 \"'" + std::string(DEGNN_BINARY) +
                 "' console " + node0 + " --json\""),
            0);
  // capture-pane drops trailing blanks: the prompt ends with ">".
  ASSERT_TRUE(wait_shown("degnn " + node0 + ">")) << shown();
  // Completion: "progr" and Tab become "progress".
  tmux("send-keys -t console progr Tab Enter");
  ASSERT_TRUE(wait_shown("\"steps_per_epoch\"")) << shown();
  // Editing: "viex", backspace, "w".
  tmux("send-keys -t console viex BSpace w Enter");
  ASSERT_TRUE(wait_shown("\"members\"")) << shown();
  // History: arrow up twice recalls "progress".
  tmux("send-keys -t console Up Up Enter");
  ASSERT_TRUE(wait_shown("\"steps_per_epoch\"", 2)) << shown();
  const std::string s = shown();
  EXPECT_TRUE(contains(s, "> progress")) << s;
  EXPECT_TRUE(contains(s, "> view")) << s;
  EXPECT_FALSE(contains(s, "unknown command")) << s;
  tmux("send-keys -t console quit Enter");
  EXPECT_EQ(nodes_[0]->wait(10ms), -1) << read_file(log("tmux0"));
}

// `trace start FILE` / `trace stop` (node 0 started with --trace-dir): every actor keeps its
// stage spans from the next step on and the stop writes them as a Chrome trace; names outside
// the folder, a second start and a stop with nothing running are refused.
TEST_F(Console, TraceStartAndStopWriteTheStepsBetweenAsAChromeTrace) {
  const fs::path traces = dir_->path / "traces";
  fs::create_directories(traces);
  const std::string node0 = start_cluster("trace", {"--trace-dir", traces.string()}, {});
  for (const char* bad : {"trace stop", "trace start ../x.json", "trace start x.txt", "trace",
                          "trace start a.json b"}) {
    const auto [rc, out] = console({node0, "-c", bad});
    EXPECT_EQ(rc, 1) << bad << ": " << out;
  }
  const auto [src, started] = console({node0, "-c", "trace start steps.json"});
  ASSERT_EQ(src, 0) << started;
  const auto [again_rc, again] = console({node0, "-c", "trace start other.json"});
  EXPECT_EQ(again_rc, 1);
  EXPECT_TRUE(contains(again, "runs (trace stop first)")) << again;
  ASSERT_TRUE(wait_for(log("trace0"), "trace asked from the console", 30s))
      << read_file(log("trace0"));
  std::this_thread::sleep_for(kFewSteps);
  const auto [prc, stopped] = console({node0, "-c", "trace stop"});
  ASSERT_EQ(prc, 0) << stopped;
  ASSERT_TRUE(wait_for(log("trace0"), "written to " + (traces / "steps.json").string(), 30s))
      << read_file(log("trace0"));
  const auto j = nlohmann::json::parse(read_file(traces / "steps.json"), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  std::set<std::string> names;
  for (const auto& e : j["traceEvents"])
    if (e.value("ph", "") == "X") names.insert(e.value("name", ""));
  EXPECT_TRUE(names.count("sample")) << j.dump().substr(0, 500);
  EXPECT_TRUE(names.count("all-reduce")) << j.dump().substr(0, 500);
  // Written once: the same name again is refused.
  const auto [erc, exists] = console({node0, "-c", "trace start steps.json"});
  EXPECT_EQ(erc, 1);
  EXPECT_TRUE(contains(exists, "exists already")) << exists;
  EXPECT_EQ(nodes_[1]->wait(10ms), -1) << read_file(log("trace1"));
}

// `set staleness K` (decentralized, 3 layers): from the next step boundary the shards reuse halo
// rows confirmed within K steps; with K beyond the run's length every row the exact pass put in
// the history is reused, so `history` shows none pulled per step where staleness 1 pulled some.
// Malformed or out-of-range settings are refused and the run goes on.
TEST_F(Console, SetStalenessLowersTheRowsPulledPerStep) {
  const std::vector<std::string> deep = {"--pipeline", "decentralized", "--layers",     "3",
                                         "--fanouts",  "10,10,10",      "--batch-size", "8"};
  const std::string node0 = start_cluster("staleness", deep, deep);
  auto history = [&] {
    const auto [rc, out] = console({node0, "-c", "history", "--json"});
    EXPECT_EQ(rc, 0) << out;
    return nlohmann::json::parse(out, nullptr, false);
  };
  const auto before = history();
  ASSERT_FALSE(before.is_discarded());
  EXPECT_EQ(before["staleness"], 1);
  EXPECT_EQ(before["bits"], 8);
  const double pulled1 = before["rows_pulled_per_step"].get<double>();
  EXPECT_GT(pulled1, 0);
  for (const char* bad : {"set staleness 0", "set staleness x", "set fanout 4", "set staleness"}) {
    const auto [rc, out] = console({node0, "-c", bad});
    EXPECT_EQ(rc, 1) << bad << ": " << out;
  }
  const auto [src, set] = console({node0, "-c", "set staleness 100000", "--json"});
  ASSERT_EQ(src, 0) << set;
  ASSERT_TRUE(wait_for(log("staleness0"), "staleness 100000 set from the console", 30s))
      << read_file(log("staleness0"));
  // Three epoch lines later, the last epoch ran entirely with the new staleness.
  const auto set_at = read_file(log("staleness0")).find("staleness 100000 set from the console");
  std::size_t epochs_after = 0;
  for (int i = 0; i < 400 && epochs_after < 3; ++i) {
    const std::string now = read_file(log("staleness0"));
    epochs_after = 0;
    for (auto at = now.find("\nepoch", set_at); at != std::string::npos;
         at = now.find("\nepoch", at + 1))
      ++epochs_after;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_GE(epochs_after, 3u) << read_file(log("staleness0"));
  const auto after = history();
  EXPECT_EQ(after["staleness"], 100000);
  const double pulled = after["rows_pulled_per_step"].get<double>();
  std::printf("rows pulled per step: %.2f with staleness 1, %.2f with staleness 100000\n", pulled1,
              pulled);
  // Only rows no step had read before still come (the set-up sends no history rows).
  EXPECT_LT(pulled, pulled1 / 4);
  EXPECT_TRUE(contains(read_file(log("staleness0")), "'set staleness 100000' from an operator at"));
  EXPECT_EQ(nodes_[1]->wait(10ms), -1) << read_file(log("staleness1"));
}
