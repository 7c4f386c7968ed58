// Graph partitioning: METIS k-way with two balance constraints plus a greedy rebalancing pass, a
// seeded random baseline, and the quality figures (edge cut, halos, balance) used to compare them.
#include "model/partitioner.hpp"

#include <metis.h>

#include <algorithm>
#include <climits>
#include <stdexcept>
#include <string>

namespace degnn {

namespace {

// splitmix64: a tiny, portable generator, so a seed gives the same deal with every standard library
// (std::shuffle and the std distributions are implementation-defined).
struct splitmix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
};

void shuffle(std::vector<node_id>& v, splitmix64& rng) {
  for (size_t i = v.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(rng.next() % i);  // modulo bias is irrelevant here
    std::swap(v[i - 1], v[j]);
  }
}

std::vector<char> train_mask(node_id n, std::span<const node_id> train_nodes) {
  std::vector<char> is_train(static_cast<size_t>(n), 0);
  for (node_id t : train_nodes) {
    if (t < 0 || t >= n) {
      throw std::invalid_argument("partition: train node id " + std::to_string(t) +
                                  " is outside [0, " + std::to_string(n) + ")");
    }
    is_train[static_cast<size_t>(t)] = 1;
  }
  return is_train;
}

void check_parts(const csr_graph& g, int parts) {
  if (parts < 1) {
    throw std::invalid_argument("partition_graph: parts must be at least 1, got " +
                                std::to_string(parts));
  }
  if (parts > g.num_nodes) {
    throw std::invalid_argument("partition_graph: cannot split " + std::to_string(g.num_nodes) +
                                " nodes into " + std::to_string(parts) +
                                " parts (parts must be <= num_nodes)");
  }
}

std::vector<std::int32_t> random_partition(node_id n, const std::vector<char>& is_train, int parts,
                                           std::uint64_t seed) {
  std::vector<node_id> train, other;
  for (node_id v = 0; v < n; ++v)
    (is_train[static_cast<size_t>(v)] ? train : other).push_back(v);
  splitmix64 rng{seed};
  shuffle(train, rng);
  shuffle(other, rng);
  // One deal continues where the other stopped, so both train counts and total counts differ by at
  // most one between parts.
  std::vector<std::int32_t> owner(static_cast<size_t>(n));
  int next = 0;
  for (const auto* list : {&train, &other}) {
    for (node_id v : *list) {
      owner[static_cast<size_t>(v)] = next;
      next = next + 1 == parts ? 0 : next + 1;
    }
  }
  return owner;
}

// Undirected adjacency without self loops: what METIS requires, and what the rebalancing pass uses
// to count neighbours.
csr_graph symmetrized(const csr_graph& g) {
  std::vector<node_id> src, dst;
  src.reserve(static_cast<size_t>(g.num_edges()));
  dst.reserve(static_cast<size_t>(g.num_edges()));
  for (node_id v = 0; v < g.num_nodes; ++v) {
    for (node_id u : g.in_neighbors(v)) {
      if (u == v) continue;
      src.push_back(u);
      dst.push_back(v);
    }
  }
  return build_in_csr(g.num_nodes, src, dst,
                      {.symmetrize = true, .deduplicate = true, .drop_self_loops = true});
}

std::vector<std::int32_t> metis_partition(const csr_graph& sym, const std::vector<char>& is_train,
                                          bool has_train, int parts, std::uint64_t seed) {
  if (sym.num_edges() > INT32_MAX || sym.num_nodes > INT32_MAX) {
    throw std::invalid_argument(
        "partition_graph: the symmetrized graph has " + std::to_string(sym.num_edges()) +
        " directed edges, more than this METIS build (32-bit idx_t) accepts");
  }
  idx_t nvtxs = sym.num_nodes;
  // Two constraints as in DistDGL: every node weighs 1, and train nodes weigh 1 on a second axis so
  // that each part gets its share of the seeds. Without train nodes the second axis would be all
  // zero, which METIS rejects.
  idx_t ncon = has_train ? 2 : 1;
  idx_t nparts = parts;
  std::vector<idx_t> xadj(sym.indptr.begin(), sym.indptr.end());
  std::vector<idx_t> adjncy(sym.indices.begin(), sym.indices.end());
  std::vector<idx_t> vwgt(static_cast<size_t>(nvtxs) * static_cast<size_t>(ncon), 1);
  if (has_train) {
    for (idx_t v = 0; v < nvtxs; ++v)
      vwgt[2 * static_cast<size_t>(v) + 1] = is_train[static_cast<size_t>(v)];
  }
  idx_t options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options);
  options[METIS_OPTION_NUMBERING] = 0;
  options[METIS_OPTION_SEED] = static_cast<idx_t>((seed ^ (seed >> 32)) & 0x7fffffffu);
  idx_t objval = 0;
  std::vector<idx_t> part(static_cast<size_t>(nvtxs), 0);
  const int rc =
      METIS_PartGraphKway(&nvtxs, &ncon, xadj.data(), adjncy.data(), vwgt.data(), nullptr, nullptr,
                          &nparts, nullptr, nullptr, options, &objval, part.data());
  if (rc != METIS_OK) {
    throw std::runtime_error("partition_graph: METIS_PartGraphKway failed with code " +
                             std::to_string(rc));
  }
  return {part.begin(), part.end()};
}

