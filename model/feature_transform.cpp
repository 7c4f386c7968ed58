// Feature transforms.
#include "model/feature_transform.hpp"

#include <stdexcept>

namespace degnn {

void normalize_rows_l1(Matrix& features) {
#pragma omp parallel for schedule(static) if (features.rows() >= 4096)
  for (Eigen::Index r = 0; r < features.rows(); ++r) {
    const float sum = features.row(r).cwiseAbs().sum();
    if (sum > 0) features.row(r) /= sum;
  }
}

void apply_feature_transform(const std::string& name, Matrix& features) {
  if (name == "none") return;
  if (name == "row") {
    normalize_rows_l1(features);
    return;
  }
  throw std::invalid_argument("unknown feature transform '" + name + "' (none or row)");
}

}  // namespace degnn
