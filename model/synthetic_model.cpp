// The synthetic graphs' planted model (see synthetic_model.hpp). Randomness comes from engines
// seeded from (seed, purpose, chunk or node), so the output does not depend on thread count.
#include "model/synthetic_model.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "model/hashing.hpp"

namespace degnn {

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

struct synthetic_model::tables {
  std::vector<std::vector<node_id>> members;  // the nodes of each class
  alias_table all;                            // every node, by propensity
  std::vector<alias_table> within;            // each class's nodes, by propensity
  Matrix centroids;                           // (classes, features)
  explicit tables(const std::vector<double>& theta) : all(theta) {}
};

synthetic_model::synthetic_model(const synthetic_options& o) : o_(o) {
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
  // Classes and Pareto degree propensities (capped so no node wants more than ~sqrt(E) edges).
  labels_.resize(static_cast<size_t>(n));
  std::vector<double> theta(static_cast<size_t>(n));
  {
    rng r(stream_seed(o.seed, 1, 0));
    const double cap = std::sqrt(static_cast<double>(o.num_edges)) * 4;
    for (node_id v = 0; v < n; ++v) {
      labels_[v] = static_cast<std::int32_t>(r.below(static_cast<std::uint64_t>(c)));
      theta[v] = std::min(cap, std::pow(1.0 - r.uniform(), -1.0 / (o.degree_exponent - 1.0)));
    }
  }
  t_ = std::make_unique<tables>(theta);
  t_->members.resize(static_cast<size_t>(c));
  for (node_id v = 0; v < n; ++v)
    t_->members[labels_[v]].push_back(v);
  for (int k = 0; k < c; ++k) {
    if (t_->members[k].empty()) t_->members[k].push_back(static_cast<node_id>(k));  // tiny graphs
  }
  t_->within.reserve(static_cast<size_t>(c));
  for (int k = 0; k < c; ++k) {
    std::vector<double> w(t_->members[k].size());
    for (size_t i = 0; i < w.size(); ++i)
      w[i] = theta[t_->members[k][i]];
    t_->within.emplace_back(w);
  }
  t_->centroids.resize(c, o.num_features);
  rng r(stream_seed(o.seed, 3, 0));
  for (int k = 0; k < c; ++k) {
    for (int j = 0; j < o.num_features; ++j)
      t_->centroids(k, j) = static_cast<float>(r.normal());
  }
}

synthetic_model::~synthetic_model() = default;

void synthetic_model::draw_edges(edge_offset ch, std::vector<node_id>& src,
                                 std::vector<node_id>& dst) const {
  const edge_offset begin = ch * kEdgeChunk, end = std::min(o_.num_edges, begin + kEdgeChunk);
  src.resize(static_cast<size_t>(end - begin));
  dst.resize(static_cast<size_t>(end - begin));
  rng r(stream_seed(o_.seed, 2, static_cast<std::uint64_t>(ch)));
  for (edge_offset e = begin; e < end; ++e) {
    const auto u = static_cast<node_id>(t_->all.draw(r));
    node_id v = u;
    if (r.uniform() < o_.homophily) {
      const auto& cls = t_->members[labels_[u]];
      v = cls[t_->within[labels_[u]].draw(r)];
    } else {
      for (int tries = 0; tries < 64 && labels_[v] == labels_[u]; ++tries)
        v = static_cast<node_id>(t_->all.draw(r));
    }
    src[e - begin] = u;
    dst[e - begin] = v;
  }
}

void synthetic_model::feature_row(node_id v, float* out) const {
  // Class centroid (scaled) plus unit Gaussian noise, one engine per node.
  rng r(stream_seed(o_.seed, 4, static_cast<std::uint64_t>(v)));
  for (int j = 0; j < o_.num_features; ++j)
    out[j] = static_cast<float>(o_.feature_signal * t_->centroids(labels_[v], j) + r.normal());
}

void synthetic_model::draw_splits(std::vector<node_id>& train, std::vector<node_id>& valid,
                                  std::vector<node_id>& test) const {
  // One seeded permutation, cut into train / valid / test, each sorted.
  const node_id n = o_.num_nodes;
  std::vector<node_id> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  {
    rng r(stream_seed(o_.seed, 5, 0));
    for (node_id i = n - 1; i > 0; --i)
      std::swap(perm[i], perm[r.below(static_cast<std::uint64_t>(i) + 1)]);
  }
  const auto take = [&](double f) { return static_cast<size_t>(std::floor(f * n)); };
  const size_t nt = take(o_.train_fraction), nv = take(o_.valid_fraction),
               ns = take(o_.test_fraction);
  train.assign(perm.begin(), perm.begin() + nt);
  valid.assign(perm.begin() + nt, perm.begin() + nt + nv);
  test.assign(perm.begin() + nt + nv, perm.begin() + nt + nv + ns);
  for (auto* s : {&train, &valid, &test})
    std::sort(s->begin(), s->end());
}

}  // namespace degnn
