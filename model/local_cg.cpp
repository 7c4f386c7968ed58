// Local expansion, forward and backward of locality-aware computation graphs, and the batch
// owner's top layer over partial neighbour sums.
#include "model/local_cg.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "model/block_builder.hpp"
#include "model/sampler.hpp"
#include "model/sparse_input.hpp"

namespace degnn {

std::int32_t pick_locality_biased(std::span<const node_id> neighbors, const partition_book& book,
                                  int part, int fanout, double local_bias, row_rng& rng,
                                  std::vector<node_id>& picks, std::vector<float>& weights) {
  const auto d = static_cast<std::int32_t>(neighbors.size());
  std::vector<node_id> local, remote;
  for (node_id u : neighbors)
    (book.owner(u) == part ? local : remote).push_back(u);
  const auto n_local = static_cast<std::int32_t>(local.size());
  const auto n_remote = static_cast<std::int32_t>(remote.size());
  auto take = [&](std::span<const node_id> from, std::int32_t k, float w) {
    const size_t at = picks.size();
    picks.resize(at + from.size());
    const std::int32_t got = pick_uniform(from, k, rng, picks.data() + at);
    picks.resize(at + static_cast<size_t>(got));
    weights.insert(weights.end(), static_cast<size_t>(got), w);
    return got;
  };
  // Two strata need two picks at least; otherwise (or with one stratum) a uniform pick.
  if (fanout < 2 || fanout >= d || n_local == 0 || n_remote == 0) {
    // One stratum: a uniform pick, each weighing 1 / count (the plain mean).
    const size_t at = picks.size();
    const std::int32_t got = take(neighbors, fanout, 0.0f);
    for (size_t i = at; i < weights.size(); ++i)
      weights[i] = 1.0f / static_cast<float>(got);
    return got;
  }
  // Remote share: local_bias times its proportional share, at least one pick (else the remote
  // stratum would be missing from the estimate), the rest local; any local shortfall goes back.
  const double share = local_bias * fanout * n_remote / static_cast<double>(d);
  // Each stratum keeps at least one pick, or the estimate would lose its share of the mean.
  std::int32_t k_remote =
      std::clamp(static_cast<std::int32_t>(share + 0.5), 1, std::min(n_remote, fanout - 1));
  const std::int32_t k_local = std::min(n_local, fanout - k_remote);
  k_remote = std::min(n_remote, fanout - k_local);
  // Stratified estimate of the mean: (n_L / d) mean(local picks) + (n_R / d) mean(remote picks).
  std::int32_t got = 0;
  if (k_local > 0)
    got += take(local, k_local, static_cast<float>(n_local) / (static_cast<float>(d) * k_local));
  got += take(remote, k_remote, static_cast<float>(n_remote) / (static_cast<float>(d) * k_remote));
  return got;
}

local_cg expand_local(const graph_partition& part, const partition_book& book,
                      std::span<const node_id> targets, int top_level, std::span<const int> fanouts,
                      std::uint64_t seed, std::uint64_t step, std::vector<std::int32_t>& scratch,
                      double local_bias) {
  const int num_levels = static_cast<int>(fanouts.size());
  if (top_level < 0 || top_level >= num_levels) {
    throw std::invalid_argument("expand_local: top level " + std::to_string(top_level) +
                                " outside [0, " + std::to_string(num_levels) + ")");
  }
  local_cg cg;
  cg.top_level = top_level;
  cg.targets.assign(targets.begin(), targets.end());
  for (node_id g : targets) {
    if (g < 0 || g >= book.num_nodes() || book.owner(g) != part.part) {
      throw std::invalid_argument("expand_local: node " + std::to_string(g) +
                                  " is not owned by partition " + std::to_string(part.part));
    }
    cg.target_local.push_back(book.local_id(g));
  }
  cg.blocks.resize(static_cast<size_t>(top_level));
  cg.src_from.resize(static_cast<size_t>(top_level));
  cg.remote_leaves.resize(static_cast<size_t>(top_level));
  std::vector<node_id> dst(targets.begin(), targets.end());
  std::vector<std::int32_t> counts;
  row_picks rows;
  std::vector<float> weights;
  const bool biased = local_bias < 1.0;
  for (int k = top_level - 1; k >= 0; --k) {
    const int hop = num_levels - (k + 1);
    const int fanout = fanouts[static_cast<size_t>(hop)];
    auto row_of = [&](size_t i) { return part.in_neighbors_global(book.local_id(dst[i])); };
    if (biased) {
      // Two strata with weights per row: a serial loop over the rows.
      counts.assign(dst.size(), 0);
      rows.picks.clear();
      weights.clear();
      for (size_t i = 0; i < dst.size(); ++i) {
        row_rng rng(row_seed(seed, step, static_cast<std::uint64_t>(hop), dst[i]));
        counts[i] = pick_locality_biased(row_of(i), book, part.part, fanout, local_bias, rng,
                                         rows.picks, weights);
      }
    } else {
      sample_rows(dst, row_of, fanout, seed, step, static_cast<std::uint64_t>(hop), rows);
      counts.swap(rows.counts);
    }
    block b = assemble_block(dst, counts, rows.picks, scratch);
    if (biased) b.edge_weight = weights;  // assemble_block keeps the picks' order
    auto& from = cg.src_from[static_cast<size_t>(k)];
    auto& leaves = cg.remote_leaves[static_cast<size_t>(k)];
    from.resize(b.src_nodes.size());
    b.src_degree.resize(b.src_nodes.size());
    std::vector<node_id> next;
    for (size_t i = 0; i < b.src_nodes.size(); ++i) {
      const node_id g = b.src_nodes[i];
      if (book.owner(g) == part.part) {
        const node_id l = book.local_id(g);
        b.src_degree[i] = part.in_degree(l);
        if (k > 0) {
          from[i] = static_cast<std::int32_t>(next.size());
          next.push_back(g);
        } else {
          from[i] = l;
        }
      } else {
        // Its full in-degree, kept with the partition (GCN normalises by it).
        const auto at = std::lower_bound(part.halo.begin(), part.halo.end(), g) - part.halo.begin();
        b.src_degree[i] = part.halo_degree[static_cast<size_t>(at)];
        from[i] = -1 - static_cast<std::int32_t>(leaves.size());
        leaves.push_back(g);
      }
    }
    cg.blocks[static_cast<size_t>(k)] = std::move(b);
    dst = std::move(next);
  }
  return cg;
}

namespace {

// ReLU, the history copy and dropout after layer k.
void finish_layer(const gnn_model& model, const block& b, int k, bool training,
                  std::uint64_t dropout_seed, Matrix& out, local_cg_state& state,
                  std::vector<Matrix>* pre_dropout) {
  const float p = model.config().dropout;
  relu_forward(out);
  if (pre_dropout) (*pre_dropout)[static_cast<size_t>(k)] = out;
  if (training && p > 0) {
    dropout_forward_keyed(out, p, layer_dropout_seed(dropout_seed, k),
                          std::span(b.src_nodes.data(), static_cast<size_t>(b.num_dst())),
                          state.masks[static_cast<size_t>(k)]);
  }
}

// Level 0 comes dense (local_features) or compressed (sparse_local and sparse_leaves).
Matrix run_local_cg(const gnn_model& model, const local_cg& cg,
                    const Eigen::Ref<const Matrix>& local_features, const sparse_rows* sparse_local,
                    const sparse_rows* sparse_leaves, std::vector<Matrix> leaves, bool training,
                    std::uint64_t dropout_seed, local_cg_state& state,
                    std::vector<Matrix>* pre_dropout) {
  const int top = cg.top_level;
  const float p = model.config().dropout;
  state.sparse_first.reset();
  if (top == 0 && sparse_local)
    throw std::invalid_argument(
        "forward_local_cg: targets at level 0 on compressed features (the model needs at least "
        "two layers)");
  if (top == 0) {
    // Level 0 is the input: the targets' own feature rows, nothing to compute.
    Matrix rows(static_cast<Eigen::Index>(cg.targets.size()), local_features.cols());
    for (size_t i = 0; i < cg.target_local.size(); ++i)
      rows.row(static_cast<Eigen::Index>(i)) = local_features.row(cg.target_local[i]);
    return rows;
  }
  state.outputs.assign(static_cast<size_t>(top), Matrix());
  state.masks.assign(static_cast<size_t>(top), Matrix());
  state.caches.assign(static_cast<size_t>(top), layer_cache());
  // GAT's attention dropout, keyed as gnn_model's forward keys it.
  for (int k = 0; k < top; ++k)
    state.caches[static_cast<size_t>(k)].attention_seed = attention_dropout_seed(dropout_seed, k);
  if (pre_dropout) pre_dropout->assign(static_cast<size_t>(top), Matrix());
  for (int k = 0; k < top; ++k) {
    const block& b = cg.blocks[static_cast<size_t>(k)];
    const auto& from = cg.src_from[static_cast<size_t>(k)];
    const Eigen::Ref<const Matrix> below =
        k == 0 ? local_features
               : Eigen::Ref<const Matrix>(state.outputs[static_cast<size_t>(k - 1)]);
    const Matrix* leaf_source = nullptr;
    if (k == 0 && sparse_local) {
      if (sparse_leaves->rows() != static_cast<Eigen::Index>(cg.remote_leaves[0].size()))
        throw std::invalid_argument("forward_local_cg: wrong number of leaf feature rows");
    } else if (!cg.remote_leaves[static_cast<size_t>(k)].empty()) {
      Matrix& leaf_rows = leaves.at(static_cast<size_t>(k));
      leaf_source = &leaf_rows;
      if (leaf_rows.rows() !=
          static_cast<Eigen::Index>(cg.remote_leaves[static_cast<size_t>(k)].size())) {
        throw std::invalid_argument("forward_local_cg: wrong number of leaf rows at level " +
                                    std::to_string(k));
      }
      // History rows are pre-dropout values; drop what the owner's forward would have dropped.
      if (k > 0 && training && p > 0) {
        Matrix unused;
        dropout_forward_keyed(leaf_rows, p, layer_dropout_seed(dropout_seed, k - 1),
                              cg.remote_leaves[static_cast<size_t>(k)], unused);
      }
    }
    Matrix& out = state.outputs[static_cast<size_t>(k)];
    if (k == 0 && sparse_local) {
      std::vector<sparse_row_ref> refs(from.size());
      for (size_t i = 0; i < from.size(); ++i)
        refs[i] = from[i] >= 0 ? sparse_row_ref{sparse_local, from[i]}
                               : sparse_row_ref{sparse_leaves, -1 - from[i]};
      if (training) {
        state.sparse_first = std::make_shared<sparse_layer_cache>();
        state.sparse_first->attention_seed = attention_dropout_seed(dropout_seed, 0);
      }
      sparse_layer_forward(model.layer(0), b, assemble_rows(refs, sparse_local->cols()), out,
                           state.sparse_first.get());
      finish_layer(model, b, k, training, dropout_seed, out, state, pre_dropout);
      continue;
    }
    Matrix in(static_cast<Eigen::Index>(from.size()), below.cols());
    for (size_t i = 0; i < from.size(); ++i) {
      const auto r = static_cast<Eigen::Index>(i);
      if (from[i] >= 0) {
        in.row(r) = below.row(from[i]);
      } else {
        if (!leaf_source)
          throw std::invalid_argument("forward_local_cg: a remote leaf at level " +
                                      std::to_string(k) + " without leaf rows");
        in.row(r) = leaf_source->row(-1 - from[i]);
      }
    }
    model.layer(k).apply(b, in, out, training ? &state.caches[static_cast<size_t>(k)] : nullptr);
    finish_layer(model, b, k, training, dropout_seed, out, state, pre_dropout);
  }
  return state.outputs.back();
}

}  // namespace

Matrix forward_local_cg(const gnn_model& model, const local_cg& cg,
                        Eigen::Ref<const Matrix> local_features, std::vector<Matrix> leaves,
                        bool training, std::uint64_t dropout_seed, local_cg_state& state,
                        std::vector<Matrix>* pre_dropout) {
  return run_local_cg(model, cg, local_features, nullptr, nullptr, std::move(leaves), training,
                      dropout_seed, state, pre_dropout);
}

Matrix forward_local_cg(const gnn_model& model, const local_cg& cg,
                        const sparse_rows& local_features, const sparse_rows& leaf_features,
                        std::vector<Matrix> leaves, bool training, std::uint64_t dropout_seed,
                        local_cg_state& state, std::vector<Matrix>* pre_dropout) {
  static const Matrix kNoDenseRows;
  return run_local_cg(model, cg, kNoDenseRows, &local_features, &leaf_features, std::move(leaves),
                      training, dropout_seed, state, pre_dropout);
}

void backward_local_cg(gnn_model& model, const local_cg& cg, const local_cg_state& state,
                       Matrix grad) {
  for (int k = cg.top_level - 1; k >= 0; --k) {
    const auto ku = static_cast<size_t>(k);
    if (state.masks[ku].size() > 0) dropout_backward(state.masks[ku], grad);
    // outputs hold the dropped activations: zero where ReLU was off or the entry dropped.
    relu_backward(state.outputs[ku], grad);
    if (k == 0 && state.sparse_first) {
      sparse_layer_backward(model.layer(0), *state.sparse_first, grad);
      break;
    }
    Matrix grad_src;
    model.layer(k).backward(cg.blocks[ku], state.caches[ku], grad, k > 0 ? &grad_src : nullptr);
    if (k == 0) break;
    Matrix next = Matrix::Zero(cg.blocks[ku - 1].num_dst(), grad_src.cols());
    const auto& from = cg.src_from[ku];
    for (size_t i = 0; i < from.size(); ++i) {
      if (from[i] >= 0) next.row(from[i]) += grad_src.row(static_cast<Eigen::Index>(i));
    }
    grad = std::move(next);
  }
}

Matrix top_forward(const gnn_model& model, std::span<const node_id> seeds, const Matrix& h_self,
                   const Matrix& agg, std::span<const std::int32_t> counts, top_layer_state& state,
                   std::span<const std::int32_t> degrees) {
  const bool gcn = model.config().kind == model_kind::gcn;
  if (model.config().kind == model_kind::gat)
    throw std::invalid_argument(
        "top_forward: a GAT top layer merges attention partials (model/gat_push), not sums");
  if (gcn && degrees.size() != seeds.size())
    throw std::invalid_argument("top_forward: GCN needs every seed's in-degree");
  const auto b = static_cast<std::int32_t>(seeds.size());
  block& vb = state.virtual_block;
  vb.src_nodes.assign(seeds.begin(), seeds.end());
  vb.src_nodes.insert(vb.src_nodes.end(), seeds.begin(), seeds.end());
  vb.num_dst_nodes = b;
  vb.indptr.assign(static_cast<size_t>(b) + 1, 0);
  vb.indices.clear();
  for (std::int32_t i = 0; i < b; ++i) {
    if (counts[static_cast<size_t>(i)] > 0) vb.indices.push_back(b + i);
    vb.indptr[static_cast<size_t>(i) + 1] = static_cast<std::int32_t>(vb.indices.size());
  }
  vb.src_degree.assign(vb.src_nodes.size(), 0);
  if (gcn) std::copy(degrees.begin(), degrees.end(), vb.src_degree.begin());
  Matrix h_src(2 * b, h_self.cols());
  h_src.topRows(b) = h_self;
  h_src.bottomRows(b) = agg;
  Matrix logits;
  model.layer(model.num_layers() - 1).apply(vb, h_src, logits, &state.cache);
  return logits;
}

void top_backward(gnn_model& model, const top_layer_state& state, const Matrix& grad_logits,
                  Matrix& grad_self, Matrix& grad_agg) {
  Matrix grad_src;
  model.layer(model.num_layers() - 1)
      .backward(state.virtual_block, state.cache, grad_logits, &grad_src);
  const auto b = state.virtual_block.num_dst();
  grad_self = grad_src.topRows(b);
  grad_agg = grad_src.bottomRows(b);
}

}  // namespace degnn
