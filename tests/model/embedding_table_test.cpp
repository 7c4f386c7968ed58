// Tests of model/embedding_table.hpp: rows are kept as the quantizer codes them, with their
// versions, and a put changes only the rows it names.
#include "model/embedding_table.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

using namespace degnn;

namespace {

Matrix ramp(Eigen::Index n, Eigen::Index cols, float scale) {
  Matrix m(n, cols);
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j)
      m(i, j) = scale * static_cast<float>((i + 1) * (j + 3) % 11) - 2.0f;
  return m;
}

/// Row `r` of level as a reader decodes it.
Matrix read(embedding_table& t, int level, node_id r) {
  quantized_rows q;
  t.append_row(level, r, q);
  return quantizer(t.width(level), t.bits()).decode(q.codes, q.row_min, q.row_scale);
}

}  // namespace

TEST(EmbeddingTable, KeepsRowsAsTheQuantizerCodesThemWithTheirVersions) {
  for (int bits : {32, 16, 8, 4, 2}) {
    SCOPED_TRACE("bits " + std::to_string(bits));
    embedding_table t(5, {6}, bits, rounding::nearest);
    EXPECT_FALSE(t.holds(1));
    const Matrix x = ramp(5, 6, 0.37f);
    t.init(1, x, 0);
    ASSERT_TRUE(t.holds(1));
    // Each row decodes as the quantizer codes it on its own: per-row min and scale.
    const quantizer q(6, bits);
    for (node_id r = 0; r < 5; ++r) {
      std::vector<std::uint8_t> codes;
      std::vector<float> mn, sc;
      q.encode(x.row(r), codes, mn, sc);
      EXPECT_EQ(read(t, 1, r), q.decode(codes, mn, sc));
      EXPECT_EQ(t.version(1, r), 0u);
    }
    const node_id changed[] = {3, 1};
    const Matrix y = ramp(2, 6, -0.5f);
    t.put(1, changed, y, 7);
    EXPECT_EQ(t.version(1, 3), 7u);
    EXPECT_EQ(t.version(1, 1), 7u);
    EXPECT_EQ(t.version(1, 0), 0u);
    std::vector<std::uint8_t> codes;
    std::vector<float> mn, sc;
    q.encode(y.row(0), codes, mn, sc);
    EXPECT_EQ(read(t, 1, 3), q.decode(codes, mn, sc));
    q.encode(x.row(2), codes, mn, sc);
    EXPECT_EQ(read(t, 1, 2), q.decode(codes, mn, sc)) << "a row the put did not name changed";
  }
}

TEST(EmbeddingTable, RefusesLevelsShapesAndRowsItDoesNotKeep) {
  embedding_table t(4, {3, 3}, 8, rounding::nearest);
  const node_id one[] = {0};
  EXPECT_THROW(t.put(1, one, ramp(1, 3, 1), 1), std::invalid_argument) << "put before init";
  EXPECT_THROW(t.init(1, ramp(3, 3, 1), 0), std::invalid_argument) << "too few rows";
  EXPECT_THROW(t.init(3, ramp(4, 3, 1), 0), std::invalid_argument) << "a level not kept";
  EXPECT_THROW(t.init(0, ramp(4, 3, 1), 0), std::invalid_argument) << "level 0 is the features";
  t.init(2, ramp(4, 3, 1), 0);
  const node_id outside[] = {4};
  EXPECT_THROW(t.put(2, outside, ramp(1, 3, 1), 1), std::invalid_argument);
  EXPECT_THROW(t.put(2, one, ramp(1, 2, 1), 1), std::invalid_argument) << "wrong width";
  EXPECT_THROW(embedding_table(4, {3}, 5, rounding::nearest), std::invalid_argument);
}

// The history set-up hands its rows over as a buffer: the same table as init from a matrix, and
// a buffer of the wrong size is refused.
TEST(EmbeddingTable, TakesOverARowMajorBufferAsInitFromAMatrixWould) {
  const Matrix x = ramp(4, 3, 0.61f);
  embedding_table copied(4, {3}, 8, rounding::nearest), taken(4, {3}, 8, rounding::nearest);
  copied.init(1, x, 2);
  taken.init(1, std::vector<float>(x.data(), x.data() + x.size()), 2);
  for (node_id r = 0; r < 4; ++r) {
    EXPECT_EQ(read(taken, 1, r), read(copied, 1, r));
    EXPECT_EQ(taken.version(1, r), 2u);
  }
  EXPECT_THROW(taken.init(1, std::vector<float>(11), 3), std::invalid_argument);
  EXPECT_EQ(taken.version(1, 0), 2u) << "a refused init changed the table";
}
