// The project's small hashing tools: the splitmix64 mixer that keys every random stream
// (sampling, dropout, quantization, generation), a 32-bit mixer for per-entry dropout, and the
// checksum of binary files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace degnn {

/// splitmix64 finaliser: a cheap bijective 64-bit mixer.
constexpr std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// murmur3's 32-bit finaliser: a cheap bijective 32-bit mixer that vectorises (keyed dropout).
constexpr std::uint32_t mix32(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x85ebca6bU;
  x ^= x >> 13;
  x *= 0xc2b2ae35U;
  return x ^ (x >> 16);
}

/// Order-dependent 64-bit checksum over 8-byte words: catches flipped bytes and swapped blocks
/// and runs at memory speed, so binary caches and partitions can be checked on every load.
struct checksum64 {
  std::uint64_t h = 0x9e3779b97f4a7c15ULL;
  void add(const void* data, std::size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    std::size_t i = 0;
    for (; i + 8 <= bytes; i += 8) {
      std::uint64_t w;
      std::memcpy(&w, p + i, 8);
      h = (h ^ w) * 0x100000001b3ULL + (h >> 29);
    }
    for (; i < bytes; ++i)
      h = (h ^ p[i]) * 0x100000001b3ULL;
  }
};

}  // namespace degnn