// METIS balances to about 3% on large weights, but a small second constraint (Pubmed has 60 train
// nodes) can land a few nodes off. Greedy fix: move nodes from the heaviest to the lightest part, a
// batch at a time, taking the nodes with the best gain (neighbours in the target part minus
// neighbours left behind). Train counts first, then total counts moving only non-train nodes, so
// the second phase cannot undo the first. Each batch strictly lowers the heaviest part's excess.
// Finally no part is left empty.
void rebalance(const csr_graph& sym, const std::vector<char>& is_train,
               std::vector<std::int32_t>& owner, int parts) {
  const node_id n = sym.num_nodes;
  std::vector<std::int64_t> nodes(static_cast<size_t>(parts), 0),
      train(static_cast<size_t>(parts), 0);
  std::int64_t total_train = 0;
  for (node_id v = 0; v < n; ++v) {
    ++nodes[static_cast<size_t>(owner[static_cast<size_t>(v)])];
    if (is_train[static_cast<size_t>(v)]) {
      ++train[static_cast<size_t>(owner[static_cast<size_t>(v)])];
      ++total_train;
    }
  }
  const std::int64_t node_limit = partition_balance_limit(n, parts);
  const std::int64_t train_limit = partition_balance_limit(total_train, parts);

  struct candidate {
    std::int64_t gain;
    node_id v;
  };
  std::vector<candidate> cands;
  auto move_batch = [&](int from, int to, bool train_kind, std::int64_t k) {
    cands.clear();
    for (node_id v = 0; v < n; ++v) {
      if (owner[static_cast<size_t>(v)] != from ||
          (is_train[static_cast<size_t>(v)] != 0) != train_kind)
        continue;
      std::int64_t gain = 0;
      for (node_id u : sym.in_neighbors(v)) {
        const int o = owner[static_cast<size_t>(u)];
        gain += (o == to) - (o == from);
      }
      cands.push_back({gain, v});
    }
    k = std::min<std::int64_t>(k, static_cast<std::int64_t>(cands.size()));
    std::partial_sort(cands.begin(), cands.begin() + k, cands.end(),
                      [](const candidate& a, const candidate& b) {
                        return a.gain != b.gain ? a.gain > b.gain : a.v < b.v;
                      });
    for (std::int64_t i = 0; i < k; ++i) {
      owner[static_cast<size_t>(cands[static_cast<size_t>(i)].v)] = to;
      --nodes[static_cast<size_t>(from)];
      ++nodes[static_cast<size_t>(to)];
      if (train_kind) {
        --train[static_cast<size_t>(from)];
        ++train[static_cast<size_t>(to)];
      }
    }
    return k;
  };
  auto heaviest = [&](const std::vector<std::int64_t>& c) {
    return static_cast<int>(std::max_element(c.begin(), c.end()) - c.begin());
  };
  auto lightest = [&](const std::vector<std::int64_t>& c) {
    return static_cast<int>(std::min_element(c.begin(), c.end()) - c.begin());
  };

  for (;;) {
    const int p = heaviest(train), q = lightest(train);
    if (train[static_cast<size_t>(p)] <= train_limit) break;
    const std::int64_t k = std::min(train[static_cast<size_t>(p)] - train_limit,
                                    train_limit - train[static_cast<size_t>(q)]);
    if (k <= 0 || move_batch(p, q, true, k) == 0)
      break;  // cannot happen: the limits sum to >= total
  }
  for (;;) {
    const int p = heaviest(nodes), q = lightest(nodes);
    if (nodes[static_cast<size_t>(p)] <= node_limit) break;
    const std::int64_t k = std::min(nodes[static_cast<size_t>(p)] - node_limit,
                                    node_limit - nodes[static_cast<size_t>(q)]);
    // p holds more than node_limit >= train_limit nodes, so it has non-train nodes to give.
    if (k <= 0 || move_batch(p, q, false, k) == 0) break;
  }
  // A shard without nodes is useless, and the 5% limits allow one when parts is close to num_nodes
  // (mean 1 allows 2). Refill empty parts from the heaviest; the refilled part ends at 1 <= limit.
  for (;;) {
    const int p = heaviest(nodes), q = lightest(nodes);
    if (nodes[static_cast<size_t>(q)] > 0 || nodes[static_cast<size_t>(p)] < 2) break;
    if (move_batch(p, q, false, 1) == 0 && move_batch(p, q, true, 1) == 0) break;
  }
}

}  // namespace

