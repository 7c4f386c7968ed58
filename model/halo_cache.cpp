// halo_cache: a shard's cached rows of remote nodes and the staleness test on them.
#include "model/halo_cache.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace degnn {

namespace {

std::size_t bytes_of(const sparse_rows& x) {
  return static_cast<std::size_t>(x.m.nonZeros()) * (sizeof(float) + sizeof(std::int32_t)) +
         static_cast<std::size_t>(x.rows() + 1) * sizeof(std::int32_t);
}

}  // namespace

void halo_cache::bound(std::vector<std::vector<std::uint32_t>> resident) {
  slot_.assign(resident.size(), {});
  for (std::size_t k = 0; k < resident.size(); ++k) {
    auto& keep = resident[k];
    std::sort(keep.begin(), keep.end());
    keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
    if (!keep.empty() && keep.back() >= halo_.size())
      throw std::invalid_argument("halo_cache::bound: row " + std::to_string(keep.back()) +
                                  " of level " + std::to_string(k) + " outside a halo of " +
                                  std::to_string(halo_.size()));
    slot_[k].assign(halo_.size(), -1);
    for (std::size_t s = 0; s < keep.size(); ++s)
      slot_[k][keep[s]] = static_cast<std::int32_t>(s);
  }
  resident_ = std::move(resident);
  bounded_ = true;
  // Levels already made are made again at their new sizes.
  std::vector<Eigen::Index> widths;
  for (const auto& r : rows_)
    widths.push_back(r.cols());
  rows_.clear();
  version_.clear();
  confirmed_.clear();
  if (!widths.empty()) ensure_levels(widths, sparse_features_);
}

std::int64_t halo_cache::slot(int level, std::size_t i) const {
  if (!bounded_) return static_cast<std::int64_t>(i);
  if (i >= halo_.size())
    throw std::invalid_argument("halo row " + std::to_string(i) + " outside a halo of " +
                                std::to_string(halo_.size()));
  const auto k = static_cast<std::size_t>(level);
  return k < slot_.size() ? slot_[k][i] : -1;
}

std::size_t halo_cache::num_slots(std::size_t level) const {
  if (!bounded_) return halo_.size();
  return level < resident_.size() ? resident_[level].size() : 0;
}

std::vector<std::size_t> halo_cache::resident_rows(int level) const {
  std::vector<std::size_t> out;
  if (!bounded_) {
    out.resize(halo_.size());
    std::iota(out.begin(), out.end(), std::size_t{0});
  } else if (static_cast<std::size_t>(level) < resident_.size()) {
    const auto& keep = resident_[static_cast<std::size_t>(level)];
    out.assign(keep.begin(), keep.end());
  }
  return out;
}

std::size_t halo_cache::bytes() const {
  std::size_t total = 0;
  for (const auto& r : rows_)
    total += static_cast<std::size_t>(r.size()) * sizeof(float);
  for (const auto& block : feature_blocks_)
    total += bytes_of(*block);
  for (const auto& [step, held] : held_) {
    for (const auto& v : held.values)
      total += v.size() * sizeof(float);
    for (const auto& block : held.blocks)
      total += bytes_of(*block);
  }
  return total;
}

halo_cache::step_rows& halo_cache::held_for(std::uint64_t step) {
  step_rows& h = held_[step];
  h.at.resize(rows_.size());
  h.values.resize(rows_.size());
  return h;
}

const halo_cache::step_rows* halo_cache::held_rows(std::uint64_t step) const {
  const auto it = held_.find(step);
  return it == held_.end() ? nullptr : &it->second;
}

void halo_cache::release(std::uint64_t step) {
  held_.erase(step);
}

void halo_cache::release_upto(std::uint64_t step) {
  held_.erase(held_.begin(), held_.upper_bound(step));
}

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
  for (std::size_t k = 0; k < widths.size(); ++k) {
    const auto n = num_slots(k);
    // Level 0 keeps no dense rows when they are compressed or read where their owners hold them.
    const bool compressed = k == 0 && (sparse_features || shares_features());
    const Eigen::Index dense_rows = compressed ? 0 : static_cast<Eigen::Index>(n);
    if (version_[k].size() == n && rows_[k].rows() == dense_rows && rows_[k].cols() == widths[k] &&
        (k > 0 || sparse_features_ == sparse_features))
      continue;
    rows_[k] = Matrix::Zero(dense_rows, widths[k]);
    if (compressed && !shares_features()) {
      feature_blocks_.clear();
      feature_of_.assign(n, sparse_row_ref{});
    }
    if (k == 0) sparse_features_ = sparse_features;
    version_[k].assign(n, kNoVersion);
    confirmed_[k].assign(n, -1);
  }
}

std::int64_t halo_cache::find(node_id g) const {
  const auto it = std::lower_bound(halo_.begin(), halo_.end(), g);
  return it == halo_.end() || *it != g ? -1 : it - halo_.begin();
}

