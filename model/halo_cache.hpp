// The reader side of the historical embeddings (docs/design.md section 6): the rows of a shard's
// halo (remote in-neighbours) it last pulled, per level, with the version each row has and the step
// its owner last confirmed it at, so that a step pulls only rows older than the staleness bound.
// Bounded (bound()), it keeps only a chosen set of rows per level; a step's other rows are held
// for that step only.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "model/local_cg.hpp"
#include "model/partition_book.hpp"
#include "model/sparse_input.hpp"
#include "model/tensor.hpp"

namespace degnn {

class halo_cache {
 public:
  /// Version of a row never received.
  static constexpr std::uint64_t kNoVersion = ~std::uint64_t{0};

  /// halo: the partition's remote in-neighbours, sorted and unique (graph_partition::halo).
  explicit halo_cache(std::vector<node_id> halo = {}) : halo_(std::move(halo)) {}

  /// Keeps only rows resident[k] (halo indices, any order) of level k, and no row of a level
  /// past resident.size(); the others a step pulls are kept for that step (store(), then
  /// leaf_rows(cg, step), then release(step)). Shared features (share_features) are bounded
  /// alike: they take no memory here, but the rows a step pulls still travel. Call before
  /// ensure_levels; throws std::invalid_argument for an index outside the halo.
  void bound(std::vector<std::vector<std::uint32_t>> resident);
  bool bounded() const { return bounded_; }
  /// Whether row i of level has a place in the cache (every row unless bounded).
  bool resident(int level, std::size_t i) const { return slot(level, i) >= 0; }
  /// The halo indices with a place at level, ascending.
  std::vector<std::size_t> resident_rows(int level) const;
  /// Bytes of the row values kept (resident rows and those held for steps).
  std::size_t bytes() const;

  /// Makes levels 0 .. widths.size() - 1 hold every halo row at those widths (level 0: the input
  /// features, kept as the compressed rows they came in when sparse_features). A level that
  /// already has its width keeps what it holds.
  void ensure_levels(std::span<const Eigen::Index> widths, bool sparse_features = false);
  bool sparse_features() const { return sparse_features_; }
  /// Level 0 reads each halo node's feature row where its owner in `parts` (indexed by partition,
  /// every halo node's owner among them) holds it, instead of a copy: shards of one process.
  /// Answers for level 0 are still checked and confirm their rows; their values are not kept.
  void share_features(std::vector<std::shared_ptr<const graph_partition>> parts,
                      const partition_book& book);
  bool shares_features() const { return !shared_parts_.empty(); }
  std::size_t num_levels() const { return rows_.size(); }
  const std::vector<node_id>& halo() const { return halo_; }

  /// Row of global node g; throws std::invalid_argument when g is not in the halo.
  std::size_t index(node_id g) const;
  /// Row of global node g, -1 when g is not in the halo.
  std::int64_t find(node_id g) const;
  /// Whether row i of level is kept and was received (its value may be read without asking).
  bool holds(int level, std::size_t i) const;
  /// The kept value of row i of level (dense; shared features where their owner holds them), or
  /// of level 0 (compressed); holds(level, i) first.
  Eigen::Map<const RowVector> kept_row(int level, std::size_t i) const;
  sparse_row_ref kept_feature(std::size_t i) const;
  /// Whether level holds rows at all (ensure_levels ran for it).
  bool has_level(int level) const;
  /// Whether row i of level may be used at `step` without asking its owner: confirmed current at
  /// a step later than step - staleness (never for a row without a place).
  bool fresh(int level, std::size_t i, std::uint64_t step, int staleness) const;
  /// The version held of row i (kNoVersion: never received, or no place for it).
  std::uint64_t version(int level, std::size_t i) const;

  /// Stores an owner's answer to a read of `asked` (all of level `level`, in the order asked):
  /// `nodes` (a sub-sequence of asked, in the same order) came back with their versions and
  /// values; every asked row is confirmed current at `step`, as rows not sent are unchanged.
  /// Rows without a place are held for `step` only. Throws std::invalid_argument, leaving the
  /// cache unchanged, when nodes is not such a sub-sequence, a version is kNoVersion, or the
  /// values have the wrong shape.
  void store(int level, std::span<const node_id> asked, std::span<const node_id> nodes,
             std::span<const std::uint64_t> versions, const Matrix& values, std::uint64_t step);

