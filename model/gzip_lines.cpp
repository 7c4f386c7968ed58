// Chunked gzip line reader and writer on top of zlib's gz* API.
#include "model/gzip_lines.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "model/data_error.hpp"

namespace degnn {

namespace {

std::string gz_message(gzFile gz) {
  int errnum = 0;
  const char* msg = gzerror(gz, &errnum);
  if (errnum == Z_ERRNO) return std::strerror(errno);
  return msg ? msg : "unknown zlib error";
}

}  // namespace

void read_lines_chunked(
    const std::filesystem::path& file,
    const std::function<void(std::span<const std::string_view>, std::int64_t)>& on_lines,
    std::size_t chunk_bytes) {
  const std::string name = file.string();
  if (!std::filesystem::exists(file)) throw data_error::at(name, 0, "file not found");
  gzFile gz = gzopen(name.c_str(), "rb");
  if (!gz) throw data_error::at(name, 0, std::string("cannot open: ") + std::strerror(errno));
  struct closer {
    gzFile g;
    ~closer() { gzclose(g); }
  } guard{gz};
  gzbuffer(gz, 1u << 18);

  // The buffer starts at 64 KiB and doubles while reads fill it, up to chunk_bytes: most files
  // are small (counts, splits, labels), and zeroing 8 MiB for each cost more than parsing them.
  std::vector<char> buf(std::min<std::size_t>(chunk_bytes, 1u << 16) + 1);
  std::size_t carry = 0;  // bytes of an incomplete line kept from the previous read
  std::int64_t next_line = 1;
  std::vector<std::string_view> lines;
  bool eof = false, last_read_filled = false;
  while (!eof) {
    if (carry == buf.size() - 1) {
      buf.resize(buf.size() * 2);  // one very long line
    } else if (last_read_filled && buf.size() - 1 < chunk_bytes) {
      buf.resize(std::min(2 * (buf.size() - 1), chunk_bytes) + 1);
    }
    const auto want = static_cast<unsigned>(buf.size() - 1 - carry);
    const int got = gzread(gz, buf.data() + carry, want);
    last_read_filled = got == static_cast<int>(want);
    if (got < 0) throw data_error::at(name, next_line, "corrupt gzip data: " + gz_message(gz));
    if (got == 0) {
      eof = true;
      int errnum = 0;
      gzerror(gz, &errnum);
      if (errnum != Z_OK) {
        throw data_error::at(name, next_line, "truncated or corrupt gzip: " + gz_message(gz));
      }
    }
    const std::size_t filled = carry + static_cast<std::size_t>(got);
    lines.clear();
    std::size_t start = 0;
    for (std::size_t i = 0; i < filled; ++i) {
      if (buf[i] != '\n') continue;
      std::size_t end = i;
      if (end > start && buf[end - 1] == '\r') --end;
      lines.emplace_back(buf.data() + start, end - start);
      start = i + 1;
    }
    if (eof && start < filled) {  // last line without a newline
      std::size_t end = filled;
      if (buf[end - 1] == '\r') --end;
      lines.emplace_back(buf.data() + start, end - start);
      start = filled;
    }
    if (!lines.empty()) {
      on_lines(lines, next_line);
      next_line += static_cast<std::int64_t>(lines.size());
    }
    carry = filled - start;
    if (carry > 0 && start > 0) std::memmove(buf.data(), buf.data() + start, carry);
  }
}

gzip_writer::gzip_writer(const std::filesystem::path& file, int level) : file_(file) {
  const std::string mode = "wb" + std::to_string(level);
  gz_ = gzopen(file.string().c_str(), mode.c_str());
  if (!gz_)
    throw data_error::at(file.string(), 0, std::string("cannot create: ") + std::strerror(errno));
  gzbuffer(static_cast<gzFile>(gz_), 1u << 20);
}

gzip_writer::~gzip_writer() {
  if (gz_) gzclose(static_cast<gzFile>(gz_));
}

void gzip_writer::write(std::string_view text) {
  auto* gz = static_cast<gzFile>(gz_);
  while (!text.empty()) {
    const auto n = static_cast<unsigned>(std::min<std::size_t>(text.size(), 1u << 30));
    if (gzwrite(gz, text.data(), n) != static_cast<int>(n)) {
      throw data_error::at(file_.string(), 0, "write failed: " + gz_message(gz));
    }
    text.remove_prefix(n);
  }
}

void gzip_writer::close() {
  if (!gz_) return;
  const int rc = gzclose(static_cast<gzFile>(gz_));
  gz_ = nullptr;
  if (rc != Z_OK) throw data_error::at(file_.string(), 0, "closing the gzip stream failed");
}

}  // namespace degnn
