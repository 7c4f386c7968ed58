// Streaming a partition set's files from the seed to a node that lacks them, so nodes need no
// shared filesystem: the seed lists its files with sizes and CRC-32s (the manifest) and serves
// chunks of them; a node fetches the files it lacks or holds with another checksum, chunk by
// chunk into FILE.partial (a restarted node resumes there), asks again for a damaged chunk, and
// renames the file into place once its checksum is the manifest's. A node with the right files
// downloads nothing.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "serialization/wire_files.hpp"

namespace degnn {

/// partitions.meta, owner.bin and every part-K/partition.bin of the set in `dir`.
wire::file_manifest manifest_of(const std::filesystem::path& dir);

/// The manifest entry (size, CRC-32) of dir/path; throws when it cannot be read.
wire::file_entry entry_of(const std::filesystem::path& dir, const std::string& path);

/// A seed's manifest lists, under this prefix, files of its checkpoint folder: the commit a
/// replacement node restores (runtime/node/node_recovery.hpp).
inline constexpr const char* kSeedCheckpointPrefix = "checkpoint/";

/// The seed's side: the chunk asked for, of a file of the manifest (an error for anything else).
wire::file_chunk read_chunk(const std::filesystem::path& dir, const wire::file_manifest& m,
                            const wire::file_chunk_request& r);

/// Asks the seed for chunks, all at once: encoded requests in, encoded chunks out in the same
/// order; throws on failure.
using chunk_fetcher =
    std::function<std::vector<std::vector<char>>(const std::vector<std::vector<char>>&)>;

struct transfer_stats {
  std::uint64_t bytes = 0;  ///< downloaded this time
  double seconds = 0;
  int files_fetched = 0;
  int files_present = 0;   ///< already there with the right checksum
  int chunks_retried = 0;  ///< damaged on the way and asked for again
};

/// Brings `paths` (entries of `m`) into `dir`. `chunk_bytes` per request, `window` requests in
/// flight (CAF moves a few 256 KiB messages faster than one large one: measured 120 MB/s on
/// loopback one at a time against 30 MB/s with 4 MiB); a damaged chunk is asked for again, up to
/// 3 times. `log` gets one line per fetched file with its MB/s.
transfer_stats fetch_files(
    const std::filesystem::path& dir, const wire::file_manifest& m,
    const std::vector<std::string>& paths, const chunk_fetcher& fetch, const wire::context& ctx,
    std::uint32_t chunk_bytes, int window, const std::function<void(const std::string&)>& log,
    const std::function<void(std::uint64_t done, std::uint64_t total)>& progress = {});

/// The path of partition p's file in a manifest.
std::string partition_file(int p);

}  // namespace degnn
