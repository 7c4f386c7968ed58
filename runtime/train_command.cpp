// TEMPORARY while the model layer lands.
#include <stdexcept>
#include "runtime/commands.hpp"
namespace degnn {
int run_train(int, char**) {
  throw std::runtime_error("train: not built yet");
}
int run_bench(int, char**) {
  throw std::runtime_error("bench: not built yet");
}
int run_partition(int, char**) {
  throw std::runtime_error("partition: not built yet");
}
int describe_partition_set(const char*) {
  throw std::runtime_error("partitions: not built yet");
}
}  // namespace degnn
