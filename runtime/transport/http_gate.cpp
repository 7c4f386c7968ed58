// The gate's loop and its request-head parser.
#include "runtime/transport/http_gate.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>

namespace degnn {

namespace {

using clock = std::chrono::steady_clock;

const char* reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Error";
  }
}

std::string lower(std::string s) {
  for (auto& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::string render_reply(const http_reply& r, bool head_only) {
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + reason(r.status) + "\r\n";
  out += "Content-Type: " + r.content_type + "\r\n";
  out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  out += "Connection: close\r\n\r\n";
  if (!head_only) out += r.body;
  return out;
}

std::string parse_request_head(const std::string& head, http_request& out,
                               const http_limits& limits) {
  const auto eol = head.find("\r\n");
  const std::string line = head.substr(0, eol);
  const auto s1 = line.find(' ');
  const auto s2 = s1 == std::string::npos ? s1 : line.find(' ', s1 + 1);
  if (s1 == std::string::npos || s2 == std::string::npos || line.find(' ', s2 + 1) != line.npos)
    return "400 the request line is not METHOD TARGET VERSION";
  out.method = line.substr(0, s1);
  out.target = line.substr(s1 + 1, s2 - s1 - 1);
  out.content_length = 0;
  const std::string version = line.substr(s2 + 1);
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return "505 " + version;
  if (out.target.empty() || out.target[0] != '/') return "400 the target is not a path";
  if (limits.post_only ? out.method != "POST" : out.method != "GET" && out.method != "HEAD")
    return "405 " + out.method + (limits.post_only ? " (commands are POSTed)" : " (read-only)");
  std::size_t at = eol == std::string::npos ? head.size() : eol + 2;
  bool length_seen = false;
  while (at < head.size()) {
    const auto end = head.find("\r\n", at);
    const std::string field = head.substr(at, end == std::string::npos ? end : end - at);
    at = end == std::string::npos ? head.size() : end + 2;
    const auto colon = field.find(':');
    if (field.empty()) continue;
    if (colon == std::string::npos) return "400 a header line without a colon";
    const std::string name = lower(field.substr(0, colon));
    std::string value = field.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    value.erase(value.find_last_not_of(" \t") + 1);
    // Only a body of announced length is read: chunked bodies (and with them request smuggling
    // between two readings of one request) are refused outright.
    if (name == "transfer-encoding")
      return limits.max_body ? "411 send the body with a Content-Length"
                             : "413 this endpoint takes no request body";
    if (name != "content-length") continue;
    if (length_seen) return "400 two Content-Length fields";
    length_seen = true;
    if (value.empty() || value.size() > 12 ||
        value.find_first_not_of("0123456789") != std::string::npos)
      return "400 Content-Length is not a number";
    out.content_length = std::stoull(value);
    if (out.content_length > limits.max_body)
      return limits.max_body ? "413 the body exceeds " + std::to_string(limits.max_body) + " bytes"
                             : "413 this endpoint takes no request body";
  }
  return "";
}

struct http_gate::mailbox {
  std::mutex lock;
  std::deque<std::pair<std::uint64_t, http_reply>> replies;
  bool open = true;
  int wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ~mailbox() { ::close(wake_fd); }
  void post(std::uint64_t id, http_reply r) {
    std::lock_guard<std::mutex> g(lock);
    if (!open) return;
    replies.emplace_back(id, std::move(r));
    wake();
  }
  void wake() const {
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto w = ::write(wake_fd, &one, sizeof one);
  }
};

struct http_gate::connection {
  enum class stage { handshake, request, answering, writing };
  std::uint64_t id = 0;
  int fd = -1;
  SSL* ssl = nullptr;
  stage at = stage::request;
  short want = POLLIN;  ///< what the socket must become to go on (TLS may want either)
  bool head_only = false;
  std::string remote, peer_name;
  std::string in, out;
  std::size_t sent = 0;
  clock::time_point accepted, deadline;
  ~connection() { close(); }
  void close() {
    if (ssl) SSL_free(ssl);
    ssl = nullptr;
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  bool sending() const { return at == stage::handshake || at == stage::request; }
  /// Bytes read (> 0), 0 when the socket must become `want` first, -1 when it is closed.
  ssize_t read(char* buf, std::size_t n) {
    if (!ssl) {
      const ssize_t r = ::recv(fd, buf, n, 0);
      if (r > 0) return r;
      want = POLLIN;
      return r < 0 && (errno == EAGAIN || errno == EINTR) ? 0 : -1;
    }
    const int r = SSL_read(ssl, buf, static_cast<int>(n));
    return r > 0 ? r : retry(r);
  }
  ssize_t write(const char* buf, std::size_t n) {
    if (!ssl) {
      const ssize_t w = ::send(fd, buf, n, MSG_NOSIGNAL);
      if (w >= 0) return w;
      want = POLLOUT;
      return errno == EAGAIN || errno == EINTR ? 0 : -1;
    }
    const int w = SSL_write(ssl, buf, static_cast<int>(n));
    return w > 0 ? w : retry(w);
  }
  ssize_t retry(int r) {
    switch (SSL_get_error(ssl, r)) {
      case SSL_ERROR_WANT_READ:
        want = POLLIN;
        return 0;
      case SSL_ERROR_WANT_WRITE:
        want = POLLOUT;
        return 0;
      default:
        return -1;
    }
  }
};

namespace {

std::string address_of(const sockaddr_storage& a, socklen_t len) {
  char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?";
  ::getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, host, sizeof host, port, sizeof port,
                NI_NUMERICHOST | NI_NUMERICSERV);
  return std::string(host) + ":" + port;
}

}  // namespace

http_gate::http_gate(const endpoint& where, const std::string& option, handler h,
                     http_limits limits, ssl_ctx_ptr tls)
    : http_gate(
          where, option,
          async_handler([h = std::move(h)](const http_request& q, reply_fn reply) { reply(h(q)); }),
          limits, std::move(tls)) {}

http_gate::http_gate(const endpoint& where, const std::string& option, async_handler h,
                     http_limits limits, ssl_ctx_ptr tls)
    : handler_(std::move(h)),
      limits_(limits),
      tls_(std::move(tls)),
      mailbox_(std::make_shared<mailbox>()) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(where.port);
  if (::getaddrinfo(where.host.c_str(), port.c_str(), &hints, &found) != 0)
    throw std::runtime_error(option + ": cannot listen on " + where.str());
  for (addrinfo* a = found; a && listener_ < 0; a = a->ai_next) {
    listener_ = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (listener_ < 0) continue;
    const int one = 1;
    ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(listener_, a->ai_addr, a->ai_addrlen) != 0 || ::listen(listener_, 128) != 0) {
      ::close(listener_);
      listener_ = -1;
    }
  }
  ::freeaddrinfo(found);
  if (listener_ < 0) throw std::runtime_error(option + ": cannot listen on " + where.str());
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(listener_, reinterpret_cast<sockaddr*>(&bound), &len);
  port_ = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6&>(bound).sin6_port)
                                      : ntohs(reinterpret_cast<sockaddr_in&>(bound).sin_port);
  thread_ = std::thread([this] { run(); });
}