std::string_view to_string(partition_method m) {
  switch (m) {
    case partition_method::metis:
      return "metis";
    case partition_method::random:
      return "random";
  }
  return "unknown";
}

partition_method parse_partition_method(std::string_view name) {
  if (name == "metis") return partition_method::metis;
  if (name == "random") return partition_method::random;
  throw std::invalid_argument("unknown partition method '" + std::string(name) +
                              "' (expected metis or random)");
}

std::int64_t partition_balance_limit(std::int64_t total, int parts) {
  // max(ceil(mean * 1.05), ceil(mean)) in integers, mean = total / parts.
  const std::int64_t p = parts;
  const std::int64_t tolerant = (total * 105 + 100 * p - 1) / (100 * p);
  const std::int64_t even = (total + p - 1) / p;
  return std::max(tolerant, even);
}

std::vector<std::int32_t> partition_graph(const csr_graph& g, std::span<const node_id> train_nodes,
                                          int parts, partition_method m, std::uint64_t seed) {
  check_parts(g, parts);
  const std::vector<char> is_train = train_mask(g.num_nodes, train_nodes);
  if (parts == 1) return std::vector<std::int32_t>(static_cast<size_t>(g.num_nodes), 0);
  if (m == partition_method::random) return random_partition(g.num_nodes, is_train, parts, seed);

  const csr_graph sym = symmetrized(g);
  const bool has_train = std::find(is_train.begin(), is_train.end(), 1) != is_train.end();
  std::vector<std::int32_t> owner = metis_partition(sym, is_train, has_train, parts, seed);
  rebalance(sym, is_train, owner, parts);
  return owner;
}

