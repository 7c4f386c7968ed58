// CRC-32 (zlib's polynomial) over byte ranges: what checkpoint files, commit records and every
// wire message carry so a damaged copy is refused instead of read.
#pragma once

#include <cstddef>
#include <cstdint>

namespace degnn {

/// The CRC-32 of `n` bytes at `data`, continuing from `crc` (0 for a new one).
std::uint32_t crc32_update(std::uint32_t crc, const void* data, std::size_t n);
/// The CRC-32 of A followed by B from crc(A), crc(B) and B's length, without reading either.
/// Linear in crc(A): what lets a checksum follow a change at the front of a long message.
std::uint32_t crc32_concat(std::uint32_t crc_a, std::uint32_t crc_b, std::size_t len_b);

}  // namespace degnn
