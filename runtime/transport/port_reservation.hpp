// A loopback port held for a process's whole life, for a server that binds it later (the seed
// `degnn launch` starts binds only after loading its partitions): nothing else may take it
// meanwhile, neither an outgoing connection nor another launcher running beside this one.
#pragma once

#include <cstdint>

namespace degnn {

/// A random free port on 127.0.0.1 below the kernel's ephemeral range, kept bound (never
/// listening) until destruction. The probe binds without SO_REUSEADDR, so a port another
/// reservation holds looks busy; once bound, the socket is marked SO_REUSEADDR, which on Linux
/// lets a server binding with SO_REUSEADDR (peer_door does) listen on the port while every other
/// bind is still refused. Throws std::runtime_error when 200 tries find no free port.
class port_reservation {
 public:
  port_reservation();
  /// Holds exactly `port` the same way, if it is free: held() says whether it is.
  explicit port_reservation(std::uint16_t port);
  ~port_reservation();
  port_reservation(const port_reservation&) = delete;
  port_reservation& operator=(const port_reservation&) = delete;

  std::uint16_t port() const { return port_; }
  bool held() const { return fd_ >= 0; }

 private:
  bool try_hold(std::uint16_t port);

  int fd_ = -1;
  std::uint16_t port_ = 0;
};

}  // namespace degnn
