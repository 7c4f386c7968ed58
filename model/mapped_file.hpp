// A file mapped read-only into memory (RAII): large arrays are read where they lie on disk, and a
// process's resident memory is what it touches. Pages already read can be handed back (release).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace degnn {

class mapped_file {
 public:
  /// Maps `file` whole. Throws data_error naming it when it cannot be opened or mapped.
  explicit mapped_file(const std::filesystem::path& file);
  ~mapped_file();
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;

  std::string_view bytes() const { return {data_, size_}; }
  const std::string& name() const { return name_; }
  /// Drops the pages of [offset, offset + length) from this process's resident set (they stay in
  /// the page cache): for a whole-file pass, so that its resident memory stays bounded.
  void release(std::size_t offset, std::size_t length) const;

 private:
  std::string name_;
  const char* data_ = nullptr;
  std::size_t size_ = 0;
};

/// A float32 (rows, cols) C-order matrix inside a mapped file (the data of a .npy), read in place.
struct mapped_rows {
  std::shared_ptr<const mapped_file> file;
  const float* data = nullptr;
  std::int64_t rows = 0, cols = 0;

  const float* row(std::int64_t r) const { return data + r * cols; }
  /// Hands back every page read so far (see mapped_file::release).
  void release() const { file->release(0, file->bytes().size()); }
};

}  // namespace degnn