http_gate::~http_gate() {
  {
    std::lock_guard<std::mutex> g(mailbox_->lock);
    mailbox_->open = false;  // a handler's late reply goes nowhere
  }
  stop_ = true;
  mailbox_->wake();
  if (thread_.joinable()) thread_.join();
  ::close(listener_);
}

void http_gate::answer(connection& c, const http_reply& r) {
  c.out = render_reply(r, c.head_only);
  c.at = connection::stage::writing;
  c.want = POLLOUT;
  c.deadline = clock::now() + limits_.write_deadline;
  c.in.clear();
  c.in.shrink_to_fit();
}

void http_gate::refuse(connection& c, int status, const std::string& why) {
  ++refused_;
  answer(c, {status, "text/plain", why + "\n"});
}

// Reads what the socket has; hands a whole request to the handler.
void http_gate::take_request(connection& c) {
  char buf[16 << 10];
  for (;;) {
    const ssize_t r = c.read(buf, sizeof buf);
    if (r == 0) return;
    if (r < 0) {
      ++refused_;
      c.close();
      return;
    }
    // Only up to the limits is kept: a 50 MiB header costs one buffer, not 50 MiB.
    const std::size_t cap = limits_.max_head + 4 + limits_.max_body;
    c.in.append(buf, std::min(cap - std::min(cap, c.in.size()), static_cast<std::size_t>(r)));
    const auto end = c.in.find("\r\n\r\n");
    if (end == std::string::npos) {
      if (c.in.size() > limits_.max_head) {
        refuse(c, 431, "the request head exceeds " + std::to_string(limits_.max_head) + " bytes");
        return;
      }
      continue;
    }
    http_request q;
    const std::string bad = parse_request_head(c.in.substr(0, end), q, limits_);
    if (!bad.empty()) {
      refuse(c, std::stoi(bad.substr(0, 3)), bad.substr(4));
      return;
    }
    if (c.in.size() < end + 4 + q.content_length) continue;
    q.body = c.in.substr(end + 4, q.content_length);
    q.peer_name = c.peer_name;
    q.remote = c.remote;
    c.head_only = q.method == "HEAD";
    c.at = connection::stage::answering;
    c.deadline = clock::now() + limits_.answer_deadline;
    c.in.clear();
    c.in.shrink_to_fit();
    ++served_;
    handler_(q, [box = std::weak_ptr<mailbox>(mailbox_), id = c.id](http_reply r) {
      if (auto m = box.lock()) m->post(id, std::move(r));
    });
    return;
  }
}

