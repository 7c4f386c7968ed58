// Tests of model/feature_transform.hpp against a direct computation.
#include "model/feature_transform.hpp"

#include <gtest/gtest.h>

using namespace degnn;

TEST(FeatureTransform, RowNormalisationDividesEachRowByItsAbsoluteSum) {
  Matrix m(3, 4);
  m << 1, 3, 0, 4,  //
      0, 0, 0, 0,   //
      -2, 2, 0, 0;
  const Matrix raw = m;
  apply_feature_transform("row", m);
  for (Eigen::Index r = 0; r < m.rows(); ++r) {
    const float sum = raw.row(r).cwiseAbs().sum();
    for (Eigen::Index c = 0; c < m.cols(); ++c)
      EXPECT_FLOAT_EQ(m(r, c), sum > 0 ? raw(r, c) / sum : 0.0f) << r << "," << c;
  }
  EXPECT_FLOAT_EQ(m.row(0).sum(), 1.0f);
  Matrix same = raw;
  apply_feature_transform("none", same);
  EXPECT_TRUE(same == raw);
  EXPECT_THROW(apply_feature_transform("column", same), std::invalid_argument);
}
