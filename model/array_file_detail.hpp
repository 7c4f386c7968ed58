// What the array file encoders and decoders share (model/array_file.cpp: .npy; npz_file.cpp;
// safetensors_file.cpp): dtype names, checked shape sizes, little-endian reads and writes.
// Not an interface.
#pragma once

#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "model/array_file.hpp"
#include "model/data_error.hpp"

namespace degnn::array_detail {

/// n elements of dtype t at `bytes` (any alignment) into out, each through static_cast.
template <class Out>
void convert_elements(array_dtype t, const char* bytes, Out* out, std::size_t n) {
  auto convert = [&](auto tag) {
    using T = decltype(tag);
    for (std::size_t i = 0; i < n; ++i) {
      T v;
      std::memcpy(&v, bytes + i * sizeof(T), sizeof(T));
      out[i] = static_cast<Out>(v);
    }
  };
  switch (t) {
    case array_dtype::f32:
      return convert(float{});
    case array_dtype::f64:
      return convert(double{});
    case array_dtype::i32:
      return convert(std::int32_t{});
    case array_dtype::i64:
      return convert(std::int64_t{});
    case array_dtype::u8:
      return convert(std::uint8_t{});
  }
}

struct dtype_names {
  array_dtype t;
  const char* npy;
  const char* safetensors;
};
inline constexpr dtype_names kDtypes[] = {{array_dtype::f32, "<f4", "F32"},
                                          {array_dtype::f64, "<f8", "F64"},
                                          {array_dtype::i32, "<i4", "I32"},
                                          {array_dtype::i64, "<i8", "I64"},
                                          {array_dtype::u8, "|u1", "U8"}};

inline const dtype_names& names_of(array_dtype t) {
  for (const auto& d : kDtypes)
    if (d.t == t) return d;
  throw std::invalid_argument("array_file: unknown dtype");
}

/// The element count of a shape; throws std::length_error past 2^48 (or on overflow), which no
/// file this program reads can hold.
std::int64_t product(const std::vector<std::int64_t>& shape);
/// product() for a shape read from `file`: a data_error naming it.
std::int64_t elements_of(const std::vector<std::int64_t>& shape, const std::string& file);

/// One entry of an .npz (zip) archive, located but not read: `data` is its packed bytes inside
/// the archive (method 0: stored, 8: deflated, inflating to `size` bytes).
struct npz_entry {
  std::string name;   ///< without ".npy"
  std::string where;  ///< "FILE (NAME.npy)", for errors
  std::uint16_t method = 0;
  std::uint32_t crc = 0;
  std::uint64_t size = 0;
  std::string_view data;
};
/// The entries of an .npz archive, checked: methods read, sizes possible, no shared bytes.
std::vector<npz_entry> list_npz_entries(std::string_view bytes, const std::string& file);

template <class T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // little-endian machines only (as the checkpoints)
  out.append(b, sizeof(T));
}

template <class T>
T get(std::string_view bytes, std::size_t at, const std::string& file, const char* what) {
  if (at > bytes.size() || bytes.size() - at < sizeof(T))
    throw data_error::at(file, 0, std::string("truncated (") + what + ")");
  T v;
  std::memcpy(&v, bytes.data() + at, sizeof(T));
  return v;
}

}  // namespace degnn::array_detail
