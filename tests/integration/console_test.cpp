// Tests of `degnn console` against a live 2-node cluster (issue 13): every read-only command
// answers well-formed output (valid JSON with --json), a malformed command gets an error and the
// console goes on, the cluster trains on after consoles came and went; pause holds the step
// counter still and resume moves it on, checkpoint commits one at the next step boundary, each
// logged by node 0; and a TLS cluster's console goes through node 0's HTTPS gateway, for
// operators only (CAF 0.17.6 would drop node 0's routes when a console's TLS connection closed).
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
#include <optional>
#include <set>
#include <thread>

#include "model/commit_record.hpp"
#include "runtime/console/console_commands.hpp"
#include "runtime/transport/cluster_certificates.hpp"
#include "tests/integration/node_processes.hpp"
#include "tests/integration/outside_peer.hpp"

using namespace degnn;
using namespace degnn::test;
using namespace std::chrono_literals;

namespace {

// Long enough for a few training steps: under ThreadSanitizer a step takes 5-15 times as long
// as in the plain build (a sanitized run once made no step in 500 ms).
#ifdef DEGNN_SANITIZED
constexpr auto kFewSteps = 3s;
#else
constexpr auto kFewSteps = 500ms;
#endif

class Console : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new temp_dir("console");
    write_two_metis_parts(fs::path(DEGNN_SOURCE_DIR) / "data/pubmed", dir_->path / "parts");
    const dataset pubmed = load_dataset(fs::path(DEGNN_SOURCE_DIR) / "data/pubmed");
    write_partitions(pubmed,
                     partition_graph(pubmed.graph, pubmed.train, 3, partition_method::metis, 1),
                     dir_->path / "parts3", "metis", 1, 3);
    make_cluster_certificates(dir_->path / "certs", 2, 1, 2);
  }
  static void TearDownTestSuite() { delete dir_; }

  // A 2-node cluster that trains until the test ends (3 nodes on 3 partitions when `third` has
  // node 2's options); returns node 0's address.
  std::string start_cluster(const std::string& name, const std::vector<std::string>& tls0,
                            const std::vector<std::string>& tls1,
                            const std::vector<std::string>& third = {}) {
    const fs::path parts = dir_->path / (third.empty() ? "parts" : "parts3");
    const std::string seed = "127.0.0.1:" + std::to_string(free_port_pair());
    auto a0 = std::vector<std::string>{"--is-seed", "--listen",     seed, "--epochs",
                                       "100000",    "--eval-every", "5"};
    a0.insert(a0.end(), tls0.begin(), tls0.end());
    auto a1 = std::vector<std::string>{"--join",       seed, "--epochs",    "100000",
                                       "--eval-every", "5",  "--rank-hint", "1"};
    a1.insert(a1.end(), tls1.begin(), tls1.end());
    nodes_.push_back(std::make_unique<child_process>(small_node_run(parts, a0), log(name + "0")));
    nodes_.push_back(std::make_unique<child_process>(small_node_run(parts, a1), log(name + "1")));
    if (!third.empty()) {
      auto a2 = std::vector<std::string>{"--join",       seed, "--epochs",    "100000",
                                         "--eval-every", "5",  "--rank-hint", "2"};
      a2.insert(a2.end(), third.begin(), third.end());
      nodes_.push_back(std::make_unique<child_process>(small_node_run(parts, a2), log(name + "2")));
    }
    EXPECT_TRUE(wait_for(log(name + "0"), "epoch   6", 90s)) << read_file(log(name + "0"));
    return seed;
  }
  // Runs `degnn console ARGS` (through sh when stdin is given); returns exit code and output.
  std::pair<int, std::string> console(const std::vector<std::string>& args,
                                      const std::string& stdin_text = "") {
    const fs::path out = log("console-" + std::to_string(++runs_));
    std::vector<std::string> cmd = {DEGNN_BINARY, "console"};
    cmd.insert(cmd.end(), args.begin(), args.end());
    if (!stdin_text.empty()) {
      std::string line =
          "printf '" + stdin_text + "' | '" + std::string(DEGNN_BINARY) + "' console";
      for (const auto& a : args)
        line += " '" + a + "'";
      cmd = {"/bin/sh", "-c", line};
    }
    child_process c(cmd, out);
    const int rc = c.wait(30s);
    return {rc, read_file(out)};
  }
  static fs::path log(const std::string& name) { return dir_->path / (name + ".log"); }
  std::vector<std::unique_ptr<child_process>> nodes_;
  int runs_ = 0;
  static temp_dir* dir_;
};
temp_dir* Console::dir_ = nullptr;

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

