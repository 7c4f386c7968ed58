// Graph attention layer (GAT, Velickovic et al. 2018) over one sampled block: per head, each
// destination's output is a softmax-weighted sum of its own and its sampled neighbours' projected
// rows, the weights from LeakyReLU(a_l . z_u + a_r . z_v). Built on model/attention's partials.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/attention.hpp"
#include "model/layers.hpp"

namespace degnn {

/// What a GAT forward keeps for backward (layer_cache::attention).
struct attention_cache {
  Matrix input;                      ///< (num_src, in): the rows the forward read, dropped
  Matrix input_mask;                 ///< (num_src, in) input dropout factors, or empty
  Matrix z;                          ///< (num_src, H*F)
  std::vector<std::int64_t> indptr;  ///< num_dst + 1: dst v's edges, its self edge first
  std::vector<std::int32_t> src;     ///< source row of every edge
  Matrix score;                      ///< (edges, H) after the LeakyReLU
  Matrix keep;                       ///< (edges, H) attention dropout factors, or empty
  attention_partial merged;          ///< max and sum of every dst's softmax
  Matrix heads_out;                  ///< (num_dst, H*F) before the heads are combined
};

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
  float attention_dropout() const { return attention_dropout_; }
  float input_dropout() const { return input_dropout_; }

  // The pieces of a forward, public so that a layer computed piecewise (the decentralized push,
  // model/gat_push.hpp) does the same arithmetic.

  /// el (rows, H) = z[h] . attn_l[h] of every row of z (rows, H*F), er likewise with attn_r
  /// for the first er_rows rows.
  void attention_terms(const Matrix& z, Eigen::Index er_rows, Matrix& el, Matrix& er) const;
  /// Scores after the LeakyReLU of the edges of attention_edges-style (indptr, src): edge k of
  /// target i scores el(src[k]) + er(i). With seed non-null (training, attention dropout on),
  /// keep (edges, H) gets each edge's factor keyed by (seed, dst_ids[i], src_ids[src[k]], head);
  /// else keep is emptied.
  void edge_scores(std::span<const std::int64_t> indptr, std::span<const std::int32_t> src,
                   const Matrix& el, const Matrix& er, std::span<const node_id> dst_ids,
                   std::span<const node_id> src_ids, const std::uint64_t* seed, Matrix& score,
                   Matrix& keep) const;
  /// out (n, out) from the heads' outputs (n, H*F): concatenated or averaged, plus the bias.
  void combine_heads(const Matrix& heads_out, Matrix& out) const;
  /// d loss / d heads' outputs (n, H*F) from grad_out (n, out); adds to grad_bias.
  Matrix split_gradient(const Matrix& grad_out);
  /// The forward from the projected rows c.z (num_src, H*F) on: scores, softmax, heads.
  /// attention_seed non-null: training, it keys the attention dropout; c keeps what the backward
  /// needs.
  void attend(const block& b, attention_cache& c, const std::uint64_t* attention_seed,
              Matrix& out) const;
  /// The backward down to the projected rows: d loss / d z (num_src, H*F) from grad_out
  /// (num_dst, out), adding to the bias and attention vectors' gradients (not the weight's).
  Matrix backward_to_z(const attention_cache& c, const Matrix& grad_out);
  /// Back through the attention and the scores of edges e over rows z (rows, H*F), from
  /// grad_heads = d loss / d the heads' outputs and the forward's merged max and sum and heads'
  /// output: sets grad_z (rows, H*F), adds the el part to grad_attn_l, and returns d loss / d er
  /// (targets, H), which the caller hands to er_backward where the targets' rows are.
  Matrix edges_backward(const attention_edges& e, const Matrix& z, const attention_partial& merged,
                        const Matrix& heads_out, const Matrix& grad_heads, Matrix& grad_z);
  /// Adds d loss / d er (n, H) of rows z_rows (n, H*F) to grad_attn_r and grad_z_rows (n, H*F).
  void er_backward(const Matrix& grad_er, Eigen::Ref<const Matrix> z_rows,
                   Eigen::Ref<Matrix> grad_z_rows);

  static constexpr float negative_slope = 0.2f;

  Matrix weight;          ///< (in, H*F)
  Matrix attn_l, attn_r;  ///< (H, F): source and destination halves of the attention vector
  Matrix bias;            ///< (1, out)
  Matrix grad_weight, grad_attn_l, grad_attn_r, grad_bias;

 private:
  /// edges_backward past the softmax: grad_score (edges, H) = d loss / d score after the
  /// LeakyReLU, the transpose (tindptr, tedge) grouping the edges by row.
  Matrix score_backward(const attention_edges& e, std::span<const std::int64_t> tindptr,
                        std::span<const std::int64_t> tedge, Matrix grad_score, const Matrix& z,
                        Matrix& grad_z);

  std::int32_t heads_, head_width_;
  bool concat_;
  float attention_dropout_;
  float input_dropout_;
};

}  // namespace degnn
