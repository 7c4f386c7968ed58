// Cap'n Proto encoding and validating decoding of the partition-file transfer messages.
#include "serialization/wire_files.hpp"

#include <zlib.h>

#include <algorithm>

#include "serialization/degnn.capnp.h"
#include "serialization/wire_codec.hpp"

namespace degnn::wire {

using namespace codec;

namespace {

std::string checked_path(const reader& rd, capnp::Text::Reader t) {
  std::string p = t.cStr();
  if (p.size() > 256 || !safe_relative_path(p))
    rd.fail("path '" + p.substr(0, 256) + "' leaves the partition folder or is malformed");
  return p;
}

}  // namespace

const file_entry* file_manifest::find(const std::string& path) const {
  for (const auto& f : files)
    if (f.path == path) return &f;
  return nullptr;
}

std::uint32_t crc32_of(std::span<const char> data, std::uint32_t crc) {
  return static_cast<std::uint32_t>(
      ::crc32_z(crc, reinterpret_cast<const Bytef*>(data.data()), data.size()));
}

bool safe_relative_path(const std::string& path) {
  if (path.empty() || path.front() == '/') return false;
  size_t start = 0;
  while (start <= path.size()) {
    const auto slash = path.find('/', start);
    const std::string part =
        path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    for (char ch : part)
      if (ch == '\0' || ch == '\\') return false;
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return true;
}

bytes encode(const context& c, const file_manifest& m) {
  capnp::MallocMessageBuilder mb;
  auto r = mb.initRoot<FileManifest>();
  fill_header(r, c, {0, 0});
  auto files = r.initFiles(static_cast<unsigned>(m.files.size()));
  for (unsigned i = 0; i < m.files.size(); ++i) {
    files[i].setPath(m.files[i].path);
    files[i].setSize(m.files[i].size);
    files[i].setCrc32(m.files[i].crc32);
  }
  return to_bytes(mb);
}

file_manifest decode_file_manifest(const context& c, std::span<const char> b) {
  return guarded("file manifest", [&] {
    reader rd(c, b, "file manifest");
    auto r = rd.root_of_any_cluster<FileManifest>();
    file_manifest m;
    if (r.getFiles().size() > 65536) rd.fail("more than 65536 files");
    for (auto f : r.getFiles()) {
      m.files.push_back({checked_path(rd, f.getPath()), f.getSize(), f.getCrc32()});
      if (std::count_if(m.files.begin(), m.files.end(),
                        [&](const file_entry& e) { return e.path == m.files.back().path; }) > 1)
        rd.fail("file '" + m.files.back().path + "' listed twice");
    }
    return m;
  });
}

bytes encode(const context& c, const file_chunk_request& m) {
  capnp::MallocMessageBuilder mb;
  auto r = mb.initRoot<FileChunkRequest>();
  fill_header(r, c, {0, 0});
  r.setPath(m.path);
  r.setOffset(m.offset);
  r.setLength(m.length);
  return to_bytes(mb);
}

file_chunk_request decode_file_chunk_request(const context& c, std::span<const char> b) {
  return guarded("file chunk request", [&] {
    reader rd(c, b, "file chunk request");
    auto r = rd.root_of_any_cluster<FileChunkRequest>();
    file_chunk_request m{checked_path(rd, r.getPath()), r.getOffset(), r.getLength()};
    if (m.length == 0 || m.length > kMaxChunkBytes)
      rd.fail("chunk length " + std::to_string(m.length) + " (1 .. 1 MiB)");
    return m;
  });
}

bytes encode(const context& c, const file_chunk& m) {
  capnp::MallocMessageBuilder mb;
  auto r = mb.initRoot<FileChunk>();
  fill_header(r, c, {0, 0});
  r.setPath(m.path);
  r.setOffset(m.offset);
  r.setData(kj::arrayPtr(reinterpret_cast<const kj::byte*>(m.data.data()), m.data.size()));
  r.setCrc32(crc32_of(m.data));
  return to_bytes(mb);
}

file_chunk decode_file_chunk(const context& c, std::span<const char> b) {
  return guarded("file chunk", [&] {
    reader rd(c, b, "file chunk");
    auto r = rd.root_of_any_cluster<FileChunk>();
    file_chunk m;
    m.path = checked_path(rd, r.getPath());
    m.offset = r.getOffset();
    const auto data = r.getData();
    if (data.size() > kMaxChunkBytes) rd.fail("chunk larger than 1 MiB");
    m.data.assign(reinterpret_cast<const char*>(data.begin()),
                  reinterpret_cast<const char*>(data.end()));
    if (crc32_of(m.data) != r.getCrc32())
      rd.fail("chunk of '" + m.path + "' at " + std::to_string(m.offset) +
              " does not match its CRC-32 (damaged on the way)");
    return m;
  });
}

}  // namespace degnn::wire
