// The door's private parts (runtime/transport/peer_door.cpp: the loop; door_connection.cpp: a
// connection's reads and writes and the socket helpers; peer_door_connect.cpp: an outgoing
// connection): one connection's state and the limits the loop keeps. Not an interface.
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "runtime/transport/basp_frames.hpp"
#include "runtime/transport/peer_door.hpp"

namespace degnn {
namespace door_detail {

constexpr std::size_t kReadChunk = 64 << 10;
// Bytes read ahead of the other side in either direction before the door stops reading.
constexpr std::size_t kAhead = 4 << 20;
constexpr int kLinesPerWindow = 20;
constexpr auto kWindow = std::chrono::seconds(10);
// How long a closing door keeps relaying: until CAF wrote nothing but heartbeats for kDrainQuiet
// and every byte it wrote went out (a peer that took nothing for kDrainStuck is given up), or
// kDrainLimit at most.
constexpr auto kDrainQuiet = std::chrono::milliseconds(250);
constexpr auto kDrainStuck = std::chrono::seconds(1);
constexpr auto kDrainLimit = std::chrono::seconds(3);

void set_nonblocking(int fd);
void set_nodelay(int fd);
/// "HOST:PORT" of a peer's address.
std::string address_of(const sockaddr_storage& a);

// The outcome of one non-blocking read or write on the peer's socket.
enum class io { done, would_block, closed, failed };

/// Why an OpenSSL call on `ssl` that returned `ret` failed.
std::string ssl_failure(SSL* ssl, int ret);

}  // namespace door_detail

struct peer_door::connection {
  enum class phase { tls, first_frame, relay };
  std::uint64_t id = 0;
  int remote = -1;
  SSL* ssl = nullptr;
  int local = -1;  ///< the door's end of the pair to CAF; -1 until handed over
  phase at = phase::first_frame;
  bool inbound = true;
  std::string peer;  ///< address, and the certificate name once known
  clock::time_point deadline;
  basp_frames in;         ///< peer -> CAF
  std::vector<char> out;  ///< CAF -> peer
  std::size_t out_sent = 0;
  clock::time_point last_write{};  ///< when the peer last took bytes (while the door closes)
  bool remote_eof = false, local_eof = false;
  bool read_wants_write = false, write_wants_read = false, handshake_wants_write = false;
  bool dead = false;

  connection(basp_frames::opening first, const door_settings& s)
      : in(first, s.handshake_limit, s.frame_limit) {}
  ~connection() {
    if (ssl) SSL_free(ssl);
    if (remote >= 0) ::close(remote);
    if (local >= 0) ::close(local);
  }
  std::size_t out_pending() const { return out.size() - out_sent; }
  bool authenticated() const { return at == phase::relay; }

  /// One non-blocking read from the peer into buf (n: bytes read; why: set on failure).
  door_detail::io read_remote(char* buf, std::size_t cap, std::size_t& n, std::string& why);
  /// One non-blocking write of what is pending to the peer.
  door_detail::io write_remote(std::string& why);
};

}  // namespace degnn
