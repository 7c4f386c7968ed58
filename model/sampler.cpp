// Neighbour sampler: a parallel pick phase over destination rows into per-row slots, then a
// sequential relabel (first-appearance order, so the output does not depend on thread count).
#include "model/sampler.hpp"

#include "model/block_builder.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace degnn {

std::uint64_t row_rng::below(std::uint64_t n) {
  // Lemire: the high word of x * n is uniform in [0, n) once the low word is outside the biased
  // sliver [0, 2^64 mod n); the modulo is only computed on the rare near-miss.
  unsigned __int128 m = static_cast<unsigned __int128>(next()) * n;
  auto low = static_cast<std::uint64_t>(m);
  if (low < n) {
    const std::uint64_t threshold = (0 - n) % n;
    while (low < threshold) {
      m = static_cast<unsigned __int128>(next()) * n;
      low = static_cast<std::uint64_t>(m);
    }
  }
  return static_cast<std::uint64_t>(m >> 64);
}

namespace {

// Up to this many picks, membership is a linear scan of the picks so far (k^2/2 compares on a
// few cache lines beats any set); above it a per-thread bitmap over the row's positions.
constexpr std::uint32_t kLinearScanMax = 32;

// Floyd's algorithm: m distinct positions in [0, n), every m-subset equally likely, exactly m
// draws and no O(n) work. Positions come back sorted so rows keep CSR order.
void floyd_sample(std::uint32_t n, std::uint32_t m, row_rng& rng, std::uint32_t* pos) {
  if (m <= kLinearScanMax) {
    std::uint32_t count = 0;
    for (std::uint32_t j = n - m; j < n; ++j) {
      const auto t = static_cast<std::uint32_t>(rng.below(std::uint64_t{j} + 1));
      bool seen = false;
      for (std::uint32_t i = 0; i < count; ++i)
        seen |= (pos[i] == t);
      pos[count++] = seen ? j : t;
    }
  } else {
    // Grow-only and cleared bit by bit afterwards, so a huge row costs O(m), not O(n), per call.
    thread_local std::vector<std::uint64_t> bits;
    if (bits.size() < n / 64 + 1) bits.resize(n / 64 + 1, 0);
    std::uint32_t count = 0;
    for (std::uint32_t j = n - m; j < n; ++j) {
      auto t = static_cast<std::uint32_t>(rng.below(std::uint64_t{j} + 1));
      if ((bits[t >> 6] >> (t & 63)) & 1) t = j;
      bits[t >> 6] |= std::uint64_t{1} << (t & 63);
      pos[count++] = t;
    }
    for (std::uint32_t i = 0; i < m; ++i)
      bits[pos[i] >> 6] = 0;
  }
  std::sort(pos, pos + m);
}

}  // namespace

std::int32_t pick_uniform(std::span<const node_id> neighbors, std::int32_t k, row_rng& rng,
                          node_id* out) {
  const auto deg = static_cast<std::uint32_t>(neighbors.size());
  if (k < 0 || static_cast<std::uint32_t>(k) >= deg) {
    std::copy(neighbors.begin(), neighbors.end(), out);
    return static_cast<std::int32_t>(deg);
  }
  const auto kk = static_cast<std::uint32_t>(k);
  // For k above half the degree, drawing the deg - k rows to *drop* is fewer draws.
  const bool complement = kk > deg / 2;
  const std::uint32_t m = complement ? deg - kk : kk;
  std::uint32_t small[kLinearScanMax];
  thread_local std::vector<std::uint32_t> large;
  std::uint32_t* pos = small;
  if (m > kLinearScanMax) {
    if (large.size() < m) large.resize(m);
    pos = large.data();
  }
  floyd_sample(deg, m, rng, pos);
  if (!complement) {
    for (std::uint32_t i = 0; i < m; ++i)
      out[i] = neighbors[pos[i]];
  } else {
    std::uint32_t next_drop = 0, o = 0;
    for (std::uint32_t j = 0; j < deg; ++j) {
      if (next_drop < m && pos[next_drop] == j) {
        ++next_drop;
        continue;
      }
      out[o++] = neighbors[j];
    }
  }
  return k;
}

neighbor_sampler::neighbor_sampler(const csr_graph& g)
    : g_(g), local_(static_cast<size_t>(g.num_nodes), -1) {}

