// Chunked reading of gzip (or plain) text files, a batch of complete lines at a time, so callers
// can parse lines in parallel. Errors name the file; a truncated gzip stream is an error.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>

namespace degnn {

/// Calls on_lines(lines, first_line_number) for consecutive batches of complete lines (without
/// the trailing '\n' or '\r'); first_line_number is 1-based. Reads about chunk_bytes per batch.
/// Throws data_error for a missing, unreadable, corrupt or truncated file.
void read_lines_chunked(
    const std::filesystem::path& file,
    const std::function<void(std::span<const std::string_view>, std::int64_t)>& on_lines,
    std::size_t chunk_bytes = 8u << 20);

/// Writes text through gzip at a fast compression level; throws data_error naming the file.
class gzip_writer {
 public:
  explicit gzip_writer(const std::filesystem::path& file, int level = 1);
  ~gzip_writer();
  gzip_writer(const gzip_writer&) = delete;
  gzip_writer& operator=(const gzip_writer&) = delete;
  void write(std::string_view text);
  void close();

 private:
  std::filesystem::path file_;
  void* gz_ = nullptr;
};

}  // namespace degnn
