// .npy, .npz and safetensors encoders and decoders (see array_file.hpp). The layouts follow
// NumPy's format description (numpy/lib/format.py), the zip application note (stored and
// deflated entries, zip64 sizes) and the safetensors README.
#include "model/array_file.hpp"

#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "model/crc32.hpp"
#include "model/data_error.hpp"

namespace degnn {

namespace {

struct dtype_names {
  array_dtype t;
  const char* npy;
  const char* safetensors;
};
constexpr dtype_names kDtypes[] = {{array_dtype::f32, "<f4", "F32"},
                                   {array_dtype::f64, "<f8", "F64"},
                                   {array_dtype::i32, "<i4", "I32"},
                                   {array_dtype::i64, "<i8", "I64"},
                                   {array_dtype::u8, "|u1", "U8"}};

const dtype_names& names_of(array_dtype t) {
  for (const auto& d : kDtypes)
    if (d.t == t) return d;
  throw std::invalid_argument("array_file: unknown dtype");
}

// The element count of a shape; throws std::length_error past 2^48 (or on overflow), which no
// file this program reads can hold.
std::int64_t product(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto s : shape) {
    if (s < 0 || __builtin_mul_overflow(n, s, &n) || n > (std::int64_t{1} << 48))
      throw std::length_error("an array shape with too many elements");
  }
  return n;
}

// product() for a shape read from `file`: a data_error naming it.
std::int64_t elements_of(const std::vector<std::int64_t>& shape, const std::string& file) {
  try {
    return product(shape);
  } catch (const std::length_error&) {
    throw data_error::at(file, 0, "an array shape with too many elements");
  }
}

std::size_t data_bytes(const array_ref& a) {
  for (auto s : a.shape)
    if (s < 0) throw std::invalid_argument("array_file: " + a.name + " has a negative dimension");
  return static_cast<std::size_t>(product(a.shape)) * dtype_size(a.dtype);
}

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

// -- zip --
constexpr std::uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr std::uint16_t kDosDate = (2020 - 1980) << 9 | 1 << 5 | 1;  // 2020-01-01, as numpy's zips

std::string inflate_raw(std::string_view in, std::uint64_t out_size, const std::string& where) {
  // Deflate expands at most about 1032:1: a larger stated size is a lie, refused before any
  // allocation.
  if (out_size > static_cast<std::uint64_t>(in.size()) * 1032 + 1024)
    throw data_error::at(where, 0, "a deflated entry states an impossible size");
  std::string out(static_cast<std::size_t>(out_size), '\0');
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) throw data_error::at(where, 0, "zlib cannot start");
  // zlib counts in 32 bits: an entry of 4 GiB or more is fed and drained in pieces.
  constexpr std::size_t kPiece = std::size_t{1} << 30;
  std::size_t in_at = 0, out_at = 0;
  z.next_out = reinterpret_cast<Bytef*>(out.data());  // an empty entry: a valid, empty buffer
  int rc = Z_OK;
  while (rc == Z_OK) {
    if (z.avail_in == 0 && in_at < in.size()) {
      const std::size_t n = std::min(kPiece, in.size() - in_at);
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + in_at));
      z.avail_in = static_cast<uInt>(n);
      in_at += n;
    }
    if (z.avail_out == 0 && out_at < out.size()) {
      const std::size_t n = std::min(kPiece, out.size() - out_at);
      z.next_out = reinterpret_cast<Bytef*>(out.data() + out_at);
      z.avail_out = static_cast<uInt>(n);
      out_at += n;
    }
    const uInt before_in = z.avail_in, before_out = z.avail_out;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc == Z_BUF_ERROR || (rc == Z_OK && z.avail_in == before_in && z.avail_out == before_out))
      break;  // no progress: input ended early, or more output than stated
  }
  const std::uint64_t produced = out_at - z.avail_out;
  inflateEnd(&z);
  if (rc != Z_STREAM_END || produced != out_size)
    throw data_error::at(where, 0, "a deflated entry does not inflate to its stated size");
  return out;
}

}  // namespace

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
  auto convert = [&](auto tag) {
    using T = decltype(tag);
    for (std::size_t i = 0; i < n; ++i) {
      T v;
      std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
      out[i] = static_cast<float>(v);
    }
  };
  switch (dtype) {
    case array_dtype::f32:
      convert(float{});
      break;
    case array_dtype::f64:
      convert(double{});
      break;
    case array_dtype::i32:
      convert(std::int32_t{});
      break;
    case array_dtype::i64:
      convert(std::int64_t{});
      break;
    case array_dtype::u8:
      convert(std::uint8_t{});
      break;
  }
  return out;
}

