// The door's event loop: one thread, poll() over the listener, every connection's two sockets
// (the peer's, TLS or plain, and the private one to CAF) and a wake-up descriptor. Nothing
// blocks in the loop; a connection that is not authenticated by its deadline is refused.
#include "runtime/transport/peer_door.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <caf/all.hpp>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <stdexcept>

#include "runtime/transport/basp_frames.hpp"
#include "runtime/transport/door_connection.hpp"

namespace degnn {

using namespace door_detail;

peer_door::peer_door(caf::actor_system& sys, door_settings s)
    : handoff_(sys), settings_(std::move(s)) {
  // SSL_write writes to the socket itself: a peer gone mid-write must be an error, not a signal.
  std::signal(SIGPIPE, SIG_IGN);
  if (settings_.tls) ctx_ = make_door_context(*settings_.tls);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw std::runtime_error("door: eventfd: " + std::string(std::strerror(errno)));
  thread_ = std::thread([this] { run(); });
}

peer_door::~peer_door() {
  draining_ = true;
  wake();
  if (thread_.joinable()) thread_.join();
  flush_unlogged();
  conns_.clear();
  if (listener_ >= 0) ::close(listener_);
  ::close(wake_fd_);
}

door_counts peer_door::counts() const {
  return {accepted_, refused_, dropped_};
}

void peer_door::wake() {
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto r = ::write(wake_fd_, &one, sizeof one);
}

void peer_door::post(std::function<void()> f) {
  {
    std::lock_guard<std::mutex> lock(posted_mutex_);
    posted_.push_back(std::move(f));
  }
  wake();
}

std::uint16_t peer_door::listen(const endpoint& at, caf::strong_actor_ptr whom,
                                std::set<std::string> interface) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(at.port);
  if (const int e =
          ::getaddrinfo(at.host.empty() ? nullptr : at.host.c_str(), port.c_str(), &hints, &found);
      e != 0)
    throw std::runtime_error("cannot listen on " + at.str() + ": " + ::gai_strerror(e));
  std::string failure = "no address";
  int fd = -1;
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
      failure = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) throw std::runtime_error("cannot listen on " + at.str() + ": " + failure);
  set_nonblocking(fd);
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  const std::uint16_t actual = bound.ss_family == AF_INET6
                                   ? ntohs(reinterpret_cast<sockaddr_in6&>(bound).sin6_port)
                                   : ntohs(reinterpret_cast<sockaddr_in&>(bound).sin_port);
  handoff_.publish(std::move(whom), std::move(interface), actual);
  post([this, fd] { listener_ = fd; });
  return actual;
}

void peer_door::flush_unlogged() {
  if (unlogged_ > 0 && settings_.log)
    settings_.log("door: " + std::to_string(unlogged_) + " more refusals were not logged");
  unlogged_ = 0;
}

void peer_door::note(const std::string& line) {
  const auto now = clock::now();
  if (now - window_start_ > kWindow) {
    flush_unlogged();
    window_start_ = now;
    lines_in_window_ = 0;
  }
  if (lines_in_window_ < kLinesPerWindow) {
    ++lines_in_window_;
    if (settings_.log) settings_.log("door: " + line);
  } else {
    ++unlogged_;
  }
}

void peer_door::refuse(connection& c, const std::string& why) {
  if (c.dead) return;
  c.dead = true;
  if (c.authenticated() && c.inbound) {
    ++dropped_;
    note("closed the connection of " + c.peer + ": " + why);
  } else if (c.inbound) {
    ++refused_;
    note("refused " + c.peer + ": " + why);
  }
}

