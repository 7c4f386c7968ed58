// Fuzzes basp_frames: the input is cut into reads of the sizes its first bytes name; whatever
// arrives, only whole frames within the limits are passed on, and nothing is buffered beyond a
// frame's own bytes.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "runtime/transport/basp_frames.hpp"

using degnn::basp_frames;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::size_t step = 1 + data[0] % 97;
  const auto first =
      data[1] & 1 ? basp_frames::opening::client_handshake : basp_frames::opening::server_handshake;
  constexpr std::size_t kHandshake = 256, kFrame = 4096;
  basp_frames f(first, kHandshake, kFrame);
  const char* p = reinterpret_cast<const char*>(data + 2);
  std::size_t left = size - 2;
  std::size_t passed = 0;
  while (left > 0) {
    const std::size_t n = left < step ? left : step;
    if (!f.feed(p, n).empty()) break;
    p += n;
    left -= n;
    // Whole frames only: each passed frame's header names exactly its own length.
    const char* q = f.pending();
    std::size_t have = f.pending_bytes();
    while (have > 0) {
      if (have < basp_frames::kHeaderBytes) std::abort();
      const auto* h = reinterpret_cast<const unsigned char*>(q);
      const std::size_t len = (std::size_t{h[4]} << 24) | (h[5] << 16) | (h[6] << 8) | h[7];
      if (h[0] > 6 || len > kFrame || basp_frames::kHeaderBytes + len > have) std::abort();
      q += basp_frames::kHeaderBytes + len;
      have -= basp_frames::kHeaderBytes + len;
    }
    passed += f.pending_bytes();
    f.consumed(f.pending_bytes());
    if (f.partial_bytes() > basp_frames::kHeaderBytes + kFrame) std::abort();
  }
  if (passed > size) std::abort();
  return 0;
}
