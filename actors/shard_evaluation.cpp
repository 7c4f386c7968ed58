// The shard's share of exact layer-wise evaluation (docs/design.md section 2): h^(l) of every owned
// node from h^(l-1), with the halo's rows pulled from their shards after each layer.
#include <algorithm>
#include <map>
#include <numeric>

#include "actors/shard_evaluation_detail.hpp"
#include "model/block_builder.hpp"
#include "model/prediction_files.hpp"
#include "model/sparse_input.hpp"

namespace degnn::shard_detail {

// Index of a remote source among the partition's halo (sorted, and it is there: checked on load).
std::int32_t halo_index(const graph_partition& part, node_id global) {
  return static_cast<std::int32_t>(halo_position(part, global));
}

namespace {

// Full-neighbour block over every owned node: sources are the owned nodes, then the halo.
block partition_block(const graph_partition& part) {
  block b;
  const node_id n = part.num_owned();
  b.num_dst_nodes = n;
  b.src_nodes = part.owned;
  b.src_nodes.insert(b.src_nodes.end(), part.halo.begin(), part.halo.end());
  b.indptr.assign(part.indptr.begin(), part.indptr.end());
  b.indices.resize(part.src_global.size());
  for (size_t e = 0; e < part.src_global.size(); ++e) {
    if (part.src_local[e] >= 0) {
      b.indices[e] = part.src_local[e];
    } else {
      b.indices[e] = n + halo_index(part, part.src_global[e]);
    }
  }
  b.src_degree.resize(b.src_nodes.size());
  for (node_id l = 0; l < n; ++l)
    b.src_degree[l] = part.in_degree(l);
  return b;
}

}  // namespace

// Layer 0's rows are the part's features, in memory or in its mapped file.
Eigen::Map<const Matrix> layer_rows(const shard_state& st, int layer) {
  if (layer == 0) return st.part->dense_features();
  const Matrix& h = st.eval_h.at(static_cast<size_t>(layer));
  return {h.data(), h.rows(), h.cols()};
}

// The end of the evaluation range that starts at begin: settings.evaluation_range owned nodes.
// A last range of one node would take Eigen's matrix-vector product, which rounds otherwise than
// the matrix product a longer range (or the whole part) takes: it joins the range before.
node_id range_end(const shard_state& st, node_id begin) {
  const node_id n = st.part->num_owned();
  const std::int64_t range = std::max(1, st.settings.evaluation_range);
  auto end = static_cast<node_id>(std::min<std::int64_t>(n, std::int64_t{begin} + range));
  if (end == n - 1) end = n;
  return end;
}

// h^(layer) of owned nodes [from, to) into rows of next (sized at the first range), from their
// own rows and the halo's in `halo`. Range by range (settings.evaluation_range): each range's
// block has the range as destinations and their in-neighbours as sources, numbered as owned
// local ids then n + halo index, so no (owned + halo)-row input matrix is built.
void evaluate_owned(shard_state& st, int layer, node_id from, node_id to, const halo_view& halo,
                    Matrix& next, std::vector<std::int32_t>& scratch) {
  const auto& part = *st.part;
  const auto own = layer_rows(st, layer - 1);
  const node_id n = part.num_owned();
  scratch.resize(static_cast<size_t>(n) + part.halo.size(), -1);  // assemble_block leaves it -1
  std::vector<node_id> dst, picks;
  std::vector<std::int32_t> counts;
  Matrix h_src;
  node_id begin = from;
  do {  // once at least, so that an empty part still gets its (0, width) output
    const node_id end = range_end(st, begin);
    dst.resize(static_cast<size_t>(end - begin));
    std::iota(dst.begin(), dst.end(), begin);
    counts.resize(dst.size());
    picks.clear();
    for (node_id l = begin; l < end; ++l) {
      counts[static_cast<size_t>(l - begin)] = part.in_degree(l);
      for (edge_offset e = part.indptr[static_cast<size_t>(l)];
           e < part.indptr[static_cast<size_t>(l) + 1]; ++e) {
        const node_id local = part.src_local[static_cast<size_t>(e)];
        picks.push_back(local >= 0 ? local
                                   : n + halo_index(part, part.src_global[static_cast<size_t>(e)]));
      }
    }
    block b = assemble_block(dst, counts, picks, scratch);
    b.src_degree.resize(b.src_nodes.size());
    h_src.resize(b.num_src(), own.cols());
    for (std::int32_t k = 0; k < b.num_src(); ++k) {
      const node_id u = b.src_nodes[static_cast<size_t>(k)];
      if (u < n) {
        h_src.row(k) = own.row(u);
        b.src_degree[static_cast<size_t>(k)] = part.in_degree(u);
      } else {
        const Eigen::Index at = halo.row(static_cast<size_t>(u - n));
        h_src.row(k) = halo.rows.row(at);
        b.src_degree[static_cast<size_t>(k)] = halo.degree[static_cast<size_t>(at)];
      }
    }
    const Matrix out = st.replica->layer_forward(layer - 1, b, h_src);
    if (next.rows() != n || next.cols() != out.cols()) next.resize(n, out.cols());
    next.middleRows(begin, end - begin) = out;
    begin = end;
  } while (begin < to);
}

// Copies each reply's rows into rows (at row where[positions[r][k]], or positions[r][k] itself
// when where is empty) and their in-degrees into degree; each reply is let go once copied.
void take_halo_rows(shard_state& st, std::vector<wire_message>& replies,
                    const std::vector<std::vector<size_t>>& positions, std::uint8_t bits,
                    Matrix& rows, std::vector<std::int32_t>& degree) {
  for (size_t r = 0; r < replies.size(); ++r) {
    const auto res = wire::decode_row_block(st.ctx, replies[r].bytes, bits);
    if (static_cast<size_t>(res.rows.rows()) != positions[r].size() ||
        res.rows.cols() != rows.cols() || res.degrees.size() != positions[r].size()) {
      throw wire::wire_error("halo_response has the wrong shape");
    }
    for (size_t k = 0; k < positions[r].size(); ++k) {
      rows.row(static_cast<Eigen::Index>(positions[r][k])) =
          res.rows.row(static_cast<Eigen::Index>(k));
      degree[positions[r][k]] = res.degrees[k];
    }
    replies[r] = wire_message{};  // its rows are copied: let them go before the layer runs
  }
}

// The set-up's first layer: the halo feature rows the halo cache keeps (rows.row(i) is the
// feature row of halo node nodes[i]; a bounded cache takes those it keeps and does not hold).
void keep_feature_rows(shard_state& st, std::span<const node_id> nodes, const Matrix& rows,
                       std::uint64_t step) {
  ensure_halo_levels(st);
  if (!st.halo.bounded()) {
    const std::vector<std::uint64_t> versions(nodes.size(), 0);
    st.halo.store(0, nodes, nodes, versions, rows, step);
    return;
  }
  std::vector<node_id> keep;
  std::vector<Eigen::Index> at;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto h = static_cast<size_t>(st.halo.index(nodes[i]));
    if (!st.halo.resident(0, h) || st.halo.holds(0, h)) continue;
    keep.push_back(nodes[i]);
    at.push_back(static_cast<Eigen::Index>(i));
  }
  Matrix kept(static_cast<Eigen::Index>(keep.size()), rows.cols());
  for (size_t j = 0; j < keep.size(); ++j)
    kept.row(static_cast<Eigen::Index>(j)) = rows.row(at[j]);
  const std::vector<std::uint64_t> versions(keep.size(), 0);
  st.halo.store(0, keep, keep, versions, kept, step);
}

