// cpp-httplib behind the endpoint's small interface (httplib.h stays out of every other file).
#include "runtime/http_endpoint.hpp"

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <thread>

#include "runtime/cli_options.hpp"
#include "runtime/status_board.hpp"

// Last: httplib.h pulls in <resolv.h>, whose `_res` macro breaks Eigen's templates.
#include <httplib.h>

namespace degnn {

struct http_endpoint::impl {
  httplib::Server server;
  std::thread thread;
  int port = 0;
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
  // Bounded: a slow or idle client does not hold a thread for long.
  s.set_read_timeout(5, 0);
  s.set_write_timeout(5, 0);
  s.set_keep_alive_max_count(10);
  s.set_payload_max_length(1 << 16);
  impl_->port = where.port == 0 ? s.bind_to_any_port(where.host)
                                : (s.bind_to_port(where.host, where.port) ? where.port : -1);
  if (impl_->port <= 0) throw std::runtime_error("--http: cannot listen on " + where.str());
  impl_->thread = std::thread([this] { impl_->server.listen_after_bind(); });
  // stop() before the loop runs would be lost and the destructor would wait forever.
  for (int i = 0; i < 500 && !s.is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

http_endpoint::~http_endpoint() {
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

std::uint16_t http_endpoint::port() const {
  return static_cast<std::uint16_t>(impl_->port);
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
