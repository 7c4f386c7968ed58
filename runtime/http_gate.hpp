// A small HTTP/1.x server for read-only endpoints that a stranger cannot stall or bloat: one
// thread polls every connection, a request head is at most 16 KiB and must arrive within 2 s,
// no body is taken, every reply closes its connection, and when the connection cap is reached
// the oldest connection still sending its head makes room (so a trickling flood never keeps a
// real client out). The handler runs on that thread: it must answer at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runtime/endpoint.hpp"

namespace degnn {

struct http_request {
  std::string method;  ///< GET or HEAD (others are answered 405 before the handler)
  std::string target;  ///< the path, query included
};

struct http_reply {
  int status = 200;
  std::string content_type = "text/plain";
  std::string body;
};

struct http_limits {
  std::size_t max_head = 16 << 10;
  std::chrono::milliseconds head_deadline{2000};
  std::chrono::milliseconds write_deadline{5000};
  std::size_t max_connections = 256;
};

struct http_counts {
  std::uint64_t served = 0;   ///< replies written whole
  std::uint64_t refused = 0;  ///< 4xx before the handler, late or unfinished heads
  std::uint64_t evicted = 0;  ///< slow heads closed to make room
};

class http_gate {
 public:
  using handler = std::function<http_reply(const http_request&)>;

  /// Binds `where` (port 0: any free one) or throws std::runtime_error naming `option`.
  http_gate(const endpoint& where, const std::string& option, handler h, http_limits limits = {});
  ~http_gate();
  http_gate(const http_gate&) = delete;
  http_gate& operator=(const http_gate&) = delete;

  std::uint16_t port() const { return port_; }
  http_counts counts() const { return {served_, refused_, evicted_}; }

 private:
  struct connection;
  void run();

  handler handler_;
  http_limits limits_;
  int listener_ = -1;
  int wake_fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> served_{0}, refused_{0}, evicted_{0};
  std::thread thread_;
};

/// The reply head and body as sent (a reason phrase for the common codes).
std::string render_reply(const http_reply& r, bool head_only);

/// Parses a complete request head ("" and `out` filled) or says which status to answer with
/// and why ("400 ...", "405 ...", "413 ...", "505 ...").
std::string parse_request_head(const std::string& head, http_request& out);

}  // namespace degnn
