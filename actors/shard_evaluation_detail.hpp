// Internals of the shard's evaluation shared by its two passes (docs/design.md section 2): the
// whole-layer pass (shard_evaluation.cpp) and, with a bounded halo cache, the range-by-range pass
// (shard_evaluation_ranges.cpp). Not part of the actor protocol.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "actors/shard_internal.hpp"

namespace degnn::shard_detail {

// Where an evaluation range reads its halo sources: halo row i is rows.row(where[i]) (where
// empty: row i), with in-degree degree[that row].
struct halo_view {
  const Matrix& rows;
  std::span<const std::int32_t> where;
  std::span<const std::int32_t> degree;
  Eigen::Index row(std::size_t i) const {
    return where.empty() ? static_cast<Eigen::Index>(i) : where[i];
  }
};

// One layer of an evaluation in flight.
struct evaluation_job {
  int layer = 1;
  std::uint64_t step = 0;
  std::uint8_t bits = 32;      ///< precision of the halo rows asked for
  bool keep_features = false;  ///< the set-up's first layer: the halo cache keeps feature rows
  // Range by range only:
  node_id begin = 0;                  ///< the next range's first owned node
  Matrix next;                        ///< h^(layer) of the owned nodes, filled range by range
  std::vector<std::int32_t> where;    ///< per halo row: its row among the range's, -1
  std::vector<std::int32_t> scratch;  ///< assemble_block's, kept between ranges
  caf::typed_response_promise<wire_message> rp;
};

struct halo_pulls {
  std::vector<wire_request<shard_actor, halo_atom>> requests;
  std::vector<std::vector<size_t>> positions;  ///< per request: indexes into the rows asked
  std::vector<int> owners;                     ///< per request
};

/// Index of a remote source among the partition's halo (sorted, and it is there: checked on load).
std::int32_t halo_index(const graph_partition& part, node_id global);
/// Layer 0's rows are the part's features (in memory or in its mapped file), above eval_h's.
Eigen::Map<const Matrix> layer_rows(const shard_state& st, int layer);
/// The end of the evaluation range that starts at begin (settings.evaluation_range owned nodes;
/// a last range of one node joins the one before).
node_id range_end(const shard_state& st, node_id begin);
/// h^(layer) of owned nodes [from, to) into rows of next, range by range, reading the halo's
/// rows in `halo`; scratch is assemble_block's.
void evaluate_owned(shard_state& st, int layer, node_id from, node_id to, const halo_view& halo,
                    Matrix& next, std::vector<std::int32_t>& scratch);
/// Copies each reply's rows into rows (at row positions[r][k]) and their in-degrees into degree;
/// each reply is let go once copied. Throws wire::wire_error for a reply of the wrong shape.
void take_halo_rows(shard_state& st, std::vector<wire_message>& replies,
                    const std::vector<std::vector<size_t>>& positions, std::uint8_t bits,
                    Matrix& rows, std::vector<std::int32_t>& degree);
/// The set-up's first layer: the halo cache keeps the feature rows it keeps (rows.row(i) is
/// nodes[i]'s).
void keep_feature_rows(shard_state& st, std::span<const node_id> nodes, const Matrix& rows,
                       std::uint64_t step);
/// Requests for h^(layer - 1) of halo rows `rows` (halo indexes), per owner, capped in size.
halo_pulls halo_requests(shard_state& st, const evaluation_job& job, std::span<const size_t> rows);
/// The coordinator's answer for a layer just computed (accuracy counts at the last layer).
wire_message layer_result(shard_state& st, int layer, std::uint64_t step);
/// A layer one evaluation range at a time (shard_evaluation_ranges.cpp); answers job->rp.
void evaluate_range_by_range(self_ptr self, std::shared_ptr<evaluation_job> job);

}  // namespace degnn::shard_detail
