// NumPy's .npy and .npz files and the safetensors file, the array formats that NumPy and PyTorch
// read: encoders for what DEGNN writes (inference outputs, exported models) and decoders for what
// it reads back (--init). Little-endian, C order. Bad input throws data_error naming the file.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace degnn {

enum class array_dtype { f32, f64, i32, i64, u8 };

/// Bytes per element of a dtype.
std::size_t dtype_size(array_dtype t);

/// An array to write: its name (in an .npz or safetensors file), element type, shape and data
/// (shape's product elements, C order, native little-endian).
struct array_ref {
  std::string name;
  array_dtype dtype = array_dtype::f32;
  std::vector<std::int64_t> shape;
  const void* data = nullptr;
};

/// An array read from a file: the bytes of its elements, C order, little-endian.
struct stored_array {
  std::string name;
  array_dtype dtype = array_dtype::f32;
  std::vector<std::int64_t> shape;
  std::string bytes;

  std::int64_t elements() const;
  /// The elements as float (f32 as is, f64 rounded, integers converted).
  std::vector<float> as_floats() const;
};

/// Bytes of an array's data (shape's product times the dtype's size).
std::size_t array_bytes(const array_ref& a);

/// A whole .npy file (format 1.0; header padded so the data starts at a multiple of 64).
std::string encode_npy(const array_ref& a);
/// The header part of encode_npy(a) (the data follows it): to stream a large array to a file.
std::string npy_header(const array_ref& a);
/// The header of a .npy file: element type, shape, and where the data starts.
struct npy_info {
  array_dtype dtype = array_dtype::f32;
  std::vector<std::int64_t> shape;
  std::size_t data_at = 0;
};
/// Reads the header at the start of `bytes` (which need hold no more than the header).
npy_info read_npy_header(std::string_view bytes, const std::string& file);
/// The header's length in bytes (data_at) from the file's first 12 bytes (a .npy is never
/// shorter): how much to read before read_npy_header.
std::size_t npy_header_bytes(std::string_view first, const std::string& file);
/// The array of a .npy file (format 1.x or 2.x, dtypes <f4 <f8 <i4 <i8 |u1, C order). `file`
/// names it in errors.
stored_array decode_npy(std::string_view bytes, const std::string& file);

/// A whole .npz file: a zip archive of NAME.npy entries, stored (not compressed) as numpy.savez
/// writes them. Throws std::length_error past 4 GiB (no zip64).
std::string encode_npz(std::span<const array_ref> arrays);
/// The arrays of an .npz file, stored or deflated (numpy.savez_compressed), by entry name
/// without ".npy".
std::vector<stored_array> decode_npz(std::string_view bytes, const std::string& file);

/// A whole safetensors file: u64 header size, the JSON header (dtype, shape, data offsets of each
/// tensor, and `metadata` as "__metadata__", strings only) padded to 8 bytes, then the data.
std::string encode_safetensors(std::span<const array_ref> arrays,
                               const std::map<std::string, std::string>& metadata);
/// The tensors of a safetensors file (dtypes F32 F64 I32 I64 U8), metadata into *metadata.
std::vector<stored_array> decode_safetensors(std::string_view bytes, const std::string& file,
                                             std::map<std::string, std::string>* metadata);

}  // namespace degnn
