// Adam update, element-wise; bias corrections computed in double once per step.
#include "model/adam.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace degnn {

void adam::step(std::span<Matrix* const> params, std::span<Matrix* const> grads) {
  if (params.size() != grads.size())
    throw std::invalid_argument("adam::step: params and grads differ in count");
  if (state_.m.empty()) {
    for (Matrix* p : params) {
      state_.m.push_back(Matrix::Zero(p->rows(), p->cols()));
      state_.v.push_back(Matrix::Zero(p->rows(), p->cols()));
    }
  }
  if (state_.m.size() != params.size())
    throw std::invalid_argument("adam::step: parameter count changed since the first step");
  ++state_.step;
  const double t = static_cast<double>(state_.step);
  const float c1 = static_cast<float>(1.0 / (1.0 - std::pow(double{options_.beta1}, t)));
  const float c2 = static_cast<float>(1.0 / (1.0 - std::pow(double{options_.beta2}, t)));
  const float b1 = options_.beta1, b2 = options_.beta2, lr = options_.lr, eps = options_.eps,
              wd = options_.weight_decay;
  for (std::size_t i = 0; i < params.size(); ++i) {
    Matrix& p = *params[i];
    const Matrix& g = *grads[i];
    Matrix& m = state_.m[i];
    Matrix& v = state_.v[i];
    if (g.rows() != p.rows() || g.cols() != p.cols() || m.rows() != p.rows() ||
        m.cols() != p.cols())
      throw std::invalid_argument("adam::step: shape mismatch at parameter " + std::to_string(i));
    float* pd = p.data();
    const float* gd = g.data();
    float* md = m.data();
    float* vd = v.data();
    const Eigen::Index n = p.size();
#pragma omp parallel for schedule(static) if (n > 65536)
    for (Eigen::Index k = 0; k < n; ++k) {
      const float gk = gd[k] + wd * pd[k];
      md[k] = b1 * md[k] + (1.0f - b1) * gk;
      vd[k] = b2 * vd[k] + (1.0f - b2) * gk * gk;
      pd[k] -= lr * (md[k] * c1) / (std::sqrt(vd[k] * c2) + eps);
    }
  }
}

}  // namespace degnn
