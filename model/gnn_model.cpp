// gnn_model: runs the blocks of a batch through the layer stack, caching what backward needs.
#include "model/gnn_model.hpp"
#include "model/gat_layer.hpp"
#include "model/hashing.hpp"
#include "model/sparse_input.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace degnn {
namespace {}  // namespace

gnn_model::gnn_model(const model_config& config, std::uint64_t init_seed) : config_(config) {
  if (config.in_dim <= 0 || config.hidden <= 0 || config.num_classes <= 0 || config.num_layers <= 0)
    throw std::invalid_argument("gnn_model: in_dim, hidden, num_classes, num_layers must be > 0");
  if (!(config.dropout >= 0.0f && config.dropout < 1.0f))  // NaN fails too
    throw std::invalid_argument("gnn_model: dropout must be in [0, 1)");
  if (config.kind == model_kind::gat &&
      (config.heads <= 0 || config.output_heads <= 0 || config.hidden % config.heads != 0))
    throw std::invalid_argument("gnn_model: GAT needs heads > 0 dividing hidden (" +
                                std::to_string(config.hidden) + ") and output heads > 0");
  for (std::int32_t l = 0; l < config.num_layers; ++l) {
    const std::int32_t in = l == 0 ? config.in_dim : config.hidden;
    const std::int32_t out = l + 1 == config.num_layers ? config.num_classes : config.hidden;
    const bool last = l + 1 == config.num_layers;
    if (config.kind == model_kind::sage)
      layers_.push_back(std::make_unique<sage_layer>(in, out));
    else if (config.kind == model_kind::gcn)
      layers_.push_back(std::make_unique<gcn_layer>(in, out));
    else
      layers_.push_back(std::make_unique<gat_layer>(
          in, out, last ? config.output_heads : config.heads,
          /*concat=*/!last, config.attention_dropout, l == 0 ? config.input_dropout : 0.0f));
    layers_.back()->init(mix64(init_seed + static_cast<std::uint64_t>(l)));
  }
}

const char* model_kind_name(model_kind k) {
  return k == model_kind::gcn ? "gcn" : k == model_kind::gat ? "gat" : "sage";
}

std::uint64_t step_dropout_seed(std::uint64_t seed, std::uint64_t step) {
  return mix64(seed ^ mix64(step));
}

std::uint64_t layer_dropout_seed(std::uint64_t dropout_seed, std::int32_t layer) {
  return mix64(dropout_seed ^ mix64(static_cast<std::uint64_t>(layer) + 1));
}

std::uint64_t attention_dropout_seed(std::uint64_t dropout_seed, std::int32_t layer) {
  return mix64(layer_dropout_seed(dropout_seed, layer) ^ 0x6a7ULL);
}

Matrix gnn_model::forward(const sampled_batch& batch, const Matrix& input, bool training,
                          std::uint64_t dropout_seed) {
  return run(batch, &input, nullptr, false, training, dropout_seed);
}

Matrix gnn_model::forward(const sampled_batch& batch, const feature_table& input, bool training,
                          std::uint64_t dropout_seed) {
  if (!input.rows) throw std::invalid_argument("gnn_model::forward: an empty feature table");
  return run(batch, input.rows, nullptr, true, training, dropout_seed);
}

Matrix gnn_model::forward(const sampled_batch& batch, const sparse_rows& input, bool training,
                          std::uint64_t dropout_seed) {
  return run(batch, nullptr, &input, false, training, dropout_seed);
}

Matrix gnn_model::run(const sampled_batch& batch, const Matrix* dense, const sparse_rows* sparse,
                      bool table, bool training, std::uint64_t dropout_seed) {
  const std::int32_t n = num_layers();
  if (static_cast<std::int32_t>(batch.blocks.size()) != n)
    throw std::invalid_argument("gnn_model::forward: batch has " +
                                std::to_string(batch.blocks.size()) + " blocks, model has " +
                                std::to_string(n) + " layers");
  const Eigen::Index rows = dense ? dense->rows() : sparse->rows();
  const Eigen::Index cols = dense ? dense->cols() : sparse->cols();
  // A table's rows are checked against the block's ids by the first layer.
  if ((!table && rows != batch.blocks[0].num_src()) || cols != config_.in_dim)
    throw std::invalid_argument("gnn_model::forward: input is not (num inputs, in_dim)");
  for (std::int32_t l = 0; l + 1 < n; ++l)
    if (batch.blocks[l].num_dst() != batch.blocks[l + 1].num_src())
      throw std::invalid_argument("gnn_model::forward: block " + std::to_string(l) +
                                  " dst count differs from the next block's src count");
  batch_ = training ? &batch : nullptr;
  table_input_ = table;
  sparse_cache_.reset();
  if (sparse && training) {
    sparse_cache_ = std::make_shared<sparse_layer_cache>();
    sparse_cache_->attention_seed = attention_dropout_seed(dropout_seed, 0);
  }
  hidden_.resize(n - 1);
  masks_.resize(n - 1);
  Matrix logits;
  Matrix scratch;
  for (std::int32_t l = 0; l < n; ++l) {
    Matrix& out = l + 1 == n ? logits : hidden_[l];  // (num_dst of block l, out_dim)
    if (training) layers_[l]->set_attention_seed(attention_dropout_seed(dropout_seed, l));
    if (l == 0 && sparse)
      sparse_layer_forward(*layers_[0], batch.blocks[0], *sparse, out, sparse_cache_.get());
    else if (l == 0 && table)
      layers_[0]->forward_from_table(batch.blocks[0], *dense, out, training);
    else
      layers_[l]->forward(batch.blocks[l], l == 0 ? *dense : (training ? hidden_[l - 1] : scratch),
                          out, training);
    if (l + 1 == n) break;
    relu_forward(out);
    if (training && config_.dropout > 0.0f)
      dropout_forward_keyed(
          out, config_.dropout, layer_dropout_seed(dropout_seed, l),
          std::span(batch.blocks[l].src_nodes.data(), static_cast<size_t>(out.rows())), masks_[l]);
    else
      masks_[l].resize(0, 0);
    // Inference keeps only one hidden activation alive.
    if (!training) scratch = std::move(out);
  }
  if (!training) {
    hidden_.clear();
    masks_.clear();
  }
  return logits;
}

