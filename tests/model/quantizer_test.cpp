// Tests of model/quantizer.hpp: round-trip error bounds per bit width (nearest and stochastic),
// unbiasedness of stochastic rounding, the packed layout, constant rows, determinism.
#include "model/quantizer.hpp"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>

using namespace degnn;

namespace {

constexpr int kQuantizedBits[] = {16, 8, 4, 2};

// Rows of very different ranges and offsets, as embeddings after ReLU or not look.
Matrix varied_rows(int n, int d, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.f, 1.f);
  Matrix x(n, d);
  for (int i = 0; i < n; ++i) {
    const float mag = std::pow(10.f, static_cast<float>(i % 7) - 3.f);
    const float off = (i % 3 == 0) ? 0.f : g(rng) * 5.f * mag;
    for (int j = 0; j < d; ++j)
      x(i, j) = off + mag * g(rng);
  }
  return x;
}

// Float slack of encode + decode for a row: x' carries a relative error of a few ulps of L, which
// is a few ulps of the row's magnitude in x units.
float float_slack(const Matrix& x, int i) {
  return 8.f * FLT_EPSILON * x.row(i).cwiseAbs().maxCoeff();
}

struct round_trip {
  std::vector<std::uint8_t> codes;
  std::vector<float> mins, scales;
  Matrix y;
};

round_trip run(const quantizer& q, const Matrix& x, std::uint64_t seed = 0) {
  round_trip r;
  q.encode(x, r.codes, r.mins, r.scales, seed);
  r.y = q.decode(r.codes, r.mins, r.scales);
  return r;
}

}  // namespace

TEST(Quantizer, ThirtyTwoBitsIsBitExactRawFloats) {
  const Matrix x = varied_rows(50, 13, 1);
  quantizer q(13, 32);
  EXPECT_EQ(q.code_size(), 13u * 4u);
  const auto r = run(q, x);
  EXPECT_TRUE(r.mins.empty() && r.scales.empty());
  EXPECT_EQ(std::memcmp(r.codes.data(), x.data(), r.codes.size()), 0);
  EXPECT_TRUE(r.y == x);
  std::printf("bits 32: max abs error %g\n", static_cast<double>((r.y - x).cwiseAbs().maxCoeff()));
}

TEST(Quantizer, NearestRoundingErrsAtMostHalfAStepPerBitWidth) {
  const int n = 301, d = 67;
  const Matrix x = varied_rows(n, d, 2);
  for (const int bits : kQuantizedBits) {
    quantizer q(d, bits, rounding::nearest);
    const auto r = run(q, x);
    ASSERT_EQ(r.mins.size(), static_cast<size_t>(n));
    double max_abs = 0, max_ratio = 0;
    for (int i = 0; i < n; ++i) {
      const float scale = r.scales[i];
      const float mx = x.row(i).maxCoeff(), mn = x.row(i).minCoeff();
      EXPECT_EQ(r.mins[i], mn);
      EXPECT_FLOAT_EQ(scale, (mx - mn) / static_cast<float>(q.levels()));
      for (int j = 0; j < d; ++j) {
        const float e = std::abs(r.y(i, j) - x(i, j));
        ASSERT_LE(e, 0.5f * scale + float_slack(x, i))
            << "bits " << bits << " at " << i << "," << j;
        max_abs = std::max(max_abs, static_cast<double>(e));
        max_ratio = std::max(max_ratio, static_cast<double>(e / scale));
      }
    }
    std::printf("bits %2d nearest: max abs error %.3g, max error / scale %.6f (bound 0.5)\n", bits,
                max_abs, max_ratio);
  }
}

TEST(Quantizer, StochasticRoundingErrsLessThanAStepAndIsUnbiased) {
  const int n = 6, d = 37, draws = 4000;
  const Matrix x = varied_rows(n, d, 3);
  for (const int bits : kQuantizedBits) {
    quantizer q(d, bits, rounding::stochastic);
    Eigen::MatrixXd sum = Eigen::MatrixXd::Zero(n, d);  // float would lose the 16-bit steps
    std::vector<float> scales;
    double max_err_ratio = 0;
    for (int s = 0; s < draws; ++s) {
      const auto r = run(q, x, static_cast<std::uint64_t>(s) * 7919 + 1);
      scales = r.scales;
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < d; ++j) {
          const float e = std::abs(r.y(i, j) - x(i, j));
          ASSERT_LT(e, r.scales[i] + float_slack(x, i)) << "bits " << bits;
          max_err_ratio = std::max(max_err_ratio, static_cast<double>(e / r.scales[i]));
        }
      }
      sum += r.y.cast<double>();
    }
    // Each decoded value lies in an interval of width `scale` around x, so by Hoeffding
    // P(|mean - x| > t) <= 2 exp(-2 draws t^2 / scale^2). Bound all n*d values at once with
    // failure probability 1e-6 (the test is deterministic; this says how far off is suspicious).
    const double t_over_scale = std::sqrt(std::log(2.0 * n * d / 1e-6) / (2.0 * draws));
    double worst = 0, signed_sum = 0;
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < d; ++j) {
        const double dev = (sum(i, j) / draws - static_cast<double>(x(i, j))) / scales[i];
        worst = std::max(worst, std::abs(dev));
        signed_sum += dev;
        EXPECT_LE(std::abs(dev), t_over_scale + 1e-4) << "bits " << bits << " at " << i << "," << j;
      }
    }
    std::printf(
        "bits %2d stochastic: max error / scale %.4f (bound 1); |mean of %d - x| / scale max %.4f "
        "(Hoeffding bound %.4f), mean signed %.2e\n",
        bits, max_err_ratio, draws, worst, t_over_scale, signed_sum / (n * d));
  }
}

