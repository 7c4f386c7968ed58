// The validation accuracy of every evaluated epoch of a cluster run, kept beside its checkpoints
// (VALIDATION in --checkpoint-dir) so that a run resumed from a commit reports the best
// validation epoch of the whole run, as the uninterrupted run does, not only of its own epochs.
#pragma once

#include <filesystem>
#include <vector>

namespace degnn {

struct validation_point {
  int epoch = 0;  ///< 1-based
  double valid = 0, test = 0;
  bool operator==(const validation_point&) const = default;
};

inline constexpr const char* kValidationFileName = "VALIDATION";

/// The points of `file` for epochs 1 .. last_epoch (a later one belongs to an epoch the commit
/// resumed from did not finish); nothing when there is no file. Throws data_error naming the file
/// and line when it is malformed.
std::vector<validation_point> read_validation_history(const std::filesystem::path& file,
                                                      int last_epoch);

/// Writes `points` to `file` durably (temporary file, fsync, rename), exact to the bit.
void write_validation_history(const std::filesystem::path& file,
                              const std::vector<validation_point>& points);

}  // namespace degnn