namespace {

// h^(layer) of every owned node from h^(layer - 1): its own rows (in memory, or at layer 1 in the
// mapped part file) and the whole halo's in the replies (at layer 1 the set-up keeps the halo's
// features in the halo cache).
void evaluate_on_rows(shard_state& st, int layer, std::vector<wire_message>& replies,
                      const std::vector<std::vector<size_t>>& positions, std::uint8_t bits,
                      bool keep_features, std::uint64_t step) {
  const auto& part = *st.part;
  Matrix halo_rows(static_cast<Eigen::Index>(part.halo.size()), layer_rows(st, layer - 1).cols());
  std::vector<std::int32_t> halo_degree(part.halo.size(), 0);
  take_halo_rows(st, replies, positions, bits, halo_rows, halo_degree);
  if (keep_features && !st.halo_features_loaded) {
    keep_feature_rows(st, part.halo, halo_rows, step);
    st.halo_features_loaded = true;
  }
  Matrix next;
  std::vector<std::int32_t> scratch;
  evaluate_owned(st, layer, 0, part.num_owned(), {halo_rows, {}, halo_degree}, next, scratch);
  if (st.eval_h.size() <= static_cast<size_t>(layer))
    st.eval_h.resize(static_cast<size_t>(layer) + 1);
  st.eval_h[static_cast<size_t>(layer)] = std::move(next);
}

// h^(1) of every owned node from compressed feature rows: the part's own and the halo's, as
// they came (the set-up keeps the halo's in the halo cache).
void evaluate_on_compressed_features(shard_state& st, std::vector<wire_message>& replies,
                                     const std::vector<std::vector<size_t>>& positions,
                                     bool keep_features, std::uint64_t step) {
  const auto& part = *st.part;
  const node_id n = part.num_owned();
  block b = partition_block(part);
  std::vector<sparse_row_ref> refs(b.src_nodes.size());
  for (node_id l = 0; l < n; ++l)
    refs[static_cast<size_t>(l)] = {part.sparse_features.get(), l};
  std::vector<std::shared_ptr<const sparse_rows>> pulled;
  for (size_t r = 0; r < replies.size(); ++r) {
    auto res = wire::decode_row_block(st.ctx, replies[r].bytes, 32, true);
    if (static_cast<size_t>(res.sparse->rows()) != positions[r].size() ||
        res.sparse->cols() != part.features.cols() || res.degrees.size() != positions[r].size())
      throw wire::wire_error("halo_response has the wrong shape");
    for (size_t k = 0; k < positions[r].size(); ++k) {
      refs[static_cast<size_t>(n) + positions[r][k]] = {res.sparse.get(),
                                                        static_cast<Eigen::Index>(k)};
      b.src_degree[static_cast<size_t>(n) + positions[r][k]] = res.degrees[k];
    }
    pulled.push_back(std::move(res.sparse));
  }
  if (keep_features && !st.halo_features_loaded) {
    ensure_halo_levels(st);
    for (size_t r = 0; r < pulled.size(); ++r) {
      std::vector<node_id> asked;
      std::vector<sparse_row_ref> kept;  // a bounded cache copies the rows it keeps
      for (size_t k = 0; k < positions[r].size(); ++k) {
        const size_t i = positions[r][k];
        if (!st.halo.resident(0, i)) continue;
        asked.push_back(part.halo[i]);
        kept.push_back({pulled[r].get(), static_cast<Eigen::Index>(k)});
      }
      auto rows = st.halo.bounded()
                      ? std::make_shared<const sparse_rows>(assemble_rows(kept, pulled[r]->cols()))
                      : pulled[r];
      st.halo.store_features(asked, asked, std::move(rows), step);
    }
    st.halo_features_loaded = true;
  }
  if (st.eval_h.size() <= 1) st.eval_h.resize(2);
  st.eval_h[1] = st.replica->first_layer_forward(b, assemble_rows(refs, part.features.cols()));
}

// The partition's predictions of this evaluation, under predictions_dir/part-p (throws
// data_error naming the file when it cannot be written).
void write_part_predictions(const shard_state& st, std::uint64_t step) {
  const auto& part = *st.part;
  const int layers = st.replica->num_layers();
  const std::int32_t keep = st.settings.predictions_embeddings;
  const prediction_outputs out{
      part.owned, &st.eval_h[static_cast<size_t>(layers)],
      keep > 0 && keep < layers ? &st.eval_h[static_cast<size_t>(keep)] : nullptr, keep};
  write_predictions(
      std::filesystem::path(st.settings.predictions_dir) / ("part-" + std::to_string(part.part)),
      out,
      {{"format", "degnn-inference 1"},
       {"partition", std::to_string(part.part)},
       {"partitions", std::to_string(st.book->num_parts())},
       {"step", std::to_string(step)}});
}

}  // namespace

