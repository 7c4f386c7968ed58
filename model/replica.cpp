// model_replica: gnn_model + Adam behind the interface every pipeline trains through.
#include "model/replica.hpp"

#include <stdexcept>

#include "model/layers.hpp"
#include "model/local_cg.hpp"
#include "model/sparse_input.hpp"

namespace degnn {

namespace {

model_config to_model_config(const replica_config& c) {
  model_config m;
  if (c.model == "sage") {
    m.kind = model_kind::sage;
  } else if (c.model == "gcn") {
    m.kind = model_kind::gcn;
  } else if (c.model == "gat") {
    m.kind = model_kind::gat;
  } else {
    throw std::invalid_argument("model must be sage, gcn or gat, got '" + c.model + "'");
  }
  m.heads = c.heads;
  m.output_heads = c.output_heads;
  m.attention_dropout = c.attention_dropout;
  m.input_dropout = c.input_dropout;
  m.in_dim = c.in_dim;
  m.hidden = c.hidden;
  m.num_classes = c.num_classes;
  m.num_layers = c.num_layers;
  m.dropout = c.dropout;
  return m;
}

}  // namespace

step_stats classification_loss(const Matrix& logits, std::span<const std::int32_t> labels,
                               Matrix& grad_logits) {
  step_stats s;
  const double mean_loss = softmax_cross_entropy(logits, labels, grad_logits);
  for (Eigen::Index r = 0; r < logits.rows(); ++r) {
    if (labels[static_cast<size_t>(r)] < 0) continue;
    ++s.seeds;
    Eigen::Index best = 0;
    logits.row(r).maxCoeff(&best);
    s.correct += best == labels[static_cast<size_t>(r)];
  }
  s.loss_sum = mean_loss * s.seeds;
  return s;
}

model_replica::model_replica(const replica_config& c)
    : config_(c),
      model_(to_model_config(c), c.seed),
      adam_(adam_options{.lr = c.lr, .weight_decay = c.weight_decay}) {}

namespace {

// Dense or sparse input rows: the same step.
template <class Inputs>
step_stats train_batch(gnn_model& model, Matrix& grad_logits, const sampled_batch& batch,
                       const Inputs& inputs, std::span<const std::int32_t> labels,
                       std::uint64_t dropout_seed) {
  model.zero_grad();
  const Matrix logits = model.forward(batch, inputs, true, dropout_seed);
  const step_stats s = classification_loss(logits, labels, grad_logits);
  model.backward(grad_logits);
  return s;
}

}  // namespace

step_stats model_replica::train_step(const sampled_batch& batch, const Matrix& inputs,
                                     std::span<const std::int32_t> labels,
                                     std::uint64_t dropout_seed) {
  return train_batch(model_, grad_logits_, batch, inputs, labels, dropout_seed);
}

step_stats model_replica::train_step(const sampled_batch& batch, const feature_table& inputs,
                                     std::span<const std::int32_t> labels,
                                     std::uint64_t dropout_seed) {
  return train_batch(model_, grad_logits_, batch, inputs, labels, dropout_seed);
}

step_stats model_replica::train_step(const sampled_batch& batch, const sparse_rows& inputs,
                                     std::span<const std::int32_t> labels,
                                     std::uint64_t dropout_seed) {
  return train_batch(model_, grad_logits_, batch, inputs, labels, dropout_seed);
}

top_step model_replica::train_top_layer(std::span<const node_id> seeds, const Matrix& h_self,
                                        Matrix partial_sum, std::span<const std::int32_t> counts,
                                        std::span<const std::int32_t> labels,
                                        std::span<const std::int32_t> degrees) {
  if (model_.config().kind == model_kind::gat)
    throw std::invalid_argument(
        "train_top_layer: a GAT top layer merges attention partials (model/gat_push), not sums");
  top_step out;
  const auto b = static_cast<Eigen::Index>(seeds.size());
  if (b == 0) return out;
  const bool gcn = model_.config().kind == model_kind::gcn;
  // Per seed, what its summed partial sums are multiplied by before the layer. GraphSAGE: the
  // mean is linear, 1 / count. GCN: the layer weighs its one virtual neighbour row by
  // unbias_vb / sqrt(d + 1) (model/aggregate.hpp with a count of 1); the sampled neighbours need
  // unbias / sqrt(d + 1), unbias = d / count for a sampled row: the factor is their ratio.
  std::vector<float> factor(static_cast<size_t>(b), 1.0f);
  for (Eigen::Index i = 0; i < b; ++i) {
    const auto c = counts[static_cast<size_t>(i)];
    if (c <= 0) continue;
    if (!gcn) {
      factor[static_cast<size_t>(i)] = 1.0f / static_cast<float>(c);
      continue;
    }
    const auto d = static_cast<double>(degrees[static_cast<size_t>(i)]);
    const double unbias = c < d ? d / c : 1.0;
    const double unbias_virtual = 1 < d ? d : 1.0;
    factor[static_cast<size_t>(i)] = static_cast<float>(unbias / unbias_virtual);
  }
  for (Eigen::Index i = 0; i < b; ++i) {
    if (counts[static_cast<size_t>(i)] <= 0) continue;
    // (SAGE keeps its division, as the single-process mean does.)
    if (gcn)
      partial_sum.row(i) *= factor[static_cast<size_t>(i)];
    else
      partial_sum.row(i) /= static_cast<float>(counts[static_cast<size_t>(i)]);
  }
  top_layer_state top;
  const Matrix logits = top_forward(model_, seeds, h_self, partial_sum, counts, top, degrees);
  out.stats = classification_loss(logits, labels, grad_logits_);
  top_backward(model_, top, grad_logits_, out.grad_self, out.grad_partial);
  // d loss / d (a shard's partial sum of seed i) = d loss / d agg_i * factor_i.
  for (Eigen::Index i = 0; i < b; ++i) {
    if (counts[static_cast<size_t>(i)] <= 0) continue;
    if (gcn)
      out.grad_partial.row(i) *= factor[static_cast<size_t>(i)];
    else
      out.grad_partial.row(i) /= static_cast<float>(counts[static_cast<size_t>(i)]);
  }
  return out;
}

std::vector<float> model_replica::gradient() const {
  auto& m = const_cast<gnn_model&>(model_);  // gradients() has no const overload; read only
  return flatten(m.gradients());
}

void model_replica::apply_gradient(std::span<const float> g) {
  unflatten(g, model_.gradients());
  apply_own_gradient();
}

void model_replica::apply_own_gradient() {
  adam_.step(model_.parameters(), model_.gradients());
}

std::vector<float> model_replica::parameters() const {
  return flatten(model_.parameters());
}

void model_replica::set_parameters(std::span<const float> p) {
  unflatten(p, model_.parameters());
}

Matrix model_replica::layer_forward(int layer, const block& b, const Matrix& h_src) const {
  Matrix out;
  model_.layer(layer).apply(b, h_src, out, nullptr);
  if (layer + 1 < model_.num_layers()) relu_forward(out);
  return out;
}

Matrix model_replica::first_layer_forward(const block& b, const sparse_rows& features) const {
  Matrix out;
  sparse_layer_forward(model_.layer(0), b, features, out, nullptr);
  if (model_.num_layers() > 1) relu_forward(out);
  return out;
}

const gnn_model& model_replica::model() const {
  return model_;
}
gnn_model& model_replica::model() {
  return model_;
}
const adam& model_replica::optimizer() const {
  return adam_;
}
adam& model_replica::optimizer() {
  return adam_;
}

}  // namespace degnn
