// The check a node's door runs on every byte a peer sends before CAF sees it: the stream is cut
// into BASP frames (CAF 0.17.6: a 32-byte header, payload length big-endian at offset 4, then the
// payload), and a frame is passed on only once it arrived whole and within the limits. CAF
// allocates whatever length a header announces; here nothing is reserved before bytes arrive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace degnn {

class basp_frames {
 public:
  static constexpr std::size_t kHeaderBytes = 32;
  /// Which handshake must come first: a peer that connected to us sends the client's, the node
  /// we connected to the server's.
  enum class opening : std::uint8_t { server_handshake = 0, client_handshake = 1 };

  /// `handshake_limit`: the largest payload before the handshake passed (a node id, the
  /// published actor's interface: a few KB); `frame_limit`: any payload after it.
  basp_frames(opening first, std::size_t handshake_limit, std::size_t frame_limit)
      : first_(first), handshake_limit_(handshake_limit), frame_limit_(frame_limit) {}

  /// Takes the next bytes of the stream; "" or why the stream is refused (then close it: the
  /// bytes after a refused header mean nothing).
  std::string feed(const char* data, std::size_t n);

  /// Whole frames not yet handed on, from `sent()` on.
  const char* pending() const { return ready_.data() + sent_; }
  std::size_t pending_bytes() const { return ready_.size() - sent_; }
  /// `n` bytes of `pending()` were handed on.
  void consumed(std::size_t n);

  bool handshake_passed() const { return frames_ > 0; }
  std::uint64_t frames() const { return frames_; }
  /// Bytes of the frame still arriving (its header announced more).
  std::size_t partial_bytes() const { return partial_.size(); }

 private:
  std::string check_header() const;

  opening first_;
  std::size_t handshake_limit_, frame_limit_;
  std::vector<char> partial_;  ///< the frame arriving, header first
  std::size_t need_ = kHeaderBytes;
  std::vector<char> ready_;  ///< whole frames
  std::size_t sent_ = 0;
  std::uint64_t frames_ = 0;
};

}  // namespace degnn
