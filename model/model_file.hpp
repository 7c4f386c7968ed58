// A trained model as a file other tools read: its weights under DGL's names and shapes (what
// `dgl.nn.SAGEConv` / `GraphConv` state dicts hold, and scripts/pytorch_model.py rebuilds) plus the
// settings needed to rebuild it, as safetensors or NumPy .npz (docs/model_use.md). Written by
// `degnn export` and `train --save-model`, read by `degnn infer --model` and `train --init`.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "model/array_file.hpp"
#include "model/gnn_model.hpp"

namespace degnn {

enum class model_format { safetensors, npz };

/// What rebuilds the model and feeds it as it was trained.
struct model_settings {
  model_config config;
  std::string normalize_features = "none";  ///< the input transform (--normalize-features)
  std::uint64_t step = 0;                   ///< optimiser steps taken (0: unknown)
};

/// The model's tensors under their exported names, in export order: for layer l,
/// SAGE: layers.l.fc_self.weight (out, in), layers.l.fc_neigh.weight (out, in), layers.l.bias
/// (out); GCN: layers.l.weight (in, out), layers.l.bias (out). float32.
struct named_tensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> values;  ///< C order
};
std::vector<named_tensor> export_tensors(const gnn_model& model);

/// The whole file's bytes.
std::string encode_model_file(const gnn_model& model, const model_settings& s, model_format f);
/// Writes `path` whole or not at all (durable_file); data_error naming it when it cannot.
void save_model_file(const std::filesystem::path& path, const gnn_model& model,
                     const model_settings& s, model_format f);
/// The format a path's extension names: .npz -> npz, anything else safetensors.
model_format format_for(const std::filesystem::path& path);

struct loaded_model {
  model_settings settings;
  gnn_model model;
};
/// Reads a file save_model_file wrote (or one in the same layout, e.g. numpy.savez of a PyTorch
/// state dict plus `degnn_settings`). data_error naming the file and the tensor on a missing
/// tensor, a wrong shape, a non-finite weight or a damaged file.
loaded_model load_model_file(const std::filesystem::path& path);
/// The same from a file's bytes; `file` names it in errors.
loaded_model decode_model_file(std::string_view bytes, const std::string& file);

/// Sets `model`'s parameters from a model file (train --init): the file's settings must describe
/// the same layers and widths, and its input transform must be `normalize_features` (the run's
/// --normalize-features). Returns the file's settings.
model_settings init_from_model_file(gnn_model& model, const std::filesystem::path& path,
                                    const std::string& normalize_features);

/// "sage, 2 layers, 1433 -> 256 -> 7": a model's kind and widths, for messages.
std::string model_summary(const model_config& c);

}  // namespace degnn
