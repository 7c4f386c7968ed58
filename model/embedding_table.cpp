// embedding_table: quantized, versioned rows per level.
#include "model/embedding_table.hpp"

#include "model/hashing.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace degnn {

embedding_table::embedding_table(std::int64_t rows, std::vector<int> widths, int bits, rounding r)
    : rows_(rows), bits_(bits) {
  if (rows < 0) throw std::invalid_argument("embedding_table: negative row count");
  for (int w : widths)
    levels_.push_back(level_rows{.codec = quantizer(w, bits, r)});
}

const embedding_table::level_rows& embedding_table::at(int level) const {
  if (level < 1 || level > num_levels())
    throw std::invalid_argument("no history is kept at level " + std::to_string(level));
  return levels_[static_cast<std::size_t>(level - 1)];
}

embedding_table::level_rows& embedding_table::at(int level) {
  return const_cast<level_rows&>(std::as_const(*this).at(level));
}

bool embedding_table::holds(int level) const {
  return level >= 1 && level <= num_levels() && levels_[static_cast<std::size_t>(level - 1)].filled;
}

int embedding_table::width(int level) const {
  return at(level).codec.dim();
}

void embedding_table::init(int level, const Eigen::Ref<const Matrix>& values,
                           std::uint64_t version) {
  level_rows& l = at(level);
  if (values.rows() != rows_ || values.cols() != l.codec.dim()) {
    throw std::invalid_argument("history of level " + std::to_string(level) + " must be " +
                                std::to_string(rows_) + " x " + std::to_string(l.codec.dim()));
  }
  l.committed.resize(static_cast<std::size_t>(values.size()));
  committed(l) = values;
  fill(l, version);
}

void embedding_table::init(int level, std::vector<float>&& values, std::uint64_t version) {
  level_rows& l = at(level);
  if (values.size() != static_cast<std::size_t>(rows_) * static_cast<std::size_t>(l.codec.dim())) {
    throw std::invalid_argument("history of level " + std::to_string(level) + " must be " +
                                std::to_string(rows_) + " x " + std::to_string(l.codec.dim()) +
                                " values, got " + std::to_string(values.size()));
  }
  l.committed = std::move(values);
  fill(l, version);
}

Eigen::Map<Matrix> embedding_table::committed(level_rows& l) const {
  return {l.committed.data(), rows_, l.codec.dim()};
}

void embedding_table::fill(level_rows& l, std::uint64_t version) const {
  const auto n = static_cast<std::size_t>(rows_);
  l.codes.assign(n * l.codec.code_size(), 0);
  l.row_min.assign(n, 0.0f);
  l.row_scale.assign(n, 0.0f);
  l.version.assign(n, version);
  l.coded.assign(n, 0);
  l.filled = true;
}

void embedding_table::put(int level, std::span<const node_id> local,
                          const Eigen::Ref<const Matrix>& values, std::uint64_t version) {
  level_rows& l = at(level);
  if (!l.filled) throw std::invalid_argument("put before init at level " + std::to_string(level));
  if (values.rows() != static_cast<Eigen::Index>(local.size()) ||
      (values.rows() > 0 && values.cols() != l.codec.dim()))
    throw std::invalid_argument("put of the wrong shape at level " + std::to_string(level));
  for (node_id r : local) {
    if (r < 0 || r >= rows_)
      throw std::invalid_argument("put of row " + std::to_string(r) + ", out of range");
  }
  for (std::size_t i = 0; i < local.size(); ++i) {
    const auto r = static_cast<std::size_t>(local[i]);
    committed(l).row(local[i]) = values.row(static_cast<Eigen::Index>(i));
    l.version[r] = version;
    l.coded[r] = 0;
  }
}

std::uint64_t embedding_table::version(int level, node_id local) const {
  return at(level).version.at(static_cast<std::size_t>(local));
}

void embedding_table::append_row(int level, node_id local, quantized_rows& out) {
  level_rows& l = at(level);
  const auto r = static_cast<std::size_t>(local);
  const std::size_t size = l.codec.code_size();
  if (!l.coded.at(r)) {
    const std::uint64_t seed = mix64(mix64(l.version[r] ^ static_cast<std::uint64_t>(level)) ^
                                     static_cast<std::uint64_t>(r));
    l.codec.encode(1, committed(l).row(local).data(), l.codes.data() + r * size, &l.row_min[r],
                   &l.row_scale[r], seed);
    l.coded[r] = 1;
  }
  out.codes.insert(out.codes.end(), l.codes.begin() + static_cast<std::ptrdiff_t>(r * size),
                   l.codes.begin() + static_cast<std::ptrdiff_t>((r + 1) * size));
  if (bits_ != 32) {
    out.row_min.push_back(l.row_min[r]);
    out.row_scale.push_back(l.row_scale[r]);
  }
  out.versions.push_back(l.version[r]);
}

}  // namespace degnn
