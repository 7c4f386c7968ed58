// Probe-and-hold of a loopback port; see port_reservation.hpp for why the socket is bound first
// and marked SO_REUSEADDR after.
#include "runtime/transport/port_reservation.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <stdexcept>

namespace degnn {

bool port_reservation::try_hold(std::uint16_t port) {
  const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  const int one = 1;
  if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
    ::close(s);
    return false;
  }
  fd_ = s;
  port_ = port;
  return true;
}

port_reservation::port_reservation(std::uint16_t port) {
  try_hold(port);
}

port_reservation::port_reservation() {
  int low = 32768;
  if (std::FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%d", &low) != 1) low = 32768;
    std::fclose(f);
  }
  std::mt19937 rng(std::random_device{}());
  for (int attempt = 0; attempt < 200 && fd_ < 0; ++attempt)
    try_hold(static_cast<std::uint16_t>(
        20000 + static_cast<int>(rng() % static_cast<unsigned>(std::max(1, low - 20000)))));
  if (fd_ < 0)
    throw std::runtime_error("no free loopback port below the ephemeral range in 200 tries");
}

port_reservation::~port_reservation() {
  ::close(fd_);
}

}  // namespace degnn