  /// store() of level 0 when the features are compressed: row i of *rows is nodes[i]'s (every
  /// version is 0). The rows are kept as they came, not copied.
  void store_features(std::span<const node_id> asked, std::span<const node_id> nodes,
                      std::shared_ptr<const sparse_rows> rows, std::uint64_t step);

  /// Per level k of cg: (remote_leaves[k].size(), width of k) rows of its remote leaves (level 0
  /// stays empty when the features are compressed: leaf_features has them); rows without a place
  /// are those held for `step`. Throws std::invalid_argument when a level it needs is not there,
  /// or a row without a place was not received for the step.
  std::vector<Matrix> leaf_rows(const local_cg& cg, std::uint64_t step = 0) const;
  /// The compressed feature rows of cg's level-0 remote leaves, in their order.
  sparse_rows leaf_features(const local_cg& cg, std::uint64_t step = 0) const;
  /// Lets go of the rows held for `step`.
  void release(std::uint64_t step);
  /// Lets go of the rows held for every step up to `step` (steps that ended without a forward).
  void release_upto(std::uint64_t step);

 private:
  /// Where each of rows nodes[r] goes, checked before anything changes: only rows that were
  /// asked for, in the order asked, each with a real version (a peer cannot overwrite rows of
  /// another owner or rows nobody asked for); marks every asked row confirmed at step.
  /// Returns per row its slot, -1 for a row without a place.
  std::vector<std::int64_t> place(int level, std::span<const node_id> asked,
                                  std::span<const node_id> nodes,
                                  std::span<const std::uint64_t> versions, std::uint64_t step);
  /// Row i's place at level (i itself unless bounded), -1 none.
  std::int64_t slot(int level, std::size_t i) const;
  std::size_t num_slots(std::size_t level) const;

  /// Rows without a place that one step pulled, per level: where each node's row is.
  struct step_rows {
    std::vector<std::unordered_map<node_id, std::size_t>> at;  ///< per level: node -> row
    std::vector<std::vector<float>> values;                    ///< per level, row-major
    std::unordered_map<node_id, sparse_row_ref> features;      ///< level 0, compressed
    std::vector<std::shared_ptr<const sparse_rows>> blocks;    ///< what features point into
  };
  step_rows& held_for(std::uint64_t step);
  /// Level k's row of halo node g: kept, or held for `step`; throws when neither.
  const float* row_of(std::size_t k, node_id g, const step_rows* held, std::uint64_t step) const;
  const step_rows* held_rows(std::uint64_t step) const;  ///< null: none held for step

  std::vector<node_id> halo_;
  bool bounded_ = false;
  std::vector<std::vector<std::int32_t>> slot_;  ///< bounded: per level, per halo row (-1 none)
  std::vector<std::vector<std::uint32_t>> resident_;  ///< bounded: per level, ascending
  std::map<std::uint64_t, step_rows> held_;           ///< bounded: per step
  std::vector<Matrix> rows_;                          ///< per level: (slots, width)
  std::vector<std::vector<std::uint64_t>> version_;   ///< per level, per slot
  std::vector<std::vector<std::int64_t>> confirmed_;  ///< per level, per slot: step, -1 never
  bool sparse_features_ = false;
  std::vector<std::shared_ptr<const sparse_rows>> feature_blocks_;  ///< as they came
  std::vector<sparse_row_ref> feature_of_;                          ///< per slot (not when shared)
  /// share_features: the owners' partitions, and per halo row its owner's dense row.
  std::vector<std::shared_ptr<const graph_partition>> shared_parts_;
  std::vector<const float*> shared_rows_;
  std::vector<sparse_row_ref> shared_sparse_;  ///< per halo row, when the owners' are compressed
};

}  // namespace degnn
