// Exact layer-wise full-neighbour inference (docs/design.md section 2, evaluation): layer l is
// applied to every node before layer l+1, over ranges of destination nodes so the per-range blocks
// stay small; no sampling. Plus the accuracy of logits on a node list.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "model/block.hpp"
#include "model/csr_graph.hpp"
#include "model/gnn_model.hpp"
#include "model/tensor.hpp"

namespace degnn {

/// The block whose dst nodes are `dst` (distinct) with all their in-neighbours as sources:
/// src_nodes = dst, then the other neighbours in order of first appearance; src_degree = full
/// in-degree. `scratch` maps global id -> local index: size >= g.num_nodes, all -1 on entry, and
/// all -1 again on return.
block full_neighbor_block(const csr_graph& g, std::span<const node_id> dst,
                          std::vector<std::int32_t>& scratch);

/// logits (g.num_nodes, num_classes) for every node. features is (g.num_nodes, in_dim).
/// Each layer runs over dst ranges of batch_nodes nodes; peak extra memory is two (num_nodes,
/// width) activations plus one range's gathered source rows. ReLU between layers, no dropout.
Matrix layerwise_inference(const gnn_model& model, const csr_graph& g, const Matrix& features,
                           node_id batch_nodes = 8192);
/// The same on sparse input rows (model/sparse_input.hpp): the first layer runs on them.
Matrix layerwise_inference(const gnn_model& model, const csr_graph& g, const sparse_rows& features,
                           node_id batch_nodes = 8192);

/// Told after each layer of a layer-wise pass: the layer (1-based) and the number of layers.
using layer_progress = std::function<void(std::int32_t layer, std::int32_t layers)>;

/// layerwise_inference that also keeps layer `keep`'s output (0-based, a hidden layer: keep <
/// num_layers - 1, after its ReLU) in *kept, (num_nodes, hidden): the node embeddings of that
/// layer; `progress` (if set) is told after each layer.
Matrix layerwise_inference(const gnn_model& model, const csr_graph& g, const Matrix& features,
                           node_id batch_nodes, std::int32_t keep, Matrix* kept,
                           const layer_progress& progress = {});
Matrix layerwise_inference(const gnn_model& model, const csr_graph& g, const sparse_rows& features,
                           node_id batch_nodes, std::int32_t keep, Matrix* kept);

/// Fraction of `nodes` whose argmax logit equals labels[node]. logits is (num_nodes, C), one row
/// per global node id; labels has one entry per node. Returns 0 for an empty list.
double accuracy(const Matrix& logits, std::span<const std::int32_t> labels,
                std::span<const node_id> nodes);

}  // namespace degnn
