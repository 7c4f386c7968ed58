// Model files: the weights under DGL's names, transposed where DGL stores (out, in), and the
// settings as strings (safetensors metadata, or the JSON bytes of an npz entry degnn_settings).
#include "model/model_file.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "model/data_error.hpp"
#include "model/durable_file.hpp"

namespace degnn {

namespace {

constexpr const char* kSettingsEntry = "degnn_settings";

// What each model's layer aggregates with, as the file names it.
const char* aggregator_of(const std::string& model) {
  return model == "gcn" ? "gcn" : model == "gat" ? "attention" : "mean";
}

std::map<std::string, std::string> settings_strings(const model_settings& s) {
  const model_config& c = s.config;
  std::map<std::string, std::string> m = {{"degnn_model_file", "1"},
                                          {"model", model_kind_name(c.kind)},
                                          {"aggregator", aggregator_of(model_kind_name(c.kind))},
                                          {"layers", std::to_string(c.num_layers)},
                                          {"in_dim", std::to_string(c.in_dim)},
                                          {"hidden", std::to_string(c.hidden)},
                                          {"num_classes", std::to_string(c.num_classes)},
                                          {"dropout", std::to_string(c.dropout)},
                                          {"normalize_features", s.normalize_features},
                                          {"step", std::to_string(s.step)}};
  if (c.kind == model_kind::gat) {
    m["heads"] = std::to_string(c.heads);
    m["output_heads"] = std::to_string(c.output_heads);
    m["attention_dropout"] = std::to_string(c.attention_dropout);
    m["input_dropout"] = std::to_string(c.input_dropout);
  }
  return m;
}

model_settings parse_settings(const std::map<std::string, std::string>& m,
                              const std::string& file) {
  auto field = [&](const char* key) -> const std::string& {
    const auto it = m.find(key);
    if (it == m.end()) throw data_error::at(file, 0, std::string("its settings have no ") + key);
    return it->second;
  };
  // A whole-string unsigned number no larger than `most`.
  auto number = [&](const char* key, std::uint64_t most = INT32_MAX) {
    const std::string& text = field(key);
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty() || v > most)
      throw data_error::at(file, 0,
                           std::string("its setting ") + key + " = '" + text + "' is not a count");
    return v;
  };
  model_settings s;
  const std::string& model = field("model");
  if (model != "sage" && model != "gcn" && model != "gat")
    throw data_error::at(file, 0, "its model '" + model + "' is none of sage, gcn and gat");
  s.config.kind = model == "gcn"   ? model_kind::gcn
                  : model == "gat" ? model_kind::gat
                                   : model_kind::sage;
  s.config.num_layers = static_cast<std::int32_t>(number("layers"));
  s.config.in_dim = static_cast<std::int32_t>(number("in_dim"));
  s.config.hidden = static_cast<std::int32_t>(number("hidden"));
  s.config.num_classes = static_cast<std::int32_t>(number("num_classes"));
  // An optional probability in [0, 1).
  auto probability = [&](const char* key, float& into) {
    const auto it = m.find(key);
    if (it == m.end()) return;
    float p = 0;
    const std::string& text = it->second;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), p);
    if (ec != std::errc() || end != text.data() + text.size() || !(p >= 0 && p < 1))
      throw data_error::at(file, 0,
                           std::string("its ") + key + " '" + text + "' is not a number in [0, 1)");
    into = p;
  };
  probability("dropout", s.config.dropout);
  if (s.config.kind == model_kind::gat) {
    // Heads are bounded by the widths they divide or multiply, so the settings alone cannot ask
    // for an unbounded model (the tensors' shapes are checked against them before any build).
    s.config.heads = static_cast<std::int32_t>(number("heads", 1 << 16));
    s.config.output_heads = static_cast<std::int32_t>(number("output_heads", 1 << 16));
    probability("attention_dropout", s.config.attention_dropout);
    probability("input_dropout", s.config.input_dropout);
    if (s.config.heads < 1 || s.config.output_heads < 1 || s.config.hidden % s.config.heads != 0)
      throw data_error::at(file, 0,
                           "its heads (" + std::to_string(s.config.heads) +
                               ") do not divide its hidden width " +
                               std::to_string(s.config.hidden) + " or a head count is 0");
  }
  if (auto it = m.find("aggregator"); it != m.end() && it->second != aggregator_of(model))
    throw data_error::at(file, 0,
                         "its aggregator '" + it->second + "' is not what a " + model +
                             " layer computes here (" + aggregator_of(model) + ")");
  if (auto it = m.find("normalize_features"); it != m.end()) s.normalize_features = it->second;
  if (s.normalize_features != "none" && s.normalize_features != "row")
    throw data_error::at(
        file, 0, "its normalize_features '" + s.normalize_features + "' is neither none nor row");
  if (m.count("step")) s.step = number("step", UINT64_MAX);
  return s;
}

