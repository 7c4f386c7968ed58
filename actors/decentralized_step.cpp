// The decentralized (DEGNN) step of the batch actor. The owner samples its seeds' neighbours and
// pushes every shard (itself included) one computation push; a shard waits for the pushes of all
// owners, expands their nodes locally (LAMP) into one fused sub-graph, pulls the historical rows
// of remote leaves that are older than the staleness bound, and returns one partial sum per
// target. Gradients of the partial sums come back and are applied in sender order when the
// coordinator asks for the step's gradient, which is also when the step's history is committed:
// both make a run bit-deterministic whatever order messages arrive in.
#include <algorithm>
#include <map>

#include "actors/batch_internal.hpp"
#include "model/block_builder.hpp"
#include "model/quantizer.hpp"
#include "model/sampler.hpp"

namespace degnn::batch_detail {

namespace {

/// Steps a shard holds at once: two are in flight in the pipelined schedule; more means pushes
/// were lost or a peer misbehaves, and further pushes are refused rather than stored.
constexpr std::size_t kMaxServedSteps = 4;

std::uint64_t dropout_seed_of(const batch_state& st, std::uint64_t step) {
  return mix64(st.settings.seed ^ mix64(step));
}

int top_level(const batch_state& st) {
  return static_cast<int>(st.settings.fanouts.size()) - 1;
}

int num_parts(const batch_state& st) {
  return static_cast<int>(st.view->batchers.size());
}

/// Width of the rows a push's answer carries: h^(top) of the model, or the features.
Eigen::Index push_width(const batch_state& st) {
  const int top = top_level(st);
  return top > 0 ? st.replica->model().layer(top - 1).out_dim() : st.part->features.cols();
}

size_t halo_index(const batch_state& st, node_id g) {
  const auto& halo = st.part->halo;
  const auto it = std::lower_bound(halo.begin(), halo.end(), g);
  if (it == halo.end() || *it != g) {
    throw wire::wire_error("node " + std::to_string(g) + " is not in partition " +
                           std::to_string(st.part->part) + "'s halo");
  }
  return static_cast<size_t>(it - halo.begin());
}

// Rows of every remote leaf of cg, from the halo cache.
std::vector<Matrix> leaf_rows(const batch_state& st, const local_cg& cg) {
  std::vector<Matrix> out(cg.remote_leaves.size());
  for (size_t k = 0; k < cg.remote_leaves.size(); ++k) {
    const auto& ids = cg.remote_leaves[k];
    if (ids.empty()) continue;
    if (k >= st.halo_rows.size() ||
        st.halo_rows[k].rows() != static_cast<Eigen::Index>(st.part->halo.size())) {
      throw wire::wire_error("no halo rows at level " + std::to_string(k) +
                             " yet (history not initialised)");
    }
    out[k].resize(static_cast<Eigen::Index>(ids.size()), st.halo_rows[k].cols());
    for (size_t i = 0; i < ids.size(); ++i)
      out[k].row(static_cast<Eigen::Index>(i)) =
          st.halo_rows[k].row(static_cast<Eigen::Index>(halo_index(st, ids[i])));
  }
  return out;
}

bool weights_ready(const batch_state& st, std::uint64_t step) {
  const auto it = st.applies_needed.find(step);
  return it != st.applies_needed.end() && st.applies_done >= it->second;
}

// Runs fn once the weights of `step` are there: every averaged gradient before it applied.
void when_weights_ready(self_ptr self, std::uint64_t step, std::function<void()> fn) {
  auto& st = self->state;
  if (weights_ready(st, step)) {
    fn();
    return;
  }
  st.waiting_for_weights.emplace_back(
      step, [self, step, since = stage_log::now_us(), fn = std::move(fn)] {
        self->state.stages.add(stage::weights_wait, step, since, stage_log::now_us());
        fn();
      });
}

// An answer may hold only nodes that were asked for, in the order asked (the owner skips the
// unchanged ones), each with a real version: a peer cannot overwrite another owner's rows.
void check_rows_answer(const std::vector<node_id>& asked, const wire::embedding_rows& rows) {
  size_t a = 0;
  for (size_t k = 0; k < rows.nodes.size(); ++k) {
    while (a < asked.size() && asked[a] != rows.nodes[k])
      ++a;
    if (a == asked.size())
      throw wire::wire_error("embedding_rows holds node " + std::to_string(rows.nodes[k]) +
                             ", which was not asked for (or out of order)");
    ++a;
    if (rows.versions[k] == wire::kNoVersion)
      throw wire::wire_error("embedding_rows holds a row without a version");
  }
}

// The width of history (or feature) rows at a level, as this replica computes them.
Eigen::Index level_width(const batch_state& st, int level) {
  return level == 0 ? st.part->features.cols() : st.replica->model().layer(level - 1).out_dim();
}

// Stores an owner's answer to `ask` in the halo cache: the rows that came back, with their
// versions, and every asked row confirmed current at `step` (rows not sent are unchanged).
// Returns the number of rows received.
size_t store_answer(batch_state& st, const wire::embedding_get& ask,
                    const wire::embedding_rows& rows, std::uint64_t step) {
  const auto level = static_cast<size_t>(ask.layer);
  if (rows.layer != ask.layer) throw wire::wire_error("embedding_rows for another level");
  if (rows.nodes.size() > ask.nodes.size()) {
    throw wire::wire_error("embedding_rows has " + std::to_string(rows.nodes.size()) + " rows, " +
                           std::to_string(ask.nodes.size()) + " asked");
  }
  if (static_cast<Eigen::Index>(rows.cols) != level_width(st, ask.layer))
    throw wire::wire_error("embedding_rows of the wrong width");
  check_rows_answer(ask.nodes, rows);
  const Matrix values = quantizer(static_cast<int>(rows.cols), rows.bits)
                            .decode(rows.payload, rows.row_min, rows.row_scale);
  Matrix& cache = st.halo_rows[level];
  for (size_t k = 0; k < rows.nodes.size(); ++k) {
    const size_t i = halo_index(st, rows.nodes[k]);
    cache.row(static_cast<Eigen::Index>(i)) = values.row(static_cast<Eigen::Index>(k));
    st.halo_version[level][i] = rows.versions[k];
  }
  for (node_id u : ask.nodes)
    st.halo_checked[level][halo_index(st, u)] = static_cast<std::int64_t>(step);
  return rows.nodes.size();
}

void fail_step(batch_state& st, served_step& s, const std::string& why) {
  for (auto& p : s.pushes) {
    if (p && p->rp.pending()) p->rp.deliver(as_error(st, why));
  }
}

// -- the shard's side --

// Forward of the step's sub-graphs (their leaves are current) and one answer per push.
void finish_step(self_ptr self, std::uint64_t step) {
  auto& st = self->state;
  const auto it = st.served.find(step);
  if (it == st.served.end()) return;
  served_step& s = it->second;
  if (s.computed || s.received != num_parts(st)) return;  // a late callback of a replaced step
  stage_timer timer(st.stages, stage::forward, step);
  try {
    const size_t n = s.graphs.size();
    s.states.resize(n);
    s.outs.resize(n);
    s.pre.resize(n);
    for (size_t g = 0; g < n; ++g) {
      s.outs[g] = forward_local_cg(st.replica->model(), s.graphs[g], st.part->features,
                                   leaf_rows(st, s.graphs[g]), true, dropout_seed_of(st, step),
                                   s.states[g], &s.pre[g]);
      ++st.work.graphs;
      for (const block& b : s.graphs[g].blocks) {
        st.work.nodes += static_cast<std::uint64_t>(b.num_dst());
        st.work.edges += b.indices.size();
        ++st.work.kernel_calls;
      }
    }
    const Eigen::Index width = push_width(st);
    s.computed = true;
    for (size_t q = 0; q < s.pushes.size(); ++q) {
      served_push& p = *s.pushes[q];
      wire::partial_aggregate res{.h = {step, st.part->part}, .counts = p.push.counts};
      res.sums = Matrix::Zero(static_cast<Eigen::Index>(p.push.targets.size()), width);
      size_t j = 0;
      for (size_t t = 0; t < p.push.targets.size(); ++t) {
        for (std::int32_t k = 0; k < p.push.counts[t]; ++k, ++j) {
          const auto [g, r] = p.neighbor_at[j];
          res.sums.row(static_cast<Eigen::Index>(t)) += s.outs[static_cast<size_t>(g)].row(r);
        }
      }
      res.own_rows.resize(static_cast<Eigen::Index>(p.row_at.size()), width);
      for (size_t i = 0; i < p.row_at.size(); ++i) {
        const auto [g, r] = p.row_at[i];
        res.own_rows.row(static_cast<Eigen::Index>(i)) = s.outs[static_cast<size_t>(g)].row(r);
      }
      auto msg = pack(wire::kind::partial_aggregate, wire::encode(st.ctx, res));
      count(st, static_cast<int>(q), msg);
      p.rp.deliver(std::move(msg));
    }
  } catch (const std::exception& e) {
    ++st.rejected;
    fail_step(st, s, "step " + std::to_string(step) + ": " + e.what());
    st.served.erase(it);
  }
}

// All pushes of the step are in: plan the sub-graphs (fused or not), expand them, pull the halo
// rows they read that are older than the staleness bound, then finish.
void compute_step(self_ptr self, std::uint64_t step) {
  auto& st = self->state;
  served_step& s = st.served.at(step);
  const auto& part = *st.part;
  const int top = top_level(st);
  stage_timer expanding(st.stages, stage::expand, step);
  std::vector<std::vector<node_id>> plans;  // per graph to build: the owned nodes it computes
  // Adds node u to plan g (once) and returns its row there.
  auto place = [&](size_t g, node_id u) -> std::pair<std::int32_t, std::int32_t> {
    auto& tg = plans[g];
    if (st.scratch[u] == -1) {
      st.scratch[u] = static_cast<std::int32_t>(tg.size());
      tg.push_back(u);
    }
    return {static_cast<std::int32_t>(g), st.scratch[u]};
  };
  auto close = [&](size_t g) {
    for (node_id u : plans[g])
      st.scratch[u] = -1;
  };
  const bool fuse_all = st.settings.fuse_targets && st.settings.fuse_pushes;
  if (fuse_all) plans.emplace_back();
  for (auto& slot : s.pushes) {
    served_push& p = *slot;
    p.neighbor_at.clear();
    p.row_at.clear();
    if (st.settings.fuse_targets) {
      // Level 1: one graph per push (level 2: one for every push); rows first, as the centralized
      // batch orders a batch's seeds before their neighbours.
      if (!fuse_all) plans.emplace_back();
      const size_t g = plans.size() - 1;
      for (node_id u : p.push.rows)
        p.row_at.push_back(place(g, u));
      for (node_id u : p.push.neighbors)
        p.neighbor_at.push_back(place(g, u));
      if (!fuse_all) close(g);
    } else {
      // No fusion: every asked row and every target's neighbours get a graph of their own.
      for (node_id u : p.push.rows) {
        plans.emplace_back();
        p.row_at.push_back(place(plans.size() - 1, u));
        close(plans.size() - 1);
      }
      size_t j = 0;
      for (size_t t = 0; t < p.push.targets.size(); ++t) {
        if (p.push.counts[t] == 0) continue;
        plans.emplace_back();
        for (std::int32_t k = 0; k < p.push.counts[t]; ++k, ++j)
          p.neighbor_at.push_back(place(plans.size() - 1, p.push.neighbors[j]));
        close(plans.size() - 1);
      }
    }
  }
  if (fuse_all) close(0);
  try {
    s.graphs.clear();
    for (const auto& plan : plans) {
      s.graphs.push_back(expand_local(part, *st.book, plan, top, st.settings.fanouts,
                                      st.settings.seed, step, st.scratch, st.settings.local_bias));
    }
    // Level 0 leaves read features (pulled once); higher levels read history, pulled when the
    // cached row was last confirmed staleness or more steps ago.
    for (const auto& cg : s.graphs) {
      if (!cg.remote_leaves.empty() && !cg.remote_leaves[0].empty() && !st.halo_features_loaded)
        throw wire::wire_error("halo features not loaded (history not initialised)");
    }
    std::map<std::pair<int, int>, wire::embedding_get> gets;  // (owner, level)
    std::vector<std::vector<char>> asked(static_cast<size_t>(std::max(top, 1)));
    for (const auto& cg : s.graphs) {
      for (int k = 1; k < top; ++k) {
        const auto ku = static_cast<size_t>(k);
        if (ku >= st.halo_checked.size())
          throw wire::wire_error("no halo history at level " + std::to_string(k));
        if (asked[ku].empty()) asked[ku].assign(part.halo.size(), 0);
        for (node_id u : cg.remote_leaves[ku]) {
          const size_t i = halo_index(st, u);
          if (asked[ku][i]) continue;
          const std::int64_t checked = st.halo_checked[ku][i];
          if (checked >= 0 && checked + st.settings.staleness > static_cast<std::int64_t>(step))
            continue;
          asked[ku][i] = 1;
          auto& req = gets[{part.halo_owner[i], k}];
          req.nodes.push_back(u);
          req.held.push_back(st.halo_version[ku][i]);
        }
      }
    }
    expanding.end();
    if (gets.empty()) {
      when_weights_ready(self, step, [self, step] { finish_step(self, step); });
      return;
    }
    std::vector<batch_request> requests;
    std::vector<wire::embedding_get> asks;
    for (auto& [key, req] : gets) {
      req.h = {step, part.part};
      req.layer = static_cast<std::uint8_t>(key.second);
      auto msg = pack(wire::kind::embedding_get, wire::encode(st.ctx, req));
      count(st, key.first, msg);
      requests.push_back({st.view->batchers[static_cast<size_t>(key.first)], std::move(msg)});
      asks.push_back(std::move(req));
    }
    gather(
        self, batch_atom_v, std::move(requests), st.settings.timeout,
        [self, step, asks = std::move(asks),
         asked_at = stage_log::now_us()](std::vector<wire_message>& replies) {
          auto& st = self->state;
          st.stages.add(stage::history_pull, step, asked_at, stage_log::now_us());
          try {
            for (size_t r = 0; r < replies.size(); ++r) {
              const auto rows = wire::decode_embedding_rows(st.ctx, replies[r].bytes);
              st.work.rows_pulled += store_answer(st, asks[r], rows, step);
            }
          } catch (const std::exception& e) {
            ++st.rejected;
            const auto it = st.served.find(step);
            if (it == st.served.end()) return;
            fail_step(st, it->second, std::string("history pull: ") + e.what());
            st.served.erase(it);
            return;
          }
          when_weights_ready(self, step, [self, step] { finish_step(self, step); });
        },
        [self, step](const caf::error& err) {
          auto& st = self->state;
          const auto it = st.served.find(step);
          if (it == st.served.end()) return;
          fail_step(st, it->second, "history pull failed: " + caf::to_string(err));
          st.served.erase(it);
        });
  } catch (const std::exception& e) {
    ++st.rejected;
    fail_step(st, s, "step " + std::to_string(step) + ": " + e.what());
    st.served.erase(step);
  }
}

// One step in flight on its owner.
struct owner_job {
  std::uint64_t step = 0;
  std::vector<node_id> seeds;
  std::vector<std::int32_t> counts;  ///< sampled neighbours per seed
  /// Per part: the seed positions its push's targets stand for.
  std::vector<std::vector<std::int32_t>> push_targets;
  promise rp;
};

// The owner's half once every part answered: neighbour means, top layer, loss, its backward,
// and the gradients of the partial sums back to their shards.
void finish_owner_step(self_ptr self, const std::shared_ptr<owner_job>& job,
                       std::vector<wire_message>& replies) {
  auto& st = self->state;
  const int me = st.part->part;
  stage_timer timer(st.stages, stage::top_layer, job->step);
  const auto b = static_cast<Eigen::Index>(job->seeds.size());
  const Eigen::Index width = push_width(st);
  Matrix agg = Matrix::Zero(b, width);
  Matrix h_self;
  for (size_t q = 0; q < replies.size(); ++q) {
    if (replies[q].kind != static_cast<std::uint16_t>(wire::kind::partial_aggregate))
      throw wire::wire_error("expected a partial_aggregate");
    const auto pa = wire::decode_partial_aggregate(st.ctx, replies[q].bytes);
    const auto& targets = job->push_targets[q];
    if (pa.sums.rows() != static_cast<Eigen::Index>(targets.size()) ||
        (!targets.empty() && pa.sums.cols() != width)) {
      throw wire::wire_error("partial_aggregate from part " + std::to_string(q) +
                             " has the wrong shape");
    }
    for (size_t t = 0; t < targets.size(); ++t)
      agg.row(targets[t]) += pa.sums.row(static_cast<Eigen::Index>(t));
    if (static_cast<int>(q) == me) h_self = pa.own_rows;
  }
  if (h_self.rows() != b || (b > 0 && h_self.cols() != width))
    throw wire::wire_error("the owner's own rows have the wrong shape");
  wire::allreduce_chunk stats{.h = {job->step, me}};
  Matrix grad_self, grad_agg;
  if (b > 0) {
    for (Eigen::Index i = 0; i < b; ++i) {
      if (job->counts[static_cast<size_t>(i)] > 0)
        agg.row(i) /= static_cast<float>(job->counts[static_cast<size_t>(i)]);
    }
    auto& model = st.replica->model();
    top_layer_state top;
    const Matrix logits = top_forward(model, job->seeds, h_self, agg, job->counts, top);
    std::vector<std::int32_t> labels(job->seeds.size());
    for (size_t i = 0; i < labels.size(); ++i)
      labels[i] = st.part->labels[st.book->local_id(job->seeds[i])];
    Matrix grad_logits;
    const double mean_loss = softmax_cross_entropy(logits, labels, grad_logits);
    for (Eigen::Index r = 0; r < logits.rows(); ++r) {
      if (labels[static_cast<size_t>(r)] < 0) continue;
      ++stats.seeds;
      Eigen::Index best = 0;
      logits.row(r).maxCoeff(&best);
      stats.correct += best == labels[static_cast<size_t>(r)];
    }
    stats.loss = mean_loss * stats.seeds;
    top_backward(model, top, grad_logits, grad_self, grad_agg);
    // d loss / d (a shard's partial sum of seed i) = d loss / d agg_i / count_i.
    for (Eigen::Index i = 0; i < b; ++i) {
      if (job->counts[static_cast<size_t>(i)] > 0)
        grad_agg.row(i) /= static_cast<float>(job->counts[static_cast<size_t>(i)]);
    }
  }
  std::vector<batch_request> returns;
  for (size_t q = 0; q < job->push_targets.size(); ++q) {
    wire::gradient_return g{.h = {job->step, me}};
    const auto& targets = job->push_targets[q];
    g.grads.resize(static_cast<Eigen::Index>(targets.size()), width);
    for (size_t t = 0; t < targets.size(); ++t)
      g.grads.row(static_cast<Eigen::Index>(t)) = grad_agg.row(targets[t]);
    if (static_cast<int>(q) == me && b > 0) g.own_grads = grad_self;
    auto msg = pack(wire::kind::gradient_return, wire::encode(st.ctx, g));
    count(st, static_cast<int>(q), msg);
    returns.push_back({st.view->batchers[q], std::move(msg)});
  }
  auto reply = pack(wire::kind::allreduce_chunk, wire::encode(st.ctx, stats));
  count(st, kCoordinatorPart, reply);
  timer.end();
  gather(
      self, batch_atom_v, std::move(returns), st.settings.timeout,
      [self, job, reply = std::move(reply),
       sent_at = stage_log::now_us()](std::vector<wire_message>&) mutable {
        self->state.stages.add(stage::grad_wait, job->step, sent_at, stage_log::now_us());
        job->rp.deliver(std::move(reply));
      },
      [self, job](const caf::error& err) {
        job->rp.deliver(as_error(self->state, "gradient return failed: " + caf::to_string(err)));
      });
}

}  // namespace

caf::result<wire_message> start_decentralized_step(self_ptr self, const wire::control& c) {
  auto& st = self->state;
  const auto& part = *st.part;
  const auto& book = *st.book;
  const int me = part.part;
  const int parts = num_parts(st);
  auto job = std::make_shared<owner_job>();
  job->step = c.h.step;
  // The weights this step's forward needs (the previous step may still be in its all-reduce).
  if (c.counts.size() != 1) throw wire::wire_error("step control without the weights it needs");
  const auto [needed, fresh] = st.applies_needed.try_emplace(job->step, c.counts.front());
  if (!fresh && needed->second != c.counts.front())
    throw wire::wire_error("step control and a push of step " + std::to_string(job->step) +
                           " name different weights");
  stage_timer sampling(st.stages, stage::sample, job->step);
  if (!st.train_global.empty()) {
    if (st.batches_epoch != c.epoch) {
      st.batches = make_batches(st.train_global, st.settings.batch_size, st.settings.seed, c.epoch);
      st.batches_epoch = c.epoch;
    }
    job->seeds = st.batches[static_cast<size_t>(c.value) % st.batches.size()];
  }
  const auto b = job->seeds.size();
  // Hop 0 from the owner's own in-edges (the seeds are owned here), grouped by owner. Every part
  // gets a push, empty or not, so a shard knows when it has all of a step's pushes.
  std::vector<wire::computation_push> pushes(static_cast<size_t>(parts));
  job->push_targets.resize(static_cast<size_t>(parts));
  for (auto& p : pushes) {
    p.h = {job->step, me};
    p.layer = static_cast<std::uint8_t>(top_level(st));
    p.applies = st.applies_needed[job->step];
  }
  pushes[static_cast<size_t>(me)].rows = job->seeds;
  job->counts.resize(b);
  std::vector<node_id> picks;
  for (size_t i = 0; i < b; ++i) {
    const auto row = part.in_neighbors_global(book.local_id(job->seeds[i]));
    picks.resize(row.size());
    row_rng rng(row_seed(st.settings.seed, job->step, 0, job->seeds[i]));
    picks.resize(static_cast<size_t>(pick_uniform(row, st.settings.fanouts[0], rng, picks.data())));
    job->counts[i] = static_cast<std::int32_t>(picks.size());
    for (node_id u : picks) {
      const auto q = static_cast<size_t>(book.owner(u));
      auto& p = pushes[q];
      auto& targets = job->push_targets[q];
      if (targets.empty() || targets.back() != static_cast<std::int32_t>(i)) {
        targets.push_back(static_cast<std::int32_t>(i));
        p.targets.push_back(job->seeds[i]);
        p.counts.push_back(0);
      }
      ++p.counts.back();
      p.neighbors.push_back(u);
    }
  }
  std::vector<batch_request> requests;
  for (int q = 0; q < parts; ++q) {
    auto msg =
        pack(wire::kind::computation_push, wire::encode(st.ctx, pushes[static_cast<size_t>(q)]));
    count(st, q, msg);
    requests.push_back({st.view->batchers[static_cast<size_t>(q)], std::move(msg)});
  }
  job->rp = self->make_response_promise<wire_message>();
  sampling.end();
  run_ready_work(self);  // pushes of this step may have been waiting for its weights
  gather(
      self, batch_atom_v, std::move(requests), st.settings.timeout,
      [self, job, pushed_at = stage_log::now_us()](std::vector<wire_message>& replies) {
        self->state.stages.add(stage::push_wait, job->step, pushed_at, stage_log::now_us());
        when_weights_ready(self, job->step, [self, job, replies = std::move(replies)]() mutable {
          try {
            finish_owner_step(self, job, replies);
          } catch (const std::exception& e) {
            ++self->state.rejected;
            job->rp.deliver(as_error(self->state, std::string("decentralized step: ") + e.what()));
          }
        });
      },
      [self, job](const caf::error& err) {
        job->rp.deliver(as_error(self->state, "computation push failed: " + caf::to_string(err)));
      });
  return job->rp;
}

caf::result<wire_message> serve_push(self_ptr self, const wire_message& m) {
  auto& st = self->state;
  auto push = wire::decode_computation_push(st.ctx, m.bytes);
  const auto& part = *st.part;
  const auto& book = *st.book;
  const std::uint64_t step = push.h.step;
  if (push.layer != top_level(st))
    throw wire::wire_error("computation_push for layer " + std::to_string(push.layer));
  if (push.h.sender < 0 || push.h.sender >= num_parts(st))
    throw wire::wire_error("computation_push from unknown part " + std::to_string(push.h.sender));
  for (const auto* list : {&push.neighbors, &push.rows}) {
    for (node_id u : *list) {
      if (u >= book.num_nodes() || book.owner(u) != part.part) {
        throw wire::wire_error("computation_push names node " + std::to_string(u) +
                               ", not owned here");
      }
    }
  }
  if (!st.view->ready.load(std::memory_order_acquire))
    throw wire::wire_error("computation_push before this node is connected to every peer");
  // The weights a push names act as its sequence number: at most one apply ahead of this
  // replica (the previous step's all-reduce may be under way), never behind it.
  if (push.applies < st.applies_done || push.applies > st.applies_done + 1) {
    throw wire::wire_error("computation_push for step " + std::to_string(step) + " names weights " +
                           std::to_string(push.applies) + ", this replica has applied " +
                           std::to_string(st.applies_done));
  }
  if (!st.served.count(step) && st.served.size() >= kMaxServedSteps) {
    throw wire::wire_error("computation_push for step " + std::to_string(step) + ": " +
                           std::to_string(kMaxServedSteps) + " steps already held");
  }
  served_step& s = st.served[step];
  if (s.pushes.empty()) s.pushes.resize(static_cast<size_t>(num_parts(st)));
  auto& slot = s.pushes[static_cast<size_t>(push.h.sender)];
  if (slot || s.computed) {
    throw wire::wire_error("a second computation_push from part " + std::to_string(push.h.sender) +
                           " for step " + std::to_string(step));
  }
  // Every push of a step names the same weights; the shard computes with those.
  const auto [needed, fresh] = st.applies_needed.try_emplace(step, push.applies);
  if (!fresh && needed->second != push.applies) {
    throw wire::wire_error("computation_push from part " + std::to_string(push.h.sender) +
                           " needs " + std::to_string(push.applies) +
                           " applied gradients, another push of step " + std::to_string(step) +
                           " said " + std::to_string(needed->second));
  }
  auto rp = self->make_response_promise<wire_message>();
  slot = served_push{.push = std::move(push), .rp = rp};
  if (++s.received == num_parts(st)) compute_step(self, step);
  return rp;
}

wire_message serve_gradient_return(batch_state& st, const wire_message& m) {
  auto g = wire::decode_gradient_return(st.ctx, m.bytes);
  const auto it = st.served.find(g.h.step);
  if (it == st.served.end() || !it->second.computed || g.h.sender < 0 ||
      static_cast<size_t>(g.h.sender) >= it->second.pushes.size()) {
    throw wire::wire_error("gradient_return for a push this shard does not hold");
  }
  served_push& p = *it->second.pushes[static_cast<size_t>(g.h.sender)];
  if (p.grad) throw wire::wire_error("a second gradient_return for one push");
  if (g.grads.rows() != static_cast<Eigen::Index>(p.push.targets.size()))
    throw wire::wire_error("gradient_return has the wrong row count");
  if (g.own_grads.rows() != static_cast<Eigen::Index>(p.push.rows.size()))
    throw wire::wire_error("gradient_return has the wrong number of own-row gradients");
  // The width must be that of the rows this shard returned, or backward reads out of bounds.
  const Eigen::Index width = push_width(st);
  if ((g.grads.rows() > 0 && g.grads.cols() != width) ||
      (g.own_grads.rows() > 0 && g.own_grads.cols() != width)) {
    throw wire::wire_error("gradient_return has the wrong width");
  }
  p.grad = std::move(g);
  wire::control out{.h = {it->first, st.part->part}, .what = wire::control_kind::result};
  auto msg = pack(wire::kind::control, wire::encode(st.ctx, out));
  count(st, p.grad->h.sender, msg);
  return msg;
}

void run_ready_work(self_ptr self) {
  auto& st = self->state;
  // Work that runs may queue more (or the same step's next stage): loop until nothing is ready.
  for (bool ran = true; ran;) {
    ran = false;
    for (size_t i = 0; i < st.waiting_for_weights.size(); ++i) {
      if (!weights_ready(st, st.waiting_for_weights[i].first)) continue;
      auto fn = std::move(st.waiting_for_weights[i].second);
      st.waiting_for_weights.erase(st.waiting_for_weights.begin() + static_cast<std::ptrdiff_t>(i));
      fn();
      ran = true;
      break;
    }
  }
}

void backward_served_steps(batch_state& st, std::uint64_t upto) {
  st.applies_needed.erase(st.applies_needed.begin(), st.applies_needed.upper_bound(upto));
  // Work of those steps that never got its weights cannot run any more (its requests failed).
  std::erase_if(st.waiting_for_weights, [upto](const auto& w) { return w.first <= upto; });
  while (!st.served.empty() && st.served.begin()->first <= upto) {
    const std::uint64_t step = st.served.begin()->first;
    served_step& s = st.served.begin()->second;
    stage_timer timer(st.stages, stage::backward, step);
    if (!s.computed) {
      fail_step(st, s, "step " + std::to_string(step) + " ended before every push arrived");
      st.served.erase(st.served.begin());
      if (step == upto)
        throw wire::wire_error("gradient asked for a step whose pushes are missing");
      continue;
    }
    const Eigen::Index width = push_width(st);
    std::vector<Matrix> grads(s.graphs.size());
    for (size_t g = 0; g < grads.size(); ++g)
      grads[g] = Matrix::Zero(static_cast<Eigen::Index>(s.graphs[g].targets.size()), width);
    // Sender order, whatever order the gradients arrived in.
    for (size_t q = 0; q < s.pushes.size(); ++q) {
      const served_push& p = *s.pushes[q];
      if (!p.grad) {
        st.served.erase(st.served.begin());
        throw wire::wire_error("step " + std::to_string(step) + ": part " + std::to_string(q) +
                               " returned no gradient");
      }
      size_t j = 0;
      for (size_t t = 0; t < p.push.targets.size(); ++t) {
        for (std::int32_t k = 0; k < p.push.counts[t]; ++k, ++j) {
          const auto [g, r] = p.neighbor_at[j];
          grads[static_cast<size_t>(g)].row(r) += p.grad->grads.row(static_cast<Eigen::Index>(t));
        }
      }
      for (size_t i = 0; i < p.row_at.size(); ++i) {
        const auto [g, r] = p.row_at[i];
        grads[static_cast<size_t>(g)].row(r) += p.grad->own_grads.row(static_cast<Eigen::Index>(i));
      }
    }
    for (size_t g = 0; g < grads.size(); ++g) {
      if (s.graphs[g].top_level > 0)
        backward_local_cg(st.replica->model(), s.graphs[g], s.states[g], std::move(grads[g]));
    }
    // History write-back: every owned node computed below the top level, stamped step + 1
    // (0 is the initial inference). Readers this step saw the values of the step before.
    for (size_t g = 0; g < s.graphs.size(); ++g) {
      const local_cg& cg = s.graphs[g];
      for (int k = 0; k + 1 < cg.top_level; ++k) {
        const size_t level = static_cast<size_t>(k) + 1;
        if (level >= st.history.size() || st.history[level].rows() == 0) continue;
        const block& b = cg.blocks[static_cast<size_t>(k)];
        const Matrix& rows = s.pre[g][static_cast<size_t>(k)];
        for (std::int32_t i = 0; i < b.num_dst(); ++i) {
          const node_id l = st.book->local_id(b.src_nodes[static_cast<size_t>(i)]);
          st.history[level].row(l) = rows.row(i);
          st.history_version[level][static_cast<size_t>(l)] = step + 1;
        }
      }
    }
    st.served.erase(st.served.begin());
  }
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
    if (!req.held.empty() && req.held[i] != wire::kNoVersion && version <= req.held[i])
      continue;  // the asker holds this version already
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
  const size_t levels = static_cast<size_t>(std::max(top, 1));
  st.halo_rows.resize(levels);
  st.halo_version.resize(levels);
  st.halo_checked.resize(levels);
  for (size_t k = 0; k < levels; ++k) {
    if (st.halo_version[k].size() != part.halo.size()) {
      st.halo_version[k].assign(part.halo.size(), wire::kNoVersion);
      st.halo_checked[k].assign(part.halo.size(), -1);
      st.halo_rows[k] = Matrix::Zero(static_cast<Eigen::Index>(part.halo.size()),
                                     level_width(st, static_cast<int>(k)));
    }
  }
  std::map<int, std::vector<size_t>> by_owner;
  for (size_t i = 0; i < part.halo.size(); ++i)
    by_owner[part.halo_owner[i]].push_back(i);
  std::vector<batch_request> requests;
  std::vector<wire::embedding_get> asks;
  for (int level = st.halo_features_loaded ? 1 : 0; level < top; ++level) {
    for (auto& [q, pos] : by_owner) {
      // Features never change; history rows come back only when newer than the held version.
      wire::embedding_get req{.h = {c.h.step, part.part},
                              .layer = static_cast<std::uint8_t>(level)};
      for (size_t i : pos) {
        req.nodes.push_back(part.halo[i]);
        if (level > 0) req.held.push_back(st.halo_version[static_cast<size_t>(level)][i]);
      }
      auto msg = pack(wire::kind::embedding_get, wire::encode(st.ctx, req));
      count(st, q, msg);
      requests.push_back({st.view->batchers[static_cast<size_t>(q)], std::move(msg)});
      asks.push_back(std::move(req));
    }
  }
  auto rp = self->make_response_promise<wire_message>();
  gather(
      self, batch_atom_v, std::move(requests), st.settings.timeout,
      [self, rp, asks = std::move(asks),
       step = c.h.step](std::vector<wire_message>& replies) mutable {
        auto& st = self->state;
        try {
          for (size_t r = 0; r < replies.size(); ++r)
            store_answer(st, asks[r], wire::decode_embedding_rows(st.ctx, replies[r].bytes), step);
          st.halo_features_loaded = true;
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
