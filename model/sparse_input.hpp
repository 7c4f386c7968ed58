// Sparse input features (bag-of-words graphs: thousands of columns, a few non-zeros a row) and
// the first layer on them: the layer's products run on the compressed rows, so training makes no
// dense batch of input rows and keeps no dense (nodes x features) matrix, from the CSV parse and
// the dataset cache to the partition files and the messages between shards.
#pragma once

#include <Eigen/SparseCore>
#include <memory>
#include <span>
#include <vector>

#include "model/block.hpp"
#include "model/dataset.hpp"
#include "model/tensor.hpp"

namespace degnn {

class gnn_layer;
struct attention_cache;

/// Compressed rows (CSR) of input features; an exact copy of the dense rows without the zeros.
struct sparse_rows {
  Eigen::SparseMatrix<float, Eigen::RowMajor, std::int32_t> m;

  Eigen::Index rows() const { return m.rows(); }
  Eigen::Index cols() const { return m.cols(); }
};

/// Fraction of the entries of x that are not zero (0 for an empty matrix).
double density(const Matrix& x);
/// x without its zeros.
sparse_rows to_sparse(const Matrix& x);
/// Rows `ids` of x, in that order: (ids.size(), x.cols()). Throws std::out_of_range on a bad id.
sparse_rows gather_rows(const sparse_rows& x, std::span<const node_id> ids);
/// One row of a sparse_rows: a source row for assemble_rows.
struct sparse_row_ref {
  const sparse_rows* from = nullptr;
  Eigen::Index row = 0;
};
/// Rows refs[i], in that order: (refs.size(), cols). Throws std::invalid_argument when a row is
/// out of range or of another width.
sparse_rows assemble_rows(std::span<const sparse_row_ref> refs, Eigen::Index cols);
/// Compressed rows from their arrays as files and peers send them: counts[r] non-zeros in row r,
/// columns strictly ascending within a row and in [0, cols), values finite. Throws
/// std::invalid_argument naming the first thing that does not hold.
sparse_rows sparse_from_parts(Eigen::Index cols, std::span<const std::int32_t> counts,
                              std::span<const std::int32_t> columns, std::span<const float> values);
/// The non-zeros of each row of x (the counts sparse_from_parts takes).
std::vector<std::int32_t> row_counts(const sparse_rows& x);
/// The dense matrix (for tests and for pipelines that take dense rows).
Matrix to_dense(const sparse_rows& x);
/// Divides each row by the sum of its absolute values (all-zero rows stay), as
/// --normalize-features row does to a dense matrix (normalize_rows_l1).
void normalize_rows(sparse_rows& x);

/// Moves d's features into d.sparse_features (d.features keeps its width and no rows).
void make_features_sparse(dataset& d);

/// What the first layer keeps for its backward on sparse input.
struct sparse_layer_cache {
  sparse_rows h_dst;  ///< (num_dst, in): SAGE's self rows
  sparse_rows agg;    ///< (num_dst, in): the aggregated neighbour rows
  sparse_rows input;  ///< (num_src, in): GAT's source rows (its weight gradient)
  std::shared_ptr<attention_cache> attention;  ///< GAT's forward past the projection
  std::uint64_t attention_seed = 0;            ///< GAT's attention dropout, set by the caller
};

/// layer.apply(b, dense rows of x_src, out, ...), computed on the compressed rows, for a SAGE, a
/// GCN or a GAT layer (GAT: the projection runs on them, the attention on its dense output, no
/// input dropout); fills *cache for sparse_layer_backward when cache is not null.
void sparse_layer_forward(const gnn_layer& layer, const block& b, const sparse_rows& x_src,
                          Matrix& out, sparse_layer_cache* cache);
/// Accumulates the layer's parameter gradients for grad_out (num_dst, out), as layer.backward
/// does; the input gets no gradient (features are constants).
void sparse_layer_backward(gnn_layer& layer, const sparse_layer_cache& cache,
                           const Matrix& grad_out);

}  // namespace degnn
