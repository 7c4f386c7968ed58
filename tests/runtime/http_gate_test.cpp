// http_gate: a 50 MiB request head is cut off at 16 KiB with 431, 200 or 300 trickling clients
// never keep a real request from an answer within a second, and the request head parser refuses
// what a read-only endpoint does not take.
#include "runtime/transport/http_gate.hpp"
#include "tests/runtime/loopback_client.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <thread>

using namespace degnn;
using degnn::test::connect_to;
using namespace std::chrono_literals;

namespace {

std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  for (ssize_t r; (r = ::recv(fd, buf, sizeof buf, 0)) > 0;)
    out.append(buf, static_cast<std::size_t>(r));
  return out;
}

std::string get(std::uint16_t port, const std::string& path) {
  const int fd = connect_to(port);
  const std::string q = "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n";
  ::send(fd, q.data(), q.size(), MSG_NOSIGNAL);
  std::string r = read_all(fd);
  ::close(fd);
  return r;
}

double rss_mib() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}

http_gate::handler status_page() {
  return [](const http_request& q) -> http_reply {
    if (q.target == "/status") return {200, "application/json", "{\"ok\":true}\n"};
    return {404, "text/plain", "no\n"};
  };
}

}  // namespace

TEST(HttpGate, ServesGetAndRefusesWhatAReadOnlyEndpointDoesNotTake) {
  http_gate g({"127.0.0.1", 0}, "--http", status_page());
  const std::string ok = get(g.port(), "/status");
  EXPECT_EQ(ok.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << ok;
  EXPECT_NE(ok.find("Content-Length: 12\r\n"), std::string::npos);
  EXPECT_NE(ok.find("\r\n\r\n{\"ok\":true}\n"), std::string::npos);
  EXPECT_EQ(get(g.port(), "/other").rfind("HTTP/1.1 404", 0), 0u);
  http_request q;
  EXPECT_EQ(parse_request_head("POST /status HTTP/1.1\r\nHost: x", q).substr(0, 3), "405");
  EXPECT_EQ(parse_request_head("GET /status HTTP/2.0", q).substr(0, 3), "505");
  EXPECT_EQ(parse_request_head("GET status HTTP/1.1", q).substr(0, 3), "400");
  EXPECT_EQ(parse_request_head("GET /status HTTP/1.1 extra", q).substr(0, 3), "400");
  EXPECT_EQ(parse_request_head("GET /s HTTP/1.1\r\nContent-Length: 5", q).substr(0, 3), "413");
  EXPECT_EQ(parse_request_head("GET /s HTTP/1.1\r\nno colon here", q).substr(0, 3), "400");
  EXPECT_EQ(parse_request_head("HEAD /s?x=1 HTTP/1.0\r\nA: b\r\nContent-Length: 0", q), "");
  EXPECT_EQ(q.method, "HEAD");
  EXPECT_EQ(q.target, "/s?x=1");
}

TEST(HttpGate, AFiftyMebibyteHeadIsCutOffAtItsLimitAndCostsNoMemory) {
  http_gate g({"127.0.0.1", 0}, "--http", status_page());
  // The client's own 1 MiB chunk is in this process too: touch it before the baseline, so the
  // figure is the gate's alone (under a sanitizer the chunk's shadow memory would count too).
  std::string chunk = "GET /status HTTP/1.1\r\nX-Big: ";
  chunk.resize(1 << 20, 'a');
  const double before = rss_mib();
  const int fd = connect_to(g.port());
  std::size_t sent = 0;
  for (int i = 0; i < 50; ++i) {
    const ssize_t w = ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL);
    if (w <= 0) break;  // the gate answered and closed: the rest is never read
    sent += static_cast<std::size_t>(w);
  }
  ::shutdown(fd, SHUT_WR);
  const std::string reply = read_all(fd);
  ::close(fd);
  EXPECT_EQ(reply.rfind("HTTP/1.1 431", 0), 0u) << reply.substr(0, 200) << " after " << sent;
  EXPECT_LE(rss_mib() - before, 4.0);
  EXPECT_EQ(g.counts().refused, 1u);
  EXPECT_EQ(get(g.port(), "/status").rfind("HTTP/1.1 200", 0), 0u);
}

TEST(HttpGate, TricklingClientsNeverKeepARealRequestWaiting) {
  for (int slow : {200, 300}) {
    http_gate g({"127.0.0.1", 0}, "--http", status_page(),
                http_limits{.head_deadline = 10s, .max_connections = 256});
    std::vector<int> trickling;
    for (int i = 0; i < slow; ++i) {
      trickling.push_back(connect_to(g.port()));
      ::send(trickling.back(), "GET /status HTTP/1.1\r\n", 22, MSG_NOSIGNAL);
    }
    std::this_thread::sleep_for(200ms);
    double worst = 0;
    for (int round = 0; round < 5; ++round) {
      for (int fd : trickling)
        ::send(fd, "X: y\r\n", 6, MSG_NOSIGNAL);
      const auto t0 = std::chrono::steady_clock::now();
      const std::string r = get(g.port(), "/status");
      worst = std::max(
          worst, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << slow << " slow clients: " << r;
    }
    EXPECT_LT(worst, 1.0) << slow << " slow clients";
    std::printf("%d trickling clients: slowest real GET %.4f s, %llu evicted\n", slow, worst,
                static_cast<unsigned long long>(g.counts().evicted));
    if (slow > 256) {
      EXPECT_GE(g.counts().evicted, static_cast<std::uint64_t>(slow - 256));
    }
    for (int fd : trickling)
      ::close(fd);
  }
}
