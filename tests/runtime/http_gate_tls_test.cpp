// http_gate as node 0's console gateway uses it: POST bodies read to their announced length and
// refused past the limit, replies that come later from another thread (and 503 when none comes),
// mutual TLS that serves only clients with a certificate of the cluster CA, and an operator's
// request answered within a second while 200 raw and 50 half-finished TLS connections are held.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fcntl.h>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "runtime/transport/cluster_certificates.hpp"
#include "runtime/transport/http_gate.hpp"
#include "tests/runtime/loopback_client.hpp"

using namespace degnn;
using degnn::test::connect_to;
using namespace std::chrono_literals;

namespace {

// Sends `parts` one after another (50 ms apart) and reads the reply to its end.
std::string exchange(std::uint16_t port, const std::vector<std::string>& parts) {
  const int fd = connect_to(port);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) std::this_thread::sleep_for(50ms);
    ::send(fd, parts[i].data(), parts[i].size(), MSG_NOSIGNAL);
  }
  std::string out;
  char buf[4096];
  for (ssize_t r; (r = ::recv(fd, buf, sizeof buf, 0)) > 0;)
    out.append(buf, static_cast<std::size_t>(r));
  ::close(fd);
  return out;
}

std::string body_of(const std::string& reply) {
  const auto at = reply.find("\r\n\r\n");
  return at == std::string::npos ? "" : reply.substr(at + 4);
}

// A blocking TLS client: `request` over a handshake as `who` (a certificate of `dir`, or none),
// the whole reply back, or "" when the gate refused the handshake.
std::string tls_exchange(std::uint16_t port, const std::filesystem::path& dir,
                         const std::string& who, const std::string& request) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_load_verify_locations(ctx, (dir / "ca.crt").c_str(), nullptr);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  if (!who.empty()) {
    SSL_CTX_use_certificate_file(ctx, (dir / (who + ".crt")).c_str(), SSL_FILETYPE_PEM);
    SSL_CTX_use_PrivateKey_file(ctx, (dir / (who + ".key")).c_str(), SSL_FILETYPE_PEM);
  }
  std::string out;
  const int fd = connect_to(port);
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  if (SSL_connect(ssl) == 1 &&
      SSL_write(ssl, request.data(), static_cast<int>(request.size())) > 0) {
    char buf[4096];
    for (int r; (r = SSL_read(ssl, buf, sizeof buf)) > 0;)
      out.append(buf, static_cast<std::size_t>(r));
  }
  SSL_free(ssl);
  ::close(fd);
  SSL_CTX_free(ctx);
  return out;
}

// Echoes who asked, what and with which body.
http_gate::handler echo() {
  return [](const http_request& q) -> http_reply {
    return {200, "text/plain", q.peer_name + " " + q.target + " " + q.body};
  };
}

constexpr http_limits kCommands{.max_body = 1024, .post_only = true};

}  // namespace

TEST(HttpGateBodies, APostBodyIsReadToItsLengthAndRefusedPastTheLimit) {
  http_gate g({"127.0.0.1", 0}, "--console", echo(), kCommands);
  const std::string ok = exchange(
      g.port(), {"POST /command HTTP/1.1\r\nContent-Length: 11\r\n\r\nhel", "lo", " world"});
  EXPECT_EQ(ok.rfind("HTTP/1.1 200", 0), 0u) << ok;
  EXPECT_EQ(body_of(ok), " /command hello world");
  EXPECT_EQ(body_of(exchange(g.port(), {"POST /challenge HTTP/1.1\r\n\r\n"})), " /challenge ");
  EXPECT_EQ(exchange(g.port(), {"POST /c HTTP/1.1\r\nContent-Length: 1025\r\n\r\n"}).substr(0, 12),
            "HTTP/1.1 413");
  EXPECT_EQ(
      exchange(g.port(), {"POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"}).substr(0, 12),
      "HTTP/1.1 411");
  EXPECT_EQ(exchange(g.port(), {"GET /c HTTP/1.1\r\n\r\n"}).substr(0, 12), "HTTP/1.1 405");
  http_request q;
  EXPECT_EQ(parse_request_head("POST /c HTTP/1.1\r\nContent-Length: 1x", q, kCommands).substr(0, 3),
            "400");
  EXPECT_EQ(parse_request_head("POST /c HTTP/1.1\r\nContent-Length: 99999999999999", q, kCommands)
                .substr(0, 3),
            "400");
  EXPECT_EQ(
      parse_request_head("POST /c HTTP/1.1\r\nContent-Length: 1\r\nContent-length: 2", q, kCommands)
          .substr(0, 3),
      "400");
  EXPECT_EQ(parse_request_head("POST /c HTTP/1.1\r\ncontent-length:  7 ", q, kCommands), "");
  EXPECT_EQ(q.content_length, 7u);
  // A body shorter than announced is a late request: 408, not a short read handed on.
  http_gate quick({"127.0.0.1", 0}, "--console", echo(),
                  http_limits{.max_body = 1024, .head_deadline = 300ms, .post_only = true});
  EXPECT_EQ(
      exchange(quick.port(), {"POST /c HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc"}).substr(0, 12),
      "HTTP/1.1 408");
  EXPECT_EQ(quick.counts().served, 0u);
}

