// The error a bad setting raises anywhere in the runtime: an option value, a config-file line, a
// settings file or a checkpoint that does not fit the run. Its message names what is wrong and
// where; `degnn` prints it and ends with status 1.
#pragma once

#include <stdexcept>

namespace degnn {

class config_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace degnn
