// A door connection's non-blocking reads and writes on the peer's socket (TLS or plain), and the
// socket helpers the door's loop and its outgoing connections share.
#include "runtime/transport/door_connection.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <openssl/err.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "runtime/transport/door_tls.hpp"

namespace degnn {
namespace door_detail {

void set_nonblocking(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

void set_nodelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

std::string address_of(const sockaddr_storage& a) {
  char host[INET6_ADDRSTRLEN] = {0};
  std::uint16_t port = 0;
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    ::inet_ntop(AF_INET, &v4.sin_addr, host, sizeof host);
    port = ntohs(v4.sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    ::inet_ntop(AF_INET6, &v6.sin6_addr, host, sizeof host);
    port = ntohs(v6.sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

std::string ssl_failure(SSL* ssl, int ret) {
  const int e = SSL_get_error(ssl, ret);
  if (e == SSL_ERROR_SYSCALL)
    return std::string("connection error (") + (errno ? std::strerror(errno) : "unexpected end") +
           ")";
  return openssl_errors();
}

}  // namespace door_detail

using door_detail::io;
using door_detail::ssl_failure;

io peer_door::connection::read_remote(char* buf, std::size_t cap, std::size_t& n,
                                      std::string& why) {
  if (ssl) {
    ERR_clear_error();
    const int r = SSL_read(ssl, buf, static_cast<int>(cap));
    read_wants_write = false;
    if (r > 0) {
      n = static_cast<std::size_t>(r);
      return io::done;
    }
    switch (SSL_get_error(ssl, r)) {
      case SSL_ERROR_WANT_READ:
        return io::would_block;
      case SSL_ERROR_WANT_WRITE:
        read_wants_write = true;
        return io::would_block;
      case SSL_ERROR_ZERO_RETURN:
        return io::closed;
      default:
        why = ssl_failure(ssl, r);
        return io::failed;
    }
  }
  const ssize_t r = ::recv(remote, buf, cap, 0);
  if (r > 0) {
    n = static_cast<std::size_t>(r);
    return io::done;
  }
  if (r == 0) return io::closed;
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return io::would_block;
  why = std::strerror(errno);
  return io::failed;
}

io peer_door::connection::write_remote(std::string& why) {
  const char* data = out.data() + out_sent;
  const std::size_t n = out_pending();
  if (ssl) {
    ERR_clear_error();
    const int r = SSL_write(ssl, data, static_cast<int>(std::min<std::size_t>(n, 1 << 30)));
    write_wants_read = false;
    if (r > 0) {
      out_sent += static_cast<std::size_t>(r);
      return io::done;
    }
    switch (SSL_get_error(ssl, r)) {
      case SSL_ERROR_WANT_WRITE:
        return io::would_block;
      case SSL_ERROR_WANT_READ:
        write_wants_read = true;
        return io::would_block;
      default:
        why = ssl_failure(ssl, r);
        return io::failed;
    }
  }
  const ssize_t r = ::send(remote, data, n, MSG_NOSIGNAL);
  if (r >= 0) {
    out_sent += static_cast<std::size_t>(r);
    return io::done;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return io::would_block;
  why = std::strerror(errno);
  return io::failed;
}

}  // namespace degnn