void http_gate::handshake(connection& c) {
  const int r = SSL_accept(c.ssl);
  if (r != 1) {
    if (c.retry(r) < 0) {
      ++refused_;
      c.close();
    }
    return;
  }
  const std::string why = verified_peer_name(c.ssl, c.peer_name);
  if (!why.empty() && SSL_get_verify_mode(c.ssl) & SSL_VERIFY_FAIL_IF_NO_PEER_CERT) {
    ++refused_;
    c.close();
    return;
  }
  c.at = connection::stage::request;
  c.want = POLLIN;
  take_request(c);  // the request may have come with the handshake's last flight
}

void http_gate::write_reply(connection& c) {
  for (;;) {
    const ssize_t w = c.write(c.out.data() + c.sent, c.out.size() - c.sent);
    if (w == 0) return;
    if (w > 0) c.sent += static_cast<std::size_t>(w);
    if (w < 0 || c.sent == c.out.size()) {
      if (c.ssl && w > 0) SSL_shutdown(c.ssl);  // close_notify, not waited for
      ::shutdown(c.fd, SHUT_WR);
      c.close();
      return;
    }
  }
}

// Late requests are answered 408, late handlers 503, late replies dropped.
void http_gate::expire_late(connections& conns) {
  const auto now = clock::now();
  for (auto& c : conns) {
    if (c->fd < 0 || now < c->deadline) continue;
    if (c->at == connection::stage::writing || c->at == connection::stage::handshake) {
      if (c->at == connection::stage::handshake) ++refused_;
      c->close();
    } else if (c->at == connection::stage::answering) {
      refuse(*c, 503,
             "no answer within " + std::to_string(limits_.answer_deadline.count()) + " ms");
    } else {
      refuse(*c, 408,
             "the request did not arrive within " + std::to_string(limits_.head_deadline.count()) +
                 " ms");
    }
  }
  conns.erase(std::remove_if(conns.begin(), conns.end(), [](auto& c) { return c->fd < 0; }),
              conns.end());
}

