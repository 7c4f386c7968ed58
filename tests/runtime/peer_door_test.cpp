// peer_door: two actor systems in this process, each behind its own door, reach each other's
// published actor (plain and mutual TLS, messages far larger than a socket buffer), while
// strangers (a bare connect-and-close, random bytes, a header announcing 1 GiB, a TLS client
// without a certificate, of another CA, of an operator, a silent flood past the cap) are refused,
// each with one log line, and never reach CAF.
#include "runtime/transport/peer_door.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <future>
#include <mutex>
#include <random>
#include <thread>

#include "runtime/transport/cluster_certificates.hpp"
#include "runtime/transport/port_reservation.hpp"
#include "tests/model/temp_dir.hpp"

using namespace degnn;
using namespace std::chrono_literals;

namespace {

using echo_actor = caf::typed_actor<caf::replies_to<std::string>::with<std::string>>;

echo_actor::behavior_type echo() {
  return {[](std::string& s) { return s + "!"; }};
}

// One side: an actor system with the middleman (CAF listens nowhere) and a door.
struct side {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<peer_door> door;
  std::mutex m;
  std::vector<std::string> lines;

  explicit side(std::optional<tls_files> tls, std::size_t max_pending = 32) {
    cfg.load<caf::io::middleman>();
    cfg.set("scheduler.max-threads", 2);
    sys = std::make_unique<caf::actor_system>(cfg);
    door_settings s;
    s.tls = std::move(tls);
    s.max_pending = max_pending;
    s.handshake_timeout = 1500ms;
    s.log = [this](const std::string& l) {
      std::lock_guard<std::mutex> lock(m);
      lines.push_back(l);
    };
    door = std::make_unique<peer_door>(*sys, std::move(s));
  }
  echo_actor published;
  ~side() {
    // An actor that stays alive blocks the actor system's shutdown.
    if (published) caf::anon_send_exit(published, caf::exit_reason::user_shutdown);
    door.reset();
    sys.reset();
  }
  std::uint16_t publish(const echo_actor& a, std::uint16_t port = 0) {
    published = a;
    return door->listen({"127.0.0.1", port}, caf::actor_cast<caf::strong_actor_ptr>(a),
                        sys->message_types(a));
  }
  std::size_t count(const std::string& text) {
    std::lock_guard<std::mutex> lock(m);
    std::size_t n = 0;
    for (const auto& l : lines)
      n += l.find(text) != std::string::npos;
    return n;
  }
  bool wait_count(const std::string& text, std::size_t n) {
    for (int i = 0; i < 100; ++i) {
      if (count(text) >= n) return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }
};

// One request to `a` from `s`; "" when it failed.
std::string ask(side& s, const echo_actor& a, const std::string& what) {
  caf::scoped_actor self{*s.sys};
  std::string out;
  self->request(a, 10s, what)
      .receive([&](std::string& r) { out = std::move(r); },
               [&](caf::error& e) { out = "error: " + s.sys->render(e); });
  return out;
}

echo_actor reach(side& s, std::uint16_t port, const std::string& name = "") {
  auto got = s.door->connect({"127.0.0.1", port}, name, 5s);
  if (!got) {
    ADD_FAILURE() << "connect: " << s.sys->render(got.error());
    return {};
  }
  return caf::actor_cast<echo_actor>(got->actor);
}

int raw_connect(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// A 32-byte BASP header: operation `op`, payload length `len` (big-endian).
std::string header(std::uint8_t op, std::uint32_t len) {
  std::string h(32, '\0');
  h[0] = static_cast<char>(op);
  for (int i = 0; i < 4; ++i)
    h[4 + i] = static_cast<char>(len >> (24 - 8 * i));
  return h;
}

// Whether the door closed `fd` within the time (a read ends with 0 or an error).
bool closed_by_peer(int fd, std::chrono::milliseconds limit) {
  timeval tv{static_cast<time_t>(limit.count() / 1000),
             static_cast<suseconds_t>((limit.count() % 1000) * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[4096];
  while (true) {
    const ssize_t r = ::recv(fd, buf, sizeof buf, 0);
    if (r == 0) return true;
    if (r < 0) return errno != EAGAIN && errno != EWOULDBLOCK;
  }
}

}  // namespace

TEST(PeerDoor, APeerReachesThePublishedActorAndLargeMessagesPassWhole) {
  side a(std::nullopt), b(std::nullopt);
  const std::uint16_t port = a.publish(a.sys->spawn(echo));
  const echo_actor remote = reach(b, port);
  ASSERT_TRUE(remote);
  EXPECT_EQ(ask(b, remote, "hello"), "hello!");
  // 24 MB each way: many socket buffers, frames cut across reads, back-pressure in both doors.
  const std::string big(24 << 20, 'q');
  const std::string back = ask(b, remote, big);
  ASSERT_EQ(back.size(), big.size() + 1);
  EXPECT_EQ(back.back(), '!');
  EXPECT_EQ(a.door->counts().accepted, 1u);
  EXPECT_EQ(a.door->counts().refused, 0u);
}

// `degnn launch` holds its seed's port from the start, so parallel launchers never pick the same
// one (CI once saw two seeds race for a port; the loser's joiner knocked on the other cluster).
// Held ports are busy to any other bind and to other reservations, yet the seed's door listens
// on its own held port and a peer reaches the actor behind it.
TEST(PeerDoor, AReservedPortIsRefusedToOthersButTheDoorListensOnIt) {
  const port_reservation held;
  std::vector<std::unique_ptr<port_reservation>> others;
  for (int i = 0; i < 50; ++i) {
    others.push_back(std::make_unique<port_reservation>());
    EXPECT_NE(others.back()->port(), held.port());
  }
  const int plain = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  at.sin_port = htons(held.port());
  EXPECT_NE(::bind(plain, reinterpret_cast<sockaddr*>(&at), sizeof at), 0);
  EXPECT_EQ(errno, EADDRINUSE);
  ::close(plain);
  EXPECT_EQ(raw_connect(held.port()), -1);  // held, not listening: refused, never accepted

  side a(std::nullopt), b(std::nullopt);
  ASSERT_EQ(a.publish(a.sys->spawn(echo), held.port()), held.port());
  const echo_actor remote = reach(b, held.port());
  ASSERT_TRUE(remote);
  EXPECT_EQ(ask(b, remote, "seed"), "seed!");
}

// A node that ends right after it answered (node 0 refusing a greeting, then exiting) must not
// cut its answer off: the closing door relays what CAF writes until CAF has been quiet for a
// while. 1 MB, so the reply is still in flight when the door closes.
TEST(PeerDoor, AClosingDoorStillDeliversWhatWasAlreadySent) {
  side a(std::nullopt), b(std::nullopt);
  std::promise<void> replied;
  const std::uint16_t port = a.publish(a.sys->spawn([&replied]() -> echo_actor::behavior_type {
    return {[&replied](std::string&) {
      replied.set_value();
      return std::string(1 << 20, 'r');
    }};
  }));
  const echo_actor remote = reach(b, port);
  ASSERT_TRUE(remote);
  std::string back;
  std::thread asker([&] { back = ask(b, remote, "last words?"); });
  ASSERT_EQ(replied.get_future().wait_for(10s), std::future_status::ready);
  a.door.reset();
  asker.join();
  EXPECT_EQ(back.size(), std::size_t{1} << 20) << back.substr(0, 200);
}

TEST(PeerDoor, StrangersAreRefusedAndLoggedAndAPeerKeepsWorking) {
  side a(std::nullopt), b(std::nullopt);
  const std::uint16_t port = a.publish(a.sys->spawn(echo));
  const echo_actor remote = reach(b, port);
  ASSERT_TRUE(remote);
  // A bare connect-and-close.
  ::close(raw_connect(port));
  ASSERT_TRUE(a.wait_count("closed before its handshake", 1));
  // Random bytes.
  {
    const int fd = raw_connect(port);
    std::mt19937 rng(1);
    std::string junk(100'000, '\0');
    for (auto& c : junk)
      c = static_cast<char>(rng() % 256 == 1 ? 2 : rng());  // never a client handshake first
    junk[0] = 9;
    ::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);
    EXPECT_TRUE(closed_by_peer(fd, 3s));
    ::close(fd);
  }
  ASSERT_TRUE(a.wait_count("not a BASP stream", 1));
  // Three headers announcing 1 GiB, held open: refused at once.
  std::vector<int> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(raw_connect(port));
    const std::string h = header(1, 1u << 30);
    ::send(held.back(), h.data(), h.size(), MSG_NOSIGNAL);
  }
  for (int fd : held) {
    EXPECT_TRUE(closed_by_peer(fd, 3s));
    ::close(fd);
  }
  ASSERT_TRUE(a.wait_count("over the limit of 65536 before the handshake", 3));
  // A silent connection: refused at the deadline.
  const int silent = raw_connect(port);
  EXPECT_TRUE(closed_by_peer(silent, 4s));
  ::close(silent);
  ASSERT_TRUE(a.wait_count("not authenticated within 1500 ms", 1));
  EXPECT_EQ(a.door->counts().refused, 6u);
  EXPECT_EQ(a.door->counts().accepted, 1u);
  // The peer that was there all along still works.
  EXPECT_EQ(ask(b, remote, "still"), "still!");
}

TEST(PeerDoor, PendingConnectionsAreCappedAndTheCapRefusalIsLogged) {
  side a(std::nullopt, 4);
  const std::uint16_t port = a.publish(a.sys->spawn(echo));
  std::vector<int> fds;
  for (int i = 0; i < 10; ++i)
    fds.push_back(raw_connect(port));
  ASSERT_TRUE(a.wait_count("still authenticating (the cap)", 6));
  for (int fd : fds)
    ::close(fd);
  // Once they are gone a peer gets in.
  side b(std::nullopt);
  std::this_thread::sleep_for(200ms);
  const echo_actor remote = reach(b, port);
  ASSERT_TRUE(remote);
  EXPECT_EQ(ask(b, remote, "in"), "in!");
}

TEST(PeerDoor, MutualTlsAdmitsNodesOfTheClusterCaOnly) {
  degnn::testing::temp_dir dir("peer-door-tls");
  make_cluster_certificates(dir.path / "certs", 3, 1, 2);
  make_cluster_certificates(dir.path / "other", 3, 0, 2);
  side a(tls_files{dir.path / "certs", "node-0"});
  const std::uint16_t port = a.publish(a.sys->spawn(echo));
  side b(tls_files{dir.path / "certs", "node-1"});
  const echo_actor remote = reach(b, port, "node-0");
  ASSERT_TRUE(remote);
  EXPECT_EQ(ask(b, remote, std::string(3 << 20, 't')).size(), (3u << 20) + 1);
  // The right CA, the wrong name: the connecting side refuses.
  {
    side c(tls_files{dir.path / "certs", "node-2"});
    auto got = c.door->connect({"127.0.0.1", port}, "node-1", 3s);
    ASSERT_FALSE(got);
    EXPECT_NE(c.sys->render(got.error()).find("made out to 'node-0', not to 'node-1'"),
              std::string::npos);
  }
  // Another CA: refused on both sides.
  {
    side c(tls_files{dir.path / "other", "node-2"});
    EXPECT_FALSE(c.door->connect({"127.0.0.1", port}, "", 3s));
  }
  ASSERT_TRUE(a.wait_count("TLS handshake failed", 1));
  // An operator's certificate is no node's.
  {
    side c(tls_files{dir.path / "certs", "operator-0"});
    EXPECT_FALSE(c.door->connect({"127.0.0.1", port}, "", 3s));
  }
  ASSERT_TRUE(a.wait_count("not to a node (node-K)", 1));
  // A plain door (no TLS) and raw bytes on the TLS port.
  {
    side c(std::nullopt);
    EXPECT_FALSE(c.door->connect({"127.0.0.1", port}, "", 3s));
  }
  const int fd = raw_connect(port);
  ::close(fd);
  ASSERT_TRUE(a.wait_count("refused", 5));
  EXPECT_EQ(a.door->counts().accepted, 1u);
  EXPECT_EQ(ask(b, remote, "still"), "still!");
}