// Where each exported tensor lives among the model's parameters (gnn_model::parameters(), layer by
// layer: SAGE w_self, w_neigh, bias; GCN weight, bias; GAT weight, attn_l, attn_r, bias), and how
// it is stored: transposed, as DGL's (1, H, F) attention vectors, or a bias DGL keeps per head.
template <class M>
struct slot {
  std::string name;
  M* matrix;
  bool transposed;           ///< exported (out, in) from the layer's (in, out)
  bool vector;               ///< exported as 1-D (the (1, out) bias)
  bool leading_one = false;  ///< exported (1, rows, cols): GATConv's attn_l / attn_r
  /// Exported `copies` times over (1-D): GATConv adds a bias per head before averaging them, we
  /// after; read back as the mean of the copies, which is the same output.
  std::int64_t copies = 1;
};

template <class M>
std::vector<slot<M>> slots_of(const model_config& c, const std::vector<M*>& params) {
  std::vector<slot<M>> out;
  const bool gcn = c.kind == model_kind::gcn, gat = c.kind == model_kind::gat;
  const std::size_t per_layer = gcn ? 2 : gat ? 4 : 3;
  for (std::int32_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    M* const* at = params.data() + static_cast<std::size_t>(l) * per_layer;
    if (gat) {
      const bool last = l + 1 == c.num_layers;
      out.push_back({p + "fc.weight", at[0], true, false});
      out.push_back({p + "attn_l", at[1], false, false, true});
      out.push_back({p + "attn_r", at[2], false, false, true});
      out.push_back({p + "bias", at[3], false, true, false, last ? c.output_heads : 1});
    } else if (gcn) {
      out.push_back({p + "weight", at[0], false, false});
      out.push_back({p + "bias", at[1], false, true});
    } else {
      out.push_back({p + "fc_self.weight", at[0], true, false});
      out.push_back({p + "fc_neigh.weight", at[1], true, false});
      out.push_back({p + "bias", at[2], false, true});
    }
  }
  return out;
}

}  // namespace

std::vector<named_tensor> export_tensors(const gnn_model& model) {
  std::vector<named_tensor> out;
  for (const auto& s : slots_of(model.config(), model.parameters())) {
    const Matrix& m = *s.matrix;
    named_tensor t;
    t.name = s.name;
    if (s.vector) {
      t.shape = {m.size() * s.copies};
      for (std::int64_t k = 0; k < s.copies; ++k)
        t.values.insert(t.values.end(), m.data(), m.data() + m.size());
    } else if (s.leading_one) {
      t.shape = {1, m.rows(), m.cols()};
      t.values.assign(m.data(), m.data() + m.size());
    } else if (s.transposed) {
      t.shape = {m.cols(), m.rows()};
      const Matrix mt = m.transpose();
      t.values.assign(mt.data(), mt.data() + mt.size());
    } else {
      t.shape = {m.rows(), m.cols()};
      t.values.assign(m.data(), m.data() + m.size());
    }
    out.push_back(std::move(t));
  }
  return out;
}

