// Codecs of the partition-file transfer (a manifest of files with sizes and CRC-32s, chunk
// requests, chunks): paths are checked to stay inside the partition folder, a chunk whose data
// does not match its CRC is rejected so the receiver asks again.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "serialization/wire.hpp"

namespace degnn::wire {

inline constexpr std::uint32_t kMaxChunkBytes = 1u << 20;

struct file_entry {
  std::string path;
  std::uint64_t size = 0;
  std::uint32_t crc32 = 0;
};

struct file_manifest {
  std::vector<file_entry> files;
  const file_entry* find(const std::string& path) const;
};

struct file_chunk_request {
  std::string path;
  std::uint64_t offset = 0;
  std::uint32_t length = 0;
};

struct file_chunk {
  std::string path;
  std::uint64_t offset = 0;
  std::vector<char> data;
};

/// CRC-32 (zlib) of `data`, continuing from `crc` (0 to start).
std::uint32_t crc32_of(std::span<const char> data, std::uint32_t crc = 0);

/// Whether `path` is a relative path of plain names (no "..", no leading '/', no empty part).
bool safe_relative_path(const std::string& path);

// The cluster id is not checked (these travel before the joiner's settings are known).
bytes encode(const context& c, const file_manifest& m);
file_manifest decode_file_manifest(const context& c, std::span<const char> b);
bytes encode(const context& c, const file_chunk_request& m);
file_chunk_request decode_file_chunk_request(const context& c, std::span<const char> b);
/// The chunk's CRC-32 is computed here.
bytes encode(const context& c, const file_chunk& m);
file_chunk decode_file_chunk(const context& c, std::span<const char> b);

}  // namespace degnn::wire