void rebalance_partition(const csr_graph& g, std::span<const node_id> train_nodes,
                         std::vector<std::int32_t>& owner, int parts) {
  check_parts(g, parts);
  if (owner.size() != static_cast<size_t>(g.num_nodes)) {
    throw std::invalid_argument("rebalance_partition: owner has " + std::to_string(owner.size()) +
                                " entries for a graph of " + std::to_string(g.num_nodes) +
                                " nodes");
  }
  for (std::int32_t o : owner) {
    if (o < 0 || o >= parts) {
      throw std::invalid_argument("rebalance_partition: owner " + std::to_string(o) +
                                  " is outside [0, " + std::to_string(parts) + ")");
    }
  }
  rebalance(symmetrized(g), train_mask(g.num_nodes, train_nodes), owner, parts);
}

partition_quality evaluate_partition(const csr_graph& g, std::span<const node_id> train_nodes,
                                     std::span<const std::int32_t> owner, int parts) {
  if (parts < 1) throw std::invalid_argument("evaluate_partition: parts must be at least 1");
  if (owner.size() != static_cast<size_t>(g.num_nodes)) {
    throw std::invalid_argument("evaluate_partition: owner has " + std::to_string(owner.size()) +
                                " entries for a graph of " + std::to_string(g.num_nodes) +
                                " nodes");
  }
  for (std::int32_t o : owner) {
    if (o < 0 || o >= parts) {
      throw std::invalid_argument("evaluate_partition: owner " + std::to_string(o) +
                                  " is outside [0, " + std::to_string(parts) + ")");
    }
  }
  const std::vector<char> is_train = train_mask(g.num_nodes, train_nodes);
  partition_quality q;
  q.num_parts = parts;
  q.num_edges = g.num_edges();
  q.nodes.assign(static_cast<size_t>(parts), 0);
  q.train_nodes.assign(static_cast<size_t>(parts), 0);
  q.halo.assign(static_cast<size_t>(parts), 0);

  // Group nodes by part (counting sort) so one stamp array counts distinct halo nodes of each part.
  std::vector<node_id> start(static_cast<size_t>(parts) + 1, 0);
  for (node_id v = 0; v < g.num_nodes; ++v) {
    const auto o = static_cast<size_t>(owner[static_cast<size_t>(v)]);
    ++q.nodes[o];
    q.train_nodes[o] += is_train[static_cast<size_t>(v)];
    ++start[o + 1];
  }
  for (int p = 0; p < parts; ++p)
    start[static_cast<size_t>(p) + 1] += start[static_cast<size_t>(p)];
  std::vector<node_id> by_part(static_cast<size_t>(g.num_nodes));
  {
    std::vector<node_id> fill(start.begin(), start.end() - 1);
    for (node_id v = 0; v < g.num_nodes; ++v)
      by_part[static_cast<size_t>(fill[owner[static_cast<size_t>(v)]]++)] = v;
  }
  std::vector<std::int32_t> stamp(static_cast<size_t>(g.num_nodes), -1);
  for (int p = 0; p < parts; ++p) {
    for (node_id i = start[static_cast<size_t>(p)]; i < start[static_cast<size_t>(p) + 1]; ++i) {
      for (node_id u : g.in_neighbors(by_part[static_cast<size_t>(i)])) {
        if (owner[static_cast<size_t>(u)] == p) continue;
        ++q.cut_edges;
        if (stamp[static_cast<size_t>(u)] != p) {
          stamp[static_cast<size_t>(u)] = p;
          ++q.halo[static_cast<size_t>(p)];
        }
      }
    }
  }
  set_quality_ratios(q);
  return q;
}

void set_quality_ratios(partition_quality& q) {
  q.cut_fraction =
      q.num_edges > 0 ? static_cast<double>(q.cut_edges) / static_cast<double>(q.num_edges) : 0.0;
  auto imbalance = [parts = q.num_parts](const std::vector<node_id>& c) {
    std::int64_t total = 0;
    for (node_id x : c)
      total += x;
    if (total == 0) return 1.0;
    const double mean = static_cast<double>(total) / parts;
    return *std::max_element(c.begin(), c.end()) / mean;
  };
  q.node_imbalance = imbalance(q.nodes);
  q.train_imbalance = imbalance(q.train_nodes);
}

}  // namespace degnn
