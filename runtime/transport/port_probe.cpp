// Non-blocking connects polled together, so silent addresses cost one wait, not one each.
#include "runtime/transport/port_probe.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace degnn {

namespace {

// A socket connecting to `at` (in progress), or -1 when none could start; `refused` is set when
// the kernel refused at once (loopback answers before connect returns).
int start_connect(const endpoint& at, bool& refused) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(at.host.c_str(), std::to_string(at.port).c_str(), &hints, &found) != 0 || !found)
    return -1;
  const int fd = socket(found->ai_family, found->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                        found->ai_protocol);
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) != 0 && errno != EINPROGRESS) {
    refused = errno == ECONNREFUSED;
    close(fd);
    freeaddrinfo(found);
    return -1;
  }
  freeaddrinfo(found);
  return fd;
}

}  // namespace

std::vector<bool> refused_connections(const std::vector<endpoint>& at,
                                      std::chrono::milliseconds wait) {
  std::vector<bool> refused(at.size(), false);
  std::vector<pollfd> fds;
  std::vector<std::size_t> which;
  for (std::size_t i = 0; i < at.size(); ++i) {
    bool now = false;
    const int fd = start_connect(at[i], now);
    refused[i] = now;
    if (fd < 0) continue;
    fds.push_back({fd, POLLOUT, 0});
    which.push_back(i);
  }
  const auto until = std::chrono::steady_clock::now() + wait;
  std::size_t open = fds.size();
  while (open > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0 || poll(fds.data(), fds.size(), static_cast<int>(left.count())) <= 0)
      break;
    for (std::size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].fd < 0 || fds[k].revents == 0) continue;
      int error = 0;
      socklen_t len = sizeof error;
      getsockopt(fds[k].fd, SOL_SOCKET, SO_ERROR, &error, &len);
      refused[which[k]] = error == ECONNREFUSED;
      close(fds[k].fd);
      fds[k].fd = -1;  // poll skips negative descriptors
      --open;
    }
  }
  for (const pollfd& p : fds)
    if (p.fd >= 0) close(p.fd);
  return refused;
}

}  // namespace degnn
