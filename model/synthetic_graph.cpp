// Degree-corrected SBM generator and the OGB raw-layout writer. Randomness comes from per-chunk
// engines seeded from (seed, purpose, chunk), so the output does not depend on thread count.
#include "model/synthetic_graph.hpp"
#include "model/hashing.hpp"

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

namespace {

// xoshiro256** seeded by splitmix64: small, fast, good enough for simulation.
struct rng {
  std::uint64_t s[4];
  explicit rng(std::uint64_t seed) {
    for (auto& w : s)
      w = seed = mix64(seed);
  }
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t next() {
    const std::uint64_t result = rotl(s[1] * 5, 7) * 9;
    const std::uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  std::uint64_t below(std::uint64_t n) {
    return static_cast<std::uint64_t>(uniform() * static_cast<double>(n));
  }
  double normal() {  // Box-Muller; one value per call keeps the stream simple
    const double u1 = std::max(uniform(), 1e-300), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

std::uint64_t stream_seed(std::uint64_t seed, std::uint64_t purpose, std::uint64_t chunk) {
  return mix64(mix64(seed ^ (purpose * 0x632be59bd9b4e019ull)) + chunk);
}

// Walker's alias table: O(1) draws proportional to weights.
struct alias_table {
  std::vector<float> prob;
  std::vector<std::uint32_t> alias;
  explicit alias_table(const std::vector<double>& w) : prob(w.size()), alias(w.size()) {
    const double total = std::accumulate(w.begin(), w.end(), 0.0);
    const auto n = w.size();
    std::vector<double> scaled(n);
    std::vector<std::uint32_t> small, large;
    for (size_t i = 0; i < n; ++i) {
      scaled[i] = w[i] * static_cast<double>(n) / total;
      (scaled[i] < 1.0 ? small : large).push_back(static_cast<std::uint32_t>(i));
    }
    while (!small.empty() && !large.empty()) {
      const auto s = small.back(), l = large.back();
      small.pop_back();
      prob[s] = static_cast<float>(scaled[s]);
      alias[s] = l;
      scaled[l] -= 1.0 - scaled[s];
      if (scaled[l] < 1.0) {
        large.pop_back();
        small.push_back(l);
      }
    }
    for (auto i : large)
      prob[i] = 1.0f, alias[i] = i;
    for (auto i : small)
      prob[i] = 1.0f, alias[i] = i;
  }
  std::uint32_t draw(rng& r) const {
    const auto i = static_cast<std::uint32_t>(r.below(prob.size()));
    return r.uniform() < prob[i] ? i : alias[i];
  }
};

}  // namespace

dataset generate_synthetic(const synthetic_options& o) {
  if (o.num_nodes < 2) throw std::invalid_argument("synthetic graph: nodes must be at least 2");
  if (o.num_edges < 1) throw std::invalid_argument("synthetic graph: edges must be at least 1");
  if (o.num_classes < 2 || o.num_classes > o.num_nodes)
    throw std::invalid_argument("synthetic graph: classes must be in [2, nodes]");
  if (o.num_features < 1)
    throw std::invalid_argument("synthetic graph: features must be at least 1");
  if (o.homophily < 0 || o.homophily > 1)
    throw std::invalid_argument("synthetic graph: homophily must be in [0, 1]");
  if (o.degree_exponent <= 2.0)
    throw std::invalid_argument("synthetic graph: degree exponent must be > 2");
  if (o.train_fraction < 0 || o.valid_fraction < 0 || o.test_fraction < 0 ||
      o.train_fraction + o.valid_fraction + o.test_fraction > 1.0 + 1e-9) {
    throw std::invalid_argument(
        "synthetic graph: split fractions must be >= 0 and sum to at most 1");
  }
  const node_id n = o.num_nodes;
  const int c = o.num_classes;
  dataset d;
  d.name = "synthetic-" + std::to_string(n);
  d.num_classes = c;

  // Classes and Pareto degree propensities (capped so no node wants more than ~sqrt(E) edges).
  d.labels.resize(static_cast<size_t>(n));
  std::vector<double> theta(static_cast<size_t>(n));
  {
    rng r(stream_seed(o.seed, 1, 0));
    const double cap = std::sqrt(static_cast<double>(o.num_edges)) * 4;
    for (node_id v = 0; v < n; ++v) {
      d.labels[v] = static_cast<std::int32_t>(r.below(static_cast<std::uint64_t>(c)));
      theta[v] = std::min(cap, std::pow(1.0 - r.uniform(), -1.0 / (o.degree_exponent - 1.0)));
    }
  }
  std::vector<std::vector<node_id>> members(static_cast<size_t>(c));
  for (node_id v = 0; v < n; ++v)
    members[d.labels[v]].push_back(v);
  for (int k = 0; k < c; ++k) {
    if (members[k].empty()) members[k].push_back(static_cast<node_id>(k));  // tiny graphs only
  }
  const alias_table all(theta);
  std::vector<alias_table> within;
  within.reserve(static_cast<size_t>(c));
  for (int k = 0; k < c; ++k) {
    std::vector<double> w(members[k].size());
    for (size_t i = 0; i < w.size(); ++i)
      w[i] = theta[members[k][i]];
    within.emplace_back(w);
  }

  // Edges in fixed-size chunks, each with its own engine.
  const edge_offset m = o.num_edges;
  constexpr edge_offset kChunk = 1 << 20;
  std::vector<node_id> src(static_cast<size_t>(m)), dst(static_cast<size_t>(m));
  const edge_offset chunks = (m + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(dynamic, 1)
  for (edge_offset ch = 0; ch < chunks; ++ch) {
    rng r(stream_seed(o.seed, 2, static_cast<std::uint64_t>(ch)));
    for (edge_offset e = ch * kChunk; e < std::min(m, (ch + 1) * kChunk); ++e) {
      const auto u = static_cast<node_id>(all.draw(r));
      node_id v = u;
      if (r.uniform() < o.homophily) {
        const auto& cls = members[d.labels[u]];
        v = cls[within[d.labels[u]].draw(r)];
      } else {
        for (int tries = 0; tries < 64 && d.labels[v] == d.labels[u]; ++tries)
          v = static_cast<node_id>(all.draw(r));
      }
      src[e] = u;
      dst[e] = v;
    }
  }
  d.raw_edges = m;
  d.graph =
      build_in_csr(n, src, dst, {.symmetrize = true, .deduplicate = true, .drop_self_loops = true});
  std::vector<node_id>().swap(src);
  std::vector<node_id>().swap(dst);
  // raw_edges counts the undirected edges that survive, as edge.csv.gz will hold them.
  d.raw_edges = d.graph.num_edges() / 2;

  // Features: class centroid (scaled) plus unit Gaussian noise, per-node engines.
  Matrix centroids(c, o.num_features);
  {
    rng r(stream_seed(o.seed, 3, 0));
    for (int k = 0; k < c; ++k) {
      for (int j = 0; j < o.num_features; ++j)
        centroids(k, j) = static_cast<float>(r.normal());
    }
  }
  d.features.resize(n, o.num_features);
#pragma omp parallel for schedule(static)
  for (node_id v = 0; v < n; ++v) {
    rng r(stream_seed(o.seed, 4, static_cast<std::uint64_t>(v)));
    for (int j = 0; j < o.num_features; ++j) {
      d.features(v, j) =
          static_cast<float>(o.feature_signal * centroids(d.labels[v], j) + r.normal());
    }
  }

  // Split: one seeded permutation, cut into train / valid / test, each sorted.
  std::vector<node_id> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  {
    rng r(stream_seed(o.seed, 5, 0));
    for (node_id i = n - 1; i > 0; --i)
      std::swap(perm[i], perm[r.below(static_cast<std::uint64_t>(i) + 1)]);
  }
  const auto take = [&](double f) { return static_cast<size_t>(std::floor(f * n)); };
  const size_t nt = take(o.train_fraction), nv = take(o.valid_fraction), ns = take(o.test_fraction);
  d.train.assign(perm.begin(), perm.begin() + nt);
  d.valid.assign(perm.begin() + nt, perm.begin() + nt + nv);
  d.test.assign(perm.begin() + nt + nv, perm.begin() + nt + nv + ns);
  for (auto* s : {&d.train, &d.valid, &d.test})
    std::sort(s->begin(), s->end());
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
