// Checkpoint writer/reader: the payload is assembled in memory, checksummed with zlib's CRC-32
// and written after a fixed header; the reader verifies everything before building the model.
#include "model/checkpoint.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "model/crc32.hpp"
#include "model/data_error.hpp"
#include "model/durable_file.hpp"

namespace degnn {
namespace {

constexpr char kMagic[8] = {'D', 'E', 'G', 'N', 'N', 'C', 'K', 'P'};
constexpr std::size_t kHeaderSize = 8 + 4 + 4 + 8;

std::uint32_t crc_of(const char* data, std::size_t n) {
  return crc32_update(0, data, n);
}

struct writer {
  std::string buf;
  template <class T>
  void put(const T& x) {
    buf.append(reinterpret_cast<const char*>(&x), sizeof(T));
  }
  void put_matrix(const Matrix& m) {
    put<std::int64_t>(m.rows());
    put<std::int64_t>(m.cols());
    buf.append(reinterpret_cast<const char*>(m.data()), sizeof(float) * m.size());
  }
};

struct reader {
  const std::string& file;
  const char* p;
  const char* end;
  template <class T>
  T get(const char* what) {
    T x;
    need(sizeof(T), what);
    std::memcpy(&x, p, sizeof(T));
    p += sizeof(T);
    return x;
  }
  void need(std::size_t n, const char* what) {
    if (static_cast<std::size_t>(end - p) < n)
      throw data_error::at(file, 0, std::string("checkpoint payload too short reading ") + what);
  }
  // Reads a matrix; when expect is given its shape must match.
  Matrix get_matrix(const char* what, const Matrix* expect) {
    const auto rows = get<std::int64_t>(what);
    const auto cols = get<std::int64_t>(what);
    if (rows < 0 || cols < 0 || (expect && (rows != expect->rows() || cols != expect->cols())))
      throw data_error::at(file, 0,
                           std::string("checkpoint has a bad shape for ") + what + ": " +
                               std::to_string(rows) + "x" + std::to_string(cols));
    const std::size_t bytes = sizeof(float) * static_cast<std::size_t>(rows) * cols;
    need(bytes, what);
    Matrix m(rows, cols);
    std::memcpy(m.data(), p, bytes);
    p += bytes;
    return m;
  }
};

}  // namespace

std::uint32_t checkpoint_crc(std::string_view bytes) {
  return crc_of(bytes.data(), bytes.size());
}

std::string encode_checkpoint(const gnn_model& model, const adam& opt) {
  writer w;
  const model_config& c = model.config();
  w.put<std::int32_t>(static_cast<std::int32_t>(c.kind));
  w.put<std::int32_t>(c.in_dim);
  w.put<std::int32_t>(c.hidden);
  w.put<std::int32_t>(c.num_classes);
  w.put<std::int32_t>(c.num_layers);
  w.put<float>(c.dropout);
  if (c.kind == model_kind::gat) {  // only GAT checkpoints carry these, so others read as before
    w.put<std::int32_t>(c.heads);
    w.put<std::int32_t>(c.output_heads);
    w.put<float>(c.attention_dropout);
    w.put<float>(c.input_dropout);
  }
  const auto params = model.parameters();
  w.put<std::uint64_t>(params.size());
  for (const Matrix* m : params)
    w.put_matrix(*m);
  const adam_options& o = opt.options();
  for (float x : {o.lr, o.beta1, o.beta2, o.eps, o.weight_decay})
    w.put<float>(x);
  const adam_state& s = opt.state();
  w.put<std::int64_t>(s.step);
  w.put<std::uint64_t>(s.m.size());
  for (const Matrix& m : s.m)
    w.put_matrix(m);
  for (const Matrix& v : s.v)
    w.put_matrix(v);

  writer h;
  h.buf.append(kMagic, sizeof(kMagic));
  h.put<std::uint32_t>(checkpoint_version);
  h.put<std::uint32_t>(crc_of(w.buf.data(), w.buf.size()));
  h.put<std::uint64_t>(w.buf.size());
  return h.buf + w.buf;
}

void save_checkpoint(const std::filesystem::path& path, const gnn_model& model, const adam& opt) {
  write_file_durably(path, encode_checkpoint(model, opt));
}

checkpoint load_checkpoint(const std::filesystem::path& path) {
  const std::string file = path.string();
  const auto bytes = read_whole_file(path);
  if (!bytes) throw data_error::at(file, 0, "cannot open checkpoint");
  return decode_checkpoint(*bytes, file);
}

checkpoint decode_checkpoint(std::string_view bytes, const std::string& file) {
  if (bytes.size() < kHeaderSize)
    throw data_error::at(file, 0, "checkpoint truncated: shorter than its header");
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    throw data_error::at(file, 0, "not a DEGNN checkpoint (bad magic)");
  reader hr{file, bytes.data() + sizeof(kMagic), bytes.data() + kHeaderSize};
  const auto version = hr.get<std::uint32_t>("version");
  const auto crc = hr.get<std::uint32_t>("checksum");
  const auto size = hr.get<std::uint64_t>("payload size");
  if (version != checkpoint_version)
    throw data_error::at(file, 0, "unsupported checkpoint version " + std::to_string(version));
  if (bytes.size() - kHeaderSize != size)
    throw data_error::at(file, 0,
                         "checkpoint truncated or padded: payload is " +
                             std::to_string(bytes.size() - kHeaderSize) + " bytes, header says " +
                             std::to_string(size));
  const char* payload = bytes.data() + kHeaderSize;
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
  if (crc_of(payload, size) != crc)
    throw data_error::at(file, 0, "checkpoint checksum mismatch (corrupt file)");
#else
  (void)crc;
#endif

  reader r{file, payload, payload + size};
  model_config c;
  const auto kind = r.get<std::int32_t>("model kind");
  if (kind != 0 && kind != 1 && kind != 2)
    throw data_error::at(file, 0, "checkpoint has unknown model kind " + std::to_string(kind));
  c.kind = static_cast<model_kind>(kind);
  c.in_dim = r.get<std::int32_t>("in_dim");
  c.hidden = r.get<std::int32_t>("hidden");
  c.num_classes = r.get<std::int32_t>("num_classes");
  c.num_layers = r.get<std::int32_t>("num_layers");
  c.dropout = r.get<float>("dropout");
  if (c.kind == model_kind::gat) {
    c.heads = r.get<std::int32_t>("heads");
    c.output_heads = r.get<std::int32_t>("output heads");
    c.attention_dropout = r.get<float>("attention dropout");
    c.input_dropout = r.get<float>("input dropout");
  }
  // Every layer holds at least an in x out weight: those floats must fit in what is left of the
  // payload before the model is built, or a damaged or forged config (the CRC is no signature)
  // would allocate whatever sizes it names. (Found by tests/fuzz/files_fuzz.cpp: 37 GB.)
  if (c.in_dim > 0 && c.hidden > 0 && c.num_classes > 0 && c.num_layers > 0) {
    const auto left = static_cast<unsigned __int128>(r.end - r.p);
    unsigned __int128 bytes = 0;
    for (std::int32_t l = 0; l < c.num_layers && bytes <= left; ++l) {
      const std::int32_t in = l == 0 ? c.in_dim : c.hidden;
      const std::int32_t out = l + 1 == c.num_layers ? c.num_classes : c.hidden;
      // A GAT output layer projects to output_heads x num_classes.
      const std::int32_t copies =
          c.kind == model_kind::gat && l + 1 == c.num_layers ? std::max(c.output_heads, 1) : 1;
      bytes += 4 * static_cast<unsigned __int128>(in) * static_cast<unsigned __int128>(out) *
               static_cast<unsigned __int128>(copies);
    }
    if (bytes > left)
      throw data_error::at(file, 0,
                           "checkpoint's model config (" + std::to_string(c.num_layers) +
                               " layers, in " + std::to_string(c.in_dim) + ", hidden " +
                               std::to_string(c.hidden) + ") needs more weights than its " +
                               std::to_string(size) + "-byte payload holds");
  }
  std::optional<gnn_model> model;
  try {
    model.emplace(c);
  } catch (const std::invalid_argument& e) {
    throw data_error::at(file, 0, std::string("checkpoint has a bad model config: ") + e.what());
  }
  const auto params = model->parameters();
  if (r.get<std::uint64_t>("parameter count") != params.size())
    throw data_error::at(file, 0, "checkpoint parameter count does not match its config");
  for (Matrix* m : params)
    *m = r.get_matrix("parameter", m);
  adam_options o;
  o.lr = r.get<float>("lr");
  o.beta1 = r.get<float>("beta1");
  o.beta2 = r.get<float>("beta2");
  o.eps = r.get<float>("eps");
  o.weight_decay = r.get<float>("weight_decay");
  adam_state s;
  s.step = r.get<std::int64_t>("adam step");
  const auto moments = r.get<std::uint64_t>("moment count");
  if (moments != 0 && moments != params.size())
    throw data_error::at(file, 0, "checkpoint moment count does not match its parameters");
  for (std::uint64_t i = 0; i < moments; ++i)
    s.m.push_back(r.get_matrix("adam m", params[i]));
  for (std::uint64_t i = 0; i < moments; ++i)
    s.v.push_back(r.get_matrix("adam v", params[i]));
  if (r.p != r.end) throw data_error::at(file, 0, "checkpoint has trailing bytes in its payload");
  adam opt(o);
  opt.set_state(std::move(s));
  return checkpoint{std::move(*model), std::move(opt)};
}

}  // namespace degnn
