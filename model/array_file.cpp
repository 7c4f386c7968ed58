// The .npy encoder and decoder and the array types (see array_file.hpp), after NumPy's format
// description (numpy/lib/format.py); .npz and safetensors are in npz_file.cpp and
// safetensors_file.cpp.
#include "model/array_file.hpp"

#include <charconv>

#include "model/array_file_detail.hpp"

namespace degnn {

namespace array_detail {

std::int64_t product(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto s : shape) {
    if (s < 0 || __builtin_mul_overflow(n, s, &n) || n > (std::int64_t{1} << 48))
      throw std::length_error("an array shape with too many elements");
  }
  return n;
}

std::int64_t elements_of(const std::vector<std::int64_t>& shape, const std::string& file) {
  try {
    return product(shape);
  } catch (const std::length_error&) {
    throw data_error::at(file, 0, "an array shape with too many elements");
  }
}

}  // namespace array_detail

using namespace array_detail;

namespace {

// The value after `'key':` in an .npy header dict, up to the next top-level comma or brace.
std::string header_value(const std::string& header, const std::string& key,
                         const std::string& file) {
  const auto at = header.find("'" + key + "'");
  if (at == std::string::npos)
    throw data_error::at(file, 0, "the .npy header has no '" + key + "'");
  auto v = header.find(':', at);
  if (v == std::string::npos) throw data_error::at(file, 0, "the .npy header is malformed");
  ++v;
  while (v < header.size() && header[v] == ' ')
    ++v;
  std::size_t end = v;
  if (v < header.size() && header[v] == '(') {
    end = header.find(')', v);
    if (end == std::string::npos) throw data_error::at(file, 0, "the .npy shape is malformed");
    return header.substr(v, end - v + 1);
  }
  while (end < header.size() && header[end] != ',' && header[end] != '}')
    ++end;
  std::string s = header.substr(v, end - v);
  while (!s.empty() && s.back() == ' ')
    s.pop_back();
  return s;
}

// The dimensions of a shape tuple such as "(2, 3)" or "(5,)"; at most 64 (NumPy's own limit).
std::vector<std::int64_t> parse_shape(const std::string& text, const std::string& file) {
  std::vector<std::int64_t> shape;
  if (text.size() < 2 || text.front() != '(' || text.back() != ')')
    throw data_error::at(file, 0, "the .npy shape " + text + " is not a tuple");
  const char* at = text.data() + 1;
  const char* end = text.data() + text.size() - 1;
  while (at < end) {
    while (at < end && (*at == ' ' || *at == ','))
      ++at;
    if (at >= end) break;
    std::int64_t v = 0;
    const auto [next, ec] = std::from_chars(at, end, v);
    if (ec != std::errc() || next == at)
      throw data_error::at(file, 0, "the .npy shape " + text.substr(0, 80) + " is malformed");
    if (v < 0) throw data_error::at(file, 0, "the .npy shape has a negative size");
    if (shape.size() == 64) throw data_error::at(file, 0, "the .npy shape has over 64 dimensions");
    shape.push_back(v);
    at = next;
  }
  return shape;
}

array_dtype dtype_of_npy(const std::string& descr, const std::string& file) {
  for (const auto& d : kDtypes)
    if (descr == d.npy || (d.t == array_dtype::u8 && descr == "<u1")) return d.t;
  throw data_error::at(file, 0,
                       "dtype " + descr + " is not read (float32/64, int32/64 or uint8 arrays)");
}

void check_size(const stored_array& a, std::size_t have, const std::string& file) {
  const auto want = static_cast<std::size_t>(elements_of(a.shape, file)) * dtype_size(a.dtype);
  if (have < want)
    throw data_error::at(file, 0,
                         a.name + ": truncated (" + std::to_string(have) + " of " +
                             std::to_string(want) + " data bytes)");
}

}  // namespace

std::size_t array_bytes(const array_ref& a) {
  for (auto s : a.shape)
    if (s < 0) throw std::invalid_argument("array_file: " + a.name + " has a negative dimension");
  return static_cast<std::size_t>(product(a.shape)) * dtype_size(a.dtype);
}

