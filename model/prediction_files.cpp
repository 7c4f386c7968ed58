// Inference outputs as NumPy arrays: softmax rows, argmax, staging folder, manifest.
#include "model/prediction_files.hpp"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>

#include "model/array_file.hpp"
#include "model/data_error.hpp"
#include "model/durable_file.hpp"

namespace degnn {

namespace fs = std::filesystem;

namespace {

// Removes the staging folder unless it was emptied into OUT.
struct staging {
  fs::path dir;
  ~staging() {
    std::error_code ec;
    if (!dir.empty()) fs::remove_all(dir, ec);
  }
};

nlohmann::ordered_json describe(const array_ref& a) {
  static const char* names[] = {"float32", "float64", "int32", "int64", "uint8"};
  return {
      {"file", a.name + ".npy"}, {"dtype", names[static_cast<int>(a.dtype)]}, {"shape", a.shape}};
}

}  // namespace

Matrix rows_of(const Matrix& all, std::span<const node_id> nodes) {
  Matrix out(static_cast<Eigen::Index>(nodes.size()), all.cols());
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(nodes.size()); ++i)
    out.row(i) = all.row(nodes[static_cast<std::size_t>(i)]);
  return out;
}

std::vector<fs::path> write_predictions(const fs::path& out, const prediction_outputs& p,
                                        const std::map<std::string, std::string>& manifest) {
  const auto n = static_cast<std::int64_t>(p.nodes.size());
  const std::int64_t classes = p.logits->cols();
  if (p.logits->rows() != n) throw std::invalid_argument("write_predictions: logits rows != nodes");
  std::vector<std::int64_t> ids(p.nodes.begin(), p.nodes.end());
  std::vector<std::int32_t> predicted(static_cast<std::size_t>(n));
  Matrix probabilities(p.logits->rows(), p.logits->cols());
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    Eigen::Index best = 0;
    const float top = p.logits->row(i).maxCoeff(&best);
    predicted[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(best);
    probabilities.row(i) = (p.logits->row(i).array() - top).exp();
    probabilities.row(i) /= probabilities.row(i).sum();
  }
  std::vector<array_ref> arrays = {
      {"node_ids", array_dtype::i64, {n}, ids.data()},
      {"predictions", array_dtype::i32, {n}, predicted.data()},
      {"probabilities", array_dtype::f32, {n, classes}, probabilities.data()},
      {"logits", array_dtype::f32, {n, classes}, p.logits->data()}};
  if (p.embeddings) {
    if (p.embeddings->rows() != n)
      throw std::invalid_argument("write_predictions: embeddings rows != nodes");
    arrays.push_back(
        {"embeddings", array_dtype::f32, {n, p.embeddings->cols()}, p.embeddings->data()});
  }
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw data_error::at(out.string(), 0, "cannot create the output folder: " + ec.message());
  staging stage{out / (".infer-partial-" + std::to_string(getpid()))};
  fs::create_directory(stage.dir, ec);
  if (ec)
    throw data_error::at(out.string(), 0, "cannot write in the output folder: " + ec.message());
  nlohmann::ordered_json m = nlohmann::ordered_json::object();
  for (const auto& [k, v] : manifest)
    m[k] = v;
  m["nodes"] = n;
  m["embeddings_layer"] = p.embeddings ? p.embeddings_layer : 0;
  for (const array_ref& a : arrays) {
    durable_file f(stage.dir / (a.name + ".npy"));  // header, then the rows where they are
    f.write(npy_header(a));
    f.write(a.data, array_bytes(a));
    f.commit();
    m["arrays"][a.name] = describe(a);
  }
  write_file_durably(stage.dir / "manifest.json", m.dump(2) + "\n");
  // Moved in whole, the manifest last: a reader that finds this run's manifest finds its arrays.
  std::vector<fs::path> written;
  for (const array_ref& a : arrays)
    written.push_back(out / (a.name + ".npy"));
  written.push_back(out / "manifest.json");
  // An earlier run's manifest goes first: it must never describe this run's arrays.
  fs::remove(out / "manifest.json", ec);
  if (ec)
    throw data_error::at((out / "manifest.json").string(), 0,
                         "cannot be replaced: " + ec.message());
  if (!p.embeddings) fs::remove(out / "embeddings.npy", ec);  // an earlier run's
  for (const fs::path& f : written) {
    fs::rename(stage.dir / f.filename(), f, ec);
    if (ec) throw data_error::at(f.string(), 0, "cannot be moved into place: " + ec.message());
  }
  sync_path(out);
  return written;
}

std::vector<node_id> read_node_list(const fs::path& file, node_id num_nodes) {
  std::vector<node_id> nodes;
  auto check = [&](std::int64_t v, std::int64_t line) {
    if (v < 0 || v >= num_nodes)
      throw data_error::at(
          file.string(), line,
          "node " + std::to_string(v) + " is not in [0, " + std::to_string(num_nodes) + ")");
    nodes.push_back(static_cast<node_id>(v));
  };
  if (file.extension() == ".npy") {
    const auto bytes = read_whole_file(file);
    if (!bytes) throw data_error::at(file.string(), 0, "cannot be read");
    const stored_array a = decode_npy(*bytes, file.string());
    if (a.shape.size() != 1 || (a.dtype != array_dtype::i32 && a.dtype != array_dtype::i64))
      throw data_error::at(file.string(), 0, "must be a 1-D int32 or int64 array of node ids");
    for (std::int64_t i = 0; i < a.elements(); ++i) {
      std::int64_t v = 0;
      if (a.dtype == array_dtype::i64) {
        std::memcpy(&v, a.bytes.data() + i * 8, 8);
      } else {
        std::int32_t w = 0;
        std::memcpy(&w, a.bytes.data() + i * 4, 4);
        v = w;
      }
      check(v, 0);
    }
    return nodes;
  }
  std::ifstream in(file);
  if (!in) throw data_error::at(file.string(), 0, "cannot be read");
  std::string line;
  for (std::int64_t number = 1; std::getline(in, line); ++number) {
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(line.substr(first), &used);
    } catch (const std::exception&) {
      throw data_error::at(file.string(), number, "'" + line + "' is not a node id");
    }
    if (line.find_first_not_of(" \t\r", first + used) != std::string::npos)
      throw data_error::at(file.string(), number, "'" + line + "' is not a node id");
    check(v, number);
  }
  return nodes;
}

}  // namespace degnn
