// A read-only HTTP endpoint on node 0 (`degnn node --http ADDR:PORT`): GET /status (JSON) and
// GET /metrics (Prometheus text) from the status board, served by cpp-httplib in a thread of its
// own, so a running training can be scraped and graphed. Everything else is 404; no request
// changes anything.
#pragma once

#include <memory>
#include <string>

#include "runtime/transport/endpoint.hpp"

namespace degnn {

class status_board;

class http_endpoint {
 public:
  /// Binds `where` (port 0: any free port) or throws naming the address.
  http_endpoint(const endpoint& where, const status_board& board);
  ~http_endpoint();  ///< stops the server and joins its thread
  http_endpoint(const http_endpoint&) = delete;
  http_endpoint& operator=(const http_endpoint&) = delete;

  std::uint16_t port() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// degnn node --http ADDR:PORT (`address`, "" for none): node 0's endpoint on `board` (a
/// loopback address unless `insecure`; throws config_error otherwise); on other nodes none, said
/// on stderr.
std::unique_ptr<http_endpoint> node_http_endpoint(const std::string& address, bool insecure,
                                                  bool node0, const status_board* board);

}  // namespace degnn
