// The console's fault commands against a live cluster of node processes (issue 13, 29): kill
// and stop a node, cut and heal its links, a kill recovered inside the run (--recover adopt) with
// the console showing the new view, and a damaged checkpoint copy restored at the rollback.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <optional>
#include <thread>

#include "model/commit_record.hpp"
#include "tests/integration/console_cluster.hpp"
#include "tests/integration/outside_peer.hpp"

using namespace degnn;
using namespace degnn::test;
using namespace std::chrono_literals;

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
  auto args = [&](int k) { return recovering_node(ck, k); };
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
  auto args = [&](int k) { return recovering_node(ck, k); };
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
