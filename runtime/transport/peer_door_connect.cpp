// An outgoing connection through the door: resolve, connect within the time-out, the mutual-TLS
// handshake and the peer's certificate name, then the relay to CAF over a private socket pair.
#include <netdb.h>
#include <poll.h>

#include <openssl/err.h>

#include <caf/all.hpp>

#include <cerrno>
#include <cstring>

#include "runtime/transport/door_connection.hpp"
#include "runtime/transport/door_tls.hpp"

namespace degnn {

using namespace door_detail;

caf::expected<remote_published> peer_door::connect(const endpoint& peer,
                                                   const std::string& expected_name,
                                                   std::chrono::milliseconds timeout) {
  const auto until = clock::now() + timeout;
  auto left_ms = [&] {
    return static_cast<int>(std::max<std::int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(until - clock::now()).count()));
  };
  auto fail = [&](const std::string& why) {
    return caf::make_error(caf::sec::cannot_connect_to_node, why);
  };
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(peer.port);
  if (const int e = ::getaddrinfo(peer.host.c_str(), port.c_str(), &hints, &found); e != 0)
    return fail(std::string("cannot resolve ") + peer.host + ": " + ::gai_strerror(e));
  int fd = -1;
  std::string failure = "no address";
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      failure = std::strerror(errno);
      ::close(fd);
      fd = -1;
      continue;
    }
    pollfd p{fd, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof err;
    if (::poll(&p, 1, left_ms()) != 1 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 ||
        err != 0) {
      failure = err ? std::strerror(err) : "timed out";
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) return fail(failure);
  set_nodelay(fd);
  auto c = std::make_unique<connection>(basp_frames::opening::server_handshake, settings_);
  c->remote = fd;
  c->peer = peer.str();
  c->inbound = false;
  c->deadline = until;
  if (ctx_) {
    c->ssl = SSL_new(ctx_.get());
    SSL_set_fd(c->ssl, fd);
    SSL_set_connect_state(c->ssl);
    while (true) {
      ERR_clear_error();
      const int r = SSL_do_handshake(c->ssl);
      if (r == 1) break;
      const int e = SSL_get_error(c->ssl, r);
      if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
        return fail("TLS handshake failed: " + ssl_failure(c->ssl, r));
      pollfd p{fd, static_cast<short>(e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), 0};
      if (::poll(&p, 1, left_ms()) != 1) return fail("TLS handshake timed out");
    }
    std::string name;
    if (const std::string bad = verified_peer_name(c->ssl, name); !bad.empty()) return fail(bad);
    if (expected_name.empty() ? name.rfind("node-", 0) != 0 : name != expected_name) {
      return fail("its certificate is made out to '" + name + "', not to '" +
                  (expected_name.empty() ? "node-K" : expected_name) + "'");
    }
  }
  socket_pair pair;
  try {
    pair = private_socket_pair();
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  set_nonblocking(pair.door);
  c->local = pair.door;
  c->at = connection::phase::first_frame;
  const std::uint64_t id = c->id = next_id_++;
  post([this, raw = c.release()] { conns_.emplace_back(raw); });
  auto answer = handoff_.connect(pair.caf, peer.port, std::chrono::milliseconds(left_ms() + 1));
  if (!answer) {
    // CAF gave up: the door's end closes, and with it the peer's connection.
    post([this, id] {
      for (auto& k : conns_)
        if (k->id == id) k->dead = true;
    });
  }
  return answer;
}

}  // namespace degnn
