// CRC-32 over byte ranges of any length: zlib's crc32, fed in chunks because it takes uInt
// lengths.
#include "model/crc32.hpp"

#include <zlib.h>

#include <algorithm>

namespace degnn {

std::uint32_t crc32_update(std::uint32_t crc, const void* data, std::size_t n) {
  uLong c = crc;
  auto p = static_cast<const Bytef*>(data);
  while (n > 0) {
    const uInt chunk = static_cast<uInt>(std::min<std::size_t>(n, 1u << 30));
    c = crc32(c, p, chunk);
    p += chunk;
    n -= chunk;
  }
  return static_cast<std::uint32_t>(c);
}

std::uint32_t crc32_concat(std::uint32_t crc_a, std::uint32_t crc_b, std::size_t len_b) {
  return static_cast<std::uint32_t>(crc32_combine(crc_a, crc_b, static_cast<z_off_t>(len_b)));
}

}  // namespace degnn