// Requests for h^(layer - 1) of halo rows `rows` (halo indexes), per owner, capped in size.
halo_pulls halo_requests(shard_state& st, const evaluation_job& job, std::span<const size_t> rows) {
  const auto& part = *st.part;
  const auto width = static_cast<std::size_t>(layer_rows(st, job.layer - 1).cols());
  const std::size_t row_bytes = job.layer == 1 ? feature_row_bytes(part) : width * sizeof(float);
  std::vector<node_id> nodes(rows.size());
  for (size_t j = 0; j < rows.size(); ++j)
    nodes[j] = part.halo[rows[j]];
  owner_groups groups = split_groups(group_by_owner(*st.book, nodes, part.part),
                                     rows_per_message(st.settings, row_bytes));
  halo_pulls out;
  for (size_t r = 0; r < groups.owners.size(); ++r) {
    const int owner = groups.owners[r];
    wire::row_request req{.h = {job.step, part.part},
                          .layer = static_cast<std::uint8_t>(job.layer - 1),
                          .nodes = {},
                          .bits = job.bits};
    for (size_t j : groups.positions[r])
      req.nodes.push_back(nodes[j]);
    auto msg = pack(wire::kind::halo_request, wire::encode(st.ctx, req, wire::kind::halo_request));
    count(st, owner, msg);
    out.requests.push_back({st.shards[static_cast<size_t>(owner)], std::move(msg), owner});
    out.positions.push_back(std::move(groups.positions[r]));
    out.owners.push_back(owner);
  }
  return out;
}

