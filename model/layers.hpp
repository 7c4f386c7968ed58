// Layers of the GNN (docs/design.md section 2): dense product, GraphSAGE-mean, GCN, ReLU, dropout,
// softmax cross-entropy and Glorot init. Forward and backward sit side by side; each is also a
// free function so the decentralized pipeline can run the pieces on different workers.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/aggregate.hpp"
#include "model/block.hpp"
#include "model/tensor.hpp"

namespace degnn {

// -- dense product --

/// out (n, out) = x (n, in) * w (in, out) [+ b (1, out) broadcast over rows when b != nullptr].
void dense_forward(const Matrix& x, const Matrix& w, const Matrix* b, Matrix& out);
/// Backward of dense_forward for grad_out (n, out): grad_w (in, out) += x^T grad_out,
/// grad_b (1, out) += column sums (when non-null), grad_x (n, in) = grad_out w^T (when non-null).
void dense_backward(const Matrix& x, const Matrix& w, const Matrix& grad_out, Matrix& grad_w,
                    Matrix* grad_b, Matrix* grad_x);

// -- activations and regularisation --

/// x = max(x, 0), in place.
void relu_forward(Matrix& x);
/// grad (n, f) *= [out > 0], out being relu_forward's result (n, f).
void relu_backward(const Matrix& out, Matrix& grad);

/// Inverted dropout in place: each entry is kept with probability 1-p and scaled by 1/(1-p).
/// mask (n, f) gets 0 or 1/(1-p). Entry (r, c) is decided by a hash of (seed, r*cols+c), so the
/// mask is the same for any thread count. p == 0 leaves x alone and makes an all-ones mask.
void dropout_forward(Matrix& x, float p, std::uint64_t seed, Matrix& mask);
/// grad (n, f) *= mask.
void dropout_backward(const Matrix& mask, Matrix& grad);
/// Dropout whose mask entry (r, c) is a hash of (seed, row_keys[r], c): a node's mask does not
/// depend on where its row sits, so pipelines that order rows differently drop the same entries.
void dropout_forward_keyed(Matrix& x, float p, std::uint64_t seed,
                           std::span<const node_id> row_keys, Matrix& mask);

/// Mean softmax cross-entropy over rows with labels[r] >= 0 (negative = unlabelled, ignored).
/// logits (B, C); grad (B, C) is set to d loss / d logits (zero rows for unlabelled).
/// Returns the loss (0 when no row is labelled), accumulated in double.
double softmax_cross_entropy(const Matrix& logits, std::span<const std::int32_t> labels,
                             Matrix& grad);

/// Glorot/Xavier uniform: entries of w (fan_in, fan_out) ~ U(-a, a), a = sqrt(6/(fan_in+fan_out)),
/// from a 64-bit seed; the same seed gives the same matrix on every platform.
void glorot_uniform(Matrix& w, std::uint64_t seed);

// -- message-passing layers --

struct attention_cache;

/// What forward keeps for backward (empty after an inference-only forward).
struct layer_cache {
  Matrix h_dst;          ///< (num_dst, in): the dst rows of the input (SAGE self term)
  Matrix agg;            ///< (num_dst, in): aggregated neighbour features
  edge_weights weights;  ///< GCN normalisation of the block
  /// GAT (model/gat_layer.hpp): the projections, scores and softmax of the forward.
  std::shared_ptr<attention_cache> attention;
  /// Seed of a training forward's attention dropout (GAT), set before the forward.
  std::uint64_t attention_seed = 0;
};

/// One message-passing layer: parameters, their gradients (same order and shapes) and a cache.
class gnn_layer {
 public:
  gnn_layer(std::int32_t in_dim, std::int32_t out_dim) : in_dim_(in_dim), out_dim_(out_dim) {}
  virtual ~gnn_layer() = default;