void gnn_model::backward(const Matrix& grad_logits, Matrix* grad_input) {
  if (!batch_) throw std::logic_error("gnn_model::backward without a training forward");
  const std::int32_t n = num_layers();
  Matrix grad = grad_logits;  // (num_dst of block l, out_dim of layer l)
  Matrix grad_src;
  if ((sparse_cache_ || table_input_) && grad_input)
    throw std::logic_error(
        "gnn_model::backward: no input gradient for sparse input rows or a feature table");
  for (std::int32_t l = n - 1; l >= 0; --l) {
    const bool need_src = l > 0 || grad_input != nullptr;
    if (l == 0 && sparse_cache_) {
      sparse_layer_backward(*layers_[0], *sparse_cache_, grad);
      break;
    }
    layers_[l]->backward(batch_->blocks[l], grad, need_src ? &grad_src : nullptr);
    if (l == 0) break;
    // grad_src is d loss / d hidden_[l-1], the output after ReLU and dropout.
    if (masks_[l - 1].size() > 0) dropout_backward(masks_[l - 1], grad_src);
    // hidden_ holds the dropped activations; zero where ReLU was off *or* the entry was dropped,
    // and dropped entries already have zero gradient, so the ReLU mask from it is exact.
    relu_backward(hidden_[l - 1], grad_src);
    grad = std::move(grad_src);
  }
  if (grad_input) *grad_input = std::move(grad_src);
}

std::vector<Matrix*> gnn_model::parameters() {
  std::vector<Matrix*> all;
  for (auto& layer : layers_)
    for (Matrix* m : layer->parameters())
      all.push_back(m);
  return all;
}

std::vector<const Matrix*> gnn_model::parameters() const {
  std::vector<const Matrix*> all;
  for (auto& layer : layers_)
    for (Matrix* m : layer->parameters())
      all.push_back(m);
  return all;
}

std::vector<Matrix*> gnn_model::gradients() {
  std::vector<Matrix*> all;
  for (auto& layer : layers_)
    for (Matrix* m : layer->gradients())
      all.push_back(m);
  return all;
}

std::vector<const Matrix*> gnn_model::gradients() const {
  std::vector<const Matrix*> all;
  for (auto& layer : layers_)
    for (Matrix* m : layer->gradients())
      all.push_back(m);
  return all;
}

void gnn_model::zero_grad() {
  for (Matrix* g : gradients())
    g->setZero();
}

std::size_t gnn_model::num_parameters() const {
  std::size_t total = 0;
  for (const Matrix* m : parameters())
    total += static_cast<std::size_t>(m->size());
  return total;
}

std::vector<float> flatten(std::span<const Matrix* const> mats) {
  std::size_t total = 0;
  for (const Matrix* m : mats)
    total += static_cast<std::size_t>(m->size());
  std::vector<float> flat;
  flat.reserve(total);
  for (const Matrix* m : mats)
    flat.insert(flat.end(), m->data(), m->data() + m->size());
  return flat;
}

std::vector<float> flatten(std::span<Matrix* const> mats) {
  const std::vector<const Matrix*> c(mats.begin(), mats.end());
  return flatten(std::span<const Matrix* const>(c));
}

std::vector<float> flatten(const std::vector<const Matrix*>& mats) {
  return flatten(std::span<const Matrix* const>(mats));
}

std::vector<float> flatten(const std::vector<Matrix*>& mats) {
  return flatten(std::span<Matrix* const>(mats));
}

void unflatten(std::span<const float> flat, std::span<Matrix* const> mats) {
  std::size_t total = 0;
  for (const Matrix* m : mats)
    total += static_cast<std::size_t>(m->size());
  if (total != flat.size())
    throw std::invalid_argument("unflatten: " + std::to_string(flat.size()) +
                                " values for matrices holding " + std::to_string(total));
  std::size_t at = 0;
  for (Matrix* m : mats) {
    std::copy_n(flat.data() + at, m->size(), m->data());
    at += static_cast<std::size_t>(m->size());
  }
}

}  // namespace degnn