std::string encode_npy(const array_ref& a) {
  std::string out = npy_header(a);
  out.append(static_cast<const char*>(a.data), data_bytes(a));
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

stored_array decode_npy(std::string_view bytes, const std::string& file) {
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
  stored_array a;
  std::string descr = header_value(header, "descr", file);
  if (descr.size() < 2 || descr.front() != '\'' || descr.back() != '\'')
    throw data_error::at(file, 0, "the .npy descr " + descr + " is not a plain dtype");
  a.dtype = dtype_of_npy(descr.substr(1, descr.size() - 2), file);
  if (header_value(header, "fortran_order", file) != "False")
    throw data_error::at(file, 0, "Fortran-order arrays are not read (save it in C order)");
  a.shape = parse_shape(header_value(header, "shape", file), file);
  const std::size_t data_at = start + header_len;
  check_size(a, bytes.size() - data_at, file);
  a.bytes.assign(
      bytes.substr(data_at, static_cast<std::size_t>(a.elements()) * dtype_size(a.dtype)));
  return a;
}

std::string encode_npz(std::span<const array_ref> arrays) {
  std::string out, central;
  for (const array_ref& a : arrays) {
    const std::string data = encode_npy(a);
    const std::string name = a.name + ".npy";
    if (data.size() >= 0xFFFFFFFFull || out.size() >= 0xFFFFFFFFull)
      throw std::length_error("encode_npz: " + a.name + " does not fit a zip without zip64");
    const std::uint32_t crc = crc32_update(0, data.data(), data.size());
    const auto offset = static_cast<std::uint32_t>(out.size());
    auto common = [&](std::string& h) {
      put<std::uint16_t>(h, 20);  // version needed: 2.0
      put<std::uint16_t>(h, 0);   // flags
      put<std::uint16_t>(h, 0);   // stored
      put<std::uint16_t>(h, 0);   // time
      put<std::uint16_t>(h, kDosDate);
      put<std::uint32_t>(h, crc);
      put<std::uint32_t>(h, static_cast<std::uint32_t>(data.size()));
      put<std::uint32_t>(h, static_cast<std::uint32_t>(data.size()));
      put<std::uint16_t>(h, static_cast<std::uint16_t>(name.size()));
      put<std::uint16_t>(h, 0);  // extra
    };
    put<std::uint32_t>(out, kLocalSig);
    common(out);
    out += name;
    out += data;
    put<std::uint32_t>(central, kCentralSig);
    put<std::uint16_t>(central, 20);  // made by
    common(central);
    put<std::uint16_t>(central, 0);  // comment
    put<std::uint16_t>(central, 0);  // disk
    put<std::uint16_t>(central, 0);  // internal attributes
    put<std::uint32_t>(central, 0);  // external attributes
    put<std::uint32_t>(central, offset);
    central += name;
  }
  if (out.size() >= 0xFFFFFFFFull || central.size() >= 0xFFFFFFFFull || arrays.size() >= 0xFFFF)
    throw std::length_error("encode_npz: the arrays do not fit a zip without zip64");
  const auto central_at = static_cast<std::uint32_t>(out.size());
  out += central;
  put<std::uint32_t>(out, kEndSig);
  put<std::uint16_t>(out, 0);
  put<std::uint16_t>(out, 0);
  put<std::uint16_t>(out, static_cast<std::uint16_t>(arrays.size()));
  put<std::uint16_t>(out, static_cast<std::uint16_t>(arrays.size()));
  put<std::uint32_t>(out, static_cast<std::uint32_t>(central.size()));
  put<std::uint32_t>(out, central_at);
  put<std::uint16_t>(out, 0);
  return out;
}

std::vector<stored_array> decode_npz(std::string_view bytes, const std::string& file) {
  // The end record: the last signature within its 22 bytes plus a comment of up to 64 KiB.
  if (bytes.size() < 22) throw data_error::at(file, 0, "not an .npz file (too short for a zip)");
  std::size_t end = std::string_view::npos;
  const std::size_t lowest = bytes.size() > 22 + 65535 ? bytes.size() - 22 - 65535 : 0;
  for (std::size_t at = bytes.size() - 22 + 1; at-- > lowest;) {
    if (get<std::uint32_t>(bytes, at, file, "end record") == kEndSig) {
      end = at;
      break;
    }
  }
  if (end == std::string_view::npos)
    throw data_error::at(file, 0, "not an .npz file (no zip end record)");
  const auto entries = get<std::uint16_t>(bytes, end + 10, file, "end record");
  std::size_t at = get<std::uint32_t>(bytes, end + 16, file, "end record");
  std::vector<stored_array> out;
  // Each entry's bytes (local header to data end) must be its own: central records that share
  // an entry would decode one file's bytes many times over.
  std::map<std::uint64_t, std::uint64_t> spans;  // begin -> end, checked before any copy
  for (std::uint16_t e = 0; e < entries; ++e) {
    if (get<std::uint32_t>(bytes, at, file, "central directory") != kCentralSig)
      throw data_error::at(file, 0, "the zip's central directory is damaged");
    const auto method = get<std::uint16_t>(bytes, at + 10, file, "central directory");
    const auto crc = get<std::uint32_t>(bytes, at + 16, file, "central directory");
    std::uint64_t packed = get<std::uint32_t>(bytes, at + 20, file, "central directory");
    std::uint64_t size = get<std::uint32_t>(bytes, at + 24, file, "central directory");
    const auto name_len = get<std::uint16_t>(bytes, at + 28, file, "central directory");
    const auto extra_len = get<std::uint16_t>(bytes, at + 30, file, "central directory");
    const auto comment_len = get<std::uint16_t>(bytes, at + 32, file, "central directory");
    std::uint64_t local = get<std::uint32_t>(bytes, at + 42, file, "central directory");
    if (at + 46 + name_len > bytes.size()) throw data_error::at(file, 0, "truncated (entry name)");
    std::string name(bytes.substr(at + 46, name_len));
    // zip64: the sizes and offset marked 0xFFFFFFFF are in the extra field 0x0001, in order.
    for (std::size_t x = at + 46 + name_len; x + 4 <= at + 46 + name_len + extra_len;) {
      const auto id = get<std::uint16_t>(bytes, x, file, "extra field");
      const auto len = get<std::uint16_t>(bytes, x + 2, file, "extra field");
      if (id == 0x0001) {
        std::size_t y = x + 4;
        if (size == 0xFFFFFFFF) size = get<std::uint64_t>(bytes, (y += 8) - 8, file, "zip64");
        if (packed == 0xFFFFFFFF) packed = get<std::uint64_t>(bytes, (y += 8) - 8, file, "zip64");
        if (local == 0xFFFFFFFF) local = get<std::uint64_t>(bytes, (y += 8) - 8, file, "zip64");
      }
      x += 4 + len;
    }
    at += 46 + name_len + extra_len + comment_len;
    const std::string where = file + " (" + name + ")";
    if (get<std::uint32_t>(bytes, local, file, "local header") != kLocalSig)
      throw data_error::at(where, 0, "its local header is damaged");
    const std::size_t data_at = local + 30 + get<std::uint16_t>(bytes, local + 26, file, "local") +
                                get<std::uint16_t>(bytes, local + 28, file, "local");
    if (data_at > bytes.size() || bytes.size() - data_at < packed)
      throw data_error::at(where, 0, "truncated (entry data)");
    const auto next = spans.lower_bound(local);
    if ((next != spans.end() && next->first < data_at + packed) ||
        (next != spans.begin() && std::prev(next)->second > local))
      throw data_error::at(where, 0,
                           "it shares bytes with another entry (a damaged or crafted file)");
    spans.emplace(local, data_at + packed);
    const std::string_view raw = bytes.substr(data_at, packed);
    std::string data;
    if (method == 0) {
      data.assign(raw);
    } else if (method == 8) {
      data = inflate_raw(raw, size, where);
    } else {
      throw data_error::at(where, 0, "zip method " + std::to_string(method) + " is not read");
    }
    if (data.size() != size)
      throw data_error::at(where, 0, "its stored and stated sizes differ (a damaged file)");
    if (crc32_update(0, data.data(), data.size()) != crc)
      throw data_error::at(where, 0, "its CRC-32 does not match (a damaged file)");
    stored_array a = decode_npy(data, where);
    if (name.size() > 4 && name.substr(name.size() - 4) == ".npy") name.resize(name.size() - 4);
    a.name = name;
    out.push_back(std::move(a));
  }
  return out;
}

std::string encode_safetensors(std::span<const array_ref> arrays,
                               const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::size_t offset = 0;
  for (const array_ref& a : arrays) {
    const std::size_t n = data_bytes(a);
    header[a.name] = {{"dtype", names_of(a.dtype).safetensors},
                      {"shape", a.shape},
                      {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out;
  put<std::uint64_t>(out, text.size());
  out += text;
  for (const array_ref& a : arrays)
    out.append(static_cast<const char*>(a.data), data_bytes(a));
  return out;
}

std::vector<stored_array> decode_safetensors(std::string_view bytes, const std::string& file,
                                             std::map<std::string, std::string>* metadata) {
  const auto header_len = get<std::uint64_t>(bytes, 0, file, "header length");
  if (header_len > bytes.size() - 8 || header_len > (100u << 20))
    throw data_error::at(file, 0,
                         "not a safetensors file (its header length " + std::to_string(header_len) +
                             " does not fit the file)");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.substr(8, header_len));
  } catch (const nlohmann::json::exception& e) {
    throw data_error::at(file, 0, std::string("its header is not JSON: ") + e.what());
  }
  if (!header.is_object()) throw data_error::at(file, 0, "its header is not a JSON object");
  const std::string_view data = bytes.substr(8 + header_len);
  std::vector<stored_array> out;
  // The tensors' byte ranges must tile the data exactly, as the safetensors format requires
  // (shared ranges would copy one region many times over).
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
  std::uint64_t claimed = 0;
  for (const auto& [name, t] : header.items()) {
    if (name == "__metadata__" || !t.is_object() || !t.contains("data_offsets")) continue;
    const auto& o = t["data_offsets"];
    if (o.is_array() && o.size() == 2 && o[0].is_number_unsigned() && o[1].is_number_unsigned() &&
        o[1].get<std::uint64_t>() >= o[0].get<std::uint64_t>())
      claimed += o[1].get<std::uint64_t>() - o[0].get<std::uint64_t>();
  }
  if (claimed > data.size())
    throw data_error::at(file, 0, "its tensors claim more bytes than the file holds");
  for (const auto& [name, t] : header.items()) {
    try {
      if (name == "__metadata__") {
        if (metadata)
          for (const auto& [k, v] : t.items())
            (*metadata)[k] = v.get<std::string>();
        continue;
      }
      stored_array a;
      a.name = name;
      const auto dtype = t.at("dtype").get<std::string>();
      bool known = false;
      for (const auto& d : kDtypes)
        if (dtype == d.safetensors) a.dtype = d.t, known = true;
      if (!known) throw data_error::at(file, 0, name + ": dtype " + dtype + " is not read");
      for (const auto& dim : t.at("shape"))
        if (!dim.is_number_integer())
          throw data_error::at(file, 0, name + ": a dimension that is not an integer");
      a.shape = t.at("shape").get<std::vector<std::int64_t>>();
      for (auto s : a.shape)
        if (s < 0) throw data_error::at(file, 0, name + ": a negative dimension");
      const auto offsets = t.at("data_offsets").get<std::vector<std::uint64_t>>();
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data.size())
        throw data_error::at(file, 0, name + ": its data offsets lie outside the file");
      if (offsets[1] - offsets[0] !=
          static_cast<std::uint64_t>(elements_of(a.shape, file)) * dtype_size(a.dtype))
        throw data_error::at(file, 0, name + ": its data offsets do not match its shape");
      spans.emplace_back(offsets[0], offsets[1]);
      a.bytes.assign(data.substr(offsets[0], offsets[1] - offsets[0]));
      out.push_back(std::move(a));
    } catch (const nlohmann::json::exception& e) {
      throw data_error::at(file, 0, name + ": " + e.what());
    }
  }
  std::sort(spans.begin(), spans.end());
  std::uint64_t covered = 0;
  for (const auto& [b, e] : spans) {
    if (b != covered)
      throw data_error::at(file, 0, "its tensors' data offsets overlap or leave gaps");
    covered = e;
  }
  if (covered != data.size())
    throw data_error::at(file, 0, "its tensors do not cover its data exactly");
  return out;
}

}  // namespace degnn
