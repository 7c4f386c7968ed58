// The storage of one partition's historical embeddings (docs/design.md section 6): per level, every
// owned node's last committed row, its version (step + 1 of the step that computed it; 0: the
// initial exact pass) and its quantized form (the quantizer's codes with a per-row min and scale)
// that readers get. A committed row is quantized once, when it is first read: a step commits
// several times more rows than other shards ever read, and quantizing them all at commit time
// measured 30% slower epochs (synthetic-1M, 4 parts, 3 layers, 8 bits).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/quantizer.hpp"
#include "model/tensor.hpp"

namespace degnn {

/// Quantized rows of one level, as they travel (model/quantizer.hpp layout).
struct quantized_rows {
  int bits = 32;
  int cols = 0;
  std::vector<std::uint8_t> codes;
  std::vector<float> row_min, row_scale;  ///< empty at 32 bits
  std::vector<std::uint64_t> versions;
};

class embedding_table {
 public:
  /// rows: owned nodes; widths[k]: the width of level k + 1 (level 0, the features, is not held
  /// here). Every level starts empty: init or put fills it.
  embedding_table(std::int64_t rows, std::vector<int> widths, int bits, rounding r);

  /// Levels 1 .. num_levels() are held.
  int num_levels() const { return static_cast<int>(levels_.size()); }
  int bits() const { return bits_; }
  bool holds(int level) const;
  int width(int level) const;

  /// Replaces every row of `level` with values (rows, width), all at version `version`.
  void init(int level, const Eigen::Ref<const Matrix>& values, std::uint64_t version);
  /// init from rows x width values in row-major order, taken over rather than copied (the
  /// history set-up's rows: 1.28 GB a part at 10M nodes).
  void init(int level, std::vector<float>&& values, std::uint64_t version);
  /// Commits values.row(i) as the row of local node local[i] at `version`. Throws
  /// std::invalid_argument for a level not held, ids out of range or a shape.
  void put(int level, std::span<const node_id> local, const Eigen::Ref<const Matrix>& values,
           std::uint64_t version);
  std::uint64_t version(int level, node_id local) const;
  /// Appends the codes of local node `local` to out (with its min, scale and version),
  /// quantizing its row first if it changed since it was last read. Stochastic rounding draws
  /// from (version, level, row), so a row's codes do not depend on when it is read.
  void append_row(int level, node_id local, quantized_rows& out);

 private:
  struct level_rows {
    quantizer codec;
    std::vector<float> committed;  ///< (rows, width) row-major: the committed rows
    std::vector<std::uint8_t> codes;
    std::vector<float> row_min, row_scale;
    std::vector<std::uint64_t> version;
    std::vector<char> coded;  ///< per row: codes hold its committed value
    bool filled = false;
  };
  const level_rows& at(int level) const;
  level_rows& at(int level);
  /// The committed rows of l as a (rows, width) matrix.
  Eigen::Map<Matrix> committed(level_rows& l) const;
  /// Marks every row of l committed at `version` and not coded yet.
  void fill(level_rows& l, std::uint64_t version) const;

  std::int64_t rows_;
  int bits_;
  std::vector<level_rows> levels_;
};

}  // namespace degnn