void peer_door::accept_all() {
  if (listener_ < 0) return;
  for (int i = 0; i < 64; ++i) {
    sockaddr_storage from{};
    socklen_t len = sizeof from;
    const int fd = ::accept4(listener_, reinterpret_cast<sockaddr*>(&from), &len,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    const std::string who = address_of(from);
    std::size_t pending = 0;
    for (const auto& c : conns_)
      if (c->inbound && !c->authenticated() && !c->dead) ++pending;
    if (pending >= settings_.max_pending) {
      ::close(fd);
      ++refused_;
      note("refused " + who + ": " + std::to_string(pending) +
           " connections are still authenticating (the cap)");
      continue;
    }
    set_nodelay(fd);
    auto c = std::make_unique<connection>(basp_frames::opening::client_handshake, settings_);
    c->id = next_id_++;
    c->remote = fd;
    c->peer = who;
    c->inbound = true;
    c->deadline = clock::now() + settings_.handshake_timeout;
    if (ctx_) {
      c->ssl = SSL_new(ctx_.get());
      SSL_set_fd(c->ssl, fd);
      SSL_set_accept_state(c->ssl);
      c->at = connection::phase::tls;
    } else {
      c->at = connection::phase::first_frame;
    }
    conns_.push_back(std::move(c));
  }
}

void peer_door::hand_to_caf(connection& c) {
  try {
    const socket_pair pair = private_socket_pair();
    set_nonblocking(pair.door);
    c.local = pair.door;
    handoff_.serve(pair.caf);
    ++accepted_;
  } catch (const std::exception& e) {
    refuse(c, e.what());
  }
}

void peer_door::pump(connection& c) {
  char buf[kReadChunk];
  std::string why;
  for (int round = 0; round < 64 && !c.dead; ++round) {
    bool progress = false;
    if (c.at == connection::phase::tls) {
      ERR_clear_error();
      const int r = SSL_do_handshake(c.ssl);
      c.handshake_wants_write = false;
      if (r == 1) {
        std::string name;
        if (const std::string bad = verified_peer_name(c.ssl, name); !bad.empty())
          return refuse(c, bad);
        if (name.rfind("node-", 0) != 0)
          return refuse(c, "its certificate is made out to '" + name +
                               "', not to a node (node-K); consoles use node 0's --console");
        c.peer += " (" + name + ")";
        c.at = connection::phase::first_frame;
        progress = true;
      } else {
        const int e = SSL_get_error(c.ssl, r);
        if (e == SSL_ERROR_WANT_WRITE)
          c.handshake_wants_write = true;
        else if (e != SSL_ERROR_WANT_READ) {
          return refuse(c, "TLS handshake failed: " + ssl_failure(c.ssl, r));
        }
      }
      if (!progress) return;
      continue;
    }
    // Peer -> CAF: read while CAF keeps up, cut into frames, pass whole frames on.
    if (!c.remote_eof && c.in.pending_bytes() < kAhead) {
      std::size_t n = 0;
      switch (c.read_remote(buf, sizeof buf, n, why)) {
        case io::done:
          if (std::string bad = c.in.feed(buf, n); !bad.empty()) return refuse(c, bad);
          progress = true;
          break;
        case io::closed:
          if (!c.authenticated()) return refuse(c, "closed before its handshake");
          c.remote_eof = true;
          progress = true;
          break;
        case io::failed:
          if (!c.authenticated()) return refuse(c, why);
          c.dead = true;
          return;
        case io::would_block:
          break;
      }
    }
    if (c.at == connection::phase::first_frame && c.in.handshake_passed()) {
      if (c.inbound) hand_to_caf(c);
      c.at = connection::phase::relay;
      progress = true;
    }
    if (c.local >= 0) {
      if (c.in.pending_bytes() > 0) {
        const ssize_t w = ::send(c.local, c.in.pending(), c.in.pending_bytes(), MSG_NOSIGNAL);
        if (w > 0) {
          c.in.consumed(static_cast<std::size_t>(w));
          progress = true;
        } else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          c.dead = true;
          return;
        }
      }
      // CAF -> peer.
      if (!c.local_eof && c.out_pending() < kAhead) {
        if (c.out_sent == c.out.size()) {
          c.out.clear();
          c.out_sent = 0;
        }
        const ssize_t r = ::recv(c.local, buf, sizeof buf, 0);
        if (r > 0) {
          c.out.insert(c.out.end(), buf, buf + r);
          // A lone frame header is a heartbeat, which CAF sends as long as it runs: it is not
          // something the node still has to say.
          if (static_cast<std::size_t>(r) > basp_frames::kHeaderBytes)
            last_from_caf_ = clock::now();
          progress = true;
        } else if (r == 0) {
          c.local_eof = true;
          progress = true;
        } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          c.local_eof = true;
        }
      }
    }
    if (c.out_pending() > 0) {
      const std::size_t before = c.out_sent;
      if (c.write_remote(why) == io::failed) {
        c.dead = true;
        return;
      }
      if (c.out_sent != before) {
        c.last_write = clock::now();
        progress = true;
      }
    }
    if ((c.remote_eof && c.in.pending_bytes() == 0) || (c.local_eof && c.out_pending() == 0)) {
      c.dead = true;
      return;
    }
    if (!progress) return;
  }
}

