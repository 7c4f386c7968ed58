// The reader side of the historical embeddings (docs/design.md section 6): the rows of a shard's
// halo (remote in-neighbours) it last pulled, per level, with the version each row has and the step
// its owner last confirmed it at, so that a step pulls only rows older than the staleness bound.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
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
  /// Whether level holds rows at all (ensure_levels ran for it).
  bool has_level(int level) const;
  /// Whether row i of level may be used at `step` without asking its owner: confirmed current at
  /// a step later than step - staleness.
  bool fresh(int level, std::size_t i, std::uint64_t step, int staleness) const;
  std::uint64_t version(int level, std::size_t i) const;

  /// Stores an owner's answer to a read of `asked` (all of level `level`, in the order asked):
  /// `nodes` (a sub-sequence of asked, in the same order) came back with their versions and
  /// values; every asked row is confirmed current at `step`, as rows not sent are unchanged.
  /// Throws std::invalid_argument, leaving the cache unchanged, when nodes is not such a
  /// sub-sequence, a version is kNoVersion, or the values have the wrong shape.
  void store(int level, std::span<const node_id> asked, std::span<const node_id> nodes,
             std::span<const std::uint64_t> versions, const Matrix& values, std::uint64_t step);

  /// store() of level 0 when the features are compressed: row i of *rows is nodes[i]'s (every
  /// version is 0). The rows are kept as they came, not copied.
  void store_features(std::span<const node_id> asked, std::span<const node_id> nodes,
                      std::shared_ptr<const sparse_rows> rows, std::uint64_t step);

  /// Per level k of cg: (remote_leaves[k].size(), width of k) rows of its remote leaves (level 0
  /// stays empty when the features are compressed: leaf_features has them).
  /// Throws std::invalid_argument when a level it needs is not there.
  std::vector<Matrix> leaf_rows(const local_cg& cg) const;
  /// The compressed feature rows of cg's level-0 remote leaves, in their order.
  sparse_rows leaf_features(const local_cg& cg) const;

 private:
  /// Where each of rows nodes[r] goes, checked before anything changes: only rows that were
  /// asked for, in the order asked, each with a real version (a peer cannot overwrite rows of
  /// another owner or rows nobody asked for); marks every asked row confirmed at step.
  std::vector<std::size_t> place(int level, std::span<const node_id> asked,
                                 std::span<const node_id> nodes,
                                 std::span<const std::uint64_t> versions, std::uint64_t step);

  std::vector<node_id> halo_;
  std::vector<Matrix> rows_;                          ///< per level: (halo, width)
  std::vector<std::vector<std::uint64_t>> version_;   ///< per level, per row
  std::vector<std::vector<std::int64_t>> confirmed_;  ///< per level, per row: step, -1 never
  bool sparse_features_ = false;
  std::vector<std::shared_ptr<const sparse_rows>> feature_blocks_;  ///< as they came
  std::vector<sparse_row_ref> feature_of_;                          ///< per halo row
  /// share_features: the owners' partitions, and per halo row its owner's dense row.
  std::vector<std::shared_ptr<const graph_partition>> shared_parts_;
  std::vector<const float*> shared_rows_;
};

}  // namespace degnn
