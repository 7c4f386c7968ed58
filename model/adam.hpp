// Adam optimiser (Kingma & Ba) with optional L2 weight decay added to the gradient (PyTorch's
// Adam(weight_decay=...), not AdamW). Its state can be read and restored for checkpoints.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/tensor.hpp"

namespace degnn {

struct adam_options {
  float lr = 0.01f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;  ///< L2: g += weight_decay * p before the moments

  bool operator==(const adam_options&) const = default;
};

/// Moments (one pair per parameter matrix, same shapes) and the number of steps taken.
struct adam_state {
  std::int64_t step = 0;
  std::vector<Matrix> m, v;
};

class adam {
 public:
  explicit adam(const adam_options& options = {}) : options_(options) {}

  /// One update of every params[i] (any shape) from grads[i] (same shape):
  ///   g = grad + wd p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
  ///   p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps).
  /// The moments are created (zero) on the first step; later calls must pass the same shapes.
  void step(std::span<Matrix* const> params, std::span<Matrix* const> grads);

  const adam_options& options() const { return options_; }
  void set_options(const adam_options& options) { options_ = options; }
  const adam_state& state() const { return state_; }
  void set_state(adam_state state) { state_ = std::move(state); }

 private:
  adam_options options_;
  adam_state state_;
};

}  // namespace degnn