// Fault commands (a test run): with --allow-faults on every node, `kill 1 --signal STOP` stops
// node 1's process (SIGCONT lets it train on) and `kill 1` kills it, after which node 0 stops
// naming the lost partition; both are logged on node 0. A malformed kill gets the usage.
TEST_F(Console, KillStopsOrKillsANodeWhenTheClusterAllowsFaults) {
  const std::string node0 =
      start_cluster("faults", {"--allow-faults", "--faults-duplicate", "0.01"}, {"--allow-faults"});
  const auto [frc, faults] = console({node0, "-c", "faults", "--json"});
  ASSERT_EQ(frc, 0) << faults;
  const auto j = nlohmann::json::parse(faults, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << faults;
  EXPECT_EQ(j["fault_commands"], "allowed (--allow-faults)");
  EXPECT_EQ(j["policy_on_node0"]["duplicate"], 0.01);
  const auto [brc, bad] = console({node0, "-c", "kill one"});
  EXPECT_EQ(brc, 1);
  EXPECT_TRUE(contains(bad, "usage: kill RANK [--signal KILL|STOP]")) << bad;

  // A process outside the cluster that reaches node 1 cannot stop it: it lacks the token node 1
  // gave node 0 alone.
  {
    std::smatch where;
    const std::string out1 = read_file(log("faults1"));
    ASSERT_TRUE(std::regex_search(out1, where, std::regex(R"(listening on 127\.0\.0\.1:(\d+))")))
        << out1;
    outside_peer stranger;
    auto& [cfg, sys, self] = stranger;
    auto node1 = stranger.node_at(static_cast<std::uint16_t>(std::stoi(where[1].str())));
    ASSERT_TRUE(node1) << sys.render(node1.error());
    for (const std::string token : {"", "0123456789abcdef0123456789abcdef"}) {
      self->request(*node1, 10s, kill_atom_v, token, static_cast<std::int32_t>(SIGSTOP))
          .receive(
              [](bool) { ADD_FAILURE() << "a forged kill was taken"; },
              [&](caf::error& e) {
                EXPECT_NE(sys.render(e).find("kill is taken from node 0 only"), std::string::npos)
                    << sys.render(e);
              });
    }
  }
  auto state_of = [](pid_t pid) {
    const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
    const auto paren = stat.rfind(')');
    return paren == std::string::npos || paren + 2 >= stat.size() ? '?' : stat[paren + 2];
  };
  const pid_t pid1 = nodes_[1]->pid();
  const auto [src, stop] = console({node0, "-c", "kill 1 --signal STOP"});
  ASSERT_EQ(src, 0) << stop;
  bool stopped = false;
  for (int i = 0; i < 100 && !stopped; ++i) {
    stopped = state_of(pid1) == 'T';
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(stopped) << read_file(log("faults1"));
  nodes_[1]->signal(SIGCONT);
  EXPECT_TRUE(contains(read_file(log("faults1")), "stopped with SIGSTOP by the console"));
  const std::string before = read_file(log("faults0"));
  const auto epochs_in = [](const std::string& text) {
    std::size_t n = 0;
    for (auto at = text.find("\nepoch"); at != std::string::npos; at = text.find("\nepoch", at + 1))
      ++n;
    return n;
  };
  // It trains on after SIGCONT.
  bool more = false;
  for (int i = 0; i < 1200 && !more; ++i) {
    more = epochs_in(read_file(log("faults0"))) > epochs_in(before) + 1;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(more) << read_file(log("faults0"));

  const auto [krc, killed] = console({node0, "-c", "kill 1"});
  ASSERT_EQ(krc, 0) << killed;
  EXPECT_EQ(nodes_[1]->wait(20s), 137) << read_file(log("faults1"));
  EXPECT_EQ(nodes_[0]->wait(30s), 1) << read_file(log("faults0"));
  const std::string out0 = read_file(log("faults0"));
  EXPECT_TRUE(contains(out0, "console: 'kill 1' from an operator at")) << out0;
  EXPECT_TRUE(contains(out0, "partition 1")) << out0;
}

// `cut 1` holds every message between node 1's partition and the others: the step counter
// stands still and `faults` shows the cut; `heal` lets the held requests go on and the
// run trains on. Both are logged on node 0, the cut on node 1 too; malformed ones get the usage.
TEST_F(Console, CutHoldsTheStepsAcrossItAndHealLetsThemGoOn) {
  const std::string node0 = start_cluster("cut", {"--allow-faults"}, {"--allow-faults"});
  auto progress = [&] {
    const auto [rc, out] = console({node0, "-c", "progress", "--json"});
    EXPECT_EQ(rc, 0) << out;
    return nlohmann::json::parse(out, nullptr, false);
  };
  for (const auto& [cmd, want] :
       std::vector<std::pair<std::string, std::string>>{{"cut", "usage: cut RANK"},
                                                        {"cut one", "usage: cut RANK"},
                                                        {"cut 7", "no serving member of rank 7"},
                                                        {"heal 1", "usage: heal"}}) {
    const auto [rc, out] = console({node0, "-c", cmd});
    EXPECT_EQ(rc, 1) << cmd;
    EXPECT_TRUE(contains(out, want)) << cmd << ": " << out;
  }
  const auto [crc, cut] = console({node0, "-c", "cut 1", "--json"});
  ASSERT_EQ(crc, 0) << cut;
  EXPECT_TRUE(contains(cut, "\"partitions\":[1]")) << cut;
  std::this_thread::sleep_for(1s);  // the step in flight reaches the cut
  const auto held = progress();
  ASSERT_FALSE(held.is_discarded());
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(progress()["steps"], held["steps"]) << "steps moved across the cut";
  const auto [frc, faults] = console({node0, "-c", "faults", "--json"});
  ASSERT_EQ(frc, 0) << faults;
  const auto f = nlohmann::json::parse(faults, nullptr, false);
  ASSERT_FALSE(f.is_discarded()) << faults;
  EXPECT_EQ(f["cut_partitions"], nlohmann::json::array({1})) << faults;
  // Node 0's own count only: which side's requests the cut catches depends on where the step
  // was (node 0 may be waiting on a request it sent before the cut).
  EXPECT_TRUE(f["injected_on_node0"]["held_by_a_cut"].is_number_unsigned()) << faults;
  const auto [hrc, healed] = console({node0, "-c", "heal", "--json"});
  ASSERT_EQ(hrc, 0) << healed;
  bool moved = false;
  for (int i = 0; i < 100 && !moved; ++i) {
    moved = progress()["steps"].get<std::uint64_t>() > held["steps"].get<std::uint64_t>() + 2;
    if (!moved) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(moved) << "no steps after heal within 10 s";
  const std::string out0 = read_file(log("cut0")), out1 = read_file(log("cut1"));
  EXPECT_TRUE(contains(out0, "console: 'cut 1' from an operator at")) << out0;
  EXPECT_TRUE(contains(out0, "console: 'heal' from an operator at")) << out0;
  EXPECT_TRUE(contains(out1, "the console cut partition mask 2 off")) << out1;
  EXPECT_TRUE(contains(out1, "the console healed the cut")) << out1;
  EXPECT_EQ(nodes_[0]->wait(10ms), -1) << out0;
  EXPECT_EQ(nodes_[1]->wait(10ms), -1) << out1;
}

// With --recover adopt, a node killed from the console is recovered inside the run: node 2 takes
// its partition in view 2, `view` and `nodes` show the killed node lost, and the steps go on.
// Three nodes: two keep a majority after the loss (a 2-node cluster stops instead).
TEST_F(Console, ANodeKilledFromTheConsoleIsRecoveredAndTheConsoleShowsTheNewView) {
  const fs::path ck = dir_->path / "recover-ck";
  auto args = [&](int k) {
    return std::vector<std::string>{"--allow-faults", "--recover", "adopt", "--checkpoint-dir",
                                    (ck / std::to_string(k)).string()};
  };
  const std::string node0 = start_cluster("recover", args(0), args(1), args(2));
  const auto [krc, kill] = console({node0, "-c", "kill 1"});
  ASSERT_EQ(krc, 0) << kill;
  EXPECT_EQ(nodes_[1]->wait(30s), 137) << read_file(log("recover1"));
  ASSERT_TRUE(wait_for(log("recover0"), "recovered in", 60s)) << read_file(log("recover0"));
  auto ask = [&](const std::string& what) {
    const auto [rc, out] = console({node0, "-c", what, "--json"});
    EXPECT_EQ(rc, 0) << out;
    return nlohmann::json::parse(out, nullptr, false);
  };
  const auto view = ask("view");
  ASSERT_FALSE(view.is_discarded());
  EXPECT_EQ(view["id"], 2);
  EXPECT_EQ(view["members"][1]["state"], "lost") << view.dump();
  EXPECT_EQ(view["members"][0]["state"], "serving") << view.dump();
  EXPECT_EQ(view["members"][0]["partitions"], nlohmann::json({0})) << view.dump();
  EXPECT_EQ(view["members"][2]["partitions"], nlohmann::json({1, 2})) << view.dump();
  EXPECT_EQ(view["coordinator"], 0) << view.dump();
  EXPECT_EQ(view["members"][0]["role"], "coordinator") << view.dump();
  EXPECT_EQ(view["members"][1]["role"], "worker") << view.dump();
  EXPECT_EQ(ask("nodes")[1]["state"], "lost");
  const auto steps = ask("progress")["steps"].get<int>();
  bool moved = false;
  for (int i = 0; i < 100 && !moved; ++i) {
    std::this_thread::sleep_for(100ms);
    const auto p = ask("progress");
    moved = p["steps"].get<int>() > steps && p["phase"] == "training";
  }
  EXPECT_TRUE(moved) << read_file(log("recover0"));
  EXPECT_EQ(nodes_[0]->wait(10ms), -1) << read_file(log("recover0"));
}

// A damaged copy at a rollback (issue 29): a checkpoint committed, the run paused, one byte of
// node 1's copy of the newest commit flipped, node 2 killed, the run resumed. Node 1 adopts
// partition 2, finds its copy of the commit damaged, restores it from the seed's (node 0 offers it)
// and the steps go on.
TEST_F(Console, ADamagedCopyAtARollbackIsRestoredFromTheSeedsCopy) {
  const fs::path ck = dir_->path / "rollback-ck";
  auto args = [&](int k) {
    return std::vector<std::string>{"--allow-faults", "--recover", "adopt", "--checkpoint-dir",
                                    (ck / std::to_string(k)).string()};
  };
  const std::string node0 = start_cluster("rollback", args(0), args(1), args(2));
  ASSERT_EQ(console({node0, "-c", "checkpoint"}).first, 0);
  ASSERT_TRUE(
      wait_for(log("rollback0"), "checkpoint asked from the console: taken before step", 30s))
      << read_file(log("rollback0"));
  // Paused, no commit moves: node 1's newest is the one the recovery rolls back to.
  ASSERT_EQ(console({node0, "-c", "pause"}).first, 0);
  std::this_thread::sleep_for(1s);  // the step in flight, and a commit's records, end
  const fs::path folder1 = ck / "1" / "part-1";
  const std::optional<commit_record> r = read_commit_record(folder1);
  ASSERT_TRUE(r) << read_file(log("rollback1"));
  flip_a_byte(folder1 / r->file);
  ASSERT_EQ(console({node0, "-c", "kill 2"}).first, 0);
  EXPECT_EQ(nodes_[2]->wait(30s), 137) << read_file(log("rollback2"));
  ASSERT_EQ(console({node0, "-c", "resume"}).first, 0);
  ASSERT_TRUE(wait_for(log("rollback0"), "recovered in", 60s))
      << read_file(log("rollback0")) << read_file(log("rollback1"));
  const std::string out1 = read_file(log("rollback1"));
  EXPECT_TRUE(contains(out1, "damaged file); restoring it from the seed's copy")) << out1;
  EXPECT_TRUE(contains(out1, "restored " + r->file + " from the seed at")) << out1;
  EXPECT_TRUE(contains(read_file(log("rollback0")),
                       "every node rolls back to step " + std::to_string(r->next_step)))
      << read_file(log("rollback0"));
  EXPECT_EQ(nodes_[0]->wait(10ms), -1) << read_file(log("rollback0"));
  EXPECT_EQ(nodes_[1]->wait(10ms), -1) << out1;
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
