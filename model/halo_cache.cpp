// halo_cache: a shard's cached rows of remote nodes and the staleness test on them.
#include "model/halo_cache.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace degnn {

void halo_cache::ensure_levels(std::span<const Eigen::Index> widths) {
  rows_.resize(widths.size());
  version_.resize(widths.size());
  confirmed_.resize(widths.size());
  const auto n = static_cast<Eigen::Index>(halo_.size());
  for (std::size_t k = 0; k < widths.size(); ++k) {
    if (version_[k].size() == halo_.size() && rows_[k].rows() == n && rows_[k].cols() == widths[k])
      continue;
    rows_[k] = Matrix::Zero(n, widths[k]);
    version_[k].assign(halo_.size(), kNoVersion);
    confirmed_[k].assign(halo_.size(), -1);
  }
}

std::size_t halo_cache::index(node_id g) const {
  const auto it = std::lower_bound(halo_.begin(), halo_.end(), g);
  if (it == halo_.end() || *it != g)
    throw std::invalid_argument("node " + std::to_string(g) + " is not in this shard's halo");
  return static_cast<std::size_t>(it - halo_.begin());
}

bool halo_cache::has_level(int level) const {
  return level >= 0 && static_cast<std::size_t>(level) < rows_.size() &&
         version_[static_cast<std::size_t>(level)].size() == halo_.size();
}

bool halo_cache::fresh(int level, std::size_t i, std::uint64_t step, int staleness) const {
  const std::int64_t confirmed = confirmed_.at(static_cast<std::size_t>(level)).at(i);
  return confirmed >= 0 && confirmed + staleness > static_cast<std::int64_t>(step);
}

std::uint64_t halo_cache::version(int level, std::size_t i) const {
  return version_.at(static_cast<std::size_t>(level)).at(i);
}

void halo_cache::store(int level, std::span<const node_id> asked, std::span<const node_id> nodes,
                       std::span<const std::uint64_t> versions, const Matrix& values,
                       std::uint64_t step) {
  if (!has_level(level))
    throw std::invalid_argument("no cached halo rows at level " + std::to_string(level));
  const auto k = static_cast<std::size_t>(level);
  Matrix& cache = rows_[k];
  if (versions.size() != nodes.size() || values.rows() != static_cast<Eigen::Index>(nodes.size()) ||
      (values.rows() > 0 && values.cols() != cache.cols())) {
    throw std::invalid_argument("history rows of the wrong shape at level " +
                                std::to_string(level));
  }
  // Only rows that were asked for, in the order asked, each with a real version: a peer cannot
  // overwrite rows of another owner or rows nobody asked for. Checked before anything changes.
  std::vector<std::size_t> at(nodes.size());
  std::size_t a = 0;
  for (std::size_t r = 0; r < nodes.size(); ++r) {
    while (a < asked.size() && asked[a] != nodes[r])
      ++a;
    if (a == asked.size())
      throw std::invalid_argument("history rows hold node " + std::to_string(nodes[r]) +
                                  ", which was not asked for (or out of order)");
    ++a;
    if (versions[r] == kNoVersion)
      throw std::invalid_argument("history rows hold a row without a version");
    at[r] = index(nodes[r]);
  }
  std::vector<std::size_t> asked_at(asked.size());
  for (std::size_t i = 0; i < asked.size(); ++i)
    asked_at[i] = index(asked[i]);
  for (std::size_t r = 0; r < nodes.size(); ++r) {
    cache.row(static_cast<Eigen::Index>(at[r])) = values.row(static_cast<Eigen::Index>(r));
    version_[k][at[r]] = versions[r];
  }
  for (std::size_t i : asked_at)
    confirmed_[k][i] = static_cast<std::int64_t>(step);
}

std::vector<Matrix> halo_cache::leaf_rows(const local_cg& cg) const {
  std::vector<Matrix> out(cg.remote_leaves.size());
  for (std::size_t k = 0; k < cg.remote_leaves.size(); ++k) {
    const auto& ids = cg.remote_leaves[k];
    if (ids.empty()) continue;
    if (!has_level(static_cast<int>(k))) {
      throw std::invalid_argument("no halo rows at level " + std::to_string(k) +
                                  " yet (history not initialised)");
    }
    out[k].resize(static_cast<Eigen::Index>(ids.size()), rows_[k].cols());
    for (std::size_t i = 0; i < ids.size(); ++i)
      out[k].row(static_cast<Eigen::Index>(i)) =
          rows_[k].row(static_cast<Eigen::Index>(index(ids[i])));
  }
  return out;
}

}  // namespace degnn
