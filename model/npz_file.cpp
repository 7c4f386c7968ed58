// NumPy's .npz files (see array_file.hpp): zip archives of .npy entries after the zip application
// note: stored and deflated entries, zip64 sizes, every entry checked by its CRC-32, and no two
// entries sharing bytes.
#include <zlib.h>

#include <algorithm>
#include <iterator>
#include <map>

#include "model/array_file_detail.hpp"
#include "model/crc32.hpp"

namespace degnn {

using namespace array_detail;

namespace {

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

namespace array_detail {

std::vector<npz_entry> list_npz_entries(std::string_view bytes, const std::string& file) {
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
  std::vector<npz_entry> out;
  // Each entry's bytes (local header to data end) must be its own: central records that share
  // an entry would decode one file's bytes many times over.
  std::map<std::uint64_t, std::uint64_t> spans;  // begin -> end, checked before any copy
  for (std::uint16_t e = 0; e < entries; ++e) {
    if (get<std::uint32_t>(bytes, at, file, "central directory") != kCentralSig)
      throw data_error::at(file, 0, "the zip's central directory is damaged");
    npz_entry entry;
    entry.method = get<std::uint16_t>(bytes, at + 10, file, "central directory");
    entry.crc = get<std::uint32_t>(bytes, at + 16, file, "central directory");
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
    entry.where = file + " (" + name + ")";
    if (get<std::uint32_t>(bytes, local, file, "local header") != kLocalSig)
      throw data_error::at(entry.where, 0, "its local header is damaged");
    const std::size_t data_at = local + 30 + get<std::uint16_t>(bytes, local + 26, file, "local") +
                                get<std::uint16_t>(bytes, local + 28, file, "local");
    if (data_at > bytes.size() || bytes.size() - data_at < packed)
      throw data_error::at(entry.where, 0, "truncated (entry data)");
    const auto next = spans.lower_bound(local);
    if ((next != spans.end() && next->first < data_at + packed) ||
        (next != spans.begin() && std::prev(next)->second > local))
      throw data_error::at(entry.where, 0,
                           "it shares bytes with another entry (a damaged or crafted file)");
    spans.emplace(local, data_at + packed);
    if (entry.method != 0 && entry.method != 8)
      throw data_error::at(entry.where, 0,
                           "zip method " + std::to_string(entry.method) + " is not read");
    if (entry.method == 0 && packed != size)
      throw data_error::at(entry.where, 0, "its stored and stated sizes differ (a damaged file)");
    // Deflate expands at most about 1032:1: a larger stated size is a lie, refused before any
    // allocation.
    if (entry.method == 8 && size > packed * 1032 + 1024)
      throw data_error::at(entry.where, 0, "a deflated entry states an impossible size");
    entry.data = bytes.substr(data_at, packed);
    entry.size = size;
    if (name.size() > 4 && name.substr(name.size() - 4) == ".npy") name.resize(name.size() - 4);
    entry.name = std::move(name);
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace array_detail

std::vector<stored_array> decode_npz(std::string_view bytes, const std::string& file) {
  std::vector<stored_array> out;
  for (const npz_entry& e : list_npz_entries(bytes, file)) {
    std::string data = e.method == 0 ? std::string(e.data) : inflate_raw(e.data, e.size, e.where);
    if (crc32_update(0, data.data(), data.size()) != e.crc)
      throw data_error::at(e.where, 0, "its CRC-32 does not match (a damaged file)");
    stored_array a = decode_npy(data, e.where);
    a.name = e.name;
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace degnn
