// Cutting a peer's byte stream into checked BASP frames.
#include "runtime/transport/basp_frames.hpp"

#include <algorithm>

namespace degnn {

namespace {

constexpr std::uint8_t kLastOperation = 6;  // heartbeat; 0..6 are BASP 0.17's operations

std::uint32_t payload_length(const char* header) {
  const auto* b = reinterpret_cast<const unsigned char*>(header);
  return (std::uint32_t{b[4]} << 24) | (std::uint32_t{b[5]} << 16) | (std::uint32_t{b[6]} << 8) |
         std::uint32_t{b[7]};
}

}  // namespace

std::string basp_frames::check_header() const {
  const auto op = static_cast<std::uint8_t>(partial_[0]);
  const std::uint32_t len = payload_length(partial_.data());
  if (op > kLastOperation) return "not a BASP stream (operation " + std::to_string(op) + ")";
  if (frames_ == 0 && op != static_cast<std::uint8_t>(first_)) {
    return std::string("the first frame is not the ") +
           (first_ == opening::client_handshake ? "client" : "server") + " handshake (operation " +
           std::to_string(op) + ")";
  }
  const std::size_t limit = frames_ == 0 ? handshake_limit_ : frame_limit_;
  if (len > limit) {
    return "a frame announces " + std::to_string(len) + " bytes, over the limit of " +
           std::to_string(limit) + (frames_ == 0 ? " before the handshake" : "");
  }
  return "";
}

std::string basp_frames::feed(const char* data, std::size_t n) {
  while (n > 0) {
    const std::size_t take = std::min(n, need_ - partial_.size());
    partial_.insert(partial_.end(), data, data + take);
    data += take;
    n -= take;
    if (partial_.size() < need_) break;
    if (need_ == kHeaderBytes) {
      if (std::string why = check_header(); !why.empty()) return why;
      need_ += payload_length(partial_.data());
      if (partial_.size() < need_) continue;
    }
    // A whole frame: handed on in one piece.
    if (pending_bytes() == 0) {
      ready_.swap(partial_);
      partial_.clear();
      sent_ = 0;
    } else {
      ready_.insert(ready_.end(), partial_.begin(), partial_.end());
      partial_.clear();
    }
    ++frames_;
    need_ = kHeaderBytes;
  }
  return "";
}

void basp_frames::consumed(std::size_t n) {
  sent_ += std::min(n, pending_bytes());
  if (sent_ == ready_.size()) {
    // Keep a small buffer's capacity for the next frames, give a large one back.
    if (ready_.capacity() > (std::size_t{1} << 20)) {
      std::vector<char>().swap(ready_);
    } else {
      ready_.clear();
    }
    sent_ = 0;
  }
}

}  // namespace degnn
