// Input feature transforms applied once after loading (`--normalize-features`): raw bag-of-words
// counts make the first layer's inputs large, so the first loss starts far above ln(classes).
#pragma once

#include <string>

#include "model/tensor.hpp"

namespace degnn {

/// Each row divided by the sum of its absolute values (the Planetoid preprocessing of GCN); an
/// all-zero row stays zero.
void normalize_rows_l1(Matrix& features);

/// Applies the transform named by `--normalize-features`: "none" or "row". Throws
/// std::invalid_argument for another name.
void apply_feature_transform(const std::string& name, Matrix& features);

}  // namespace degnn
