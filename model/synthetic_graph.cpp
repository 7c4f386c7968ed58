// generate_synthetic (the planted model's pieces assembled in memory, see synthetic_model.hpp)
// and the OGB raw-layout writer.
#include "model/synthetic_graph.hpp"
#include "model/synthetic_model.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <stdexcept>
#include <string>

#include "model/gzip_lines.hpp"

namespace degnn {

namespace fs = std::filesystem;

dataset generate_synthetic(const synthetic_options& o) {
  const synthetic_model model(o);
  const node_id n = o.num_nodes;
  dataset d;
  d.name = "synthetic-" + std::to_string(n);
  d.num_classes = o.num_classes;
  d.labels = model.labels();

  // Edges in fixed-size chunks, each with its own engine.
  const edge_offset m = o.num_edges;
  std::vector<node_id> src(static_cast<size_t>(m)), dst(static_cast<size_t>(m));
  const edge_offset chunks = model.edge_chunks();
#pragma omp parallel for schedule(dynamic, 1)
  for (edge_offset ch = 0; ch < chunks; ++ch) {
    std::vector<node_id> s, t;
    model.draw_edges(ch, s, t);
    std::copy(s.begin(), s.end(), src.begin() + ch * synthetic_model::kEdgeChunk);
    std::copy(t.begin(), t.end(), dst.begin() + ch * synthetic_model::kEdgeChunk);
  }
  d.graph =
      build_in_csr(n, src, dst, {.symmetrize = true, .deduplicate = true, .drop_self_loops = true});
  std::vector<node_id>().swap(src);
  std::vector<node_id>().swap(dst);
  // raw_edges counts the undirected edges that survive, as edge.csv.gz will hold them.
  d.raw_edges = d.graph.num_edges() / 2;

  d.features.resize(n, o.num_features);
#pragma omp parallel for schedule(static)
  for (node_id v = 0; v < n; ++v)
    model.feature_row(v, d.features.row(v).data());
  model.draw_splits(d.train, d.valid, d.test);
  return d;
}

namespace {

void write_id_lines(const fs::path& file, const std::vector<node_id>& ids) {
  std::string text;
  text.reserve(ids.size() * 8);
  char buf[16];
  for (node_id v : ids) {
    auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
    text.append(buf, p);
    text.push_back('\n');
  }
  gzip_writer w(file);
  w.write(text);
  w.close();
}

void write_single(const fs::path& file, std::int64_t value) {
  gzip_writer w(file);
  w.write(std::to_string(value) + "\n");
  w.close();
}

}  // namespace

void write_ogb_dataset(const dataset& d, const fs::path& dir, bool verbose) {
  fs::create_directories(dir / "split");
  const node_id n = d.num_nodes();
  const auto& g = d.graph;

  // Edges: row v of the in-CSR lists u -> v; an undirected graph writes each pair once (u < v).
  {
    gzip_writer w(dir / "edge.csv.gz");
    std::string text;
    edge_offset written = 0;
    char buf[32];
    for (node_id v = 0; v < n; ++v) {
      for (node_id u : g.in_neighbors(v)) {
        if (!d.directed && u >= v) continue;
        auto p = std::to_chars(buf, buf + 16, u).ptr;
        *p++ = ',';
        p = std::to_chars(p, buf + 32, v).ptr;
        *p++ = '\n';
        text.append(buf, p);
        ++written;
      }
      if (text.size() > (8u << 20)) {
        w.write(text);
        text.clear();
      }
    }
    w.write(text);
    w.close();
    write_single(dir / "num-edge-list.csv.gz", written);
    if (verbose) std::fprintf(stderr, "  wrote %lld edges\n", static_cast<long long>(written));
  }
  write_single(dir / "num-node-list.csv.gz", n);

  // Features: rows formatted in parallel blocks, compressed in order.
  {
    gzip_writer w(dir / "node-feat.csv.gz");
    constexpr node_id kRows = 16384;
    const auto f = d.features.cols();
    for (node_id begin = 0; begin < n; begin += kRows) {
      const node_id end = std::min(n, begin + kRows);
      std::vector<std::string> parts(static_cast<size_t>(end - begin));
#pragma omp parallel for schedule(static)
      for (node_id v = begin; v < end; ++v) {
        std::string& s = parts[v - begin];
        s.reserve(static_cast<size_t>(f) * 9);
        char buf[32];
        for (Eigen::Index j = 0; j < f; ++j) {
          const float x = d.features(v, j);
          auto p = x == 0.0f
                       ? (buf[0] = '0', buf + 1)
                       : std::to_chars(buf, buf + sizeof buf, x, std::chars_format::general, 6).ptr;
          s.append(buf, p);
          s.push_back(j + 1 < f ? ',' : '\n');
        }
      }
      for (auto& s : parts)
        w.write(s);
      if (verbose && (begin / kRows) % 64 == 63) {
        std::fprintf(stderr, "\r  features: %d / %d rows", end, n);
      }
    }
    w.close();
    if (verbose)
      std::fprintf(stderr, "\r  features: %d rows x %lld            \n", n,
                   static_cast<long long>(f));
  }
  {
    std::string text;
    for (auto y : d.labels)
      text += std::to_string(y) + "\n";
    gzip_writer w(dir / "node-label.csv.gz");
    w.write(text);
    w.close();
  }
  write_id_lines(dir / "split" / "train.csv.gz", d.train);
  write_id_lines(dir / "split" / "valid.csv.gz", d.valid);
  write_id_lines(dir / "split" / "test.csv.gz", d.test);
  std::ofstream meta(dir / "dataset.ini");
  meta << "# DEGNN dataset metadata (OGB raw layout beside it)\nname = " << d.name
       << "\ndirected = " << (d.directed ? "true" : "false") << "\nnum_classes = " << d.num_classes
       << "\n";
  if (!meta) throw std::runtime_error("cannot write " + (dir / "dataset.ini").string());
}

}  // namespace degnn
