// halo_cache: a shard's cached rows of remote nodes and the staleness test on them.
#include "model/halo_cache.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace degnn {

void halo_cache::ensure_levels(std::span<const Eigen::Index> widths, bool sparse_features) {
  if (shares_features() && !widths.empty()) {
    for (const auto& p : shared_parts_)
      if (p &&
          (p->features.cols() != widths[0] || (p->sparse_features != nullptr) != sparse_features))
        throw std::invalid_argument("ensure_levels: partition " + std::to_string(p->part) +
                                    "'s feature rows are not of this cache's width and layout");
  }
  rows_.resize(widths.size());
  version_.resize(widths.size());
  confirmed_.resize(widths.size());
  const auto n = static_cast<Eigen::Index>(halo_.size());
  for (std::size_t k = 0; k < widths.size(); ++k) {
    // Level 0 keeps no dense rows when they are compressed or read where their owners hold them.
    const bool compressed = k == 0 && (sparse_features || shares_features());
    const Eigen::Index dense_rows = compressed ? 0 : n;
    if (version_[k].size() == halo_.size() && rows_[k].rows() == dense_rows &&
        rows_[k].cols() == widths[k] && (k > 0 || sparse_features_ == sparse_features))
      continue;
    rows_[k] = Matrix::Zero(dense_rows, widths[k]);
    if (compressed && !shares_features()) {
      feature_blocks_.clear();
      feature_of_.assign(halo_.size(), sparse_row_ref{});
    }
    if (k == 0) sparse_features_ = sparse_features;
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

std::vector<std::size_t> halo_cache::place(int level, std::span<const node_id> asked,
                                           std::span<const node_id> nodes,
                                           std::span<const std::uint64_t> versions,
                                           std::uint64_t step) {
  if (!has_level(level))
    throw std::invalid_argument("no cached halo rows at level " + std::to_string(level));
  if (versions.size() != nodes.size())
    throw std::invalid_argument("history rows of the wrong shape at level " +
                                std::to_string(level));
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
  const auto k = static_cast<std::size_t>(level);
  for (std::size_t r = 0; r < nodes.size(); ++r)
    version_[k][at[r]] = versions[r];
  for (std::size_t i : asked_at)
    confirmed_[k][i] = static_cast<std::int64_t>(step);
  return at;
}

void halo_cache::share_features(std::vector<std::shared_ptr<const graph_partition>> parts,
                                const partition_book& book) {
  shared_rows_.assign(halo_.size(), nullptr);
  feature_of_.assign(halo_.size(), sparse_row_ref{});
  feature_blocks_.clear();
  for (std::size_t i = 0; i < halo_.size(); ++i) {
    const int owner = book.owner(halo_[i]);
    if (owner < 0 || static_cast<std::size_t>(owner) >= parts.size() || !parts[owner])
      throw std::invalid_argument("share_features: halo node " + std::to_string(halo_[i]) +
                                  "'s partition is not among those shared");
    const graph_partition& p = *parts[static_cast<std::size_t>(owner)];
    const node_id l = book.local_id(halo_[i]);
    if (p.sparse_features)
      feature_of_[i] = {p.sparse_features.get(), l};
    else
      shared_rows_[i] = p.dense_features().row(l).data();
  }
  shared_parts_ = std::move(parts);
}

void halo_cache::store(int level, std::span<const node_id> asked, std::span<const node_id> nodes,
                       std::span<const std::uint64_t> versions, const Matrix& values,
                       std::uint64_t step) {
  if (level == 0 && sparse_features_)
    throw std::invalid_argument("the halo's features are compressed rows (store_features)");
  if (has_level(level) &&
      (values.rows() != static_cast<Eigen::Index>(nodes.size()) ||
       (values.rows() > 0 && values.cols() != rows_[static_cast<std::size_t>(level)].cols()))) {
    throw std::invalid_argument("history rows of the wrong shape at level " +
                                std::to_string(level));
  }
  const auto at = place(level, asked, nodes, versions, step);
  if (level == 0 && shares_features()) return;  // the rows stay where their owners hold them
  Matrix& cache = rows_[static_cast<std::size_t>(level)];
  for (std::size_t r = 0; r < nodes.size(); ++r)
    cache.row(static_cast<Eigen::Index>(at[r])) = values.row(static_cast<Eigen::Index>(r));
}

void halo_cache::store_features(std::span<const node_id> asked, std::span<const node_id> nodes,
                                std::shared_ptr<const sparse_rows> rows, std::uint64_t step) {
  if (!sparse_features_) throw std::invalid_argument("the halo's features are dense rows (store)");
  if (!rows || rows->rows() != static_cast<Eigen::Index>(nodes.size()) ||
      (has_level(0) && rows->cols() != rows_[0].cols()))
    throw std::invalid_argument("feature rows of the wrong shape");
  const std::vector<std::uint64_t> versions(nodes.size(), 0);
  const auto at = place(0, asked, nodes, versions, step);
  if (shares_features()) return;  // read where their owners hold them
  for (std::size_t r = 0; r < at.size(); ++r)
    feature_of_[at[r]] = {rows.get(), static_cast<Eigen::Index>(r)};
  if (!at.empty()) feature_blocks_.push_back(std::move(rows));
}

std::vector<Matrix> halo_cache::leaf_rows(const local_cg& cg) const {
  std::vector<Matrix> out(cg.remote_leaves.size());
  for (std::size_t k = 0; k < cg.remote_leaves.size(); ++k) {
    const auto& ids = cg.remote_leaves[k];
    if (ids.empty() || (k == 0 && sparse_features_)) continue;
    if (k == 0 && shares_features()) {
      if (!has_level(0)) throw std::invalid_argument("no halo rows at level 0 yet");
      out[0].resize(static_cast<Eigen::Index>(ids.size()), rows_[0].cols());
      for (std::size_t i = 0; i < ids.size(); ++i) {
        const std::size_t at = index(ids[i]);
        if (version_[0][at] == kNoVersion)
          throw std::invalid_argument("halo node " + std::to_string(ids[i]) +
                                      " has no feature row yet");
        out[0].row(static_cast<Eigen::Index>(i)) =
            Eigen::Map<const RowVector>(shared_rows_[at], rows_[0].cols());
      }
      continue;
    }
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

sparse_rows halo_cache::leaf_features(const local_cg& cg) const {
  if (!sparse_features_ || !has_level(0))
    throw std::invalid_argument("no compressed halo features (history not initialised)");
  const auto& ids = cg.remote_leaves.at(0);
  std::vector<sparse_row_ref> refs(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::size_t at = index(ids[i]);
    refs[i] = feature_of_[at];
    if (!refs[i].from || version_[0][at] == kNoVersion)
      throw std::invalid_argument("halo node " + std::to_string(ids[i]) +
                                  " has no feature row yet");
  }
  return assemble_rows(refs, rows_[0].cols());
}

}  // namespace degnn
