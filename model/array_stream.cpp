// array_stream (see array_stream.hpp): pieces of at most 4 MiB, taken from the mapping or
// inflated into a buffer; pages of the mapping already read are released every 64 MiB so a
// whole-file pass does not grow the process's resident memory.
#include "model/array_stream.hpp"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "model/array_file_detail.hpp"
#include "model/crc32.hpp"

namespace degnn {

using namespace array_detail;

namespace {
constexpr std::size_t kPiece = std::size_t{4} << 20;
constexpr std::size_t kReleaseEvery = std::size_t{64} << 20;
}  // namespace

struct array_stream::state {
  std::shared_ptr<const mapped_file> file;
  std::string where;
  npy_info info;
  std::int64_t elements = 0, consumed = 0;  // elements in all, and read so far
  // The source: `packed` bytes of the mapping at offset `base` in it, read from `at`.
  std::string_view packed;
  std::size_t base = 0, at = 0, released = 0;
  bool deflated = false, check_crc = false;
  std::uint32_t crc = 0, want_crc = 0;
  std::uint64_t inflated_size = 0, produced = 0;  // deflated: stated size, bytes made so far
  z_stream z{};
  bool z_open = false;
  std::string buffer;

  ~state() {
    if (z_open) inflateEnd(&z);
  }

  // The next `n` bytes of the entry (n <= kPiece): a view of the mapping, or of the buffer they
  // were inflated into. A data_error when fewer remain.
  std::string_view take(std::size_t n) {
    std::string_view out;
    if (!deflated) {
      if (packed.size() - at < n) throw data_error::at(where, 0, "truncated (array data)");
      out = packed.substr(at, n);
      at += n;
      if (at - released >= kReleaseEvery) {
        file->release(base + released, at - released);
        released = at;
      }
    } else {
      buffer.resize(n);
      z.next_out = reinterpret_cast<Bytef*>(buffer.data());
      z.avail_out = static_cast<uInt>(n);
      while (z.avail_out > 0) {
        if (z.avail_in == 0 && at < packed.size()) {
          // Input a piece at a time, so the pages released below are only those zlib has read.
          const std::size_t m = std::min<std::size_t>(kPiece, packed.size() - at);
          z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(packed.data() + at));
          z.avail_in = static_cast<uInt>(m);
          at += m;
        }
        const uInt before_in = z.avail_in, before_out = z.avail_out;
        const int rc = inflate(&z, Z_NO_FLUSH);
        if (rc == Z_STREAM_END && z.avail_out > 0) break;
        if ((rc != Z_OK && rc != Z_STREAM_END) ||
            (z.avail_in == before_in && z.avail_out == before_out))
          break;
      }
      if (z.avail_out != 0)
        throw data_error::at(where, 0, "a deflated entry does not inflate to its stated size");
      produced += n;
      const std::size_t read = at - z.avail_in;  // input zlib has consumed
      if (read - released >= kReleaseEvery) {
        file->release(base + released, read - released);
        released = read;
      }
      out = buffer;
    }
    if (check_crc) crc = crc32_update(crc, out.data(), out.size());
    return out;
  }

  void open_source(std::string_view bytes, std::size_t offset, bool deflate, std::uint64_t size) {
    packed = bytes;
    base = offset;
    deflated = deflate;
    inflated_size = size;
    if (deflated) {
      if (inflateInit2(&z, -MAX_WBITS) != Z_OK) throw data_error::at(where, 0, "zlib cannot start");
      z_open = true;
    }
  }

  // Reads the .npy header at the start of the source; checks the data's size against it.
  void read_header(std::uint64_t total_bytes) {
    if (total_bytes < 12) throw data_error::at(where, 0, "truncated (.npy header)");
    std::string head(take(12));
    const std::size_t header = npy_header_bytes(head, where);
    if (total_bytes < header) throw data_error::at(where, 0, "truncated (.npy header)");
    head += take(header - 12);
    info = read_npy_header(head, where);
    elements = elements_of(info.shape, where);
    const std::uint64_t want = static_cast<std::uint64_t>(elements) * dtype_size(info.dtype);
    if (total_bytes - header < want)
      throw data_error::at(where, 0,
                           "truncated (" + std::to_string(total_bytes - header) + " of " +
                               std::to_string(want) + " data bytes)");
  }

