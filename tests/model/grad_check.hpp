// Test helpers for the layer/model tests: random graphs and blocks, and a central
// finite-difference gradient check that reports the largest difference relative to the
// gradient's scale.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "model/block.hpp"
#include "model/csr_graph.hpp"
#include "model/tensor.hpp"

namespace degnn::testing {

/// A graph of n nodes and `edges` random in-edges (repeats and self loops allowed).
inline csr_graph random_graph(node_id n, int edges, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<node_id> src(edges), dst(edges);
  for (int i = 0; i < edges; ++i) {
    src[i] = static_cast<node_id>(rng() % n);
    dst[i] = static_cast<node_id>(rng() % n);
  }
  return build_in_csr(n, src, dst);
}

/// A random block: num_dst dst rows (the first num_dst of num_src sources), 0..max_fanout
/// distinct sampled neighbours per row, full degrees >= sampled counts (some rows sampled, some
/// complete, some empty).
inline block random_block(std::int32_t num_dst, std::int32_t num_src, std::int32_t max_fanout,
                          std::uint32_t seed) {
  std::mt19937 rng(seed);
  block b;
  b.num_dst_nodes = num_dst;
  for (std::int32_t i = 0; i < num_src; ++i)
    b.src_nodes.push_back(1000 + i);
  for (std::int32_t i = 0; i < num_dst; ++i) {
    const std::int32_t k = static_cast<std::int32_t>(rng() % (max_fanout + 1));
    std::vector<std::int32_t> all(num_src);
    for (std::int32_t u = 0; u < num_src; ++u)
      all[u] = u;
    std::shuffle(all.begin(), all.end(), rng);
    all.resize(std::min(k, num_src));
    std::sort(all.begin(), all.end());
    b.indices.insert(b.indices.end(), all.begin(), all.end());
    b.indptr.push_back(static_cast<std::int32_t>(b.indices.size()));
  }
  b.src_degree.resize(num_src);
  for (std::int32_t u = 0; u < num_src; ++u) {
    const std::int32_t count = u < num_dst ? b.indptr[u + 1] - b.indptr[u] : 0;
    b.src_degree[u] = count + static_cast<std::int32_t>(rng() % 3);  // 0 extra = complete row
  }
  return b;
}

inline Matrix random_matrix(Eigen::Index rows, Eigen::Index cols, std::uint32_t seed,
                            float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  Matrix m(rows, cols);
  for (Eigen::Index k = 0; k < m.size(); ++k)
    m.data()[k] = u(rng);
  return m;
}

/// sum(a .* r) in double: a scalar loss whose gradient w.r.t. a is r.
inline double dot(const Matrix& a, const Matrix& r) {
  double s = 0;
  for (Eigen::Index k = 0; k < a.size(); ++k)
    s += static_cast<double>(a.data()[k]) * static_cast<double>(r.data()[k]);
  return s;
}

/// Central differences of loss() w.r.t. every entry of x (perturbed in place and restored),
/// compared with `analytic`. Returns max |fd - analytic| / max(max |analytic|, 1e-6): relative to
/// the gradient's scale, so round-off of tiny entries does not dominate, yet a wrong factor,
/// transpose or missing term shows up as O(1).
inline double max_grad_error(Matrix& x, const Matrix& analytic, const std::function<double()>& loss,
                             float eps) {
  double worst = 0;
  const double scale = std::max<double>(analytic.cwiseAbs().maxCoeff(), 1e-6);
  for (Eigen::Index k = 0; k < x.size(); ++k) {
    const float saved = x.data()[k];
    x.data()[k] = saved + eps;
    const double up = loss();
    x.data()[k] = saved - eps;
    const double down = loss();
    x.data()[k] = saved;
    // The step actually taken in float, not the nominal eps.
    const double h = static_cast<double>(saved + eps) - static_cast<double>(saved - eps);
    const double fd = (up - down) / h;
    worst = std::max(worst, std::abs(fd - static_cast<double>(analytic.data()[k])) / scale);
  }
  return worst;
}

}  // namespace degnn::testing
