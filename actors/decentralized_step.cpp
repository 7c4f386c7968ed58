// The decentralized (DEGNN) step of the batch actor: the owner samples its seeds' neighbours and
// pushes them to their owners; each owner expands its nodes locally (LAMP), uses historical
// embeddings for remote leaves, and returns one partial sum per target; gradients of the partial
// sums flow back the same way. Also the history: write-back, serving, halo refresh.
#include <algorithm>
#include <map>

#include "actors/batch_internal.hpp"
#include "model/block_builder.hpp"
#include "model/quantizer.hpp"
#include "model/sampler.hpp"

namespace degnn::batch_detail {

namespace {

std::uint64_t dropout_seed_of(const batch_state& st, std::uint64_t step) {
  return mix64(st.settings.seed ^ mix64(step));
}

int top_level(const batch_state& st) {
  return static_cast<int>(st.settings.fanouts.size()) - 1;
}

// Rows of every remote leaf of cg, from the halo cache.
std::vector<Matrix> leaf_rows(const batch_state& st, const local_cg& cg) {
  const auto& halo = st.part->halo;
  std::vector<Matrix> out(cg.remote_leaves.size());
  for (size_t k = 0; k < cg.remote_leaves.size(); ++k) {
    const auto& ids = cg.remote_leaves[k];
    if (ids.empty()) continue;
    if (k >= st.halo_rows.size() ||
        st.halo_rows[k].rows() != static_cast<Eigen::Index>(halo.size())) {
      throw wire::wire_error("no halo rows at level " + std::to_string(k) +
                             " yet (history not initialised)");
    }
    out[k].resize(static_cast<Eigen::Index>(ids.size()), st.halo_rows[k].cols());
    for (size_t i = 0; i < ids.size(); ++i) {
      const auto it = std::lower_bound(halo.begin(), halo.end(), ids[i]);
      out[k].row(static_cast<Eigen::Index>(i)) = st.halo_rows[k].row(it - halo.begin());
    }
  }
  return out;
}

// Forward of a local graph in training mode, with the history write-back of every owned node it
// computed below the top level.
Matrix forward_and_write_back(batch_state& st, const local_cg& cg, local_cg_state& state,
                              std::uint64_t step) {
  std::vector<Matrix> pre;
  Matrix out = forward_local_cg(st.replica->model(), cg, st.part->features, leaf_rows(st, cg), true,
                                dropout_seed_of(st, step), state, &pre);
  for (int k = 0; k + 1 < cg.top_level; ++k) {
    const size_t level = static_cast<size_t>(k) + 1;
    if (level >= st.history.size() || st.history[level].rows() == 0) continue;
    const block& b = cg.blocks[static_cast<size_t>(k)];
    for (std::int32_t i = 0; i < b.num_dst(); ++i) {
      const node_id l = st.book->local_id(b.src_nodes[static_cast<size_t>(i)]);
      st.history[level].row(l) = pre[static_cast<size_t>(k)].row(i);
      st.history_version[level][static_cast<size_t>(l)] = step + 1;  // 0: from initialisation
    }
  }
  return out;
}

// One step in flight on its owner.
struct owner_job {
  std::uint64_t step = 0;
  std::vector<node_id> seeds;
  std::vector<std::int32_t> counts;  ///< sampled neighbours per seed
  local_cg self_cg;
  local_cg_state self_state;
  Matrix self_out;  ///< rows of self_cg.targets: seeds, then the owned neighbours
  /// Per seed, its owned neighbours' rows in self_out (concatenated, offsets by seed).
  std::vector<std::int32_t> local_offsets, local_rows;
  std::vector<int> owners;  ///< remote owners pushed to, in request order
  std::vector<std::vector<std::int32_t>> push_targets;  ///< per push: seed positions
  promise rp;
};

}  // namespace

caf::result<wire_message> start_decentralized_step(self_ptr self, const wire::control& c) {
  auto& st = self->state;
  const auto& part = *st.part;
  const auto& book = *st.book;
  const int me = part.part;
  auto job = std::make_shared<owner_job>();
  job->step = c.h.step;
  if (st.train_global.empty()) {
    wire::allreduce_chunk out{.h = {c.h.step, me}};
    auto msg = pack(wire::kind::allreduce_chunk, wire::encode(st.ctx, out));
    count(st, kCoordinatorPart, msg);
    return msg;
  }
  if (st.batches_epoch != c.epoch) {
    st.batches = make_batches(st.train_global, st.settings.batch_size, st.settings.seed, c.epoch);
    st.batches_epoch = c.epoch;
  }
  job->seeds = st.batches[static_cast<size_t>(c.value) % st.batches.size()];
  const auto b = job->seeds.size();
  const int top = top_level(st);

  // Hop 0 from the owner's own in-edges: the seeds are owned here.
  std::vector<std::vector<node_id>> nbrs(b);
  job->counts.resize(b);
  for (size_t i = 0; i < b; ++i) {
    const auto row = part.in_neighbors_global(book.local_id(job->seeds[i]));
    nbrs[i].resize(row.size());
    row_rng rng(row_seed(st.settings.seed, job->step, 0, job->seeds[i]));
    nbrs[i].resize(
        static_cast<size_t>(pick_uniform(row, st.settings.fanouts[0], rng, nbrs[i].data())));
    job->counts[i] = static_cast<std::int32_t>(nbrs[i].size());
  }
  // The owner computes its seeds (self term) and their owned neighbours: seeds first, then the
  // neighbours by first appearance, as the centralized batch orders them.
  std::vector<node_id> self_targets = job->seeds;
  for (node_id v : self_targets)
    st.scratch[v] = 1;
  std::map<int, std::vector<std::int32_t>> remote;  // owner -> seed positions with neighbours there
  std::map<int, wire::computation_push> pushes;
  for (size_t i = 0; i < b; ++i) {
    for (node_id u : nbrs[i]) {
      const int q = book.owner(u);
      if (q == me) {
        if (st.scratch[u] == -1) {
          st.scratch[u] = 1;
          self_targets.push_back(u);
        }
        continue;
      }
      auto& p = pushes[q];
      auto& targets = remote[q];
      if (targets.empty() || targets.back() != static_cast<std::int32_t>(i)) {
        targets.push_back(static_cast<std::int32_t>(i));
        p.targets.push_back(job->seeds[i]);
        p.counts.push_back(0);
      }
      ++p.counts.back();
      p.neighbors.push_back(u);
    }
  }
  for (node_id v : self_targets)
    st.scratch[v] = -1;
  try {
    job->self_cg = expand_local(part, book, self_targets, top, st.settings.fanouts,
                                st.settings.seed, job->step, st.scratch);
    job->self_out = forward_and_write_back(st, job->self_cg, job->self_state, job->step);
  } catch (const std::exception& e) {
    return as_error(st, std::string("decentralized step: ") + e.what());
  }
  // Rows of each seed's owned neighbours within self_out.
  {
    std::map<node_id, std::int32_t> row_of;
    for (size_t r = 0; r < self_targets.size(); ++r)
      row_of[self_targets[r]] = static_cast<std::int32_t>(r);
    job->local_offsets.assign(b + 1, 0);
    for (size_t i = 0; i < b; ++i) {
      for (node_id u : nbrs[i]) {
        if (book.owner(u) == me) job->local_rows.push_back(row_of[u]);
      }
      job->local_offsets[i + 1] = static_cast<std::int32_t>(job->local_rows.size());
    }
  }
  std::vector<batch_request> requests;
  for (auto& [q, p] : pushes) {
    p.h = {job->step, me};
    p.layer = static_cast<std::uint8_t>(top);
    auto msg = pack(wire::kind::computation_push, wire::encode(st.ctx, p));
    count(st, q, msg);
    requests.push_back({st.view->batchers[static_cast<size_t>(q)], std::move(msg)});
    job->owners.push_back(q);
    job->push_targets.push_back(std::move(remote[q]));
  }
  job->rp = self->make_response_promise<wire_message>();
  gather(
      self, batch_atom_v, std::move(requests), st.settings.timeout,
      [self, job](std::vector<wire_message>& replies) {
        auto& st = self->state;
        try {
          const auto b = static_cast<Eigen::Index>(job->seeds.size());
          const Eigen::Index width = job->self_out.cols();
          // Neighbour sums: the owner's own part, then every shard's partial sums.
          Matrix agg = Matrix::Zero(b, width);
          for (Eigen::Index i = 0; i < b; ++i) {
            for (auto k = job->local_offsets[static_cast<size_t>(i)];
                 k < job->local_offsets[static_cast<size_t>(i) + 1]; ++k) {
              agg.row(i) += job->self_out.row(job->local_rows[static_cast<size_t>(k)]);
            }
          }
          for (size_t r = 0; r < replies.size(); ++r) {
            if (replies[r].kind != static_cast<std::uint16_t>(wire::kind::partial_aggregate)) {
              throw wire::wire_error("expected a partial_aggregate");
            }
            const auto part_sums = wire::decode_partial_aggregate(st.ctx, replies[r].bytes);
            const auto& targets = job->push_targets[r];
            if (part_sums.sums.rows() != static_cast<Eigen::Index>(targets.size()) ||
                part_sums.sums.cols() != width) {
              throw wire::wire_error("partial_aggregate has the wrong shape");
            }
            for (size_t t = 0; t < targets.size(); ++t)
              agg.row(targets[t]) += part_sums.sums.row(static_cast<Eigen::Index>(t));
          }
          for (Eigen::Index i = 0; i < b; ++i) {
            if (job->counts[static_cast<size_t>(i)] > 0)
              agg.row(i) /= static_cast<float>(job->counts[static_cast<size_t>(i)]);
          }
          // Top layer, loss, and its backward.
          auto& model = st.replica->model();
          top_layer_state top;
          const Matrix h_self = job->self_out.topRows(b);
          const Matrix logits = top_forward(model, job->seeds, h_self, agg, job->counts, top);
          std::vector<std::int32_t> labels(job->seeds.size());
          for (size_t i = 0; i < labels.size(); ++i)
            labels[i] = st.part->labels[st.book->local_id(job->seeds[i])];
          Matrix grad_logits;
          const double mean_loss = softmax_cross_entropy(logits, labels, grad_logits);
          wire::allreduce_chunk stats{.h = {job->step, st.part->part}};
          for (Eigen::Index r = 0; r < logits.rows(); ++r) {
            if (labels[static_cast<size_t>(r)] < 0) continue;
            ++stats.seeds;
            Eigen::Index best = 0;
            logits.row(r).maxCoeff(&best);
            stats.correct += best == labels[static_cast<size_t>(r)];
          }
          stats.loss = mean_loss * stats.seeds;
          Matrix grad_self, grad_agg;
          top_backward(model, top, grad_logits, grad_self, grad_agg);
          // d loss / d (a shard's partial sum of seed i) = d loss / d agg_i / count_i.
          for (Eigen::Index i = 0; i < b; ++i) {
            if (job->counts[static_cast<size_t>(i)] > 0)
              grad_agg.row(i) /= static_cast<float>(job->counts[static_cast<size_t>(i)]);
          }
          Matrix grad_out = Matrix::Zero(job->self_out.rows(), width);
          grad_out.topRows(b) = grad_self;
          for (Eigen::Index i = 0; i < b; ++i) {
            for (auto k = job->local_offsets[static_cast<size_t>(i)];
                 k < job->local_offsets[static_cast<size_t>(i) + 1]; ++k) {
              grad_out.row(job->local_rows[static_cast<size_t>(k)]) += grad_agg.row(i);
            }
          }
          backward_local_cg(model, job->self_cg, job->self_state, std::move(grad_out));
          std::vector<batch_request> returns;
          for (size_t r = 0; r < job->owners.size(); ++r) {
            wire::gradient_return g{.h = {job->step, st.part->part}};
            const auto& targets = job->push_targets[r];
            g.grads.resize(static_cast<Eigen::Index>(targets.size()), width);
            for (size_t t = 0; t < targets.size(); ++t)
              g.grads.row(static_cast<Eigen::Index>(t)) = grad_agg.row(targets[t]);
            auto msg = pack(wire::kind::gradient_return, wire::encode(st.ctx, g));
            count(st, job->owners[r], msg);
            returns.push_back(
                {st.view->batchers[static_cast<size_t>(job->owners[r])], std::move(msg)});
          }
          auto reply = pack(wire::kind::allreduce_chunk, wire::encode(st.ctx, stats));
          count(st, kCoordinatorPart, reply);
          // The step is done when every shard has finished its backward.
          gather(
              self, batch_atom_v, std::move(returns), st.settings.timeout,
              [job, reply = std::move(reply)](std::vector<wire_message>&) mutable {
                job->rp.deliver(std::move(reply));
              },
              [self, job](const caf::error& err) {
                job->rp.deliver(
                    as_error(self->state, "gradient return failed: " + caf::to_string(err)));
              });
        } catch (const std::exception& e) {
          ++st.rejected;
          job->rp.deliver(as_error(st, std::string("decentralized step: ") + e.what()));
        }
      },
      [self, job](const caf::error& err) {
        job->rp.deliver(as_error(self->state, "computation push failed: " + caf::to_string(err)));
      });
  return job->rp;
}

wire_message serve_push(batch_state& st, const wire_message& m) {
  const auto push = wire::decode_computation_push(st.ctx, m.bytes);
  const auto& part = *st.part;
  const auto& book = *st.book;
  if (push.layer != top_level(st))
    throw wire::wire_error("computation_push for layer " + std::to_string(push.layer));
  pending_push pp;
  pp.counts = push.counts;
  std::vector<node_id> targets;
  for (node_id u : push.neighbors) {
    if (u >= book.num_nodes() || book.owner(u) != part.part) {
      throw wire::wire_error("computation_push names node " + std::to_string(u) +
                             ", not owned here");
    }
    if (st.scratch[u] == -1) {
      st.scratch[u] = static_cast<std::int32_t>(targets.size());
      targets.push_back(u);
    }
    pp.neighbor_row.push_back(st.scratch[u]);
  }
  for (node_id u : targets)
    st.scratch[u] = -1;
  pp.cg = expand_local(part, book, targets, push.layer, st.settings.fanouts, st.settings.seed,
                       push.h.step, st.scratch);
  const Matrix out = forward_and_write_back(st, pp.cg, pp.state, push.h.step);
  wire::partial_aggregate res{.h = {push.h.step, part.part}, .counts = push.counts};
  res.sums = Matrix::Zero(static_cast<Eigen::Index>(push.targets.size()), out.cols());
  size_t j = 0;
  for (size_t t = 0; t < push.targets.size(); ++t) {
    for (std::int32_t k = 0; k < push.counts[t]; ++k, ++j)
      res.sums.row(static_cast<Eigen::Index>(t)) += out.row(pp.neighbor_row[j]);
  }
  st.pending[{push.h.step, push.h.sender}] = std::move(pp);
  auto msg = pack(wire::kind::partial_aggregate, wire::encode(st.ctx, res));
  count(st, push.h.sender, msg);
  return msg;
}

wire_message serve_gradient_return(batch_state& st, const wire_message& m) {
  const auto g = wire::decode_gradient_return(st.ctx, m.bytes);
  const auto it = st.pending.find({g.h.step, g.h.sender});
  if (it == st.pending.end())
    throw wire::wire_error("gradient_return for a push this shard does not hold");
  pending_push& pp = it->second;
  if (g.grads.rows() != static_cast<Eigen::Index>(pp.counts.size()))
    throw wire::wire_error("gradient_return has the wrong row count");
  // The width must be that of the rows this shard returned, or backward reads out of bounds.
  const Eigen::Index width =
      pp.cg.top_level > 0 ? pp.state.outputs.back().cols() : st.part->features.cols();
  if (g.grads.cols() != width) throw wire::wire_error("gradient_return has the wrong width");
  Matrix grad = Matrix::Zero(static_cast<Eigen::Index>(pp.cg.targets.size()), g.grads.cols());
  size_t j = 0;
  for (size_t t = 0; t < pp.counts.size(); ++t) {
    for (std::int32_t k = 0; k < pp.counts[t]; ++k, ++j)
      grad.row(pp.neighbor_row[j]) += g.grads.row(static_cast<Eigen::Index>(t));
  }
  backward_local_cg(st.replica->model(), pp.cg, pp.state, std::move(grad));
  st.pending.erase(it);
  wire::control out{.h = {g.h.step, st.part->part}, .what = wire::control_kind::result};
  auto msg = pack(wire::kind::control, wire::encode(st.ctx, out));
  count(st, g.h.sender, msg);
  return msg;
}

wire_message serve_embedding_get(batch_state& st, const wire_message& m) {
  const auto req = wire::decode_embedding_get(st.ctx, m.bytes);
  const auto& book = *st.book;
  const int level = req.layer;
  const bool features = level == 0;
  if (!features && (static_cast<size_t>(level) >= st.history.size() ||
                    st.history[static_cast<size_t>(level)].rows() == 0)) {
    throw wire::wire_error("embedding_get for level " + std::to_string(level) +
                           ", which holds no history");
  }
  const Matrix& source = features ? st.part->features : st.history[static_cast<size_t>(level)];
  Matrix rows(static_cast<Eigen::Index>(req.nodes.size()), source.cols());
  wire::embedding_rows res{.h = {req.h.step, st.part->part}, .layer = req.layer};
  res.bits = static_cast<std::uint8_t>(features ? 32 : st.settings.history_bits);
  res.cols = static_cast<std::uint32_t>(source.cols());
  for (size_t i = 0; i < req.nodes.size(); ++i) {
    const node_id g = req.nodes[i];
    if (g >= book.num_nodes() || book.owner(g) != st.part->part) {
      throw wire::wire_error("embedding_get names node " + std::to_string(g) + ", not owned here");
    }
    const node_id l = book.local_id(g);
    const std::uint64_t version =
        features ? 0 : st.history_version[static_cast<size_t>(level)][static_cast<size_t>(l)];
    if (version < req.since) continue;  // unchanged since the asker's last refresh
    rows.row(static_cast<Eigen::Index>(res.nodes.size())) = source.row(l);
    res.nodes.push_back(g);
    res.versions.push_back(version);
  }
  rows.conservativeResize(static_cast<Eigen::Index>(res.nodes.size()), Eigen::NoChange);
  const quantizer q(static_cast<int>(source.cols()), res.bits,
                    st.settings.stochastic_rounding ? rounding::stochastic : rounding::nearest);
  q.encode(rows, res.payload, res.row_min, res.row_scale,
           mix64(req.h.step ^ static_cast<std::uint64_t>(level)));
  auto msg = pack(wire::kind::embedding_rows, wire::encode(st.ctx, res));
  count(st, req.h.sender, msg);
  return msg;
}

caf::result<wire_message> refresh_halo(self_ptr self, const wire::control& c) {
  auto& st = self->state;
  const auto& part = *st.part;
  const int top = top_level(st);
  std::map<int, std::vector<size_t>> by_owner;
  for (size_t i = 0; i < part.halo.size(); ++i)
    by_owner[part.halo_owner[i]].push_back(i);
  std::vector<batch_request> requests;
  std::vector<std::pair<int, std::vector<size_t>>> what;  // (level, halo positions)
  st.halo_rows.resize(static_cast<size_t>(std::max(top, 1)));
  for (int level = st.halo_features_loaded ? 1 : 0; level < top; ++level) {
    for (auto& [q, pos] : by_owner) {
      // Features never change; history rows are asked for only when newer than the last pull.
      wire::embedding_get req{.h = {c.h.step, part.part},
                              .layer = static_cast<std::uint8_t>(level),
                              .since = level == 0 ? 0 : st.halo_since};
      for (size_t i : pos)
        req.nodes.push_back(part.halo[i]);
      auto msg = pack(wire::kind::embedding_get, wire::encode(st.ctx, req));
      count(st, q, msg);
      requests.push_back({st.view->batchers[static_cast<size_t>(q)], std::move(msg)});
      what.emplace_back(level, pos);
    }
  }
  auto rp = self->make_response_promise<wire_message>();
  gather(
      self, batch_atom_v, std::move(requests), st.settings.timeout,
      [self, rp, what = std::move(what),
       step = c.h.step](std::vector<wire_message>& replies) mutable {
        auto& st = self->state;
        try {
          for (size_t r = 0; r < replies.size(); ++r) {
            const auto rows = wire::decode_embedding_rows(st.ctx, replies[r].bytes);
            const auto& [level, pos] = what[r];
            if (rows.nodes.size() > pos.size()) {
              throw wire::wire_error("embedding_rows has " + std::to_string(rows.nodes.size()) +
                                     " rows, " + std::to_string(pos.size()) + " asked");
            }
            const quantizer q(static_cast<int>(rows.cols), rows.bits);
            const Matrix values = q.decode(rows.payload, rows.row_min, rows.row_scale);
            Matrix& cache = st.halo_rows[static_cast<size_t>(level)];
            if (cache.rows() != static_cast<Eigen::Index>(st.part->halo.size()) ||
                cache.cols() != values.cols()) {
              cache = Matrix::Zero(static_cast<Eigen::Index>(st.part->halo.size()), values.cols());
            }
            // Only changed rows come back: place each by its node id within the halo.
            const auto& halo = st.part->halo;
            for (size_t k = 0; k < rows.nodes.size(); ++k) {
              const auto it = std::lower_bound(halo.begin(), halo.end(), rows.nodes[k]);
              if (it == halo.end() || *it != rows.nodes[k]) {
                throw wire::wire_error("embedding_rows holds node " +
                                       std::to_string(rows.nodes[k]) +
                                       ", which is not in the halo");
              }
              cache.row(it - halo.begin()) = values.row(static_cast<Eigen::Index>(k));
            }
          }
          st.halo_features_loaded = true;
          st.halo_since = step + 1;  // rows written at this step or later are new next time
          wire::control out{.h = {step, st.part->part}, .what = wire::control_kind::result};
          auto msg = pack(wire::kind::control, wire::encode(st.ctx, out));
          count(st, kCoordinatorPart, msg);
          rp.deliver(std::move(msg));
        } catch (const std::exception& e) {
          ++st.rejected;
          rp.deliver(as_error(st, std::string("halo refresh: ") + e.what()));
        }
      },
      [self, rp](const caf::error& err) mutable {
        rp.deliver(as_error(self->state, "halo refresh failed: " + caf::to_string(err)));
      });
  return rp;
}

wire_message init_history(batch_state& st, const wire::control& c) {
  const int top = top_level(st);
  st.history.assign(static_cast<size_t>(std::max(top, 1)), Matrix());
  st.history_version.assign(st.history.size(), {});
  for (int level = 1; level < top; ++level) {
    if (st.eval_h.size() <= static_cast<size_t>(level) ||
        st.eval_h[static_cast<size_t>(level)].rows() != st.part->num_owned()) {
      throw wire::wire_error("init_history needs an evaluation pass first");
    }
    st.history[static_cast<size_t>(level)] = st.eval_h[static_cast<size_t>(level)];
    st.history_version[static_cast<size_t>(level)].assign(static_cast<size_t>(st.part->num_owned()),
                                                          0);
  }
  wire::control out{.h = {c.h.step, st.part->part}, .what = wire::control_kind::result};
  auto msg = pack(wire::kind::control, wire::encode(st.ctx, out));
  count(st, kCoordinatorPart, msg);
  return msg;
}

}  // namespace degnn::batch_detail
