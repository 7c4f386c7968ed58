// model_replica: gnn_model + Adam behind the interface every pipeline trains through.
#include "model/replica.hpp"

#include <stdexcept>

#include "model/layers.hpp"

namespace degnn {

namespace {

model_config to_model_config(const replica_config& c) {
  model_config m;
  if (c.model == "sage") {
    m.kind = model_kind::sage;
  } else if (c.model == "gcn") {
    m.kind = model_kind::gcn;
  } else {
    throw std::invalid_argument("model must be sage or gcn, got '" + c.model + "'");
  }
  m.in_dim = c.in_dim;
  m.hidden = c.hidden;
  m.num_classes = c.num_classes;
  m.num_layers = c.num_layers;
  m.dropout = c.dropout;
  return m;
}

}  // namespace

model_replica::model_replica(const replica_config& c)
    : config_(c),
      model_(to_model_config(c), c.seed),
      adam_(adam_options{.lr = c.lr, .weight_decay = c.weight_decay}) {}

step_stats model_replica::train_step(const sampled_batch& batch, const Matrix& inputs,
                                     std::span<const std::int32_t> labels,
                                     std::uint64_t dropout_seed) {
  model_.zero_grad();
  const Matrix logits = model_.forward(batch, inputs, true, dropout_seed);
  step_stats s;
  const double mean_loss = softmax_cross_entropy(logits, labels, grad_logits_);
  for (Eigen::Index r = 0; r < logits.rows(); ++r) {
    if (labels[static_cast<size_t>(r)] < 0) continue;
    ++s.seeds;
    Eigen::Index best = 0;
    logits.row(r).maxCoeff(&best);
    s.correct += best == labels[static_cast<size_t>(r)];
  }
  s.loss_sum = mean_loss * s.seeds;
  model_.backward(grad_logits_);
  return s;
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
