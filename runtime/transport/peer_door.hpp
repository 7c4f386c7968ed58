// A node's one door: the only socket a node listens on for its peers, and the way it connects to
// them. CAF listens nowhere; the door authenticates each connection first (mutual TLS with the
// cluster CA and a node's certificate name, or on a plain loopback cluster a BASP handshake),
// with a deadline, a cap on pending handshakes and bounded buffers, and only then hands it to
// CAF (see caf_handoff). Every frame a peer sends is checked before CAF reads it (basp_frames).
// Refusals are logged once each, at most 20 lines in 10 s.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "runtime/transport/caf_handoff.hpp"
#include "runtime/transport/cluster_certificates.hpp"
#include "runtime/transport/door_tls.hpp"
#include "runtime/transport/endpoint.hpp"

namespace degnn {

struct door_settings {
  std::optional<tls_files> tls;  ///< none: a plain cluster (loopback or --insecure)
  /// From accepting a connection to its first whole BASP frame (TLS handshake included).
  std::chrono::milliseconds handshake_timeout{5000};
  std::size_t max_pending = 32;            ///< connections not yet authenticated, at once
  std::size_t handshake_limit = 64 << 10;  ///< payload of a frame before the handshake passed
  std::size_t frame_limit = 160 << 20;     ///< payload of any frame after it
  std::function<void(const std::string&)> log;
};

/// What the door saw since it opened.
struct door_counts {
  std::uint64_t accepted = 0;  ///< peers handed to CAF
  std::uint64_t refused = 0;   ///< connections closed before CAF saw them
  std::uint64_t dropped = 0;   ///< authenticated connections closed for a bad frame
};

class peer_door {
 public:
  peer_door(caf::actor_system& sys, door_settings s);
  ~peer_door();
  peer_door(const peer_door&) = delete;
  peer_door& operator=(const peer_door&) = delete;

  /// Listens on `at` (port 0: any free one) for peers, who find `whom` (with `interface`) there.
  /// Returns the port. Throws std::runtime_error when the address cannot be bound.
  std::uint16_t listen(const endpoint& at, caf::strong_actor_ptr whom,
                       std::set<std::string> interface);

  /// One attempt to reach the node at `peer` within `timeout`: TCP, then with TLS a handshake
  /// whose certificate must be made out to `expected_name` (empty: any node-K), then CAF's
  /// BASP handshake. An error says which step failed.
  caf::expected<remote_published> connect(const endpoint& peer, const std::string& expected_name,
                                          std::chrono::milliseconds timeout);

  door_counts counts() const;
  bool tls() const { return settings_.tls.has_value(); }

 private:
  struct connection;
  using clock = std::chrono::steady_clock;

  void run();
  void accept_all();
  void pump(connection& c);
  void hand_to_caf(connection& c);
  void refuse(connection& c, const std::string& why);
  void note(const std::string& line);
  void flush_unlogged();
  void post(std::function<void()> f);
  void wake();

  caf_handoff handoff_;
  door_settings settings_;
  ssl_ctx_ptr ctx_;
  int listener_ = -1;
  int wake_fd_ = -1;
  std::atomic<std::uint64_t> next_id_{1};
  std::vector<std::unique_ptr<connection>> conns_;  ///< owned by the loop thread
  std::mutex posted_mutex_;
  std::vector<std::function<void()>> posted_;
  // Set by the destructor: the loop stops accepting and ends once CAF has been quiet for a
  // while and every byte it wrote reached the peer's socket (bounded), so a node's last replies
  // (a refusal, a goodbye) are not cut off by its own exit.
  std::atomic<bool> draining_{false};
  clock::time_point last_from_caf_{};  ///< loop thread only
  std::atomic<std::uint64_t> accepted_{0}, refused_{0}, dropped_{0};
  // Rate limit of refusal lines (loop thread only).
  clock::time_point window_start_{};
  int lines_in_window_ = 0;
  std::uint64_t unlogged_ = 0;
  std::thread thread_;
};

}  // namespace degnn