TEST(HttpGateAsync, ALaterReplyFromAnotherThreadReachesItsClientWhileOthersAreServed) {
  std::mutex lock;
  std::condition_variable parked;
  std::vector<http_gate::reply_fn> later;
  http_gate g({"127.0.0.1", 0}, "--console",
              http_gate::async_handler([&](const http_request& q, http_gate::reply_fn reply) {
                if (q.target == "/now") return reply({200, "text/plain", "now"});
                if (q.target == "/never") return;  // the gate answers 503 at the deadline
                std::lock_guard<std::mutex> l(lock);
                later.push_back(std::move(reply));
                parked.notify_all();
              }),
              http_limits{.answer_deadline = 500ms});
  std::string slow;
  std::thread waiting([&] { slow = exchange(g.port(), {"GET /later HTTP/1.1\r\n\r\n"}); });
  {
    std::unique_lock<std::mutex> l(lock);
    ASSERT_TRUE(parked.wait_for(l, 5s, [&] { return !later.empty(); }));
  }
  // The gate's thread is free while the first request waits for its answer.
  EXPECT_EQ(body_of(exchange(g.port(), {"GET /now HTTP/1.1\r\n\r\n"})), "now");
  std::thread([&] { later.front()({200, "text/plain", "later"}); }).join();
  waiting.join();
  EXPECT_EQ(body_of(slow), "later");
  EXPECT_EQ(exchange(g.port(), {"GET /never HTTP/1.1\r\n\r\n"}).substr(0, 12), "HTTP/1.1 503");
  // A second reply to a request already answered goes nowhere.
  later.front()({200, "text/plain", "too late"});
  EXPECT_EQ(body_of(exchange(g.port(), {"GET /now HTTP/1.1\r\n\r\n"})), "now");
}

class HttpsGate : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                     ("https_gate" + std::to_string(::getpid())));
    make_cluster_certificates(*dir_ / "certs", 2, 1, 2);
    make_cluster_certificates(*dir_ / "other", 2, 1, 2);
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  static std::filesystem::path certs() { return *dir_ / "certs"; }
  static std::filesystem::path* dir_;
};
std::filesystem::path* HttpsGate::dir_ = nullptr;

TEST_F(HttpsGate, OnlyAClientWithACertificateOfTheClusterCaIsServed) {
  http_gate g({"127.0.0.1", 0}, "--console", echo(), kCommands,
              make_door_context(tls_files{certs(), "node-0"}));
  const std::string request = "POST /command HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi";
  const std::string ok = tls_exchange(g.port(), certs(), "operator-0", request);
  EXPECT_EQ(ok.rfind("HTTP/1.1 200", 0), 0u) << ok;
  EXPECT_EQ(body_of(ok), "operator-0 /command hi");
  const auto before = g.counts();
  EXPECT_EQ(tls_exchange(g.port(), certs(), "", request), "");
  EXPECT_EQ(tls_exchange(g.port(), *dir_ / "other", "operator-0", request), "");
  EXPECT_EQ(exchange(g.port(), {request}).find("HTTP/1.1"), std::string::npos);
  for (int i = 0; i < 100 && g.counts().refused < before.refused + 3; ++i)
    std::this_thread::sleep_for(20ms);
  EXPECT_EQ(g.counts().refused, before.refused + 3);
  EXPECT_EQ(g.counts().served, before.served);
}

TEST_F(HttpsGate, TwoHundredSlowStrangersNeverKeepAnOperatorWaiting) {
  http_gate g({"127.0.0.1", 0}, "--console", echo(),
              http_limits{.max_body = 1024, .head_deadline = 10s, .post_only = true},
              make_door_context(tls_files{certs(), "node-0"}));
  // 200 connections that say nothing, and 50 that sent a TLS ClientHello and stopped there.
  std::vector<int> raw;
  for (int i = 0; i < 200; ++i)
    raw.push_back(connect_to(g.port()));
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  std::vector<SSL*> half;
  for (int i = 0; i < 50; ++i) {
    const int fd = connect_to(g.port());
    ::fcntl(fd, F_SETFL, O_NONBLOCK);
    half.push_back(SSL_new(ctx));
    SSL_set_fd(half.back(), fd);
    SSL_connect(half.back());  // sends the hello; the answer is never read
  }
  std::this_thread::sleep_for(200ms);
  double worst = 0;
  for (int round = 0; round < 5; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::string r =
        tls_exchange(g.port(), certs(), "operator-0",
                     "POST /command HTTP/1.1\r\nContent-Length: 8\r\n\r\nprogress");
    worst = std::max(worst,
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    EXPECT_EQ(body_of(r), "operator-0 /command progress") << r;
  }
  EXPECT_LT(worst, 1.0);
  std::printf("200 silent and 50 half-TLS strangers: slowest operator request %.4f s\n", worst);
  for (SSL* s : half) {
    ::close(SSL_get_fd(s));
    SSL_free(s);
  }
  SSL_CTX_free(ctx);
  for (int fd : raw)
    ::close(fd);
}
