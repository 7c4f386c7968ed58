// TEMPORARY while the model layer lands.
#include <stdexcept>

#include "runtime/commands.hpp"
namespace degnn {
int run_train(int, char**) { throw std::runtime_error("train: not built yet"); }
int bench_train(int, char**) { throw std::runtime_error("bench train: not built yet"); }
}  // namespace degnn