std::string encode_model_file(const gnn_model& model, const model_settings& s, model_format f) {
  model_settings settings = s;
  settings.config = model.config();
  const std::vector<named_tensor> tensors = export_tensors(model);
  std::vector<array_ref> refs;
  for (const auto& t : tensors)
    refs.push_back({t.name, array_dtype::f32, t.shape, t.values.data()});
  const auto strings = settings_strings(settings);
  if (f == model_format::safetensors) return encode_safetensors(refs, strings);
  const std::string json = nlohmann::json(strings).dump();
  refs.push_back(
      {kSettingsEntry, array_dtype::u8, {static_cast<std::int64_t>(json.size())}, json.data()});
  return encode_npz(refs);
}

void save_model_file(const std::filesystem::path& path, const gnn_model& model,
                     const model_settings& s, model_format f) {
  write_file_durably(path, encode_model_file(model, s, f));
}

model_format format_for(const std::filesystem::path& path) {
  return path.extension() == ".npz" ? model_format::npz : model_format::safetensors;
}

loaded_model load_model_file(const std::filesystem::path& path) {
  const auto bytes = read_whole_file(path);
  if (!bytes) throw data_error::at(path.string(), 0, "cannot be read (missing or not permitted)");
  return decode_model_file(*bytes, path.string());
}

loaded_model decode_model_file(std::string_view bytes, const std::string& file) {
  std::vector<stored_array> arrays;
  std::map<std::string, std::string> strings;
  if (bytes.size() >= 4 && bytes.substr(0, 4) == std::string_view("PK\x03\x04", 4)) {
    arrays = decode_npz(bytes, file);
    const auto it = std::find_if(arrays.begin(), arrays.end(),
                                 [](const stored_array& a) { return a.name == kSettingsEntry; });
    if (it == arrays.end())
      throw data_error::at(file, 0, std::string("has no ") + kSettingsEntry + " entry");
    try {
      strings = nlohmann::json::parse(it->bytes).get<std::map<std::string, std::string>>();
    } catch (const nlohmann::json::exception& e) {
      throw data_error::at(file, 0,
                           std::string(kSettingsEntry) +
                               " is not a JSON object of "
                               "strings: " +
                               e.what());
    }
    arrays.erase(it);
  } else {
    arrays = decode_safetensors(bytes, file, &strings);
  }
  const model_settings settings = parse_settings(strings, file);
  // Every tensor the settings ask for must be in the file with its shape before the model is
  // built: the settings alone could ask for any size.
  const model_config& c = settings.config;
  if (c.num_layers < 1 || c.in_dim < 1 || c.hidden < 1 || c.num_classes < 1)
    throw data_error::at(file, 0, "its settings name a layer count or width below 1");
  std::map<std::string, const stored_array*> by_name;
  for (const auto& a : arrays)
    if (!by_name.emplace(a.name, &a).second)
      throw data_error::at(file, 0, "holds tensor " + a.name + " twice");
  const bool gcn = c.kind == model_kind::gcn;
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> want;
  for (std::int32_t l = 0; l < c.num_layers && want.size() <= arrays.size(); ++l) {
    const std::int64_t in = l == 0 ? c.in_dim : c.hidden;
    const std::int64_t out = l + 1 == c.num_layers ? c.num_classes : c.hidden;
    const std::string p = "layers." + std::to_string(l) + ".";
    if (c.kind == model_kind::gat) {
      const bool last = l + 1 == c.num_layers;
      const std::int64_t heads = last ? c.output_heads : c.heads;
      const std::int64_t width = last ? c.num_classes : c.hidden / c.heads;
      want.push_back({p + "fc.weight", {heads * width, in}});
      want.push_back({p + "attn_l", {1, heads, width}});
      want.push_back({p + "attn_r", {1, heads, width}});
      want.push_back({p + "bias", {heads * width}});
      continue;
    }
    if (gcn) {
      want.push_back({p + "weight", {in, out}});
    } else {
      want.push_back({p + "fc_self.weight", {out, in}});
      want.push_back({p + "fc_neigh.weight", {out, in}});
    }
    want.push_back({p + "bias", {out}});
  }
  auto text = [](const std::vector<std::int64_t>& v) {
    std::string t = "(";
    for (std::size_t i = 0; i < v.size(); ++i)
      t += (i ? ", " : "") + std::to_string(v[i]);
    return t + ")";
  };
  for (const auto& [name, shape] : want) {
    const auto it = by_name.find(name);
    if (it == by_name.end()) throw data_error::at(file, 0, "has no tensor " + name);
    if (it->second->shape != shape)
      throw data_error::at(
          file, 0,
          name + " has shape " + text(it->second->shape) + ", the settings ask " + text(shape));
  }
  if (want.size() != arrays.size()) {
    for (const auto& a : arrays)
      if (std::none_of(want.begin(), want.end(), [&](const auto& w) { return w.first == a.name; }))
        throw data_error::at(file, 0, "holds a tensor this model does not have: " + a.name);
  }
  gnn_model model(settings.config);
  for (const auto& s : slots_of(model.config(), model.parameters())) {
    Matrix& m = *s.matrix;
    const std::vector<float> v = by_name.at(s.name)->as_floats();
    for (float x : v)
      if (!std::isfinite(x)) throw data_error::at(file, 0, s.name + " holds a NaN or infinity");
    if (s.transposed) {
      m = Eigen::Map<const Matrix>(v.data(), m.cols(), m.rows()).transpose();
    } else if (s.copies > 1) {
      // Ours, written once per head, comes back exactly (a mean of equal floats need not);
      // per-head biases trained elsewhere as their mean.
      const Eigen::Map<const Matrix> per_head(v.data(), s.copies, m.size());
      bool equal = true;
      for (std::int64_t h = 1; h < s.copies && equal; ++h)
        equal = per_head.row(h) == per_head.row(0);
      if (equal)
        m = per_head.row(0);
      else
        m = per_head.colwise().mean();
    } else {
      std::copy(v.begin(), v.end(), m.data());
    }
  }
  return {settings, std::move(model)};
}

