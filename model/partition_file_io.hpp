// The binary files of a partition set, byte by byte: a writer that checksums what it puts, a
// stream reader (the book) and a mapped reader (the parts) that checksum what they get, and the
// header and size checks both readers share. Private to model/partition_store.cpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "model/data_error.hpp"
#include "model/durable_file.hpp"
#include "model/hashing.hpp"
#include "model/mapped_file.hpp"
#include "model/partition_store.hpp"

namespace degnn::partition_io {

namespace fs = std::filesystem;

// Writes through a durable_file with a checksum at the end: readers see the old file or the new.
class bin_writer {
 public:
  explicit bin_writer(fs::path file) : out_(std::move(file)) {}
  template <class T>
  void put(const T* data, size_t count) {
    const size_t bytes = count * sizeof(T);
    if (bytes == 0) return;
    out_.write(data, bytes);
    sum_.add(data, bytes);
  }
  void finish() {
    out_.write(&sum_.h, sizeof sum_.h);
    out_.commit();
  }

 private:
  durable_file out_;
  checksum64 sum_;
};

class bin_reader {
 public:
  explicit bin_reader(fs::path file) : file_(std::move(file)) {
    std::error_code ec;
    if (!fs::is_regular_file(file_, ec)) throw fail("missing (no such file)");
    size_ = fs::file_size(file_, ec);
    if (ec) throw fail("cannot read its size: " + ec.message());
    in_.open(file_, std::ios::binary);
    if (!in_) throw fail("cannot open for reading");
  }
  std::uintmax_t size() const { return size_; }
  data_error fail(const std::string& what) const { return data_error::at(file_.string(), 0, what); }

  template <class T>
  void get(T* data, size_t count) {
    const size_t bytes = count * sizeof(T);
    if (bytes == 0) return;
    in_.read(reinterpret_cast<char*>(data), static_cast<std::streamsize>(bytes));
    if (static_cast<size_t>(in_.gcount()) != bytes)
      throw fail("truncated: ends inside the payload");
    sum_.add(data, bytes);
  }
  /// Reads the trailing checksum and compares it with everything read so far.
  void verify_checksum() {
    std::uint64_t stored = 0;
    in_.read(reinterpret_cast<char*>(&stored), sizeof stored);
    if (in_.gcount() != sizeof stored) throw fail("truncated: the trailing checksum is missing");
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
    if (stored != sum_.h) throw fail("checksum mismatch: the file is corrupted");
#endif
  }

 private:
  fs::path file_;
  std::ifstream in_;
  std::uintmax_t size_ = 0;
  checksum64 sum_;
};

// Reads a part file through a read-only mapping: an array is copied out (get) or left where it
// lies (view). Either way its bytes enter the checksum as the writer's one put of them did, a
// few MiB at a time (whole 8-byte words, which is the same sum), and the pages read are handed
// back as it goes, so checking a file of any size holds a few MiB of it.
class mapped_reader {
 public:
  explicit mapped_reader(const fs::path& file) : file_(file) {
    std::error_code ec;
    if (!fs::is_regular_file(file_, ec)) throw fail("missing (no such file)");
    map_ = std::make_shared<const mapped_file>(file_);
  }
  std::uintmax_t size() const { return map_->bytes().size(); }
  const std::shared_ptr<const mapped_file>& mapping() const { return map_; }
  data_error fail(const std::string& what) const { return data_error::at(file_.string(), 0, what); }

  template <class T>
  void get(T* data, size_t count) {
    take(count * sizeof(T), reinterpret_cast<char*>(data));
  }
  /// The next count values in place; they stay valid while mapping() is held.
  template <class T>
  const T* view(size_t count) {
    const char* at = map_->bytes().data() + pos_;
    if (reinterpret_cast<std::uintptr_t>(at) % alignof(T) != 0)
      throw fail("an array at byte " + std::to_string(pos_) + " is not aligned for its values");
    take(count * sizeof(T), nullptr);
    return reinterpret_cast<const T*>(at);
  }
  /// Compares the trailing checksum with everything read so far.
  void verify_checksum() {
    std::uint64_t stored = 0;
    if (size() - pos_ < sizeof stored) throw fail("truncated: the trailing checksum is missing");
    std::memcpy(&stored, map_->bytes().data() + pos_, sizeof stored);
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
    if (stored != sum_.h) throw fail("checksum mismatch: the file is corrupted");
#endif
  }

 private:
  void take(size_t bytes, char* copy_to) {
    if (bytes == 0) return;
    if (size() - pos_ < bytes) throw fail("truncated: ends inside the payload");
    constexpr size_t kStep = size_t{4} << 20;  // a multiple of 8: the same sum as one add
    const char* base = map_->bytes().data();
    for (size_t done = 0; done < bytes;) {
      const size_t n = std::min(kStep, bytes - done);
      if (copy_to) std::memcpy(copy_to + done, base + pos_ + done, n);
      sum_.add(base + pos_ + done, n);
      map_->release(pos_ + done, n);
      done += n;
    }
    pos_ += bytes;
  }

  fs::path file_;
  std::shared_ptr<const mapped_file> map_;
  size_t pos_ = 0;
  checksum64 sum_;
};

// Reads the header first and checks the file size against it before allocating anything, so a
// corrupt size field cannot trigger a huge allocation.
template <class Header, class Reader>
Header read_header(Reader& r, const char (&magic)[8], const char* what) {
  Header h;
  std::memset(&h, 0, sizeof h);
  if (r.size() < sizeof h + sizeof(std::uint64_t)) {
    throw r.fail("truncated: " + std::to_string(r.size()) + " bytes, too short for a " + what +
                 " header");
  }
  r.get(&h, 1);
  if (std::memcmp(h.magic, magic, 8) != 0)
    throw r.fail(std::string("not a DEGNN ") + what + " file (bad magic)");
  if (h.version != static_cast<std::uint32_t>(kPartitionFormatVersion)) {
    throw r.fail("unsupported format version " + std::to_string(h.version) + " (this build reads " +
                 std::to_string(kPartitionFormatVersion) +
                 "; write the partition set again with degnn partition)");
  }
  return h;
}

template <class Reader>
void check_size(const Reader& r, unsigned __int128 expected) {
  if (expected != r.size()) {
    const bool shorter = r.size() < expected;
    throw r.fail(std::string(shorter ? "truncated" : "has trailing bytes") + ": expected " +
                 std::to_string(static_cast<std::uint64_t>(expected)) +
                 " bytes from its header, found " + std::to_string(r.size()));
  }
}

}  // namespace degnn::partition_io