std::size_t halo_cache::index(node_id g) const {
  const std::int64_t at = find(g);
  if (at < 0)
    throw std::invalid_argument("node " + std::to_string(g) + " is not in this shard's halo");
  return static_cast<std::size_t>(at);
}

bool halo_cache::holds(int level, std::size_t i) const {
  return has_level(level) && version(level, i) != kNoVersion;
}

Eigen::Map<const RowVector> halo_cache::kept_row(int level, std::size_t i) const {
  if (!holds(level, i) || (level == 0 && sparse_features_))
    throw std::invalid_argument("halo row " + std::to_string(i) + " of level " +
                                std::to_string(level) + " is not kept here as a dense row");
  const auto k = static_cast<std::size_t>(level);
  if (level == 0 && shares_features()) return {shared_rows_[i], rows_[0].cols()};
  return {rows_[k].row(static_cast<Eigen::Index>(slot(level, i))).data(), rows_[k].cols()};
}

sparse_row_ref halo_cache::kept_feature(std::size_t i) const {
  if (!sparse_features_ || !holds(0, i))
    throw std::invalid_argument("halo row " + std::to_string(i) +
                                " is not kept here as a compressed feature row");
  return shares_features() ? shared_sparse_[i] : feature_of_[static_cast<std::size_t>(slot(0, i))];
}

bool halo_cache::has_level(int level) const {
  return level >= 0 && static_cast<std::size_t>(level) < rows_.size() &&
         version_[static_cast<std::size_t>(level)].size() ==
             num_slots(static_cast<std::size_t>(level));
}

bool halo_cache::fresh(int level, std::size_t i, std::uint64_t step, int staleness) const {
  const std::int64_t s = slot(level, i);
  if (s < 0) return false;
  const std::int64_t confirmed =
      confirmed_.at(static_cast<std::size_t>(level)).at(static_cast<std::size_t>(s));
  return confirmed >= 0 && confirmed + staleness > static_cast<std::int64_t>(step);
}

std::uint64_t halo_cache::version(int level, std::size_t i) const {
  const std::int64_t s = slot(level, i);
  if (s < 0) return kNoVersion;
  return version_.at(static_cast<std::size_t>(level)).at(static_cast<std::size_t>(s));
}

std::vector<std::int64_t> halo_cache::place(int level, std::span<const node_id> asked,
                                            std::span<const node_id> nodes,
                                            std::span<const std::uint64_t> versions,
                                            std::uint64_t step) {
  if (!has_level(level))
    throw std::invalid_argument("no cached halo rows at level " + std::to_string(level));
  if (versions.size() != nodes.size())
    throw std::invalid_argument("history rows of the wrong shape at level " +
                                std::to_string(level));
  std::vector<std::int64_t> at(nodes.size());
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
    at[r] = slot(level, index(nodes[r]));
  }
  std::vector<std::int64_t> asked_at(asked.size());
  for (std::size_t i = 0; i < asked.size(); ++i)
    asked_at[i] = slot(level, index(asked[i]));
  const auto k = static_cast<std::size_t>(level);
  for (std::size_t r = 0; r < nodes.size(); ++r)
    if (at[r] >= 0) version_[k][static_cast<std::size_t>(at[r])] = versions[r];
  for (std::int64_t s : asked_at)
    if (s >= 0) confirmed_[k][static_cast<std::size_t>(s)] = static_cast<std::int64_t>(step);
  return at;
}

