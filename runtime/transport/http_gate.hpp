// A small HTTP/1.x server that a stranger cannot stall or bloat: one thread polls every
// connection, a request (TLS handshake, head of at most 16 KiB, body up to a set limit) must
// arrive within a deadline, every reply closes its connection, and when the connection cap is
// reached the oldest connection still sending its request makes room (so a trickling flood never
// keeps a real client out). The status endpoint uses it plain and read-only; node 0's console
// gateway with mutual TLS, POST bodies and replies that come later from another thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runtime/transport/door_tls.hpp"
#include "runtime/transport/endpoint.hpp"

namespace degnn {

struct http_request {
  std::string method;  ///< one the gate takes (others are answered 405 before the handler)
  std::string target;  ///< the path, query included
  std::string body;
  std::string peer_name;           ///< TLS: the common name of the client's verified certificate
  std::string remote;              ///< the client's address and port
  std::size_t content_length = 0;  ///< as the head announced it
};

struct http_reply {
  int status = 200;
  std::string content_type = "text/plain";
  std::string body;
};

struct http_limits {
  std::size_t max_head = 16 << 10;
  std::size_t max_body = 0;  ///< 0: a request that announces a body is refused 413
  /// From accept to the last byte of the request (TLS handshake, head and body).
  std::chrono::milliseconds head_deadline{2000};
  std::chrono::milliseconds write_deadline{5000};
  /// How long an asynchronous handler may take before the client gets 503.
  std::chrono::milliseconds answer_deadline{35000};
  std::size_t max_connections = 256;
  bool post_only = false;  ///< a command endpoint: POST only, instead of read-only GET and HEAD
};

struct http_counts {
  std::uint64_t served = 0;   ///< requests handed to the handler
  std::uint64_t refused = 0;  ///< 4xx before the handler, late or unfinished requests, failed TLS
  std::uint64_t evicted = 0;  ///< slow requests closed to make room
};

class http_gate {
 public:
  using handler = std::function<http_reply(const http_request&)>;
  /// Answers a request once, from any thread, now or later; after the gate is gone it is a no-op.
  using reply_fn = std::function<void(http_reply)>;
  using async_handler = std::function<void(const http_request&, reply_fn)>;

  /// Binds `where` (port 0: any free one) or throws std::runtime_error naming `option`. The
  /// handler runs on the gate's thread: it must answer at once. With `tls` every client must
  /// complete a handshake under that context (which decides whether a certificate is required).
  http_gate(const endpoint& where, const std::string& option, handler h, http_limits limits = {},
            ssl_ctx_ptr tls = {});
  /// As above, for a handler that replies through `reply_fn` when it has the answer.
  http_gate(const endpoint& where, const std::string& option, async_handler h,
            http_limits limits = {}, ssl_ctx_ptr tls = {});
  ~http_gate();
  http_gate(const http_gate&) = delete;
  http_gate& operator=(const http_gate&) = delete;

  std::uint16_t port() const { return port_; }
  http_counts counts() const { return {served_, refused_, evicted_}; }

 private:
  struct connection;
  struct mailbox;
  using connections = std::vector<std::unique_ptr<connection>>;
  /// The gate's thread: polls every connection and the listener until the gate is destroyed.
  void run();
  // run()'s steps, on the gate's thread only.
  void expire_late(connections& conns);
  void handshake(connection& c);
  void take_request(connection& c);
  void write_reply(connection& c);
  void deliver_replies(connections& conns);
  void accept_new(connections& conns);
  void answer(connection& c, const http_reply& r);
  void refuse(connection& c, int status, const std::string& why);

  async_handler handler_;
  http_limits limits_;
  ssl_ctx_ptr tls_;
  int listener_ = -1;
  std::shared_ptr<mailbox> mailbox_;  ///< replies from other threads, and the wake-up
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> served_{0}, refused_{0}, evicted_{0};
  std::uint64_t next_id_ = 0;  ///< the last connection's id (the gate's thread)
  std::thread thread_;
};

/// The reply head and body as sent (a reason phrase for the common codes).
std::string render_reply(const http_reply& r, bool head_only);

/// Parses a complete request head ("" and `out` filled) or says which status to answer with
/// and why ("400 ...", "405 ...", "411 ...", "413 ...", "505 ...").
std::string parse_request_head(const std::string& head, http_request& out,
                               const http_limits& limits = {});

}  // namespace degnn
