// What the file harnesses share: a scratch folder per fuzzing process, whole-file reads and
// writes, and swapping one file of a valid set for the fuzzer's bytes while a loader reads it.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

namespace degnn {

/// $TMPDIR (else /tmp)/degnn-fuzz-NAME-PID, made empty.
inline std::filesystem::path fuzz_scratch_dir(const std::string& name) {
  const char* tmp = std::getenv("TMPDIR");
  const std::filesystem::path dir = std::filesystem::path(tmp && *tmp ? tmp : "/tmp") /
                                    ("degnn-fuzz-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::string read_bytes(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::filesystem::path& file, std::string_view bytes) {
  std::ofstream(file, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// A seed input: the kind byte, then the file.
inline void write_seed(const std::filesystem::path& file, char kind, const std::string& bytes) {
  std::filesystem::create_directories(file.parent_path());
  write_bytes(file, std::string(1, kind) + bytes);
}

/// Puts `bytes` at `file` for its lifetime, then the valid `original` back.
class scoped_replacement {
 public:
  scoped_replacement(std::filesystem::path file, std::string_view bytes,
                     const std::string& original)
      : file_(std::move(file)), original_(original) {
    write_bytes(file_, bytes);
  }
  ~scoped_replacement() { write_bytes(file_, original_); }
  scoped_replacement(const scoped_replacement&) = delete;
  scoped_replacement& operator=(const scoped_replacement&) = delete;

 private:
  std::filesystem::path file_;
  const std::string& original_;
};

}  // namespace degnn
