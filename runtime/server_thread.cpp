// server_thread: binding, the listening thread, and an orderly stop.
#include "runtime/server_thread.hpp"

#include <chrono>
#include <stdexcept>

// Last: httplib.h pulls in <resolv.h>, whose `_res` macro breaks Eigen's templates.
#include <httplib.h>

namespace degnn {

server_thread::server_thread(httplib::Server& server, const endpoint& where,
                             const std::string& option, std::size_t max_payload,
                             std::size_t keep_alive)
    : server_(server) {
  // Bounded: a slow or idle client does not hold a thread for long.
  server_.set_read_timeout(5, 0);
  server_.set_write_timeout(5, 0);
  server_.set_keep_alive_max_count(keep_alive);
  server_.set_payload_max_length(max_payload);
  port_ = where.port == 0 ? server_.bind_to_any_port(where.host)
                          : (server_.bind_to_port(where.host, where.port) ? where.port : -1);
  if (port_ <= 0) throw std::runtime_error(option + ": cannot listen on " + where.str());
  thread_ = std::thread([this] { server_.listen_after_bind(); });
  // stop() before the loop runs would be lost and the destructor would wait forever.
  for (int i = 0; i < 500 && !server_.is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

server_thread::~server_thread() {
  server_.stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace degnn