// Replies of handlers (this thread's own included), to connections still waiting for them.
void http_gate::deliver_replies(connections& conns) {
  std::deque<std::pair<std::uint64_t, http_reply>> replies;
  {
    std::lock_guard<std::mutex> g(mailbox_->lock);
    replies.swap(mailbox_->replies);
  }
  for (auto& [id, r] : replies)
    for (auto& c : conns)
      if (c->id == id && c->fd >= 0 && c->at == connection::stage::answering) {
        answer(*c, r);
        // Most replies fit the socket's buffer: sent on the next pass without waiting.
      }
}

void http_gate::accept_new(connections& conns) {
  for (int k = 0; k < 64; ++k) {
    sockaddr_storage from{};
    socklen_t from_len = sizeof from;
    const int fd = ::accept4(listener_, reinterpret_cast<sockaddr*>(&from), &from_len,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) break;
    conns.erase(std::remove_if(conns.begin(), conns.end(), [](auto& c) { return c->fd < 0; }),
                conns.end());
    if (conns.size() >= limits_.max_connections) {
      // Room is made by the oldest connection still sending its request.
      auto oldest = conns.end();
      for (auto it = conns.begin(); it != conns.end(); ++it)
        if ((*it)->sending() && (oldest == conns.end() || (*it)->accepted < (*oldest)->accepted))
          oldest = it;
      if (oldest == conns.end()) {
        ::close(fd);
        ++refused_;
        continue;
      }
      conns.erase(oldest);
      ++evicted_;
    }
    auto c = std::make_unique<connection>();
    c->id = ++next_id_;
    c->fd = fd;
    c->remote = address_of(from, from_len);
    c->accepted = clock::now();
    c->deadline = c->accepted + limits_.head_deadline;
    if (tls_) {
      c->ssl = SSL_new(tls_.get());
      if (!c->ssl) continue;  // out of memory: the connection is closed with it
      SSL_set_fd(c->ssl, fd);
      SSL_set_num_tickets(c->ssl, 0);  // every reply closes: a ticket would go unused
      c->at = connection::stage::handshake;
    }
    conns.push_back(std::move(c));
  }
}

void http_gate::run() {
  connections conns;
  std::vector<pollfd> fds;
  while (!stop_) {
    expire_late(conns);
    const auto now = clock::now();
    fds.clear();
    fds.push_back({mailbox_->wake_fd, POLLIN, 0});
    fds.push_back({listener_, POLLIN, 0});
    auto wait = std::chrono::milliseconds(1000);
    for (auto& c : conns) {
      // A connection waiting for its handler is not polled (its hang-up would wake us forever).
      const bool waiting = c->at == connection::stage::answering;
      fds.push_back({waiting ? -1 : c->fd, c->want, 0});
      wait =
          std::min(wait, std::chrono::duration_cast<std::chrono::milliseconds>(c->deadline - now) +
                             std::chrono::milliseconds(1));
    }
    wait = std::max(wait, std::chrono::milliseconds(0));
    if (::poll(fds.data(), fds.size(), static_cast<int>(wait.count())) < 0 && errno != EINTR) break;
    const std::size_t polled = conns.size();
    for (std::size_t i = 0; i < polled; ++i) {
      connection& c = *conns[i];
      if (!fds[i + 2].revents || c.fd < 0) continue;
      if (c.at == connection::stage::handshake)
        handshake(c);
      else if (c.at == connection::stage::request)
        take_request(c);
      else if (c.at == connection::stage::writing)
        write_reply(c);
    }
    if (fds[0].revents & POLLIN) {
      std::uint64_t drained;
      [[maybe_unused]] const auto n = ::read(mailbox_->wake_fd, &drained, sizeof drained);
    }
    deliver_replies(conns);
    if (fds[1].revents & POLLIN) accept_new(conns);
  }
}

}  // namespace degnn
