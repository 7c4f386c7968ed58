// run_ptscotch_partition in a build without PT-Scotch or MPI: a settings error saying what to
// install.
#include "runtime/partition/ptscotch_partition.hpp"
#include "runtime/process/config_error.hpp"

namespace degnn {

bool ptscotch_available() {
  return false;
}

ptscotch_report run_ptscotch_partition(const ptscotch_settings&) {
  throw config_error(
      "partition: --method ptscotch needs a build with PT-Scotch and MPI (Debian: "
      "libptscotch-dev, libopenmpi-dev and openmpi-bin; scripts/setup.sh installs them), then "
      "cmake again");
}

}  // namespace degnn