std::string model_summary(const model_config& c) {
  std::string text = std::string(model_kind_name(c.kind)) + ", " + std::to_string(c.num_layers) +
                     " layers, " + std::to_string(c.in_dim) + " -> " + std::to_string(c.hidden) +
                     " -> " + std::to_string(c.num_classes);
  if (c.kind == model_kind::gat)
    text += ", heads " + std::to_string(c.heads) + " / " + std::to_string(c.output_heads);
  return text;
}

model_settings init_from_model_file(gnn_model& model, const std::filesystem::path& path,
                                    const std::string& normalize_features) {
  loaded_model loaded = load_model_file(path);
  const model_config& want = model.config();
  const model_config& have = loaded.model.config();
  if (want.kind != have.kind || want.num_layers != have.num_layers || want.in_dim != have.in_dim ||
      want.hidden != have.hidden || want.num_classes != have.num_classes ||
      (want.kind == model_kind::gat &&
       (want.heads != have.heads || want.output_heads != have.output_heads))) {
    throw data_error::at(
        path.string(), 0,
        "holds a model of " + model_summary(have) + "; this run's is " + model_summary(want));
  }
  if (loaded.settings.normalize_features != normalize_features)
    throw data_error::at(path.string(), 0,
                         "was trained with --normalize-features " +
                             loaded.settings.normalize_features + "; this run uses " +
                             normalize_features);
  auto dst = model.parameters();
  auto src = loaded.model.parameters();
  for (std::size_t i = 0; i < dst.size(); ++i)
    *dst[i] = *src[i];
  return loaded.settings;
}

}  // namespace degnn
