// Row-wise scalar quantizer: per-row affine grid, nearest or stochastic rounding, tight packing.
#include "model/quantizer.hpp"
#include "model/hashing.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

namespace degnn {

namespace {

// Uniform in [0, 1) from 24 hash bits, exact in float. Keyed by (row key, column), so any thread
// schedule draws the same numbers.
inline float uniform(std::uint64_t row_key, std::uint64_t col) {
  return static_cast<float>(mix64(row_key ^ (col * 0xd1b54a32d192ed03ULL)) >> 40) * 0x1p-24f;
}

// Below this many values, encode/decode stay on the calling thread.
constexpr std::size_t kParallelValues = std::size_t{1} << 15;

// One row: finds min and scale, writes code_size(d, B) bytes. False if the row cannot be
// quantized (non-finite value or range).
template <int B>
bool encode_row(const float* x, int d, std::uint8_t* out, float& row_min, float& row_scale,
                bool stochastic, std::uint64_t key) {
  static_assert(B == 16 || B == 8 || B == 4 || B == 2);
  constexpr std::uint32_t L = (1u << B) - 1u;
  float mn = x[0], mx = x[0], probe = 0.f;
#pragma omp simd reduction(min : mn) reduction(max : mx) reduction(+ : probe)
  for (int j = 0; j < d; ++j) {
    mn = std::min(mn, x[j]);
    mx = std::max(mx, x[j]);
    probe += x[j] * 0.f;  // NaN iff some value is infinite or NaN
  }
  if (!std::isfinite(probe) || !std::isfinite(mx - mn)) return false;
  float scale = (mx - mn) / static_cast<float>(L);
  // A range so small that dividing it by L underflows to zero: use a two-level grid instead, so
  // that only a truly constant row gets scale 0 (and the error stays <= scale / 2).
  if (scale == 0.f && mx > mn) scale = mx - mn;
  row_min = mn;
  row_scale = scale;
  const std::size_t bytes = quantizer::code_size(d, B);
  if (scale == 0.f) {
    std::memset(out, 0, bytes);
    return true;
  }
  const auto code = [&](int j) -> std::uint32_t {
    const float t = (x[j] - mn) / scale;  // in [0, L] up to rounding
    float q;
    if (stochastic) {
      const float f = std::floor(t);
      q = f + (uniform(key, static_cast<std::uint64_t>(j)) < t - f ? 1.f : 0.f);
    } else {
      q = std::nearbyint(t);
    }
    return static_cast<std::uint32_t>(std::clamp(q, 0.f, static_cast<float>(L)));
  };
  if constexpr (B == 16) {
    for (int j = 0; j < d; ++j) {
      const std::uint32_t q = code(j);
      out[2 * j] = static_cast<std::uint8_t>(q & 0xffu);
      out[2 * j + 1] = static_cast<std::uint8_t>(q >> 8);
    }
  } else if constexpr (B == 8) {
    for (int j = 0; j < d; ++j)
      out[j] = static_cast<std::uint8_t>(code(j));
  } else {
    constexpr int per = 8 / B;
    for (std::size_t k = 0; k < bytes; ++k) {
      std::uint32_t v = 0;
      for (int t = 0; t < per; ++t) {
        const int j = static_cast<int>(k) * per + t;
        if (j < d) v |= code(j) << (t * B);
      }
      out[k] = static_cast<std::uint8_t>(v);
    }
  }
  return true;
}

template <int B>
void decode_row(const std::uint8_t* in, int d, float mn, float scale, float* x) {
  static_assert(B == 16 || B == 8 || B == 4 || B == 2);
  if (scale == 0.f) {  // constant row: exact, sign of zero included
    std::fill(x, x + d, mn);
    return;
  }
  if constexpr (B == 16) {
    for (int j = 0; j < d; ++j) {
      const std::uint32_t q = in[2 * j] | (static_cast<std::uint32_t>(in[2 * j + 1]) << 8);
      x[j] = mn + static_cast<float>(q) * scale;
    }
  } else {
    constexpr int per = 8 / B;
    constexpr std::uint32_t mask = (1u << B) - 1u;
    for (int j = 0; j < d; ++j) {
      const std::uint32_t q = (in[j / per] >> ((j % per) * B)) & mask;
      x[j] = mn + static_cast<float>(q) * scale;
    }
  }
}

template <int B>
void encode_rows(std::size_t n, int d, std::size_t stride, const float* x, std::uint8_t* codes,
                 float* row_min, float* row_scale, bool stochastic, std::uint64_t seed) {
  const std::uint64_t base = mix64(seed ^ 0x243f6a8885a308d3ULL);
  std::atomic<std::int64_t> first_bad{std::numeric_limits<std::int64_t>::max()};
  const auto rows = static_cast<std::int64_t>(n);
#pragma omp parallel for schedule(static) if (n * static_cast <std::size_t>(d) >= kParallelValues)
  for (std::int64_t i = 0; i < rows; ++i) {
    const auto u = static_cast<std::size_t>(i);
    if (!encode_row<B>(x + u * static_cast<std::size_t>(d), d, codes + u * stride, row_min[u],
                       row_scale[u], stochastic, mix64(base ^ static_cast<std::uint64_t>(i)))) {
      std::int64_t seen = first_bad.load();
      while (i < seen && !first_bad.compare_exchange_weak(seen, i)) {
      }
    }
  }
  if (const auto bad = first_bad.load(); bad != std::numeric_limits<std::int64_t>::max()) {
    throw std::invalid_argument("quantizer: row " + std::to_string(bad) +
                                " holds a non-finite value or a range beyond float");
  }
}

template <int B>
void decode_rows(std::size_t n, int d, std::size_t stride, const std::uint8_t* codes,
                 const float* row_min, const float* row_scale, float* x) {
  const auto rows = static_cast<std::int64_t>(n);
#pragma omp parallel for schedule(static) if (n * static_cast <std::size_t>(d) >= kParallelValues)
  for (std::int64_t i = 0; i < rows; ++i) {
    const auto u = static_cast<std::size_t>(i);
    decode_row<B>(codes + u * stride, d, row_min[u], row_scale[u],
                  x + u * static_cast<std::size_t>(d));
  }
}

}  // namespace

quantizer::quantizer(int dim, int bits, rounding r) : dim_(dim), bits_(bits), rounding_(r) {
  if (dim < 1)
    throw std::invalid_argument("quantizer: dim " + std::to_string(dim) + " is not >= 1");
  if (!valid_bits(bits)) {
    throw std::invalid_argument("quantizer: bits " + std::to_string(bits) +
                                " is not one of 32, 16, 8, 4, 2");
  }
  if (r != rounding::nearest && r != rounding::stochastic) {
    throw std::invalid_argument("quantizer: unknown rounding mode " +
                                std::to_string(static_cast<int>(r)));
  }
}

void quantizer::encode(std::size_t n, const float* x, std::uint8_t* codes, float* row_min,
                       float* row_scale, std::uint64_t seed) const {
  if (n == 0) return;
  const std::size_t stride = code_size();
  if (bits_ == 32) {  // raw float32 rows are exactly the code layout
    std::memcpy(codes, x, n * stride);
    return;
  }
  const bool st = rounding_ == rounding::stochastic;
  switch (bits_) {
    case 16:
      return encode_rows<16>(n, dim_, stride, x, codes, row_min, row_scale, st, seed);
    case 8:
      return encode_rows<8>(n, dim_, stride, x, codes, row_min, row_scale, st, seed);
    case 4:
      return encode_rows<4>(n, dim_, stride, x, codes, row_min, row_scale, st, seed);
    default:
      return encode_rows<2>(n, dim_, stride, x, codes, row_min, row_scale, st, seed);
  }
}

void quantizer::decode(std::size_t n, const std::uint8_t* codes, const float* row_min,
                       const float* row_scale, float* x) const {
  if (n == 0) return;
  const std::size_t stride = code_size();
  if (bits_ == 32) {
    std::memcpy(x, codes, n * stride);
    return;
  }
  switch (bits_) {
    case 16:
      return decode_rows<16>(n, dim_, stride, codes, row_min, row_scale, x);
    case 8:
      return decode_rows<8>(n, dim_, stride, codes, row_min, row_scale, x);
    case 4:
      return decode_rows<4>(n, dim_, stride, codes, row_min, row_scale, x);
    default:
      return decode_rows<2>(n, dim_, stride, codes, row_min, row_scale, x);
  }
}

void quantizer::encode(const Matrix& x, std::vector<std::uint8_t>& codes,
                       std::vector<float>& row_min, std::vector<float>& row_scale,
                       std::uint64_t seed) const {
  if (x.cols() != dim_) {
    throw std::invalid_argument("quantizer: matrix has " + std::to_string(x.cols()) +
                                " columns, the quantizer " + std::to_string(dim_));
  }
  const auto n = static_cast<std::size_t>(x.rows());
  codes.resize(n * code_size());
  if (bits_ == 32) {
    row_min.clear();
    row_scale.clear();
  } else {
    row_min.resize(n);
    row_scale.resize(n);
  }
  encode(n, x.data(), codes.data(), row_min.data(), row_scale.data(), seed);
}

Matrix quantizer::decode(std::span<const std::uint8_t> codes, std::span<const float> row_min,
                         std::span<const float> row_scale) const {
  const std::size_t stride = code_size();
  if (codes.size() % stride != 0) {
    throw std::invalid_argument("quantizer: " + std::to_string(codes.size()) +
                                " code bytes are not whole rows of " + std::to_string(stride));
  }
  const std::size_t n = codes.size() / stride;
  const bool params_optional = bits_ == 32 && row_min.empty() && row_scale.empty();
  if (!params_optional && (row_min.size() != n || row_scale.size() != n)) {
    throw std::invalid_argument("quantizer: " + std::to_string(n) + " rows but " +
                                std::to_string(row_min.size()) + " mins and " +
                                std::to_string(row_scale.size()) + " scales");
  }
  Matrix x(static_cast<Eigen::Index>(n), dim_);
  decode(n, codes.data(), row_min.data(), row_scale.data(), x.data());
  return x;
}

}  // namespace degnn
