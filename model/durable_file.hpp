// A file that appears under its name whole or not at all, and stays after a crash: written to a
// temporary file beside it, fsynced, renamed into place, then its folder fsynced. Every write is
// checked (a full disk is an error naming the file); the temporary file is removed on failure.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace degnn {

class durable_file {
 public:
  /// Creates FILE.tmpPID beside `file`. Throws data_error naming the file when it cannot.
  explicit durable_file(std::filesystem::path file);
  ~durable_file();  ///< removes the temporary file unless commit() succeeded
  durable_file(const durable_file&) = delete;
  durable_file& operator=(const durable_file&) = delete;

  void write(const void* data, std::size_t bytes);
  void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
  /// fsync, close, rename into place, fsync of the folder.
  void commit();
  const std::filesystem::path& path() const { return file_; }

 private:
  [[noreturn]] void fail(const std::string& what);
  std::filesystem::path file_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

/// Writes `bytes` to `file` through a durable_file.
void write_file_durably(const std::filesystem::path& file, std::string_view bytes);

/// The whole contents of `file`; nothing when it cannot be opened.
std::optional<std::string> read_whole_file(const std::filesystem::path& file);

/// fsync of a file's or folder's contents by path; false when the system refused (errno set).
bool sync_path(const std::filesystem::path& path);

}  // namespace degnn
