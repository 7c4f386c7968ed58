// Partition-file manifests, chunk reads and the fetching loop.
#include "runtime/node/partition_transfer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <stdexcept>

#include "model/durable_file.hpp"
#include "model/partition_store.hpp"

namespace degnn {

namespace fs = std::filesystem;

namespace {

// Size and CRC-32 of a file, or nullopt when it cannot be read.
std::optional<std::pair<std::uint64_t, std::uint32_t>> checksum(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  std::vector<char> buf(1 << 20);
  std::uint64_t size = 0;
  std::uint32_t crc = 0;
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto n = static_cast<size_t>(in.gcount());
    crc = wire::crc32_of(std::span<const char>(buf.data(), n), crc);
    size += n;
  }
  if (in.bad()) return std::nullopt;
  return std::make_pair(size, crc);
}

}  // namespace

std::string partition_file(int p) {
  return "part-" + std::to_string(p) + "/partition.bin";
}

wire::file_manifest manifest_of(const fs::path& dir) {
  const partition_meta meta = load_partition_meta(dir);
  std::vector<std::string> paths = {kPartitionMetaName, "owner.bin"};
  for (int p = 0; p < meta.num_parts; ++p)
    paths.push_back(partition_file(p));
  wire::file_manifest m;
  for (const auto& path : paths)
    m.files.push_back(entry_of(dir, path));
  return m;
}

wire::file_entry entry_of(const fs::path& dir, const std::string& path) {
  const auto sum = checksum(dir / path);
  if (!sum) throw std::runtime_error("cannot read " + (dir / path).string());
  return {path, sum->first, sum->second};
}

wire::file_chunk read_chunk(const fs::path& dir, const wire::file_manifest& m,
                            const wire::file_chunk_request& r) {
  const wire::file_entry* f = m.find(r.path);
  if (!f) throw std::runtime_error("'" + r.path + "' is not a file of the partition set");
  if (r.offset > f->size) throw std::runtime_error("offset past the end of " + r.path);
  const std::uint64_t n = std::min<std::uint64_t>(r.length, f->size - r.offset);
  wire::file_chunk c{r.path, r.offset, std::vector<char>(n)};
  const int fd = ::open((dir / r.path).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + (dir / r.path).string());
  const ssize_t got = ::pread(fd, c.data.data(), n, static_cast<off_t>(r.offset));
  ::close(fd);
  if (got != static_cast<ssize_t>(n)) throw std::runtime_error("short read of " + r.path);
  return c;
}

transfer_stats fetch_files(const fs::path& dir, const wire::file_manifest& m,
                           const std::vector<std::string>& paths, const chunk_fetcher& fetch,
                           const wire::context& ctx, std::uint32_t chunk_bytes, int window,
                           const std::function<void(const std::string&)>& log,
                           const std::function<void(std::uint64_t, std::uint64_t)>& progress) {
  transfer_stats st;
  std::uint64_t total = 0;
  for (const auto& path : paths)
    if (const auto* f = m.find(path)) total += f->size;
  const auto start = std::chrono::steady_clock::now();
  for (const auto& path : paths) {
    const wire::file_entry* f = m.find(path);
    if (!f) throw std::runtime_error("the seed's manifest has no " + path);
    const fs::path target = dir / path;
    if (const auto sum = checksum(target);
        sum && sum->first == f->size && sum->second == f->crc32) {
      ++st.files_present;
      continue;
    }
    fs::create_directories(target.parent_path());
    // Named after the CRC it must reach: a partial file of another version is never resumed.
    char crc_hex[9];
    std::snprintf(crc_hex, sizeof crc_hex, "%08x", f->crc32);
    const fs::path partial = target.string() + "." + crc_hex + ".partial";
    // Resume after the bytes an earlier, interrupted fetch kept (checked by the final CRC).
    std::uint64_t offset = 0;
    if (fs::exists(partial)) {
      offset = fs::file_size(partial);
      if (offset > f->size) {
        fs::remove(partial);
        offset = 0;
      }
    }
    const std::uint64_t resumed_at = offset;
    const auto t0 = std::chrono::steady_clock::now();
    {
      std::ofstream out(partial, std::ios::binary | std::ios::app);
      if (!out) throw std::runtime_error("cannot write " + partial.string());
      while (offset < f->size) {
        // The next window of chunks, asked for at once, written in order.
        std::vector<wire::file_chunk_request> reqs;
        for (std::uint64_t at = offset; at < f->size && static_cast<int>(reqs.size()) < window;
             at += chunk_bytes) {
          reqs.push_back(
              {path, at,
               static_cast<std::uint32_t>(std::min<std::uint64_t>(chunk_bytes, f->size - at))});
        }
        std::vector<std::vector<char>> encoded;
        for (const auto& r : reqs)
          encoded.push_back(wire::encode(ctx, r));
        std::vector<std::vector<char>> replies = fetch(encoded);
        for (size_t i = 0; i < reqs.size(); ++i) {
          wire::file_chunk chunk;
          for (int attempt = 1;; ++attempt) {
            try {
              chunk = wire::decode_file_chunk(ctx, replies[i]);
              if (chunk.path != path || chunk.offset != reqs[i].offset ||
                  chunk.data.size() != reqs[i].length)
                throw wire::wire_error("the seed answered with another chunk");
              break;
            } catch (const wire::wire_error& e) {
              if (attempt == 3) throw std::runtime_error(path + ": " + e.what() + " (3 times)");
              ++st.chunks_retried;
              if (log) log(path + ": " + e.what() + "; asking again");
              replies[i] = fetch({encoded[i]}).at(0);
            }
          }
          out.write(chunk.data.data(), static_cast<std::streamsize>(chunk.data.size()));
          if (!out) throw std::runtime_error("cannot write " + partial.string());
          offset += chunk.data.size();
          st.bytes += chunk.data.size();
        }
        if (progress) progress(st.bytes, total);
      }
      out.close();
      if (!out) throw std::runtime_error("cannot write " + partial.string());
    }
    const auto sum = checksum(partial);
    if (!sum || sum->second != f->crc32) {
      fs::remove(partial);  // a resumed prefix that was not the seed's: start over next time
      throw std::runtime_error(path + ": the fetched file's CRC-32 is not the seed's");
    }
    if (!sync_path(partial)) throw std::runtime_error("cannot sync " + partial.string());
    fs::rename(partial, target);
    sync_path(target.parent_path());
    ++st.files_fetched;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (log && f->size - resumed_at >= (1u << 20)) {
      char line[256];
      std::snprintf(line, sizeof line, "fetched %s: %.1f MB in %.2f s (%.0f MB/s)%s", path.c_str(),
                    static_cast<double>(f->size - resumed_at) / 1e6, s,
                    static_cast<double>(f->size - resumed_at) / 1e6 / std::max(s, 1e-9),
                    resumed_at ? (", resumed at byte " + std::to_string(resumed_at)).c_str() : "");
      log(line);
    }
  }
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return st;
}

}  // namespace degnn
