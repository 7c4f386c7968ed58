// A cpp-httplib server run on a thread of its own for as long as this object lives: bound to an
// address (port 0: any free one) with bounded time-outs, stopped and joined on destruction. Node
// 0's status endpoint and its TLS console gateway both run one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>

#include "runtime/endpoint.hpp"

namespace httplib {
class Server;
}

namespace degnn {

class server_thread {
 public:
  /// Binds `where` or throws std::runtime_error naming `option` and the address. Requests over
  /// max_payload bytes are refused; a connection serves at most keep_alive requests.
  server_thread(httplib::Server& server, const endpoint& where, const std::string& option,
                std::size_t max_payload, std::size_t keep_alive);
  ~server_thread();
  server_thread(const server_thread&) = delete;
  server_thread& operator=(const server_thread&) = delete;

  std::uint16_t port() const { return static_cast<std::uint16_t>(port_); }

 private:
  httplib::Server& server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace degnn
