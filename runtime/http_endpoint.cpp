// cpp-httplib behind the endpoint's small interface (httplib.h stays out of every other file).
#include "runtime/http_endpoint.hpp"

#include <chrono>
#include <cstdio>
#include <optional>
#include <stdexcept>

#include "runtime/cli_options.hpp"
#include "runtime/server_thread.hpp"
#include "runtime/status_board.hpp"

// Last: httplib.h pulls in <resolv.h>, whose `_res` macro breaks Eigen's templates.
#include <httplib.h>

namespace degnn {

struct http_endpoint::impl {
  httplib::Server server;
  std::optional<server_thread> thread;  ///< after the server: stopped before it goes
};

http_endpoint::http_endpoint(const endpoint& where, const status_board& board)
    : impl_(std::make_unique<impl>()) {
  auto& s = impl_->server;
  s.Get("/status", [&board](const httplib::Request&, httplib::Response& r) {
    r.set_content(board.status_json() + "\n", "application/json");
  });
  s.Get("/metrics", [&board](const httplib::Request&, httplib::Response& r) {
    r.set_content(board.prometheus(), "text/plain; version=0.0.4; charset=utf-8");
  });
  impl_->thread.emplace(s, where, "--http", std::size_t{1} << 16, 10);
}

http_endpoint::~http_endpoint() = default;

std::uint16_t http_endpoint::port() const {
  return impl_->thread->port();
}

std::unique_ptr<http_endpoint> node_http_endpoint(const option_set& opts, bool node0,
                                                  const status_board* board) {
  if (!opts.given("http")) return nullptr;
  if (!node0 || !board) {
    std::fprintf(stderr, "node: --http is served by node 0 only; not serving it here\n");
    return nullptr;
  }
  const endpoint where = parse_endpoint(opts.str("http"), "--http", true);
  if (!is_loopback(where.host) && !opts.flag("insecure")) {
    throw config_error("node: --http " + where.host +
                       " is not a loopback address; pass --insecure to serve the training's "
                       "status there (read-only, unauthenticated)");
  }
  auto http = std::make_unique<http_endpoint>(where, *board);
  std::fprintf(stderr, "node 0: status on http://%s:%u/status and /metrics\n", where.host.c_str(),
               http->port());
  return http;
}

}  // namespace degnn
