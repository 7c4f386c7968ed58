// One model replica with its optimiser: the unit of data-parallel training. The single-process
// trainer and every pipeline's batch owner drive training through this, so they compute alike.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/adam.hpp"
#include "model/block.hpp"
#include "model/gnn_model.hpp"
#include "model/tensor.hpp"

namespace degnn {

struct replica_config {
  std::string model = "sage";  ///< sage | gcn | gat
  std::int32_t in_dim = 0, hidden = 128, num_classes = 0, num_layers = 2;
  float dropout = 0.5f;
  /// GAT only (model_config): heads of the hidden layers and of the output layer, dropout of the
  /// attention weights and of the input features.
  std::int32_t heads = 8, output_heads = 1;
  float attention_dropout = 0.6f, input_dropout = 0.0f;
  float lr = 0.01f, weight_decay = 0.0f;
  std::uint64_t seed = 1;  ///< parameter initialisation
};

struct step_stats {
  double loss_sum = 0;  ///< summed cross-entropy over the labelled seeds
  std::uint32_t seeds = 0;
  std::uint32_t correct = 0;
};

/// Softmax cross-entropy of logits (B, C) against labels (negative: unlabelled, skipped) with
/// the counts of a step; grad_logits receives d (mean loss) / d logits.
step_stats classification_loss(const Matrix& logits, std::span<const std::int32_t> labels,
                               Matrix& grad_logits);

/// What the batch owner's top layer leaves for the shards (decentralized pipeline).
struct top_step {
  step_stats stats;
  Matrix grad_self;     ///< (B, width): d loss / d the seeds' own rows
  Matrix grad_partial;  ///< (B, width): d loss / d any shard's partial sum of seed i
};

class model_replica {
 public:
  /// Throws std::invalid_argument for an unknown model name or a non-positive size.
  explicit model_replica(const replica_config& c);

  const replica_config& config() const { return config_; }

  /// Forward, loss and backward of one mini-batch. inputs: (batch.inputs().size(), in_dim) rows
  /// in blocks[0].src_nodes order; labels: one per seed. Leaves the gradient (of the mean loss
  /// over the seeds) in the replica.
  step_stats train_step(const sampled_batch& batch, const Matrix& inputs,
                        std::span<const std::int32_t> labels, std::uint64_t dropout_seed);
  /// train_step with the whole feature matrix as input (feature_table: no gathered rows).
  step_stats train_step(const sampled_batch& batch, const feature_table& inputs,
                        std::span<const std::int32_t> labels, std::uint64_t dropout_seed);
  /// train_step on sparse input rows (model/sparse_input.hpp).
  step_stats train_step(const sampled_batch& batch, const sparse_rows& inputs,
                        std::span<const std::int32_t> labels, std::uint64_t dropout_seed);

  /// Decentralized pipeline, the batch owner's part of a step: the last layer of `seeds` from
  /// their own rows h_self (B, width) and the sum of every shard's partial neighbour sums
  /// partial_sum (B, width) over counts[i] sampled neighbours, the loss, and its backward, which
  /// accumulates the last layer's weight gradients (zero_grad is the caller's). GraphSAGE: the
  /// partial sums are of the neighbours' rows. GCN: of h_u / sqrt(d_u + 1), and degrees[i] is
  /// seed i's full in-degree d_i.
  top_step train_top_layer(std::span<const node_id> seeds, const Matrix& h_self, Matrix partial_sum,
                           std::span<const std::int32_t> counts,
                           std::span<const std::int32_t> labels,
                           std::span<const std::int32_t> degrees = {});

  /// Current gradient, flattened in parameter order.
  std::vector<float> gradient() const;
  /// Replaces the gradient with `g` (e.g. an all-reduced average) and takes one optimiser step.
  void apply_gradient(std::span<const float> g);
  /// Takes one optimiser step with the gradient left by train_step.
  void apply_own_gradient();

  /// Parameters, flattened in parameter order (to compare replicas, checkpoint, broadcast).
  std::vector<float> parameters() const;
  void set_parameters(std::span<const float> p);

  /// Evaluation-mode forward of layer `layer` over one block: h_src (num_src, in) -> (num_dst,
  /// out).
  Matrix layer_forward(int layer, const block& b, const Matrix& h_src) const;
  /// layer_forward of the first layer on compressed feature rows.
  Matrix first_layer_forward(const block& b, const sparse_rows& features) const;
  int num_layers() const { return config_.num_layers; }

  /// The model and optimiser themselves (checkpoints, inference).
  const gnn_model& model() const;
  gnn_model& model();
  const adam& optimizer() const;
  adam& optimizer();

 private:
  replica_config config_;
  gnn_model model_;
  adam adam_;
  Matrix grad_logits_;
};

}  // namespace degnn