sampled_batch neighbor_sampler::sample(std::span<const node_id> seeds, std::span<const int> fanouts,
                                       std::uint64_t seed, std::uint64_t step) {
  if (fanouts.empty()) throw std::invalid_argument("sample_blocks: empty fanout list");
  for (size_t l = 0; l < fanouts.size(); ++l) {
    if (fanouts[l] < -1) {
      throw std::invalid_argument("sample_blocks: fanout " + std::to_string(fanouts[l]) +
                                  " at position " + std::to_string(l) + " (want k >= 0 or -1)");
    }
  }
  for (const node_id s : seeds) {
    if (s < 0 || s >= g_.num_nodes) {
      throw std::out_of_range("sample_blocks: seed " + std::to_string(s) + " outside [0, " +
                              std::to_string(g_.num_nodes) + ")");
    }
  }
  sampled_batch batch;
  batch.output_nodes.assign(seeds.begin(), seeds.end());
  const size_t layers = fanouts.size();
  batch.blocks.resize(layers);
  // Seed-first: fanouts[l] builds blocks[layers-1-l], whose sources are the next frontier. The
  // vector is sized up front, so the span into an earlier block stays valid.
  std::span<const node_id> frontier = seeds;
  for (size_t l = 0; l < layers; ++l) {
    block& b = batch.blocks[layers - 1 - l];
    b = sample_layer(frontier, fanouts[l], seed, step, l);
    frontier = b.src_nodes;
  }
  return batch;
}

block neighbor_sampler::sample_layer(std::span<const node_id> dst, int fanout, std::uint64_t seed,
                                     std::uint64_t step, std::uint64_t layer) {
  constexpr std::int64_t kMaxLocal = std::numeric_limits<std::int32_t>::max();
  const std::int64_t total = sample_rows(
      dst, [&](size_t i) { return g_.in_neighbors(dst[i]); }, fanout, seed, step, layer, picked_);
  if (total + static_cast<std::int64_t>(dst.size()) > kMaxLocal) {
    throw std::length_error("sample_blocks: layer " + std::to_string(layer) + " would sample " +
                            std::to_string(total) +
                            " edges, beyond a block's 32-bit local indices");
  }
  block b;
  try {
    b = assemble_block(dst, picked_.counts, picked_.picks, local_);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("sample_blocks: a seed appears twice in the batch (") +
                                e.what() + ")");
  }

  const auto num_src = static_cast<std::int64_t>(b.src_nodes.size());
  b.src_degree.resize(static_cast<size_t>(num_src));
#pragma omp parallel for schedule(static) if (num_src >= 4096)
  for (std::int64_t i = 0; i < num_src; ++i)
    b.src_degree[i] = static_cast<std::int32_t>(g_.in_degree(b.src_nodes[i]));
  return b;
}

sampled_batch sample_blocks(const csr_graph& g, std::span<const node_id> seeds,
                            std::span<const int> fanouts, std::uint64_t seed, std::uint64_t step) {
  neighbor_sampler sampler(g);
  return sampler.sample(seeds, fanouts, seed, step);
}

std::vector<std::vector<node_id>> make_batches(std::span<const node_id> nodes, int batch_size,
                                               std::uint64_t seed, std::uint64_t epoch) {
  if (batch_size <= 0) {
    throw std::invalid_argument("make_batches: batch size " + std::to_string(batch_size) +
                                " (want > 0)");
  }
  // Own Fisher-Yates rather than std::shuffle: the standard leaves std::shuffle's algorithm
  // unspecified, and batches must replay identically across standard libraries.
  std::vector<node_id> order(nodes.begin(), nodes.end());
  row_rng rng(mix64(mix64(seed ^ 0x6a09e667f3bcc909ULL) ^ epoch));
  for (size_t i = order.size(); i > 1; --i)
    std::swap(order[i - 1], order[rng.below(i)]);

  std::vector<std::vector<node_id>> batches;
  const size_t bs = static_cast<size_t>(batch_size);
  batches.reserve((order.size() + bs - 1) / bs);
  for (size_t begin = 0; begin < order.size(); begin += bs) {
    const size_t end = std::min(order.size(), begin + bs);
    batches.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(begin),
                         order.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return batches;
}

}  // namespace degnn