void peer_door::run() {
  std::vector<pollfd> fds;
  std::vector<connection*> owner;  // fds[i]'s connection (nullptr: listener or wake-up)
  std::optional<clock::time_point> drain_start;
  while (true) {
    if (draining_ && !drain_start) {
      drain_start = last_from_caf_ = clock::now();
      for (auto& c : conns_)
        c->last_write = *drain_start;
      if (listener_ >= 0) ::close(listener_);
      listener_ = -1;
    }
    if (drain_start) {
      const auto now = clock::now();
      bool flushed = true;
      for (const auto& c : conns_)
        flushed =
            flushed && (c->dead || c->out_pending() == 0 || now - c->last_write >= kDrainStuck);
      if ((flushed && now - last_from_caf_ >= kDrainQuiet) || now - *drain_start >= kDrainLimit)
        break;
    }
    {
      std::vector<std::function<void()>> work;
      {
        std::lock_guard<std::mutex> lock(posted_mutex_);
        work.swap(posted_);
      }
      for (auto& f : work)
        f();
    }
    const auto now = clock::now();
    // The count of a flood's unlogged refusals comes when its window ends.
    if (unlogged_ > 0 && now - window_start_ > kWindow) {
      flush_unlogged();
      window_start_ = now;
      lines_in_window_ = 0;
    }
    for (auto& c : conns_) {
      if (!c->dead && !c->authenticated() && now > c->deadline)
        refuse(*c, "not authenticated within " +
                       std::to_string(settings_.handshake_timeout.count()) + " ms");
    }
    conns_.erase(
        std::remove_if(conns_.begin(), conns_.end(), [](const auto& c) { return c->dead; }),
        conns_.end());
    fds.clear();
    owner.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    owner.push_back(nullptr);
    if (listener_ >= 0) {
      fds.push_back({listener_, POLLIN, 0});
      owner.push_back(nullptr);
    }
    auto wait = std::chrono::milliseconds(1000);
    for (auto& c : conns_) {
      short remote = 0;
      if (c->at == connection::phase::tls) {
        remote = static_cast<short>(POLLIN | (c->handshake_wants_write ? POLLOUT : 0));
      } else {
        if ((!c->remote_eof && c->in.pending_bytes() < kAhead) || c->write_wants_read)
          remote |= POLLIN;
        if ((c->out_pending() > 0 && !c->write_wants_read) || c->read_wants_write)
          remote |= POLLOUT;
      }
      // A socket nobody waits on is left out: poll would report its hang-up again and again.
      fds.push_back({remote ? c->remote : -1, remote, 0});
      owner.push_back(c.get());
      if (c->local >= 0) {
        short local = 0;
        if (!c->local_eof && c->out_pending() < kAhead) local |= POLLIN;
        if (c->in.pending_bytes() > 0) local |= POLLOUT;
        fds.push_back({local ? c->local : -1, local, 0});
        owner.push_back(c.get());
      }
      if (!c->authenticated()) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(c->deadline - now) +
                          std::chrono::milliseconds(1);
        wait = std::max(std::chrono::milliseconds(0), std::min(wait, left));
      }
      // Bytes OpenSSL already decrypted wake nobody: come back at once.
      if (c->ssl && SSL_pending(c->ssl) > 0 && c->in.pending_bytes() < kAhead)
        wait = std::chrono::milliseconds(0);
    }
    if (drain_start) wait = std::min(wait, std::chrono::milliseconds(20));
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(wait.count()));
    if (ready < 0 && errno != EINTR) break;
    if (fds[0].revents & POLLIN) {
      std::uint64_t drained;
      [[maybe_unused]] const auto r = ::read(wake_fd_, &drained, sizeof drained);
    }
    if (listener_ >= 0 && fds.size() > 1 && fds[1].fd == listener_ && (fds[1].revents & POLLIN))
      accept_all();
    for (std::size_t i = 0; i < fds.size(); ++i) {
      connection* c = owner[i];
      if (!c || c->dead) continue;
      // Both of a connection's sockets lead to one pump: skip its second entry.
      if (i > 0 && owner[i - 1] == c) continue;
      pump(*c);
    }
  }
}

}  // namespace degnn
