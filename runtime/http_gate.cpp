// The gate's loop and its request-head parser.
#include "runtime/http_gate.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
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
    case 413:
      return "Content Too Large";
    case 431:
      return "Request Header Fields Too Large";
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

std::string parse_request_head(const std::string& head, http_request& out) {
  const auto eol = head.find("\r\n");
  const std::string line = head.substr(0, eol);
  const auto s1 = line.find(' ');
  const auto s2 = s1 == std::string::npos ? s1 : line.find(' ', s1 + 1);
  if (s1 == std::string::npos || s2 == std::string::npos || line.find(' ', s2 + 1) != line.npos)
    return "400 the request line is not METHOD TARGET VERSION";
  out.method = line.substr(0, s1);
  out.target = line.substr(s1 + 1, s2 - s1 - 1);
  const std::string version = line.substr(s2 + 1);
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return "505 " + version;
  if (out.target.empty() || out.target[0] != '/') return "400 the target is not a path";
  if (out.method != "GET" && out.method != "HEAD") return "405 " + out.method + " (read-only)";
  // A body is never read: a request that announces one is refused rather than misread.
  std::size_t at = eol == std::string::npos ? head.size() : eol + 2;
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
    if (name == "transfer-encoding" || (name == "content-length" && value != "0"))
      return "413 this endpoint takes no request body";
  }
  return "";
}

struct http_gate::connection {
  int fd = -1;
  std::string in;
  std::string out;
  std::size_t sent = 0;
  bool writing = false;
  clock::time_point accepted, deadline;
  ~connection() {
    if (fd >= 0) ::close(fd);
  }
};

http_gate::http_gate(const endpoint& where, const std::string& option, handler h,
                     http_limits limits)
    : handler_(std::move(h)), limits_(limits) {
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
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  thread_ = std::thread([this] { run(); });
}

http_gate::~http_gate() {
  stop_ = true;
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto r = ::write(wake_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  ::close(listener_);
  ::close(wake_fd_);
}

void http_gate::run() {
  std::vector<std::unique_ptr<connection>> conns;
  std::vector<pollfd> fds;
  char buf[16 << 10];
  auto answer = [&](connection& c, const http_reply& r, bool head_only) {
    c.out = render_reply(r, head_only);
    c.writing = true;
    c.deadline = clock::now() + limits_.write_deadline;
    c.in.clear();
    c.in.shrink_to_fit();
  };
  auto refuse = [&](connection& c, int status, const std::string& why) {
    ++refused_;
    answer(c, {status, "text/plain", why + "\n"}, false);
  };
  while (!stop_) {
    const auto now = clock::now();
    // Late heads are answered 408, late replies dropped.
    for (auto& c : conns) {
      if (c->fd < 0 || now < c->deadline) continue;
      if (c->writing) {
        ::close(c->fd);
        c->fd = -1;
      } else {
        refuse(*c, 408,
               "the request head did not arrive within " +
                   std::to_string(limits_.head_deadline.count()) + " ms");
      }
    }
    conns.erase(std::remove_if(conns.begin(), conns.end(), [](auto& c) { return c->fd < 0; }),
                conns.end());
    fds.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    fds.push_back({listener_, POLLIN, 0});
    auto wait = std::chrono::milliseconds(1000);
    for (auto& c : conns) {
      fds.push_back({c->fd, static_cast<short>(c->writing ? POLLOUT : POLLIN), 0});
      wait =
          std::min(wait, std::chrono::duration_cast<std::chrono::milliseconds>(c->deadline - now) +
                             std::chrono::milliseconds(1));
    }
    wait = std::max(wait, std::chrono::milliseconds(0));
    if (::poll(fds.data(), fds.size(), static_cast<int>(wait.count())) < 0 && errno != EINTR) break;
    for (std::size_t i = 2; i < fds.size(); ++i) {
      connection& c = *conns[i - 2];
      if (!fds[i].revents) continue;
      if (c.writing) {
        const ssize_t w = ::send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
        if (w > 0) c.sent += static_cast<std::size_t>(w);
        if (w < 0 && errno != EAGAIN && errno != EINTR) c.sent = c.out.size();
        if (c.sent == c.out.size()) {
          ::shutdown(c.fd, SHUT_WR);
          ::close(c.fd);
          c.fd = -1;
        }
        continue;
      }
      const ssize_t r = ::recv(c.fd, buf, sizeof buf, 0);
      if (r <= 0) {
        if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
          ++refused_;
          ::close(c.fd);
          c.fd = -1;
        }
        continue;
      }
      // Only up to the limit is kept: a 50 MiB header costs one buffer, not 50 MiB.
      const std::size_t room = limits_.max_head + 4 - std::min(limits_.max_head + 4, c.in.size());
      c.in.append(buf, std::min(room, static_cast<std::size_t>(r)));
      const auto end = c.in.find("\r\n\r\n");
      if (end == std::string::npos) {
        if (c.in.size() > limits_.max_head)
          refuse(c, 431, "the request head exceeds " + std::to_string(limits_.max_head) + " bytes");
        continue;
      }
      http_request q;
      const std::string bad = parse_request_head(c.in.substr(0, end), q);
      if (!bad.empty()) {
        refuse(c, std::stoi(bad.substr(0, 3)), bad.substr(4));
        continue;
      }
      answer(c, handler_(q), q.method == "HEAD");
      ++served_;
    }
    if (fds[0].revents & POLLIN) {
      std::uint64_t drained;
      [[maybe_unused]] const auto n = ::read(wake_fd_, &drained, sizeof drained);
    }
    if (fds[1].revents & POLLIN) {
      for (int k = 0; k < 64; ++k) {
        const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        conns.erase(std::remove_if(conns.begin(), conns.end(), [](auto& c) { return c->fd < 0; }),
                    conns.end());
        if (conns.size() >= limits_.max_connections) {
          // Room is made by the oldest connection still sending its head.
          auto oldest = conns.end();
          for (auto it = conns.begin(); it != conns.end(); ++it)
            if (!(*it)->writing && (oldest == conns.end() || (*it)->accepted < (*oldest)->accepted))
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
        c->fd = fd;
        c->accepted = clock::now();
        c->deadline = c->accepted + limits_.head_deadline;
        conns.push_back(std::move(c));
      }
    }
  }
}

}  // namespace degnn