TEST(Quantizer, StochasticRoundingIsLessBiasedThanNearestOnAnOffGridValue) {
  // 0.3 of a step above a grid point: nearest always rounds down (bias -0.3 step), stochastic
  // rounds up 30% of the time.
  quantizer nearest(3, 2, rounding::nearest), stoch(3, 2, rounding::stochastic);
  Matrix x(1, 3);
  x << 0.f, 1.3f, 3.f;
  double sum = 0;
  const int draws = 20000;
  for (int s = 0; s < draws; ++s)
    sum += run(stoch, x, static_cast<std::uint64_t>(s)).y(0, 1);
  EXPECT_FLOAT_EQ(run(nearest, x).y(0, 1), 1.f);
  EXPECT_NEAR(sum / draws, 1.3, 0.02);
  std::printf("mean of %d stochastic decodes of 1.3 on a unit grid: %.4f\n", draws, sum / draws);
}

TEST(Quantizer, CodeSizeIsTheCeilingOfDimTimesBitsOverEight) {
  for (const int bits : {32, 16, 8, 4, 2}) {
    for (int d = 1; d <= 33; ++d) {
      EXPECT_EQ(quantizer(d, bits).code_size(), static_cast<size_t>((d * bits + 7) / 8))
          << "d " << d << " bits " << bits;
    }
  }
}

TEST(Quantizer, PacksLowBitsFirst) {
  // A row 0..3 with 2 bits has min 0, scale 1 and codes 0, 1, 2, 3: one byte 0b11'10'01'00.
  quantizer q2(4, 2);
  Matrix x(1, 4);
  x << 0.f, 1.f, 2.f, 3.f;
  auto r = run(q2, x);
  ASSERT_EQ(r.codes.size(), 1u);
  EXPECT_EQ(r.codes[0], 0xE4);
  EXPECT_TRUE(r.y == x);
  // Odd width with 4 bits: codes 0, 15, 5 -> bytes 0xF0, 0x05 (padding nibble zero).
  quantizer q4(3, 4);
  Matrix z(1, 3);
  z << 0.f, 15.f, 5.f;
  r = run(q4, z);
  ASSERT_EQ(r.codes.size(), 2u);
  EXPECT_EQ(r.codes[0], 0xF0);
  EXPECT_EQ(r.codes[1], 0x05);
  EXPECT_TRUE(r.y == z);
  // 16 bits: little-endian uint16.
  quantizer q16(2, 16);
  Matrix w(1, 2);
  w << 0.f, 65535.f;
  r = run(q16, w);
  ASSERT_EQ(r.codes.size(), 4u);
  EXPECT_EQ(r.codes[0], 0x00);
  EXPECT_EQ(r.codes[1], 0x00);
  EXPECT_EQ(r.codes[2], 0xFF);
  EXPECT_EQ(r.codes[3], 0xFF);
}

TEST(Quantizer, NeighbouringRowsDoNotBleedIntoEachOther) {
  // Odd widths leave padding in each row's last byte. Encoding rows together must give the same
  // bytes as encoding each alone, padding zero, and decoding a row alone must give its values.
  for (const int bits : {16, 8, 4, 2}) {
    for (const int d : {1, 3, 5, 7, 9}) {
      const Matrix x = varied_rows(11, d, 40u + static_cast<unsigned>(d));
      quantizer q(d, bits, rounding::nearest);
      const auto all = run(q, x);
      const size_t cs = q.code_size();
      ASSERT_EQ(all.codes.size(), 11u * cs);
      for (int i = 0; i < 11; ++i) {
        const auto one = run(q, x.row(i));
        ASSERT_EQ(one.codes.size(), cs);
        EXPECT_TRUE(std::equal(one.codes.begin(), one.codes.end(), all.codes.begin() + i * cs))
            << "bits " << bits << " d " << d << " row " << i;
        const int used = (d * bits) % 8;
        if (used) {
          EXPECT_EQ(all.codes[i * cs + cs - 1] >> used, 0) << "padding bits set";
        }
        EXPECT_TRUE(one.y.row(0) == all.y.row(i));
        const Matrix alone =
            q.decode(std::span(all.codes.data() + i * cs, cs), std::span(all.mins.data() + i, 1),
                     std::span(all.scales.data() + i, 1));
        EXPECT_TRUE(alone.row(0) == all.y.row(i));
      }
    }
  }
}

