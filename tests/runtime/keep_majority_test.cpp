// Keep-majority: the count without_majority makes (members proven gone leave it), checked
// against every split of small clusters so that two sides never both go on; the port probe that
// proves a member gone (a refused connection) against real sockets on 127.0.0.1; and run_gaps,
// which tells a node it was stopped itself (then it proves nobody gone).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <thread>

#include "runtime/node/node_recovery.hpp"
#include "runtime/process/run_gaps.hpp"
#include "runtime/transport/port_probe.hpp"

using namespace degnn;
using namespace std::chrono_literals;

namespace {

wire::membership_view view_of(int n) {
  wire::membership_view v;
  v.id = 1;
  for (int r = 0; r < n; ++r)
    v.members.push_back({r, "127.0.0.1", static_cast<std::uint16_t>(1000 + r), "n", {r}});
  return v;
}

// A socket listening on 127.0.0.1 at a free port; closed with the object.
struct listener {
  int fd = -1;
  std::uint16_t port = 0;
  listener() {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    listen(fd, 4);
    socklen_t len = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~listener() { close(fd); }
};

}  // namespace

TEST(KeepMajority, CountsTheLiveMembersOfTheViewAndNamesWhatIsMissing) {
  wire::membership_view v = view_of(4);
  EXPECT_EQ(without_majority(v, {3}), "");
  EXPECT_EQ(without_majority(v, {2, 3}),
            "2 of view 1's 4 members are left, not a majority (3 needed)");
  // One of the two lost proven gone: 2 of the 3 counted.
  EXPECT_EQ(without_majority(v, {2, 3}, {3}), "");
  EXPECT_EQ(without_majority(v, {1, 2, 3}, {3}),
            "1 of view 1's 4 members are left and 1 of the lost no longer runs (1 of 3 counted), "
            "not a majority (2 needed)");
  // A member the view marks lost is not counted at all.
  v.members[3].lost = true;
  EXPECT_EQ(without_majority(v, {2}), "");
  EXPECT_EQ(without_majority(v, {1, 2}),
            "1 of view 1's 3 members are left, not a majority (2 needed)");
  // Two members: a silent loss stops, a proven one does not.
  const wire::membership_view two = view_of(2);
  EXPECT_EQ(without_majority(two, {1}),
            "1 of view 1's 2 members are left, not a majority (2 needed)");
  EXPECT_EQ(without_majority(two, {1}, {1}), "");
}

// Every way up to 6 members can split into two sides and a set of members that truly stopped;
// each side sees the others as lost and may prove any of the stopped ones gone (it reaches
// some, not others). However they prove it, the two sides never both hold a majority.
TEST(KeepMajority, TwoSidesOfASplitNeverBothGoOnWhateverEachProvesGone) {
  std::size_t splits = 0;
  for (int n = 1; n <= 6; ++n) {
    const wire::membership_view v = view_of(n);
    // Each member: 0 on side A, 1 on side B, 2 stopped.
    int ways = 1;
    for (int i = 0; i < n; ++i)
      ways *= 3;
    for (int code = 0; code < ways; ++code) {
      std::vector<int> side(static_cast<size_t>(n));
      std::vector<int> stopped;
      for (int i = 0, c = code; i < n; ++i, c /= 3) {
        side[static_cast<size_t>(i)] = c % 3;
        if (c % 3 == 2) stopped.push_back(i);
      }
      auto lost_to = [&](int s) {
        std::vector<int> lost;
        for (int i = 0; i < n; ++i)
          if (side[static_cast<size_t>(i)] != s) lost.push_back(i);
        return lost;
      };
      // Any subset of the stopped members, proven by A and by B independently.
      const int subsets = 1 << stopped.size();
      for (int pa = 0; pa < subsets; ++pa) {
        for (int pb = 0; pb < subsets; ++pb) {
          std::vector<int> gone_a, gone_b;
          for (size_t k = 0; k < stopped.size(); ++k) {
            if (pa >> k & 1) gone_a.push_back(stopped[k]);
            if (pb >> k & 1) gone_b.push_back(stopped[k]);
          }
          const bool a_on = without_majority(v, lost_to(0), gone_a).empty();
          const bool b_on = without_majority(v, lost_to(1), gone_b).empty();
          ASSERT_FALSE(a_on && b_on) << "n " << n << " split " << code;
          ++splits;
        }
      }
    }
  }
  EXPECT_GT(splits, 10000u);
}

TEST(PortProbe, ARefusedConnectionTellsNoProcessListensAndAnAcceptedOneDoesNot) {
  listener open_port;
  std::uint16_t closed_port = 0;
  {
    listener gone;
    closed_port = gone.port;
  }  // closed: the kernel now refuses connections there
  const std::vector<bool> refused = refused_connections(
      {{"127.0.0.1", open_port.port}, {"127.0.0.1", closed_port}, {"localhost", closed_port}},
      1000ms);
  ASSERT_EQ(refused.size(), 3u);
  EXPECT_FALSE(refused[0]);
  EXPECT_TRUE(refused[1]);
  EXPECT_TRUE(refused[2]);
  EXPECT_TRUE(refused_connections({}, 10ms).empty());
}

TEST(PortProbe, NoLongerRunningNamesTheLostMembersWhosePortsRefuse) {
  listener alive;
  std::uint16_t closed_port = 0;
  {
    listener gone;
    closed_port = gone.port;
  }
  wire::membership_view v = view_of(3);
  v.members[1].port = alive.port;
  v.members[2].port = closed_port;
  EXPECT_EQ(no_longer_running(v, {1, 2}, 1000ms), std::vector<int>{2});
  EXPECT_EQ(no_longer_running(v, {1}, 1000ms), std::vector<int>{});
}

// A child process notes its run gaps; the test stops it (SIGSTOP) for 800 ms: the child finds a
// gap of about that length since it started, and none since it woke.
TEST(RunGaps, ATimeTheProcessWasStoppedIsFoundAndNothingAfterIt) {
  int ready[2], result[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(result), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    run_gaps gaps;
    const auto start = run_gaps::clock::now();
    char c = 'r';
    if (write(ready[1], &c, 1) != 1) _exit(2);
    std::this_thread::sleep_for(1500ms);  // stopped for 800 ms of it
    const auto woke = run_gaps::clock::now();
    std::this_thread::sleep_for(100ms);
    const long long ms[2] = {
        std::chrono::duration_cast<std::chrono::milliseconds>(gaps.longest_since(start)).count(),
        std::chrono::duration_cast<std::chrono::milliseconds>(gaps.longest_since(woke)).count()};
    _exit(write(result[1], ms, sizeof ms) == sizeof ms ? 0 : 3);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  std::this_thread::sleep_for(200ms);
  kill(child, SIGSTOP);
  std::this_thread::sleep_for(800ms);
  kill(child, SIGCONT);
  long long ms[2] = {0, 0};
  ASSERT_EQ(read(result[0], ms, sizeof ms), static_cast<ssize_t>(sizeof ms));
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_GE(ms[0], 700);
  EXPECT_LT(ms[0], 5000);
  EXPECT_LT(ms[1], 250);
  for (int fd : {ready[0], ready[1], result[0], result[1]})
    close(fd);
}