void halo_cache::share_features(std::vector<std::shared_ptr<const graph_partition>> parts,
                                const partition_book& book) {
  shared_rows_.assign(halo_.size(), nullptr);
  shared_sparse_.assign(halo_.size(), sparse_row_ref{});
  feature_of_.clear();
  feature_blocks_.clear();
  for (std::size_t i = 0; i < halo_.size(); ++i) {
    const int owner = book.owner(halo_[i]);
    if (owner < 0 || static_cast<std::size_t>(owner) >= parts.size() || !parts[owner])
      throw std::invalid_argument("share_features: halo node " + std::to_string(halo_[i]) +
                                  "'s partition is not among those shared");
    const graph_partition& p = *parts[static_cast<std::size_t>(owner)];
    const node_id l = book.local_id(halo_[i]);
    if (p.sparse_features)
      shared_sparse_[i] = {p.sparse_features.get(), l};
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
  const auto k = static_cast<std::size_t>(level);
  if (level == 0 && shares_features()) {
    // The rows stay where their owners hold them; a step notes only that it received them.
    for (std::size_t r = 0; r < nodes.size(); ++r)
      if (at[r] < 0) held_for(step).at[0].emplace(nodes[r], 0);
    return;
  }
  Matrix& cache = rows_[k];
  step_rows* held = nullptr;
  for (std::size_t r = 0; r < nodes.size(); ++r) {
    const auto row = values.row(static_cast<Eigen::Index>(r));
    if (at[r] >= 0) {
      cache.row(static_cast<Eigen::Index>(at[r])) = row;
      continue;
    }
    if (!held) held = &held_for(step);
    auto& v = held->values[k];
    const auto [it, fresh_row] = held->at[k].try_emplace(nodes[r], v.size() / cache.cols());
    if (fresh_row) v.resize(v.size() + static_cast<std::size_t>(cache.cols()));
    std::copy_n(row.data(), cache.cols(),
                v.begin() + static_cast<std::ptrdiff_t>(it->second * cache.cols()));
  }
}

void halo_cache::store_features(std::span<const node_id> asked, std::span<const node_id> nodes,
                                std::shared_ptr<const sparse_rows> rows, std::uint64_t step) {
  if (!sparse_features_) throw std::invalid_argument("the halo's features are dense rows (store)");
  if (!rows || rows->rows() != static_cast<Eigen::Index>(nodes.size()) ||
      (has_level(0) && rows->cols() != rows_[0].cols()))
    throw std::invalid_argument("feature rows of the wrong shape");
  const std::vector<std::uint64_t> versions(nodes.size(), 0);
  const auto at = place(0, asked, nodes, versions, step);
  if (shares_features()) {  // read where their owners hold them
    for (std::size_t r = 0; r < nodes.size(); ++r)
      if (at[r] < 0) held_for(step).features[nodes[r]] = shared_sparse_[index(nodes[r])];
    return;
  }
  bool kept = false, held = false;
  for (std::size_t r = 0; r < at.size(); ++r) {
    const sparse_row_ref ref{rows.get(), static_cast<Eigen::Index>(r)};
    if (at[r] >= 0) {
      feature_of_[static_cast<std::size_t>(at[r])] = ref;
      kept = true;
    } else {
      held_for(step).features[nodes[r]] = ref;
      held = true;
    }
  }
  if (held) held_for(step).blocks.push_back(rows);
  if (kept) feature_blocks_.push_back(std::move(rows));
}

const float* halo_cache::row_of(std::size_t k, node_id g, const step_rows* held,
                                std::uint64_t step) const {
  const std::size_t at = index(g);
  const std::int64_t s = slot(static_cast<int>(k), at);
  const bool shared = k == 0 && shares_features();
  if (s >= 0) {
    if (!shared) return rows_[k].row(static_cast<Eigen::Index>(s)).data();
    if (version_[0][static_cast<std::size_t>(s)] == kNoVersion)
      throw std::invalid_argument("halo node " + std::to_string(g) + " has no feature row yet");
    return shared_rows_[at];
  }
  if (!held || k >= held->at.size() || !held->at[k].contains(g))
    throw std::invalid_argument("halo node " + std::to_string(g) + " has no row at level " +
                                std::to_string(k) + " for step " + std::to_string(step) +
                                " (not kept, and not pulled for the step)");
  if (shared) return shared_rows_[at];
  return held->values[k].data() + held->at[k].at(g) * static_cast<std::size_t>(rows_[k].cols());
}

std::vector<Matrix> halo_cache::leaf_rows(const local_cg& cg, std::uint64_t step) const {
  std::vector<Matrix> out(cg.remote_leaves.size());
  const step_rows* held = held_rows(step);
  for (std::size_t k = 0; k < cg.remote_leaves.size(); ++k) {
    const auto& ids = cg.remote_leaves[k];
    if (ids.empty() || (k == 0 && sparse_features_)) continue;
    if (!has_level(static_cast<int>(k))) {
      throw std::invalid_argument("no halo rows at level " + std::to_string(k) +
                                  " yet (history not initialised)");
    }
    const Eigen::Index cols = rows_[k].cols();
    out[k].resize(static_cast<Eigen::Index>(ids.size()), cols);
    for (std::size_t i = 0; i < ids.size(); ++i)
      out[k].row(static_cast<Eigen::Index>(i)) =
          Eigen::Map<const RowVector>(row_of(k, ids[i], held, step), cols);
  }
  return out;
}

sparse_rows halo_cache::leaf_features(const local_cg& cg, std::uint64_t step) const {
  if (!sparse_features_ || !has_level(0))
    throw std::invalid_argument("no compressed halo features (history not initialised)");
  const auto& ids = cg.remote_leaves.at(0);
  std::vector<sparse_row_ref> refs(ids.size());
  const step_rows* held = held_rows(step);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::size_t at = index(ids[i]);
    const std::int64_t s = slot(0, at);
    if (s >= 0) {
      const auto slot_at = static_cast<std::size_t>(s);
      refs[i] = shares_features() ? shared_sparse_[at] : feature_of_[slot_at];
      if (!refs[i].from || version_[0][slot_at] == kNoVersion)
        throw std::invalid_argument("halo node " + std::to_string(ids[i]) +
                                    " has no feature row yet");
      continue;
    }
    if (!held || !held->features.contains(ids[i]))
      throw std::invalid_argument("halo node " + std::to_string(ids[i]) +
                                  " has no feature row for step " + std::to_string(step) +
                                  " (not kept, and not pulled for the step)");
    refs[i] = held->features.at(ids[i]);
  }
  return assemble_rows(refs, rows_[0].cols());
}

}  // namespace degnn