std::size_t dtype_size(array_dtype t) {
  switch (t) {
    case array_dtype::f32:
    case array_dtype::i32:
      return 4;
    case array_dtype::f64:
    case array_dtype::i64:
      return 8;
    case array_dtype::u8:
      return 1;
  }
  return 0;
}

std::int64_t stored_array::elements() const {
  return product(shape);
}

std::vector<float> stored_array::as_floats() const {
  const auto n = static_cast<std::size_t>(elements());
  std::vector<float> out(n);
  array_detail::convert_elements(dtype, bytes.data(), out.data(), n);
  return out;
}

std::string encode_npy(const array_ref& a) {
  std::string out = npy_header(a);
  out.append(static_cast<const char*>(a.data), array_bytes(a));
  return out;
}

std::string npy_header(const array_ref& a) {
  std::string shape = "(";
  for (std::size_t i = 0; i < a.shape.size(); ++i)
    shape += std::to_string(a.shape[i]) +
             (a.shape.size() == 1 || i + 1 < a.shape.size() ? "," : "") +
             (i + 1 < a.shape.size() ? " " : "");
  shape += ")";
  std::string header = std::string("{'descr': '") + names_of(a.dtype).npy +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  // magic (6) + version (2) + length (2) + header + '\n' is a multiple of 64.
  const std::size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  put<std::uint16_t>(out, static_cast<std::uint16_t>(header.size()));
  out += header;
  return out;
}

npy_info read_npy_header(std::string_view bytes, const std::string& file) {
  if (bytes.size() < 10 || bytes.substr(0, 6) != std::string_view("\x93NUMPY", 6))
    throw data_error::at(file, 0, "not a .npy file (no \\x93NUMPY magic)");
  const auto major = static_cast<std::uint8_t>(bytes[6]);
  std::size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = get<std::uint16_t>(bytes, 8, file, "header length");
    start = 10;
  } else if (major == 2 || major == 3) {
    header_len = get<std::uint32_t>(bytes, 8, file, "header length");
    start = 12;
  } else {
    throw data_error::at(file, 0, ".npy format version " + std::to_string(major) + " is not read");
  }
  if (bytes.size() - start < header_len) throw data_error::at(file, 0, "truncated (.npy header)");
  const std::string header(bytes.substr(start, header_len));
  npy_info info;
  std::string descr = header_value(header, "descr", file);
  if (descr.size() < 2 || descr.front() != '\'' || descr.back() != '\'')
    throw data_error::at(file, 0, "the .npy descr " + descr + " is not a plain dtype");
  info.dtype = dtype_of_npy(descr.substr(1, descr.size() - 2), file);
  if (header_value(header, "fortran_order", file) != "False")
    throw data_error::at(file, 0, "Fortran-order arrays are not read (save it in C order)");
  info.shape = parse_shape(header_value(header, "shape", file), file);
  elements_of(info.shape, file);
  info.data_at = start + header_len;
  return info;
}

std::size_t npy_header_bytes(std::string_view first, const std::string& file) {
  if (first.size() < 12 || first.substr(0, 6) != std::string_view("\x93NUMPY", 6))
    throw data_error::at(file, 0, "not a .npy file (no \\x93NUMPY magic)");
  const auto major = static_cast<std::uint8_t>(first[6]);
  if (major == 1) {
    const std::size_t bytes = 10 + get<std::uint16_t>(first, 8, file, "header length");
    if (bytes < 12) throw data_error::at(file, 0, "a .npy header shorter than its own fields");
    return bytes;
  }
  if (major == 2 || major == 3) return 12 + std::size_t{get<std::uint32_t>(first, 8, file, "h")};
  throw data_error::at(file, 0, ".npy format version " + std::to_string(major) + " is not read");
}

stored_array decode_npy(std::string_view bytes, const std::string& file) {
  npy_info info = read_npy_header(bytes, file);
  stored_array a;
  a.dtype = info.dtype;
  a.shape = std::move(info.shape);
  check_size(a, bytes.size() - info.data_at, file);
  a.bytes.assign(
      bytes.substr(info.data_at, static_cast<std::size_t>(a.elements()) * dtype_size(a.dtype)));
  return a;
}

}  // namespace degnn
