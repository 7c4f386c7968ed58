// Layer-wise inference: for each layer and each dst range, build the full-neighbour block, gather
// the source rows of the previous layer's output, apply the layer, scatter the rows back.
#include "model/inference.hpp"

#include "model/block_builder.hpp"
#include "model/sparse_input.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace degnn {

block full_neighbor_block(const csr_graph& g, std::span<const node_id> dst,
                          std::vector<std::int32_t>& scratch) {
  // Every in-neighbour "picked": the rows of the CSR, concatenated, relabelled as the sampler does.
  std::vector<std::int32_t> counts(dst.size());
  edge_offset total = 0;
  for (std::size_t i = 0; i < dst.size(); ++i) {
    counts[i] = static_cast<std::int32_t>(g.in_degree(dst[i]));
    total += counts[i];
  }
  if (total > INT32_MAX) throw std::invalid_argument("full_neighbor_block: too many edges");
  std::vector<node_id> picks;
  picks.reserve(static_cast<std::size_t>(total));
  for (node_id v : dst) {
    const auto row = g.in_neighbors(v);
    picks.insert(picks.end(), row.begin(), row.end());
  }
  block b;
  try {
    b = assemble_block(dst, counts, picks, scratch);
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument("full_neighbor_block: a destination appears twice");
  }
  b.src_degree.resize(b.src_nodes.size());
  for (std::size_t k = 0; k < b.src_nodes.size(); ++k)
    b.src_degree[k] = static_cast<std::int32_t>(g.in_degree(b.src_nodes[k]));
  return b;
}

namespace {

Matrix run_layers(const gnn_model& model, const csr_graph& g, const Matrix* dense,
                  const sparse_rows* sparse, node_id batch_nodes, std::int32_t keep = -1,
                  Matrix* kept = nullptr, const layer_progress& progress = {}) {
  const Eigen::Index rows = dense ? dense->rows() : sparse->rows();
  const Eigen::Index cols = dense ? dense->cols() : sparse->cols();
  if (rows != g.num_nodes || cols != model.config().in_dim)
    throw std::invalid_argument("layerwise_inference: features are not (num_nodes, in_dim)");
  if (batch_nodes <= 0) throw std::invalid_argument("layerwise_inference: batch_nodes must be > 0");
  if (kept && (keep < 0 || keep + 1 >= model.num_layers()))
    throw std::invalid_argument("layerwise_inference: the kept layer must be a hidden one");
  std::vector<std::int32_t> scratch(g.num_nodes, -1);
  std::vector<node_id> dst;
  Matrix prev;  // (num_nodes, in of layer l), the previous layer's output for l > 0
  Matrix next;
  Matrix h_src, out;
  for (std::int32_t l = 0; l < model.num_layers(); ++l) {
    const gnn_layer& layer = model.layer(l);
    const Matrix& h = l == 0 && dense ? *dense : prev;
    next.resize(g.num_nodes, layer.out_dim());  // (num_nodes, out)
    const bool last = l + 1 == model.num_layers();
    for (node_id begin = 0; begin < g.num_nodes; begin += batch_nodes) {
      const node_id end = std::min<node_id>(g.num_nodes, begin + batch_nodes);
      dst.resize(end - begin);
      std::iota(dst.begin(), dst.end(), begin);
      const block b = full_neighbor_block(g, dst, scratch);
      if (l == 0 && sparse) {
        sparse_layer_forward(layer, b, gather_rows(*sparse, b.src_nodes), out, nullptr);
      } else {
        h_src.resize(b.num_src(), h.cols());  // (num_src, in)
#pragma omp parallel for schedule(static)
        for (std::int32_t k = 0; k < b.num_src(); ++k)
          h_src.row(k) = h.row(b.src_nodes[k]);
        layer.apply(b, h_src, out, nullptr);  // (end - begin, out)
      }
      if (!last) relu_forward(out);
      next.middleRows(begin, end - begin) = out;
    }
    if (kept && l == keep) *kept = next;
    std::swap(prev, next);
    if (progress) progress(l + 1, model.num_layers());
  }
  return prev;
}

}  // namespace

Matrix layerwise_inference(const gnn_model& model, const csr_graph& g, const Matrix& features,
                           node_id batch_nodes) {
  return run_layers(model, g, &features, nullptr, batch_nodes);
}

Matrix layerwise_inference(const gnn_model& model, const csr_graph& g, const sparse_rows& features,
                           node_id batch_nodes) {
  return run_layers(model, g, nullptr, &features, batch_nodes);
}

Matrix layerwise_inference(const gnn_model& model, const csr_graph& g, const Matrix& features,
                           node_id batch_nodes, std::int32_t keep, Matrix* kept,
                           const layer_progress& progress) {
  return run_layers(model, g, &features, nullptr, batch_nodes, keep, kept, progress);
}

Matrix layerwise_inference(const gnn_model& model, const csr_graph& g, const sparse_rows& features,
                           node_id batch_nodes, std::int32_t keep, Matrix* kept) {
  return run_layers(model, g, nullptr, &features, batch_nodes, keep, kept);
}

double accuracy(const Matrix& logits, std::span<const std::int32_t> labels,
                std::span<const node_id> nodes) {
  if (nodes.empty()) return 0.0;
  std::int64_t correct = 0;
  for (node_id v : nodes) {
    Eigen::Index best = 0;
    logits.row(v).maxCoeff(&best);
    correct += best == labels[v];
  }
  return static_cast<double>(correct) / static_cast<double>(nodes.size());
}

}  // namespace degnn
