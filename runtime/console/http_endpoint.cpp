// The endpoint's two pages, served by an http_gate (a stranger's slow or huge request costs it
// one bounded connection, see http_gate.hpp).
#include "runtime/console/http_endpoint.hpp"

#include <chrono>
#include <cstdio>
#include <optional>
#include <stdexcept>

#include "runtime/process/config_error.hpp"
#include "runtime/train/status_board.hpp"
#include "runtime/transport/http_gate.hpp"

namespace degnn {

struct http_endpoint::impl {
  std::optional<http_gate> gate;
};

http_endpoint::http_endpoint(const endpoint& where, const status_board& board)
    : impl_(std::make_unique<impl>()) {
  impl_->gate.emplace(where, "--http", [&board](const http_request& q) -> http_reply {
    const std::string path = q.target.substr(0, q.target.find('?'));
    if (path == "/status") return {200, "application/json", board.status_json() + "\n"};
    if (path == "/metrics")
      return {200, "text/plain; version=0.0.4; charset=utf-8", board.prometheus()};
    return {404, "text/plain", "not found: " + path + " (GET /status or /metrics)\n"};
  });
}

http_endpoint::~http_endpoint() = default;

std::uint16_t http_endpoint::port() const {
  return impl_->gate->port();
}

std::unique_ptr<http_endpoint> node_http_endpoint(const std::string& address, bool insecure,
                                                  bool node0, const status_board* board) {
  if (address.empty()) return nullptr;
  if (!board) return nullptr;
  const endpoint where = parse_endpoint(address, "--http", true);
  if (!is_loopback(where.host) && !insecure) {
    throw config_error("node: --http " + where.host +
                       " is not a loopback address; pass --insecure to serve the training's "
                       "status there (read-only, unauthenticated)");
  }
  auto http = std::make_unique<http_endpoint>(where, *board);
  std::fprintf(stderr, "%s: status on http://%s:%u/status and /metrics\n",
               node0 ? "node 0" : "node", where.host.c_str(), http->port());
  return http;
}

}  // namespace degnn
