// The GNN model: a stack of SAGE, GCN or GAT layers with ReLU + dropout between them, trained on
// sampled mini-batches. Parameters are exposed as a flat list for the gradient all-reduce.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/block.hpp"
#include "model/layers.hpp"
#include "model/tensor.hpp"

namespace degnn {

struct sparse_rows;
struct sparse_layer_cache;

/// A model's input given as the whole feature matrix, a row per node id (gnn_model::forward).
struct feature_table {
  const Matrix* rows = nullptr;
};

enum class model_kind : std::int32_t { sage = 0, gcn = 1, gat = 2 };

/// "sage", "gcn" or "gat": the name options, model files and summaries use.
const char* model_kind_name(model_kind k);

struct model_config {
  model_kind kind = model_kind::sage;
  std::int32_t in_dim = 0;       ///< input feature width
  std::int32_t hidden = 256;     ///< width of every hidden layer
  std::int32_t num_classes = 0;  ///< logits width
  std::int32_t num_layers = 2;   ///< = number of blocks in a batch
  float dropout = 0.5f;          ///< drop probability between layers (training only)
  // GAT only: hidden layers concatenate `heads` heads of hidden/heads each, the last layer
  // averages `output_heads` heads of num_classes each.
  std::int32_t heads = 8;
  std::int32_t output_heads = 1;
  float attention_dropout = 0.6f;  ///< drop probability of an attention weight (training only)
  float input_dropout = 0.0f;      ///< drop probability of an input feature (first layer, training)

  bool operator==(const model_config&) const = default;
};

class gnn_model {
 public:
  /// Builds the layers (layer 0: in_dim -> hidden, ..., last: hidden -> num_classes) with Glorot
  /// weights from init_seed. Throws std::invalid_argument on a non-positive size.
  explicit gnn_model(const model_config& config, std::uint64_t init_seed = 0);

  /// logits (num seeds, num_classes) of the batch. input is (num inputs, in_dim), rows in
  /// batch.blocks[0].src_nodes order. training: apply dropout (mask from dropout_seed) and keep
  /// the activations for backward(); the batch must then stay alive until backward() returns.
  Matrix forward(const sampled_batch& batch, const Matrix& input, bool training,
                 std::uint64_t dropout_seed);
  /// forward() on sparse input rows (model/sparse_input.hpp): the first layer runs on the
  /// compressed rows. A backward of such a forward asked for grad_input throws std::logic_error
  /// (features are constants).
  Matrix forward(const sampled_batch& batch, const sparse_rows& input, bool training,
                 std::uint64_t dropout_seed);

  /// forward() with the whole feature matrix as input (a row per node id, feature_table): the
  /// first layer reads the rows its block's source nodes name in place, so no batch of input
  /// rows is gathered. The same logits, bit for bit; no input gradient.
  Matrix forward(const sampled_batch& batch, const feature_table& input, bool training,
                 std::uint64_t dropout_seed);

  /// Back-propagates grad_logits (num seeds, num_classes) of the last training forward and adds
  /// to gradients(). grad_input, when non-null, is set to d loss / d input (num inputs, in_dim);
  /// leaving it null skips the widest scatter of the step.
  void backward(const Matrix& grad_logits, Matrix* grad_input = nullptr);

  /// All parameters and their gradients, in the same order and shapes (layer by layer).
  std::vector<Matrix*> parameters();
  std::vector<const Matrix*> parameters() const;
  std::vector<Matrix*> gradients();
  std::vector<const Matrix*> gradients() const;
  void zero_grad();
  /// Total number of scalars in parameters().
  std::size_t num_parameters() const;

  const model_config& config() const { return config_; }
  std::int32_t num_layers() const { return static_cast<std::int32_t>(layers_.size()); }
  gnn_layer& layer(std::int32_t l) { return *layers_[l]; }
  const gnn_layer& layer(std::int32_t l) const { return *layers_[l]; }

 private:
  model_config config_;
  std::vector<std::unique_ptr<gnn_layer>> layers_;
  // Training cache: batch of the last forward, output of each non-last layer after ReLU and
  // dropout, and its dropout mask.
  const sampled_batch* batch_ = nullptr;
  std::vector<Matrix> hidden_;
  std::vector<Matrix> masks_;
  /// The first layer's cache of a training forward on sparse input (null after a dense one).
  std::shared_ptr<sparse_layer_cache> sparse_cache_;

  /// The last training forward read a feature_table (no input gradient then).
  bool table_input_ = false;

  Matrix run(const sampled_batch& batch, const Matrix* dense, const sparse_rows* sparse, bool table,
             bool training, std::uint64_t dropout_seed);
};

/// The dropout seed of training step `step` of a run seeded `seed`: every pipeline keys the
/// step's dropout masks (and GAT's attention dropout) on it, so they drop alike.
std::uint64_t step_dropout_seed(std::uint64_t seed, std::uint64_t step);
/// Seed of the dropout mask after layer `layer` for a forward with `dropout_seed`; pipelines
/// that compute a batch piecewise use it to drop exactly what gnn_model::forward drops.
std::uint64_t layer_dropout_seed(std::uint64_t dropout_seed, std::int32_t layer);
/// Seed of layer `layer`'s attention dropout (GAT) for a forward with `dropout_seed`.
std::uint64_t attention_dropout_seed(std::uint64_t dropout_seed, std::int32_t layer);

/// Concatenates the matrices' entries (row-major, in list order) into one vector.
std::vector<float> flatten(std::span<const Matrix* const> mats);
std::vector<float> flatten(std::span<Matrix* const> mats);
/// Overloads so a vector from parameters() / gradients() converts without ambiguity.
std::vector<float> flatten(const std::vector<const Matrix*>& mats);
std::vector<float> flatten(const std::vector<Matrix*>& mats);
/// Inverse of flatten: copies flat into the matrices (whose shapes must already be set).
/// Throws std::invalid_argument when the sizes differ.
void unflatten(std::span<const float> flat, std::span<Matrix* const> mats);

}  // namespace degnn
