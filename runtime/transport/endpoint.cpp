// Address parsing for the node options.
#include "runtime/transport/endpoint.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <charconv>

#include "runtime/process/config_error.hpp"

namespace degnn {

endpoint parse_endpoint(const std::string& text, const std::string& option, bool port_zero_ok) {
  std::string item = text;
  item.erase(0, item.find_first_not_of(" \t\""));
  item.erase(item.find_last_not_of(" \t\"") + 1);
  const auto colon = item.rfind(':');
  if (colon == std::string::npos || colon == 0)
    throw config_error(option + ": '" + item + "' is not HOST:PORT");
  // The whole text after the colon must be the number: "24811abc" is refused, not 24811.
  const std::string digits = item.substr(colon + 1);
  int port = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (ec != std::errc() || end != digits.data() + digits.size()) port = -1;
  const int lowest = port_zero_ok ? 0 : 1;
  if (port < lowest || port > 65535) {
    throw config_error(option + ": bad port in '" + item + "' (" + std::to_string(lowest) +
                       "..65535)");
  }
  std::string host = item.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')  // [::1]:24800
    host = host.substr(1, host.size() - 2);
  return {host, static_cast<std::uint16_t>(port)};
}

std::vector<endpoint> parse_peers(const std::string& text) {
  std::vector<endpoint> out;
  std::string s = text;
  if (!s.empty() && s.front() == '[' && s.back() == ']') s = s.substr(1, s.size() - 2);
  size_t pos = 0;
  while (pos < s.size()) {
    const auto comma = s.find(',', pos);
    out.push_back(parse_endpoint(
        s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos), "--peers"));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (out.empty()) throw config_error("--peers: no HOST:PORT given");
  return out;
}

bool is_loopback(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4{};
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return ::inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

}  // namespace degnn