  /// h_src (num_src, in) -> out (num_dst, out), num_src/num_dst of block b. Fills *cache with
  /// what backward needs when cache != nullptr. Const: inference shares one model.
  void apply(const block& b, const Matrix& h_src, Matrix& out, layer_cache* cache) const {
    apply_rows(b, h_src, {}, out, cache);
  }
  /// apply() on the rows of `table` that the block's source nodes name (a row per node id): the
  /// first layer reads the feature matrix in place instead of a gathered copy of its rows. The
  /// same result, bit for bit.
  void apply_from_table(const block& b, const Matrix& table, Matrix& out,
                        layer_cache* cache) const {
    apply_rows(b, table, b.src_nodes, out, cache);
  }
  /// Keys the attention dropout of the next training forward() (GAT; other layers ignore it).
  void set_attention_seed(std::uint64_t seed) { cache_.attention_seed = seed; }
  /// apply() that keeps the cache in the layer when keep_cache (training).
  void forward(const block& b, const Matrix& h_src, Matrix& out, bool keep_cache) {
    apply(b, h_src, out, keep_cache ? &cache_ : nullptr);
  }
  /// apply_from_table() that keeps the cache in the layer when keep_cache.
  void forward_from_table(const block& b, const Matrix& table, Matrix& out, bool keep_cache) {
    apply_from_table(b, table, out, keep_cache ? &cache_ : nullptr);
  }
  /// grad_out (num_dst, out): accumulates into gradients(); when grad_src != nullptr also sets
  /// it to d loss / d h_src, (num_src, in). Needs a forward with keep_cache on the same block.
  void backward(const block& b, const Matrix& grad_out, Matrix* grad_src) {
    backward(b, cache_, grad_out, grad_src);
  }
  /// backward() with a cache the caller kept (filled by apply on the same block): lets one layer
  /// serve several sub-graphs in flight, as a shard does for pushes from several batch owners.
  virtual void backward(const block& b, const layer_cache& cache, const Matrix& grad_out,
                        Matrix* grad_src) = 0;

  virtual std::vector<Matrix*> parameters() = 0;
  virtual std::vector<Matrix*> gradients() = 0;
  /// Glorot weights from seed, zero bias.
  virtual void init(std::uint64_t seed) = 0;

  std::int32_t in_dim() const { return in_dim_; }
  std::int32_t out_dim() const { return out_dim_; }

 protected:
  /// apply(): row_of empty, h_src is (num_src, in); else src row u is h_src.row(row_of[u]).
  virtual void apply_rows(const block& b, const Matrix& h_src, std::span<const node_id> row_of,
                          Matrix& out, layer_cache* cache) const = 0;
  /// Throws std::invalid_argument unless h_src (with row_of) holds every src row at width in.
  void check_input(const block& b, const Matrix& h_src, std::span<const node_id> row_of,
                   const char* who) const;

  std::int32_t in_dim_, out_dim_;
  layer_cache cache_;
};

/// GraphSAGE-mean: out (num_dst, out) = h_dst W_self + mean_neigh(h) W_neigh + b.
/// Aggregates before the product: the sampled blocks have many more sources than destinations,
/// so projecting all sources first would cost more GEMM than the mean saves.
class sage_layer final : public gnn_layer {
 public:
  sage_layer(std::int32_t in_dim, std::int32_t out_dim);
  void apply_rows(const block& b, const Matrix& h_src, std::span<const node_id> row_of, Matrix& out,
                  layer_cache* cache) const override;
  using gnn_layer::backward;
  void backward(const block& b, const layer_cache& cache, const Matrix& grad_out,
                Matrix* grad_src) override;
  std::vector<Matrix*> parameters() override { return {&w_self, &w_neigh, &bias}; }
  std::vector<Matrix*> gradients() override { return {&grad_w_self, &grad_w_neigh, &grad_bias}; }
  void init(std::uint64_t seed) override;

  Matrix w_self, w_neigh;  ///< (in, out)
  Matrix bias;             ///< (1, out)
  Matrix grad_w_self, grad_w_neigh, grad_bias;
};

/// GCN: out (num_dst, out) = Agg_gcn(h) W + b, Agg_gcn from gcn_normalization (self loop,
/// symmetric normalisation, unbiased rescaling of sampled rows).
class gcn_layer final : public gnn_layer {
 public:
  gcn_layer(std::int32_t in_dim, std::int32_t out_dim);
  void apply_rows(const block& b, const Matrix& h_src, std::span<const node_id> row_of, Matrix& out,
                  layer_cache* cache) const override;
  using gnn_layer::backward;
  void backward(const block& b, const layer_cache& cache, const Matrix& grad_out,
                Matrix* grad_src) override;
  std::vector<Matrix*> parameters() override { return {&weight, &bias}; }
  std::vector<Matrix*> gradients() override { return {&grad_weight, &grad_bias}; }
  void init(std::uint64_t seed) override;

  Matrix weight;  ///< (in, out)
  Matrix bias;    ///< (1, out)
  Matrix grad_weight, grad_bias;
};

}  // namespace degnn
