// Neighbour aggregation kernels over one sampled block (docs/design.md section 2): sum, mean and
// per-edge weighted sum (GCN), each with its backward. Free functions so that a shard can compute
// partial neighbour sums and a batch owner can finish the mean, piecewise.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/block.hpp"
#include "model/tensor.hpp"

namespace degnn {

/// The block's edges grouped by source row: the in-edges of dst i are block rows; here the
/// out-edges of src u are edge[indptr[u] .. indptr[u+1]) (edge ids into block.indices, ascending),
/// going to dst[same range]. Lets backward gather per src row, so no two threads write one row
/// and the summation order (and so the result) does not depend on the thread count.
struct block_transpose {
  std::vector<std::int64_t> indptr;  ///< num_src + 1
  std::vector<std::int32_t> dst;     ///< num_edges, local dst index of each edge
  std::vector<std::int64_t> edge;    ///< num_edges, edge id in the block's CSR
};

/// Counting sort of the block's edges by source; O(num_src + num_edges).
block_transpose transpose_block(const block& b);

/// Sampled neighbour count of every dst row (indptr differences), as floats for scaling.
std::vector<float> neighbor_counts(const block& b);

/// Per-edge weights (and an optional self term per dst row) of a weighted sum aggregation.
struct edge_weights {
  std::vector<float> edge;       ///< num_edges, weight of edge e (block CSR order)
  std::vector<float> self_term;  ///< num_dst or empty: weight of dst i's own row (src row i)
};

/// GCN symmetric normalisation with self loops, d_hat = full in-degree + 1 (block.src_degree):
/// edge u->v weighs 1/sqrt(d_hat_u d_hat_v), the self term 1/d_hat_v. A dst row that was sampled
/// (0 < count < degree) has its edge weights scaled by degree/count so the neighbour sum stays an
/// unbiased estimate of the full one; with all neighbours (fanout -1) this is exactly GCN.
edge_weights gcn_normalization(const block& b);

/// out (num_dst, F) = sum over the sampled neighbours u of dst i of h_src.row(u): the partial
/// sum a shard returns for its own neighbours. h_src is (num_src, F). out is resized.
void sum_aggregate(const block& b, const Matrix& h_src, Matrix& out);
/// grad_src (num_src, F) += d out / d h_src applied to grad_out (num_dst, F). grad_src must
/// already have its shape. With accumulate == false grad_src is resized and overwritten instead
/// (same for every backward below): saves a separate zeroing pass over a wide gradient.
void sum_aggregate_backward(const block& b, const block_transpose& t, const Matrix& grad_out,
                            Matrix& grad_src, bool accumulate = true);

/// out (num_dst, F) = mean over the sampled neighbours of dst i of h_src.row(u); a dst row with
/// no neighbour gets a zero row. h_src is (num_src, F), or with row_of a table whose row
/// row_of[u] is src row u (the first layer reading the feature matrix by node id, ungathered).
void mean_aggregate(const block& b, const Matrix& h_src, Matrix& out,
                    std::span<const node_id> row_of = {});
/// grad_src (num_src, F) += backward of mean_aggregate for grad_out (num_dst, F).
void mean_aggregate_backward(const block& b, const block_transpose& t, const Matrix& grad_out,
                             Matrix& grad_src, bool accumulate = true);

/// Divides row i of m by counts[i] (rows with count 0 become zero): finishes a mean from the sum
/// of partial sums.
void divide_rows_by_count(Matrix& m, std::span<const float> counts);

/// out (num_dst, F) = self_term[i] h_src.row(i) + sum_e edge[e] h_src.row(indices[e]); row_of as
/// in mean_aggregate.
void weighted_aggregate(const block& b, const edge_weights& w, const Matrix& h_src, Matrix& out,
                        std::span<const node_id> row_of = {});
/// grad_src (num_src, F) += backward of weighted_aggregate for grad_out (num_dst, F).
void weighted_aggregate_backward(const block& b, const block_transpose& t, const edge_weights& w,
                                 const Matrix& grad_out, Matrix& grad_src, bool accumulate = true);

}  // namespace degnn
