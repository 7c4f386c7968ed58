// HOST:PORT addresses of nodes: parsing (with the option's name in every error) and whether an
// address is loopback (a node without TLS publishes only there).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace degnn {

struct endpoint {
  std::string host;
  std::uint16_t port = 0;

  std::string str() const { return host + ":" + std::to_string(port); }
  bool operator==(const endpoint&) const = default;
};

/// "HOST:PORT"; port 0 only when `port_zero_ok` (a node that listens on any free port). Throws
/// config_error naming `option` ("--join").
endpoint parse_endpoint(const std::string& text, const std::string& option,
                        bool port_zero_ok = false);

/// "H:P,H:P,..." (optionally in brackets, items optionally quoted): every node of a static cluster.
std::vector<endpoint> parse_peers(const std::string& text);

/// 127.0.0.0/8, ::1 or "localhost".
bool is_loopback(const std::string& host);

}  // namespace degnn
