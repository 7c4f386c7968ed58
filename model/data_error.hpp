// The exception thrown for malformed input data (datasets, caches, partitions, configs): its
// message always names the file and, where there is one, the line and field.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace degnn {

class data_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;

  /// "FILE:LINE: WHAT" (LINE is 1-based; 0 means the whole file).
  static data_error at(const std::string& file, std::int64_t line, const std::string& what) {
    if (line <= 0) return data_error(file + ": " + what);
    return data_error(file + ":" + std::to_string(line) + ": " + what);
  }
};

}  // namespace degnn