  template <class Out>
  void read(Out* out, std::size_t count) {
    if (static_cast<std::uint64_t>(elements - consumed) < count)
      throw data_error::at(where, 0, "read past the array's end (a reader's mistake)");
    if constexpr (std::is_integral_v<Out>) {
      if (info.dtype == array_dtype::f32 || info.dtype == array_dtype::f64)
        throw data_error::at(where, 0, "expected integers, the array holds floats");
    }
    const std::size_t size = dtype_size(info.dtype);
    while (count > 0) {
      const std::size_t n = std::min(count, kPiece / size);
      const std::string_view bytes = take(n * size);
      convert_elements(info.dtype, bytes.data(), out, n);
      out += n;
      count -= n;
      consumed += static_cast<std::int64_t>(n);
    }
  }
};

array_stream::array_stream(std::unique_ptr<state> s) : s_(std::move(s)) {}
array_stream::array_stream(array_stream&&) noexcept = default;
array_stream& array_stream::operator=(array_stream&&) noexcept = default;
array_stream::~array_stream() = default;

array_stream array_stream::of_npy(std::shared_ptr<const mapped_file> file) {
  auto s = std::make_unique<state>();
  s->where = file->name();
  s->file = file;
  s->open_source(file->bytes(), 0, false, file->bytes().size());
  s->read_header(file->bytes().size());
  return array_stream(std::move(s));
}

array_stream array_stream::of_npz(std::shared_ptr<const mapped_file> file,
                                  const std::string& name) {
  const auto entries = list_npz_entries(file->bytes(), file->name());
  const auto e = std::find_if(entries.begin(), entries.end(),
                              [&](const npz_entry& x) { return x.name == name; });
  if (e == entries.end()) {
    std::string have;
    for (const auto& x : entries)
      have += (have.empty() ? "" : ", ") + x.name;
    throw data_error::at(file->name(), 0,
                         "has no array '" + name + "' (it holds: " +
                             (have.empty() ? std::string("nothing") : have) + ")");
  }
  auto s = std::make_unique<state>();
  s->where = e->where;
  s->file = file;
  s->check_crc = true;
  s->want_crc = e->crc;
  s->open_source(e->data, static_cast<std::size_t>(e->data.data() - file->bytes().data()),
                 e->method == 8, e->size);
  s->read_header(e->size);
  return array_stream(std::move(s));
}

std::vector<std::string> array_stream::npz_names(const mapped_file& file) {
  std::vector<std::string> names;
  for (const auto& e : list_npz_entries(file.bytes(), file.name()))
    names.push_back(e.name);
  return names;
}

array_dtype array_stream::dtype() const {
  return s_->info.dtype;
}
const std::vector<std::int64_t>& array_stream::shape() const {
  return s_->info.shape;
}
std::int64_t array_stream::elements() const {
  return s_->elements;
}
const std::string& array_stream::where() const {
  return s_->where;
}
void array_stream::read(std::int64_t* out, std::size_t count) {
  s_->read(out, count);
}
void array_stream::read(float* out, std::size_t count) {
  s_->read(out, count);
}
void array_stream::read(double* out, std::size_t count) {
  s_->read(out, count);
}

void array_stream::skip(std::int64_t count) {
  state& s = *s_;
  if (count < 0 || count > s.elements - s.consumed)
    throw data_error::at(s.where, 0, "skip past the array's end (a reader's mistake)");
  const std::size_t size = dtype_size(s.info.dtype);
  if (!s.deflated) {
    s.at += static_cast<std::size_t>(count) * size;
    s.released = s.at;
    s.check_crc = false;  // bytes passed over are not hashed
  } else {
    for (std::int64_t left = count; left > 0;) {
      const auto n = static_cast<std::size_t>(
          std::min<std::int64_t>(left, static_cast<std::int64_t>(kPiece / size)));
      s.take(n * size);
      left -= static_cast<std::int64_t>(n);
    }
  }
  s.consumed += count;
}

void array_stream::finish() {
  state& s = *s_;
  if (!s.check_crc) return;
  // Whatever follows the elements (an entry may hold padding) is part of the checksum.
  const std::uint64_t total = s.deflated ? s.inflated_size : s.packed.size();
  const std::uint64_t read = s.deflated ? s.produced : s.at;
  for (std::uint64_t left = total - read; left > 0;) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, kPiece));
    s.take(n);
    left -= n;
  }
  if (s.crc != s.want_crc)
    throw data_error::at(s.where, 0, "its CRC-32 does not match (a damaged file)");
}

}  // namespace degnn
