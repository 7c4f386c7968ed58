// Neighbour sampling for mini-batch training: turns a batch of seed nodes into a stack of blocks
// (model/block.hpp) by picking k in-neighbours per destination, layer by layer, and relabelling.
// Also the deterministic seed shuffler that cuts an epoch into batches.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "model/block.hpp"
#include "model/csr_graph.hpp"
#include "model/hashing.hpp"
#include "model/tensor.hpp"

namespace degnn {

// -- randomness --

/// Seed for one sampled row. Keyed by what the row *is*, not by which thread runs it, so a batch
/// replays bit for bit under any OpenMP thread count.
constexpr std::uint64_t row_seed(std::uint64_t seed, std::uint64_t step, std::uint64_t layer,
                                 node_id row) {
  std::uint64_t h = mix64(seed);
  h = mix64(h ^ step);
  h = mix64(h ^ (layer * 0xd1b54a32d192ed03ULL));
  return mix64(h ^ static_cast<std::uint32_t>(row));
}

/// splitmix64 stream: 8 bytes of state, so one engine per row costs nothing to create.
struct row_rng {
  std::uint64_t state;

  explicit constexpr row_rng(std::uint64_t s) : state(s) {}
  constexpr std::uint64_t next() {
    state += 0x9e3779b97f4a7c15ULL;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// Uniform integer in [0, n), n > 0; Lemire's multiply-shift with rejection, so exactly uniform.
  std::uint64_t below(std::uint64_t n);
};

// -- pick policies --

/// Uniform pick without replacement: writes min(k, neighbors.size()) distinct entries of
/// `neighbors` to `out` (all of them when k < 0) and returns how many. Output keeps the row's
/// order (ascending ids for a sorted CSR row). Thread-safe; `out` needs room for the returned
/// count. A policy is a function of this shape; the sampler skeleton calls it once per destination
/// row.
std::int32_t pick_uniform(std::span<const node_id> neighbors, std::int32_t k, row_rng& rng,
                          node_id* out);

// -- the row-sampling skeleton --

/// Picks of a list of rows: counts[i] picks of row i, concatenated in row order in `picks`.
/// Reused across calls, it allocates only when a call needs more room than the last.
struct row_picks {
  std::vector<std::int32_t> counts;
  std::vector<node_id> picks;
  std::vector<std::int64_t> slot;  ///< where row i writes: slot[i] .. slot[i+1]
};

/// The one parallel skeleton every sampler of DEGNN runs: row i has the in-neighbours row_of(i)
/// (a std::span<const node_id>) and the key ids[i]; k = fanout of them (all when fanout < 0) are
/// picked uniformly with the engine of row_seed(seed, step, layer, ids[i]). Capacities first, so
/// each row writes its own slots, then the picks in parallel: any thread count gives the same
/// result. Returns the total number of picks.
template <class RowOf>
std::int64_t sample_rows(std::span<const node_id> ids, RowOf&& row_of, int fanout,
                         std::uint64_t seed, std::uint64_t step, std::uint64_t layer,
                         row_picks& out) {
  const auto n = static_cast<std::int64_t>(ids.size());
  out.slot.resize(static_cast<size_t>(n) + 1);
  out.slot[0] = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto deg = static_cast<std::int64_t>(row_of(static_cast<size_t>(i)).size());
    out.slot[static_cast<size_t>(i) + 1] =
        out.slot[static_cast<size_t>(i)] + ((fanout < 0 || deg <= fanout) ? deg : fanout);
  }
  out.picks.resize(static_cast<size_t>(out.slot[static_cast<size_t>(n)]));
  out.counts.resize(static_cast<size_t>(n));
  // Degrees are skewed, so rows are handed out dynamically; each row's engine comes from its own
  // key, never from the thread.
#pragma omp parallel for schedule(dynamic, 64) if (n >= 256)
  for (std::int64_t i = 0; i < n; ++i) {
    const auto u = static_cast<size_t>(i);
    row_rng rng(row_seed(seed, step, layer, ids[u]));
    out.counts[u] = pick_uniform(row_of(u), fanout, rng, out.picks.data() + out.slot[u]);
  }
  // A policy may take fewer than its capacity: compact in place (a row's slot starts at or after
  // the total of the rows before it).
  std::int64_t written = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto u = static_cast<size_t>(i);
    if (written != out.slot[u])
      std::copy_n(out.picks.data() + out.slot[u], out.counts[u], out.picks.data() + written);
    written += out.counts[u];
  }
  out.picks.resize(static_cast<size_t>(written));
  return written;
}

// -- sampler --

/// Reusable sampler over one graph. Owns a dense global->local scratch (4 bytes per graph node)
/// and per-row pick slots, so repeated batches allocate little. One object per thread: sample()
/// is not reentrant (its row loop is OpenMP-parallel inside).
class neighbor_sampler {
 public:
  explicit neighbor_sampler(const csr_graph& g);

  /// Samples one mini-batch. `seeds` must be distinct node ids; `fanouts` is seed-first (fanouts[0]
  /// builds blocks.back()), each k >= 0 or -1 for all in-neighbours. (seed, step) select the
  /// random stream: the same arguments give the same batch whatever the thread count.
  sampled_batch sample(std::span<const node_id> seeds, std::span<const int> fanouts,
                       std::uint64_t seed, std::uint64_t step);

  const csr_graph& graph() const { return g_; }

 private:
  /// One block whose dst nodes are `dst`; `layer` is the fanout index (seed-first).
  block sample_layer(std::span<const node_id> dst, int fanout, std::uint64_t seed,
                     std::uint64_t step, std::uint64_t layer);

  const csr_graph& g_;
  std::vector<std::int32_t> local_;  ///< global id -> local src index, -1 when untouched
  row_picks picked_;                 ///< the rows' picks of the layer being sampled
};

/// Convenience wrapper: builds a neighbor_sampler for one call (allocates its scratch each time;
/// keep a neighbor_sampler across batches in training loops).
sampled_batch sample_blocks(const csr_graph& g, std::span<const node_id> seeds,
                            std::span<const int> fanouts, std::uint64_t seed, std::uint64_t step);

// -- batching --

/// Shuffles `nodes` deterministically from (seed, epoch) and cuts them into batches of
/// `batch_size` (> 0); the last batch may be smaller. Same arguments, same batches, any platform.
std::vector<std::vector<node_id>> make_batches(std::span<const node_id> nodes, int batch_size,
                                               std::uint64_t seed, std::uint64_t epoch);

}  // namespace degnn
