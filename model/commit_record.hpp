// The commit record of a coordinated cluster checkpoint (docs/design.md section 9): a small text
// file COMMIT in a replica's checkpoint folder naming the checkpoint file of the last step every
// replica confirmed, with its size and CRC-32. A checkpoint counts only once its record is there.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "model/checkpoint.hpp"

namespace degnn {

struct commit_record {
  std::uint64_t next_step = 0;   ///< global step the resumed run starts with
  std::uint64_t cluster_id = 0;  ///< the run's id (dataset and seed)
  std::int32_t parts = 0;        ///< partitions of the run
  std::string file;              ///< checkpoint file, beside the record
  std::uint64_t size = 0;
  std::uint32_t crc = 0;  ///< CRC-32 of the whole file

  bool operator==(const commit_record&) const = default;
};

/// Name of replica p's checkpoint folder inside a run's checkpoint folder.
std::filesystem::path replica_checkpoint_dir(const std::filesystem::path& dir, int part);
/// Name of the checkpoint file of the state before global step `next_step`.
std::string checkpoint_file_name(std::uint64_t next_step);

/// Writes dir/COMMIT durably (temporary file, fsync, rename), then removes the checkpoint files of
/// dir except r.file and the newest one before it. Throws data_error naming the file.
void write_commit_record(const std::filesystem::path& dir, const commit_record& r);
/// Reads dir/COMMIT; nothing when there is none. Throws data_error naming the file and line
/// when it is malformed.
std::optional<commit_record> read_commit_record(const std::filesystem::path& dir);

struct committed_checkpoint {
  commit_record record;
  std::filesystem::path folder;  ///< where the record was found
  checkpoint state;
};

/// The newest committed checkpoint under `dir`: dir/COMMIT itself, else the newest of
/// dir/part-*/COMMIT. Checks every replica's copy of that commit's file against its record, uses
/// the first intact one and restores each damaged or missing copy from it (saying so on stderr).
/// Throws data_error naming the folder when there is no commit, or every copy when none is intact.
committed_checkpoint load_committed_checkpoint(const std::filesystem::path& dir);

/// The checkpoint before global step `next_step` under `dir` (dir or its part-* folders), for a
/// node told by its seed which commit the cluster resumes from: every node holds that file once
/// any node committed it (phase 1 ends everywhere before any commit). The file's own checksum is
/// verified, and against a commit record that names it. Throws data_error naming the folder when
/// there is no such file, or the file when it is damaged.
committed_checkpoint load_checkpoint_of_step(const std::filesystem::path& dir,
                                             std::uint64_t next_step);

}  // namespace degnn