TEST(Quantizer, ConstantRowsRoundTripExactly) {
  Matrix x(4, 9);
  x.row(0).setConstant(3.25f);
  x.row(1).setConstant(-1e-30f);
  x.row(2).setConstant(0.f);
  x.row(3).setConstant(1e30f);
  for (const int bits : {32, 16, 8, 4, 2}) {
    for (const auto mode : {rounding::nearest, rounding::stochastic}) {
      quantizer q(9, bits, mode);
      const auto r = run(q, x, 5);
      EXPECT_TRUE(r.y == x) << "bits " << bits;
      if (bits != 32) {
        for (const float s : r.scales)
          EXPECT_EQ(s, 0.f);
      }
    }
  }
}

TEST(Quantizer, ValuesOnTheGridRoundTripExactly) {
  // min 0, max 3 * 0.5: every value a multiple of the scale, both roundings exact.
  Matrix x(1, 6);
  x << 0.f, 0.5f, 1.f, 1.5f, 1.f, 0.f;
  for (const auto mode : {rounding::nearest, rounding::stochastic}) {
    const auto r = run(quantizer(6, 2, mode), x, 9);
    EXPECT_TRUE(r.y == x);
  }
}

TEST(Quantizer, TinyRangesStillMeetTheBound) {
  // max - min is a few denormals: (max - min) / 255 underflows, so a two-level grid is used.
  Matrix x(1, 3);
  x << 0.f, 2 * FLT_TRUE_MIN, FLT_TRUE_MIN;
  const auto r = run(quantizer(3, 8), x);
  EXPECT_GT(r.scales[0], 0.f);
  for (int j = 0; j < 3; ++j)
    EXPECT_LE(std::abs(r.y(0, j) - x(0, j)), 0.5f * r.scales[0]);
}

TEST(Quantizer, IsDeterministicForASeedAndIndependentOfTheThreadCount) {
  const Matrix x = varied_rows(3000, 48, 7);  // large enough to run in parallel
  for (const int bits : kQuantizedBits) {
    quantizer q(48, bits, rounding::stochastic);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const auto serial = run(q, x, 42);
    omp_set_num_threads(std::max(threads, 4));
    const auto parallel = run(q, x, 42);
    const auto again = run(q, x, 42);
    const auto other = run(q, x, 43);
    omp_set_num_threads(threads);
    EXPECT_EQ(serial.codes, parallel.codes) << "bits " << bits;
    EXPECT_EQ(parallel.codes, again.codes);
    EXPECT_NE(parallel.codes, other.codes) << "the seed should matter";
    EXPECT_EQ(serial.scales, parallel.scales);
  }
}

TEST(Quantizer, RejectsInvalidArguments) {
  for (const int bits : {0, 1, 3, 7, 12, 24, 64, -8}) {
    try {
      quantizer q(4, bits);
      FAIL() << "accepted bits " << bits;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(std::to_string(bits)), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(quantizer(0, 8), std::invalid_argument);
  quantizer q(4, 8);
  std::vector<std::uint8_t> codes;
  std::vector<float> mins, scales;
  EXPECT_THROW(q.encode(Matrix::Zero(2, 5), codes, mins, scales), std::invalid_argument);
  const std::vector<std::uint8_t> seven(7);
  const std::vector<float> one(1, 0.f), two(2, 0.f);
  EXPECT_THROW(q.decode(seven, one, one), std::invalid_argument);
  const std::vector<std::uint8_t> eight(8);
  EXPECT_THROW(q.decode(eight, one, two), std::invalid_argument);
  EXPECT_EQ(q.decode(eight, two, two).rows(), 2);
}

TEST(Quantizer, RejectsNonFiniteRowsNamingTheRow) {
  Matrix x = Matrix::Ones(5, 4);
  x(3, 2) = std::numeric_limits<float>::quiet_NaN();
  x(4, 1) = std::numeric_limits<float>::infinity();
  std::vector<std::uint8_t> codes;
  std::vector<float> mins, scales;
  try {
    quantizer(4, 8).encode(x, codes, mins, scales);
    FAIL() << "accepted a NaN";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("row 3"), std::string::npos) << e.what();
  }
  Matrix big(1, 2);
  big << -3e38f, 3e38f;  // range beyond float
  EXPECT_THROW(quantizer(2, 4).encode(big, codes, mins, scales), std::invalid_argument);
}
