// Graph attention layer (GAT, Velickovic et al. 2018) over one sampled block: per head, each
// destination's output is a softmax-weighted sum of its own and its sampled neighbours' projected
// rows, the weights from LeakyReLU(a_l . z_u + a_r . z_v). Built on model/attention's partials.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/layers.hpp"

namespace degnn {

/// What a GAT forward keeps for backward (layer_cache::attention).
struct attention_cache;

/// out (num_dst, out) = heads combined [concat: out = H*F; mean: out = F] + bias, where head h
/// of dst v is sum_k alpha_k z_k[h] over v itself and its sampled neighbours, z = h_src W
/// (num_src, H*F), alpha the softmax over those edges of LeakyReLU(el[u] + er[v]) (slope 0.2),
/// el = z[h] . attn_l[h], er = z[h] . attn_r[h]. Attention dropout drops edges of a training
/// forward (keyed by the edge's global ids and the head, so every pipeline drops alike), input
/// dropout entries of h_src (keyed by the source's global id and the column).
class gat_layer final : public gnn_layer {
 public:
  /// concat: out_dim = heads * F (hidden layers); else out_dim = F, the heads averaged (output).
  /// Throws std::invalid_argument when concat and heads does not divide out_dim.
  /// input_dropout drops entries of the input rows in training (GAT drops its features so).
  gat_layer(std::int32_t in_dim, std::int32_t out_dim, std::int32_t heads, bool concat,
            float attention_dropout, float input_dropout = 0.0f);
  void apply_rows(const block& b, const Matrix& h_src, std::span<const node_id> row_of, Matrix& out,
                  layer_cache* cache) const override;
  using gnn_layer::backward;
  void backward(const block& b, const layer_cache& cache, const Matrix& grad_out,
                Matrix* grad_src) override;
  std::vector<Matrix*> parameters() override { return {&weight, &attn_l, &attn_r, &bias}; }
  std::vector<Matrix*> gradients() override {
    return {&grad_weight, &grad_attn_l, &grad_attn_r, &grad_bias};
  }
  void init(std::uint64_t seed) override;

  std::int32_t heads() const { return heads_; }
  std::int32_t head_width() const { return head_width_; }
  bool concat() const { return concat_; }

  static constexpr float negative_slope = 0.2f;

  Matrix weight;          ///< (in, H*F)
  Matrix attn_l, attn_r;  ///< (H, F): source and destination halves of the attention vector
  Matrix bias;            ///< (1, out)
  Matrix grad_weight, grad_attn_l, grad_attn_r, grad_bias;

 private:
  std::int32_t heads_, head_width_;
  bool concat_;
  float attention_dropout_;
  float input_dropout_;
};

}  // namespace degnn
