// Settings that need the run's shape before they are final.
#include "runtime/train/train_settings.hpp"

#include <string>

#include "runtime/process/config_error.hpp"

namespace degnn {

void resolve_batch_size(train_settings& s, int workers) {
  if (s.global_batch_size == 0) return;
  if (s.global_batch_size % workers != 0) {
    throw config_error("--global-batch-size " + std::to_string(s.global_batch_size) +
                       " is not a multiple of the " + std::to_string(workers) + " workers");
  }
  s.batch_size = s.global_batch_size / workers;
  s.global_batch_size = 0;
}

}  // namespace degnn
