// One graph partition as a shard holds it (owned nodes, their in-edges, features, labels, split,
// halo), and the on-disk layout of a partitioned dataset: partitions.meta, owner.bin (the book) and
// part-K/partition.bin, so that a node reads only the book and its own partition.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/dataset.hpp"
#include "model/partition_book.hpp"
#include "model/tensor.hpp"

namespace degnn {

/// Everything a shard needs about its part. Local id l is the position of owned[l].
struct graph_partition {
  std::int32_t part = 0;
  std::int32_t num_parts = 0;
  node_id num_global_nodes = 0;
  std::vector<node_id> owned;  ///< global ids, ascending
  /// In-edges of the owned nodes as CSR over local destination rows: row l (edges indptr[l] to
  /// indptr[l+1]) is the global CSR row of owned[l], sources ascending. Each edge of the graph is
  /// stored once, at its destination's owner.
  std::vector<edge_offset> indptr{0};  ///< size owned.size() + 1
  std::vector<node_id> src_global;     ///< global source id per edge
  std::vector<node_id> src_local;      ///< local source id per edge, -1 where the source is remote
  Matrix features;                     ///< (owned, num_features), rows in local order
  /// The same rows compressed, instead of features' (which then keeps its width and no rows): a
  /// run on --sparse-features (set_feature_layout).
  std::shared_ptr<const sparse_rows> sparse_features;
  /// The same dense rows where they lie in the mapped part file (load_partition with
  /// part_loading::map_features), instead of features' (which then keeps its width and no rows):
  /// the process's resident memory holds the rows it touches, not the part's.
  std::shared_ptr<const mapped_rows> mapped_features;
  std::vector<std::int32_t> labels;  ///< per owned node
  std::int32_t num_classes = 0;
  std::vector<node_id> train, valid, test;  ///< local ids, ascending
  std::vector<node_id> halo;                ///< remote in-neighbours: global ids, sorted, unique
  std::vector<std::int32_t> halo_owner;     ///< owner of halo[i]
  std::vector<std::int32_t> halo_degree;    ///< full in-degree of halo[i] (GCN normalisation)

