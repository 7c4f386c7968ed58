// Row-wise scalar quantizer for historical embeddings (docs/design.md sections 1 and 6): a codec in
// the style of faiss's Quantizer (code_size, encode, decode). Each float32 row of width d is stored
// as d codes of `bits` bits, packed tightly, plus its own min and scale; the embedding store and
// the wire format (EmbeddingRows) carry exactly these three arrays.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "model/tensor.hpp"

namespace degnn {

/// How a value between two grid points picks its code.
enum class rounding : std::uint8_t {
  nearest,     ///< error <= scale / 2, biased
  stochastic,  ///< floor(x') + (u < frac(x')): error < scale, unbiased in expectation
};

/// Code layout of one row (code_size() bytes, rows back to back):
///   bits 32: the row's float32 values, raw (little-endian); row_min / row_scale are unused.
///   bits 16: one little-endian uint16 code per value.
///   bits 8, 4, 2: 8 / bits codes per byte, value j in byte j / (8 / bits), lowest bits first
///     (shift (j % (8 / bits)) * bits); the unused high bits of a row's last byte are zero.
/// A code q decodes to row_min + q * row_scale, with row_scale = (max - min) / (2^bits - 1).
/// A constant row has scale 0, codes 0, and decodes exactly.
class quantizer {
 public:
  /// Throws std::invalid_argument if dim < 1 or bits is not one of 32, 16, 8, 4, 2.
  quantizer(int dim, int bits, rounding r = rounding::nearest);

  static bool valid_bits(int bits) {
    return bits == 32 || bits == 16 || bits == 8 || bits == 4 || bits == 2;
  }
  /// Bytes per row: ceil(dim * bits / 8).
  static std::size_t code_size(int dim, int bits) {
    return (static_cast<std::size_t>(dim) * static_cast<std::size_t>(bits) + 7) / 8;
  }

  int dim() const { return dim_; }
  int bits() const { return bits_; }
  rounding mode() const { return rounding_; }
  std::size_t code_size() const { return code_size(dim_, bits_); }
  /// Number of grid steps, 2^bits - 1 (0 for 32 bits).
  std::uint32_t levels() const { return bits_ == 32 ? 0u : (1u << bits_) - 1u; }

  /// x is (n, dim) row-major; codes receives n * code_size() bytes; row_min and row_scale receive
  /// n floats each (ignored, and may be null, when bits == 32). Stochastic rounding draws its
  /// uniform for element (i, j) from a hash of (seed, i, j), so the result depends on the seed
  /// only, never on the thread count. Below 32 bits, throws std::invalid_argument if a row holds a
  /// non-finite value or its range overflows float (the outputs are then unspecified); 32 bits
  /// copies whatever it is given.
  void encode(std::size_t n, const float* x, std::uint8_t* codes, float* row_min, float* row_scale,
              std::uint64_t seed = 0) const;

  /// Inverse of encode: x receives (n, dim) row-major floats.
  void decode(std::size_t n, const std::uint8_t* codes, const float* row_min,
              const float* row_scale, float* x) const;

  // -- convenience overloads on Matrix --

  /// x must have dim() columns. The vectors are resized (row_min / row_scale cleared at 32 bits,
  /// which is what the wire format sends).
  void encode(const Matrix& x, std::vector<std::uint8_t>& codes, std::vector<float>& row_min,
              std::vector<float>& row_scale, std::uint64_t seed = 0) const;

  /// Rows = codes.size() / code_size(); throws std::invalid_argument when the sizes disagree
  /// (row_min / row_scale may be empty at 32 bits).
  Matrix decode(std::span<const std::uint8_t> codes, std::span<const float> row_min,
                std::span<const float> row_scale) const;

 private:
  int dim_;
  int bits_;
  rounding rounding_;
};

}  // namespace degnn
