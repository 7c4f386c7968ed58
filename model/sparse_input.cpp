// Sparse input rows and the first layer on them (sparse_input.hpp). The aggregation of a block is
// the (num_dst, num_src) matrix of its edge weights, so the layer's mean, weighted or GCN sum is
// one sparse product, and the weight products and their gradients are sparse-dense products.
#include "model/sparse_input.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/aggregate.hpp"
#include "model/gat_layer.hpp"
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
  std::vector<sparse_row_ref> refs(ids.size());
  for (size_t r = 0; r < ids.size(); ++r) {
    if (ids[r] < 0 || ids[r] >= x.rows())
      throw std::out_of_range("gather_rows: row " + std::to_string(ids[r]) + " of " +
                              std::to_string(x.rows()));
    refs[r] = {&x, ids[r]};
  }
  return assemble_rows(refs, x.cols());
}

sparse_rows assemble_rows(std::span<const sparse_row_ref> refs, Eigen::Index cols) {
  std::int64_t nnz = 0;
  for (const auto& ref : refs) {
    if (!ref.from || ref.row < 0 || ref.row >= ref.from->rows() || ref.from->cols() != cols)
      throw std::invalid_argument("assemble_rows: a source row is missing, out of range or not " +
                                  std::to_string(cols) + " wide");
    const auto* outer = ref.from->m.outerIndexPtr();
    nnz += outer[ref.row + 1] - outer[ref.row];
  }
  if (nnz > std::numeric_limits<std::int32_t>::max())
    throw std::invalid_argument("assemble_rows: " + std::to_string(nnz) +
                                " non-zeros, more than 32-bit offsets hold");
  sparse_rows out;
  out.m.resize(static_cast<Eigen::Index>(refs.size()), cols);
  out.m.resizeNonZeros(static_cast<Eigen::Index>(nnz));
  std::int32_t* outer = out.m.outerIndexPtr();
  std::int32_t at = 0;
  outer[0] = 0;
  for (size_t r = 0; r < refs.size(); ++r) {
    const auto& x = refs[r].from->m;
    // A source that is not compressed has gaps between its rows: innerNonZeroPtr says how many.
    const auto begin = x.outerIndexPtr()[refs[r].row];
    const auto end = x.isCompressed() ? x.outerIndexPtr()[refs[r].row + 1]
                                      : begin + x.innerNonZeroPtr()[refs[r].row];
    std::copy(x.innerIndexPtr() + begin, x.innerIndexPtr() + end, out.m.innerIndexPtr() + at);
    std::copy(x.valuePtr() + begin, x.valuePtr() + end, out.m.valuePtr() + at);
    at += end - begin;
    outer[r + 1] = at;
  }
  return out;
}

sparse_rows sparse_from_parts(Eigen::Index cols, std::span<const std::int32_t> counts,
                              std::span<const std::int32_t> columns,
                              std::span<const float> values) {
  if (cols < 0) throw std::invalid_argument("sparse rows: negative width");
  if (columns.size() != values.size())
    throw std::invalid_argument("sparse rows: " + std::to_string(columns.size()) + " columns for " +
                                std::to_string(values.size()) + " values");
  std::int64_t total = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] < 0 || counts[r] > cols)
      throw std::invalid_argument("sparse rows: row " + std::to_string(r) + " claims " +
                                  std::to_string(counts[r]) + " non-zeros in " +
                                  std::to_string(cols) + " columns");
    total += counts[r];
  }
  if (total != static_cast<std::int64_t>(values.size()) ||
      total > std::numeric_limits<std::int32_t>::max())
    throw std::invalid_argument("sparse rows: the rows' counts add up to " + std::to_string(total) +
                                ", but " + std::to_string(values.size()) + " values came");
  sparse_rows out;
  out.m.resize(static_cast<Eigen::Index>(counts.size()), cols);
  out.m.resizeNonZeros(static_cast<Eigen::Index>(total));
  std::int32_t* outer = out.m.outerIndexPtr();
  outer[0] = 0;
  std::int32_t at = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    for (std::int32_t k = 0; k < counts[r]; ++k, ++at) {
      const auto c = columns[static_cast<size_t>(at)];
      const float v = values[static_cast<size_t>(at)];
      if (c < 0 || c >= cols || (k > 0 && c <= columns[static_cast<size_t>(at) - 1]))
        throw std::invalid_argument("sparse rows: row " + std::to_string(r) + " has column " +
                                    std::to_string(c) + " out of range or out of ascending order");
      if (!std::isfinite(v))
        throw std::invalid_argument("sparse rows: row " + std::to_string(r) +
                                    " has a non-finite value");
      out.m.innerIndexPtr()[at] = c;
      out.m.valuePtr()[at] = v;
    }
    outer[r + 1] = at;
  }
  return out;
}

std::vector<std::int32_t> row_counts(const sparse_rows& x) {
  std::vector<std::int32_t> counts(static_cast<size_t>(x.rows()));
  for (Eigen::Index r = 0; r < x.rows(); ++r)
    counts[static_cast<size_t>(r)] = static_cast<std::int32_t>(x.m.innerVector(r).nonZeros());
  return counts;
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
  } else if (const auto* gat = dynamic_cast<const gat_layer*>(&layer)) {
    check_input(layer, b, x_src, "gat_layer");
    if (cache && gat->input_dropout() > 0.0f)
      throw std::invalid_argument(
          "gat_layer: input dropout on compressed feature rows is not written (use dense rows)");
    attention_cache local;
    attention_cache* ac = &local;
    if (cache) {
      cache->attention = std::make_shared<attention_cache>();
      cache->input = x_src;
      ac = cache->attention.get();
    }
    ac->z = x_src.m * gat->weight;  // (num_src, H*F)
    gat->attend(b, *ac, cache ? &cache->attention_seed : nullptr, out);
  } else {
    throw std::invalid_argument("sparse input: the first layer is neither SAGE, GCN nor GAT");
  }
}

void sparse_layer_backward(gnn_layer& layer, const sparse_layer_cache& cache,
                           const Matrix& grad_out) {
  if (!cache.attention && grad_out.rows() != cache.agg.rows())  // GAT checks its own
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
  } else if (auto* gat = dynamic_cast<gat_layer*>(&layer)) {
    if (!cache.attention)
      throw std::logic_error("sparse_layer_backward: a GAT layer without a training forward");
    const Matrix grad_z = gat->backward_to_z(*cache.attention, grad_out);
    gat->grad_weight.noalias() += cache.input.m.transpose() * grad_z;  // (in, H*F)
  } else {
    throw std::invalid_argument("sparse input: the first layer is neither SAGE, GCN nor GAT");
  }
}

}  // namespace degnn