  node_id num_owned() const { return static_cast<node_id>(owned.size()); }
  /// Full in-degree of local node l.
  std::int32_t in_degree(node_id l) const {
    return static_cast<std::int32_t>(indptr[static_cast<size_t>(l) + 1] -
                                     indptr[static_cast<size_t>(l)]);
  }
  edge_offset num_edges() const { return indptr.back(); }
  /// The dense feature rows (owned, num_features) wherever they lie: features or the mapping.
  /// Not for compressed rows (the map is then empty).
  Eigen::Map<const Matrix> dense_features() const;
  std::span<const node_id> in_neighbors_global(node_id l) const {
    return {
        src_global.data() + indptr[static_cast<size_t>(l)],
        static_cast<size_t>(indptr[static_cast<size_t>(l) + 1] - indptr[static_cast<size_t>(l)])};
  }
};

/// Makes p hold its features as compressed rows (sparse) or as dense rows; mapped rows made
/// compressed are read from the mapping, which p then lets go.
void set_feature_layout(graph_partition& p, bool sparse);
/// Copies mapped feature rows into p.features and lets the mapping go (a transform rewrites rows).
void copy_mapped_features(graph_partition& p);
/// Bytes a message is sized by per feature row of p: the dense row's, in either layout. The rows
/// a message carries are other partitions', so this partition's own density says nothing of
/// them; a compressed row takes at most twice its dense bytes (8 per non-zero against 4 per
/// entry), so a message of compressed rows stays within twice the cap.
std::size_t feature_row_bytes(const graph_partition& p);

/// Position of global node g in p.halo (sorted), -1 when g is not in it.
std::int64_t halo_position(const graph_partition& p, node_id g);
/// apply_feature_transform (model/feature_transform.hpp) on p's features, in either layout.
void apply_feature_transform(const std::string& name, graph_partition& p);
/// A run's feature settings on a part read from a file: its layout, then the transform.
void apply_feature_settings(graph_partition& p, bool sparse, const std::string& transform);

/// Cuts part `part` out of d (its features compressed when d's are) according to book (in memory;
/// write_partitions uses it per part).
/// copy_mapped_rows false: a dataset's mapped features are left where they lie (p.features keeps
/// their width and no rows; write_partition_file reads them from the mapping).
graph_partition extract_partition(const dataset& d, const partition_book& book, int part,
                                  bool copy_mapped_rows = true);
/// The same part from in-arcs instead of a graph: `arcs` packs (dst << 32 | src) for every
/// in-edge whose destination `part` owns, sorted and unique (as the dataset's CSR holds them);
/// `in_degree` is every node's full in-degree; `outline` has the labels, splits and the feature
/// width. p holds no feature rows (write them from the mapping with write_partition_file).
graph_partition assemble_partition(const dataset& outline, const partition_book& book, int part,
                                   std::span<const std::uint64_t> arcs,
                                   std::span<const std::int32_t> in_degree);

/// Contents of DIR/partitions.meta.
/// The partition files' format (2: per halo node its full in-degree, for GCN's normalisation of
/// remote leaves; 3: features as dense or compressed rows, as the set was cut), and the name of
/// the meta file in a partition set's folder.
inline constexpr std::int32_t kPartitionFormatVersion = 3;
inline constexpr const char* kPartitionMetaName = "partitions.meta";

struct partition_meta {
  std::int32_t format_version = 0;
  std::string dataset_name;
  node_id num_nodes = 0;
  edge_offset num_edges = 0;
  std::int32_t num_features = 0;
  std::int32_t num_classes = 0;
  std::int32_t num_parts = 0;
  std::string method;  ///< e.g. "metis", "random"
  std::uint64_t seed = 0;
  std::uint64_t owner_checksum = 0;  ///< ties each partition file to the book it was cut with
  std::string source;  ///< the dataset directory it was cut from, absolute (optional, may be "")
};

/// The checksum of an owner vector that partitions.meta records (owner_checksum).
std::uint64_t owner_checksum(std::span<const std::int32_t> owner);

/// Writes DIR/partitions.meta, DIR/owner.bin and DIR/part-K/partition.bin for K in [0, num_parts),
/// creating DIR. Each file is written to a temporary name and renamed, and the meta file last, so a
/// reader never sees a half-written set. owner has one entry in [0, num_parts) per node of d;
/// num_parts = max(owner) + 1 unless given. Throws std::invalid_argument on bad arguments and
/// data_error when a file cannot be written.
void write_partitions(const dataset& d, const std::vector<std::int32_t>& owner,
                      const std::filesystem::path& dir, std::string_view method, std::uint64_t seed,
                      int num_parts = 0, const std::filesystem::path& source = {});

/// The pieces write_partitions writes, for writers that cut the parts in several processes: one
/// part's file (its feature rows read from `rows_from` at p.owned when given: p then holds no
/// feature rows, only their width), the book, and the meta file, which goes last. Each file is
/// written to a temporary name and renamed.
void write_partition_file(const std::filesystem::path& file, const graph_partition& p,
                          std::uint64_t book_sum, const mapped_rows* rows_from = nullptr);
void write_partition_book(const std::filesystem::path& dir, std::span<const std::int32_t> owner,
                          int num_parts);
void write_partition_meta(const std::filesystem::path& dir, const partition_meta& m);

/// Each loader throws data_error naming the file and what is wrong with it (missing, truncated,
/// bad magic or version, checksum mismatch, sizes that disagree with partitions.meta, ids out of
/// range).
partition_meta load_partition_meta(const std::filesystem::path& dir);
/// What a cluster on a partition set needs of its dataset (name, sizes), from the set's meta:
/// a graph with no edges, features with no rows, no labels (the parts hold all of them).
dataset dataset_outline(const partition_meta& meta);
/// The text of a partitions.meta file (model/partition_meta.cpp).
std::string partition_meta_text(const partition_meta& m);
partition_book load_partition_book(const std::filesystem::path& dir);
/// How load_partition holds a part's dense feature rows: read into p.features, or left where
/// they lie in the mapped file (p.mapped_features; compressed rows are always read). Either way
/// every byte of the file is checked against its checksum first, and the pages read to check it
/// are handed back. The file must not be rewritten in place while it is mapped (the writers
/// replace files by renaming, which leaves a mapping its old contents).
enum class part_loading { read_features, map_features };
/// map_features, unless asked to read (in_memory) or the run rewrites the rows: compressed
/// (sparse) or transformed (any transform but "none").
part_loading part_loading_for(bool in_memory, bool sparse, const std::string& transform);
graph_partition load_partition(const std::filesystem::path& dir, int part,
                               part_loading how = part_loading::read_features);

/// DIR/part-K/partition.bin.
std::filesystem::path partition_file(const std::filesystem::path& dir, int part);

}  // namespace degnn
