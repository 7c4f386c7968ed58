// Sparse input rows and the first layer on them (sparse_input.hpp). The aggregation of a block is
// the (num_dst, num_src) matrix of its edge weights, so the layer's mean, weighted or GCN sum is
// one sparse product, and the weight products and their gradients are sparse-dense products.
#include "model/sparse_input.hpp"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/aggregate.hpp"
#include "model/layers.hpp"

namespace degnn {

namespace {

using sparse_matrix = Eigen::SparseMatrix<float, Eigen::RowMajor, std::int32_t>;

/// (num_dst, num_src): row i holds dst i's edge weights (and its self term, at column i).
sparse_matrix aggregation_matrix(const block& b, const std::vector<float>* edge,
                                 const std::vector<float>* self_term) {
  std::vector<Eigen::Triplet<float, std::int32_t>> t;
  t.reserve(b.indices.size() + (self_term ? self_term->size() : 0));
  for (std::int32_t i = 0; i < b.num_dst(); ++i) {
    const auto begin = b.indptr[static_cast<size_t>(i)], end = b.indptr[static_cast<size_t>(i) + 1];
    for (auto e = begin; e < end; ++e) {
      // Without weights: the plain mean over the sampled neighbours.
      const float w =
          edge ? (*edge)[static_cast<size_t>(e)] : 1.0f / static_cast<float>(end - begin);
      t.emplace_back(i, b.indices[static_cast<size_t>(e)], w);
    }
    if (self_term && !self_term->empty())
      t.emplace_back(i, i, (*self_term)[static_cast<size_t>(i)]);
  }
  sparse_matrix a(b.num_dst(), b.num_src());
  a.setFromTriplets(t.begin(), t.end());  // a neighbour picked twice counts twice
  return a;
}

void check_input(const gnn_layer& layer, const block& b, const sparse_rows& x, const char* who) {
  if (x.rows() != b.num_src() || x.cols() != layer.in_dim())
    throw std::invalid_argument(std::string(who) + ": sparse input is " + std::to_string(x.rows()) +
                                " x " + std::to_string(x.cols()) + ", the block needs " +
                                std::to_string(b.num_src()) + " x " +
                                std::to_string(layer.in_dim()));
}

}  // namespace

double density(const Matrix& x) {
  if (x.size() == 0) return 0.0;
  return static_cast<double>((x.array() != 0.0f).count()) / static_cast<double>(x.size());
}

sparse_rows to_sparse(const Matrix& x) {
  sparse_rows out;
  out.m = x.sparseView(0.0f, 0.0f);  // keeps every non-zero, however small
  out.m.makeCompressed();
  return out;
}

sparse_rows gather_rows(const sparse_rows& x, std::span<const node_id> ids) {
  sparse_rows out;
  out.m.resize(static_cast<Eigen::Index>(ids.size()), x.cols());
  std::int64_t nnz = 0;
  for (node_id v : ids) {
    if (v < 0 || v >= x.rows())
      throw std::out_of_range("gather_rows: row " + std::to_string(v) + " of " +
                              std::to_string(x.rows()));
    nnz += x.m.outerIndexPtr()[v + 1] - x.m.outerIndexPtr()[v];
  }
  out.m.resizeNonZeros(static_cast<Eigen::Index>(nnz));
  std::int32_t* outer = out.m.outerIndexPtr();
  std::int32_t at = 0;
  outer[0] = 0;
  for (size_t r = 0; r < ids.size(); ++r) {
    const auto begin = x.m.outerIndexPtr()[ids[r]], end = x.m.outerIndexPtr()[ids[r] + 1];
    std::copy(x.m.innerIndexPtr() + begin, x.m.innerIndexPtr() + end, out.m.innerIndexPtr() + at);
    std::copy(x.m.valuePtr() + begin, x.m.valuePtr() + end, out.m.valuePtr() + at);
    at += end - begin;
    outer[r + 1] = at;
  }
  return out;
}

Matrix to_dense(const sparse_rows& x) {
  return Matrix(x.m);
}

void normalize_rows(sparse_rows& x) {
  // In float, summed in row order, as normalize_rows_l1 does on dense rows (zeros add nothing).
  for (Eigen::Index r = 0; r < x.m.outerSize(); ++r) {
    float sum = 0;
    for (decltype(x.m)::InnerIterator it(x.m, r); it; ++it)
      sum += std::abs(it.value());
    if (sum > 0)
      for (decltype(x.m)::InnerIterator it(x.m, r); it; ++it)
        it.valueRef() /= sum;
  }
}

void make_features_sparse(dataset& d) {
  if (d.sparse_features) return;
  d.sparse_features = std::make_shared<const sparse_rows>(to_sparse(d.features));
  d.features = Matrix(0, d.features.cols());
}

void sparse_layer_forward(const gnn_layer& layer, const block& b, const sparse_rows& x_src,
                          Matrix& out, sparse_layer_cache* cache) {
  sparse_layer_cache local;
  sparse_layer_cache& c = cache ? *cache : local;
  if (const auto* sage = dynamic_cast<const sage_layer*>(&layer)) {
    check_input(layer, b, x_src, "sage_layer");
    if (!b.edge_weight.empty() && b.edge_weight.size() != static_cast<size_t>(b.num_edges()))
      throw std::invalid_argument("sage_layer: edge weights do not match the block's edges");
    const sparse_matrix a =
        aggregation_matrix(b, b.edge_weight.empty() ? nullptr : &b.edge_weight, nullptr);
    c.agg.m = a * x_src.m;                     // (nd, in)
    c.h_dst.m = x_src.m.topRows(b.num_dst());  // dst rows are the first source rows
    out.noalias() = c.h_dst.m * sage->w_self;
    out.noalias() += c.agg.m * sage->w_neigh;
    out.rowwise() += sage->bias.row(0);
  } else if (const auto* gcn = dynamic_cast<const gcn_layer*>(&layer)) {
    check_input(layer, b, x_src, "gcn_layer");
    const edge_weights w = gcn_normalization(b);
    c.agg.m = aggregation_matrix(b, &w.edge, &w.self_term) * x_src.m;
    out.noalias() = c.agg.m * gcn->weight;
    out.rowwise() += gcn->bias.row(0);
  } else {
    throw std::invalid_argument("sparse input: the first layer is neither SAGE nor GCN");
  }
}

void sparse_layer_backward(gnn_layer& layer, const sparse_layer_cache& cache,
                           const Matrix& grad_out) {
  if (grad_out.rows() != cache.agg.rows())
    throw std::invalid_argument("sparse_layer_backward: the gradient has " +
                                std::to_string(grad_out.rows()) + " rows, the forward made " +
                                std::to_string(cache.agg.rows()));
  if (auto* sage = dynamic_cast<sage_layer*>(&layer)) {
    sage->grad_w_self.noalias() += cache.h_dst.m.transpose() * grad_out;
    sage->grad_w_neigh.noalias() += cache.agg.m.transpose() * grad_out;
    sage->grad_bias += grad_out.colwise().sum();
  } else if (auto* gcn = dynamic_cast<gcn_layer*>(&layer)) {
    gcn->grad_weight.noalias() += cache.agg.m.transpose() * grad_out;
    gcn->grad_bias += grad_out.colwise().sum();
  } else {
    throw std::invalid_argument("sparse input: the first layer is neither SAGE nor GCN");
  }
}

}  // namespace degnn