// The coordinator's answer for a layer just computed: at the last layer the accuracy counts
// (correct and total for train, valid, test), and the predictions written when asked.
wire_message layer_result(shard_state& st, int layer, std::uint64_t step) {
  const auto& part = *st.part;
  wire::control out{.h = {step, part.part}, .what = wire::control_kind::result};
  if (layer == st.replica->num_layers()) {
    const Matrix& logits = st.eval_h[static_cast<size_t>(layer)];
    for (const auto* split : {&part.train, &part.valid, &part.test}) {
      std::uint64_t correct = 0;
      for (node_id l : *split) {
        Eigen::Index best = 0;
        logits.row(l).maxCoeff(&best);
        correct += best == part.labels[l];
      }
      out.counts.push_back(correct);
      out.counts.push_back(split->size());
    }
    if (!st.settings.predictions_dir.empty()) write_part_predictions(st, step);
  }
  auto msg = pack(wire::kind::control, wire::encode(st.ctx, out));
  count(st, kCoordinatorPart, msg);
  return msg;
}

caf::result<wire_message> evaluate_layer(self_ptr self, const wire::control& c) {
  auto& st = self->state;
  const int layer = static_cast<int>(c.epoch);  // computes h^(layer) from h^(layer-1)
  if (layer < 1 || layer > st.replica->num_layers())
    return as_error(st, actor_errc::rejected, "evaluate: bad layer " + std::to_string(layer));
  if (layer > 1 && st.eval_h.size() < static_cast<size_t>(layer))
    return as_error(st, actor_errc::rejected, "evaluate: layers out of order");
  const auto& part = *st.part;
  // A layer of the history set-up keeps its first layer's halo rows, the halo's features,
  // which steps read; above them a quantized set-up asks for rows at the history's bits.
  const bool setup = c.counts.size() == 1 && c.counts[0] == 1 && st.settings.decentralized;
  evaluation_job job{.layer = layer,
                     .step = c.h.step,
                     .bits = static_cast<std::uint8_t>(
                         setup && layer > 1 && st.settings.setup == history_setup::quantized
                             ? st.settings.history_bits
                             : 32),
                     .keep_features = setup && layer == 1};
  // A bounded halo cache (not on compressed rows) keeps a layer's halo rows bounded too.
  if (st.settings.halo_cache_bytes >= 0 && !(layer == 1 && part.sparse_features)) {
    auto windowed = std::make_shared<evaluation_job>(std::move(job));
    windowed->where.assign(part.halo.size(), -1);
    windowed->rp = self->make_response_promise<wire_message>();
    evaluate_range_by_range(self, windowed);
    return windowed->rp;
  }
  std::vector<size_t> all(part.halo.size());
  std::iota(all.begin(), all.end(), size_t{0});
  auto pulls = halo_requests(st, job, all);
  auto rp = self->make_response_promise<wire_message>();
  gather(
      self, halo_atom_v, std::move(pulls.requests), st.settings.timeout,
      [self, rp, job,
       positions = std::move(pulls.positions)](std::vector<wire_message>& replies) mutable {
        auto& st = self->state;
        try {
          if (job.layer == 1 && st.part->sparse_features) {
            evaluate_on_compressed_features(st, replies, positions, job.keep_features, job.step);
          } else {
            evaluate_on_rows(st, job.layer, replies, positions, job.bits, job.keep_features,
                             job.step);
          }
          rp.deliver(layer_result(st, job.layer, job.step));
        } catch (const std::exception& e) {
          ++st.rejected;
          rp.deliver(as_error(st, actor_errc::rejected, std::string("evaluate: ") + e.what()));
        }
      },
      [self, rp, owners = std::move(pulls.owners)](std::size_t r, const caf::error& err) mutable {
        rp.deliver(as_error(self->state, actor_errc::peer_failed,
                            "halo request to partition " + std::to_string(owners[r]) +
                                " failed: " + caf::to_string(err)));
      });
  return rp;
}

wire_message serve_halo(shard_state& st, const wire_message& m) {
  const auto req = wire::decode_row_request(st.ctx, m.bytes);
  if (req.layer >= std::max<size_t>(1, st.eval_h.size()) ||
      (req.layer > 0 && st.eval_h[req.layer].rows() != st.part->num_owned()))
    throw wire::wire_error("halo_request for a layer not computed yet (or let go)");
  if (req.layer == 0 && st.part->sparse_features && req.bits != 32)
    throw wire::wire_error("halo_request for compressed features below 32 bits");
  wire::row_block res;
  res.h = {req.h.step, st.part->part};
  res.bits = req.bits;
  put_rows(*st.part, req.layer == 0 ? nullptr : &st.eval_h.at(static_cast<size_t>(req.layer)),
           st.book->owned_local_ids(req.nodes, st.part->part, "halo_request"), res);
  auto msg = pack(wire::kind::halo_response, wire::encode(st.ctx, res, wire::kind::halo_response));
  count(st, req.h.sender, msg);
  return msg;
}

}  // namespace degnn::shard_detail
