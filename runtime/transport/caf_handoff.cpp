// Handing open connections to CAF 0.17.6's BASP broker (the messages its middleman actor sends
// it after its own listener accepted or its own connect succeeded).
#include "runtime/transport/caf_handoff.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/io/basp_broker.hpp>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace degnn {

namespace {

std::runtime_error socket_failure(const char* what) {
  return std::runtime_error(std::string("door: ") + what + ": " + std::strerror(errno));
}

sockaddr_in loopback_any_port() {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

}  // namespace

socket_pair private_socket_pair() {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) throw socket_failure("a socket for a local pair");
  sockaddr_in at = loopback_any_port();
  socklen_t len = sizeof at;
  if (::bind(listener, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0 ||
      ::listen(listener, 8) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&at), &len) != 0) {
    const auto e = socket_failure("a local listener");
    ::close(listener);
    throw e;
  }
  socket_pair pair;
  pair.caf = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (pair.caf < 0 || ::connect(pair.caf, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0) {
    const auto e = socket_failure("connecting a local pair");
    if (pair.caf >= 0) ::close(pair.caf);
    ::close(listener);
    throw e;
  }
  sockaddr_in mine{};
  len = sizeof mine;
  ::getsockname(pair.caf, reinterpret_cast<sockaddr*>(&mine), &len);
  // Whoever else connected in the moment the listener lived is closed: only our own end counts.
  for (int tries = 0; tries < 16 && pair.door < 0; ++tries) {
    sockaddr_in from{};
    len = sizeof from;
    const int fd = ::accept4(listener, reinterpret_cast<sockaddr*>(&from), &len, SOCK_CLOEXEC);
    if (fd < 0) break;
    if (from.sin_port == mine.sin_port && from.sin_addr.s_addr == mine.sin_addr.s_addr) {
      pair.door = fd;
    } else {
      ::close(fd);
    }
  }
  ::close(listener);
  if (pair.door < 0) {
    ::close(pair.caf);
    throw std::runtime_error("door: a local pair did not connect");
  }
  const int one = 1;
  ::setsockopt(pair.caf, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(pair.door, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return pair;
}

caf_handoff::caf_handoff(caf::actor_system& sys)
    : sys_(sys), broker_(sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"))) {}

void caf_handoff::publish(caf::strong_actor_ptr whom, std::set<std::string> interface,
                          std::uint16_t port) {
  published_ = std::move(whom);
  interface_ = std::move(interface);
  port_ = port;
}

void caf_handoff::serve(int fd) {
  caf::io::scribe_ptr s = sys_.middleman().backend().new_scribe(fd);
  caf::anon_send(broker_, caf::publish_atom_v, std::move(s), port_, published_, interface_);
}

caf::expected<remote_published> caf_handoff::connect(int fd, std::uint16_t port,
                                                     std::chrono::milliseconds timeout) {
  caf::io::scribe_ptr s = sys_.middleman().backend().new_scribe(fd);
  caf::scoped_actor self{sys_};
  caf::expected<remote_published> out{caf::sec::cannot_connect_to_node};
  self->request(broker_, timeout, caf::connect_atom_v, std::move(s), port)
      .receive(
          [&](caf::node_id& nid, caf::strong_actor_ptr& actor, std::set<std::string>& ifs) {
            out = remote_published{std::move(nid), std::move(actor), std::move(ifs)};
          },
          [&](caf::error& e) { out = std::move(e); });
  return out;
}

}  // namespace degnn
