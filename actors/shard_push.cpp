// The shard's side of a decentralized (DEGNN) step. Every owner pushes every shard one
// computation push per step; once a step's pushes are all in, the shard plans their sub-graphs
// (CG fusion, model/push_plan.hpp), expands them locally (LAMP), pulls from the embedding stores
// the historical rows of remote leaves older than the staleness bound, runs the local layers with
// the step's weights and answers each push with its targets' partial sums (GAT: with the own rows
// only; the attention rounds follow in shard_attention.cpp). The gradients of those
// sums come back and are applied in sender order at the step's gradient phase, which also commits
// the step's rows to this partition's embedding store: both keep a run bit-deterministic whatever
// order messages arrive in.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <unordered_map>

#include "actors/shard_internal.hpp"
#include "model/quantizer.hpp"

namespace degnn::shard_detail {

namespace {

/// Steps a shard holds at once: two are in flight in the pipelined schedule; more means pushes
/// were lost or a peer misbehaves, and further pushes are refused rather than stored.
constexpr std::size_t kMaxServedSteps = 4;

int num_parts(const shard_state& st) {
  return static_cast<int>(st.shards.size());
}

/// Width of the rows a push's answer carries: h^(top).
Eigen::Index push_width(const shard_state& st) {
  return level_width(st, st.settings.top_level());
}

std::vector<push_view> views_of(const served_step& s) {
  std::vector<push_view> out;
  out.reserve(s.pushes.size());
  for (const auto& p : s.pushes)
    out.push_back(
        {p->push.rows, p->push.targets, p->push.counts, p->push.neighbors, p->neighbor_scale});
  return out;
}

void fail_step(shard_state& st, served_step& s, const std::string& why) {
  for (auto& p : s.pushes) {
    if (p && p->rp.pending()) p->rp.deliver(as_error(st, actor_errc::internal, why));
  }
}

void drop_step(shard_state& st, std::uint64_t step, const std::string& why) {
  st.halo.release(step);
  const auto it = st.served.find(step);
  if (it == st.served.end()) return;
  fail_step(st, it->second, why);
  st.served.erase(it);
}

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
    const std::uint64_t dropout_seed = step_dropout_seed(st.settings.seed, step);
    for (size_t g = 0; g < n; ++g) {
      const local_cg& cg = s.graphs[g];
      s.outs[g] =
          st.part->sparse_features
              ? forward_local_cg(st.replica->model(), cg, *st.part->sparse_features,
                                 st.halo.leaf_features(cg, step), st.halo.leaf_rows(cg, step), true,
                                 dropout_seed, s.states[g], &s.pre[g])
              : forward_local_cg(st.replica->model(), cg, st.part->dense_features(),
                                 st.halo.leaf_rows(cg, step), true, dropout_seed, s.states[g],
                                 &s.pre[g]);
      ++st.work.graphs;
      for (const block& b : s.graphs[g].blocks) {
        st.work.nodes += static_cast<std::uint64_t>(b.num_dst());
        st.work.edges += b.indices.size();
        ++st.work.kernel_calls;
      }
    }
    st.halo.release(step);  // the rows a bounded cache held for this step are read
    const Eigen::Index width = push_width(st);
    s.computed = true;
    const auto views = views_of(s);
    for (size_t q = 0; q < s.pushes.size(); ++q) {
      served_push& p = *s.pushes[q];
      wire::partial_aggregate res{.h = {step, st.part->part}, .counts = p.push.counts};
      if (attention_model(st)) {  // GAT: the own rows now, the partials for the attention push
        res.counts.clear();
        res.sums.resize(0, width);
        res.own_rows = gather_own_rows(s.plan, q, s.outs, width);
      } else {
        gather_partial_sums(s.plan, q, views[q], s.outs, width, res.sums, res.own_rows);
      }
      auto msg = pack(wire::kind::partial_aggregate, wire::encode(st.ctx, res));
      count(st, static_cast<int>(q), msg);
      p.rp.deliver(std::move(msg));
    }
  } catch (const std::exception& e) {
    ++st.rejected;
    drop_step(st, step, "step " + std::to_string(step) + ": " + e.what());
  }
}

// All pushes of the step are in: plan the sub-graphs, expand them, pull the history rows they
// read that are older than the staleness bound, then finish with the step's weights.
void compute_step(self_ptr self, std::uint64_t step) {
  auto& st = self->state;
  served_step& s = st.served.at(step);
  const auto& part = *st.part;
  const int top = st.settings.top_level();
  stage_timer expanding(st.stages, stage::expand, step);
  try {
    s.plan = plan_pushes(views_of(s), static_cast<fusion_level>(st.settings.fusion), st.scratch);
    s.graphs.clear();
    for (const auto& targets : s.plan.graphs) {
      s.graphs.push_back(expand_local(part, *st.book, targets, top, st.settings.fanouts,
                                      st.settings.seed, step, st.scratch, st.settings.local_bias));
    }
    // Level 0 leaves read features, which the set-up brought (a bounded cache: those it keeps;
    // the others are pulled for the step); higher levels read history, pulled when the cached
    // row was never received or last confirmed `staleness` or more steps ago.
    if (!st.history_ready || !st.halo_features_loaded)
      throw wire::wire_error("a step before the history set-up");
    std::map<std::pair<int, int>, wire::embedding_get> gets;  // (owner, level)
    std::vector<std::vector<char>> asked(static_cast<size_t>(std::max(top, 1)));
    for (const auto& cg : s.graphs) {
      for (int k = 0; k < top; ++k) {
        const auto ku = static_cast<size_t>(k);
        if (!st.halo.has_level(k))
          throw wire::wire_error("no halo rows at level " + std::to_string(k));
        if (k == 0 && !st.halo.bounded()) continue;  // every feature row is held
        if (asked[ku].empty()) asked[ku].assign(part.halo.size(), 0);
        for (node_id u : cg.remote_leaves[ku]) {
          const size_t i = st.halo.index(u);
          if (asked[ku][i]) continue;
          // Features never change: a kept row is current.
          if (k == 0 ? st.halo.resident(0, i) : st.halo.fresh(k, i, step, st.settings.staleness))
            continue;
          asked[ku][i] = 1;
          auto& req = gets[{part.halo_owner[i], k}];
          req.nodes.push_back(u);
          req.held.push_back(st.halo.version(k, i));
        }
      }
    }
    expanding.end();
    if (gets.empty()) {
      st.weights.when_ready(step, st.stages, [self, step] { finish_step(self, step); });
      return;
    }
    std::vector<wire_request<store_actor, get_atom>> requests;
    std::vector<wire::embedding_get> asks;
    std::vector<int> owners;  ///< per request
    // Feature rows are wide: their gets are cut to about settings.max_row_payload_bytes of
    // answer each, as the set-up's are (history gets stay whole, as before).
    const size_t feature_rows_per_get = rows_per_message(st.settings, feature_row_bytes(part));
    for (auto& [key, whole] : gets) {
      const size_t cap = key.second == 0 ? feature_rows_per_get : whole.nodes.size();
      for (size_t from = 0; from < whole.nodes.size(); from += cap) {
        const size_t to = std::min(whole.nodes.size(), from + cap);
        wire::embedding_get req;
        req.h = {step, part.part};
        req.layer = static_cast<std::uint8_t>(key.second);
        req.nodes.assign(whole.nodes.begin() + static_cast<std::ptrdiff_t>(from),
                         whole.nodes.begin() + static_cast<std::ptrdiff_t>(to));
        req.held.assign(whole.held.begin() + static_cast<std::ptrdiff_t>(from),
                        whole.held.begin() + static_cast<std::ptrdiff_t>(to));
        owners.push_back(key.first);
        auto msg = pack(wire::kind::embedding_get, wire::encode(st.ctx, req));
        count(st, key.first, msg);
        requests.push_back({st.stores[static_cast<size_t>(key.first)], std::move(msg),
                            static_cast<int>(key.first)});
        asks.push_back(std::move(req));
      }
    }
    gather(
        self, get_atom_v, std::move(requests), st.settings.timeout,
        [self, step, asks = std::move(asks),
         asked_at = stage_log::now_us()](std::vector<wire_message>& replies) {
          auto& st = self->state;
          st.stages.add(stage::history_pull, step, asked_at, stage_log::now_us());
          if (!st.served.contains(step)) return;  // dropped meanwhile: nothing to hold rows for
          try {
            const bool sparse = st.part->sparse_features != nullptr;
            for (size_t r = 0; r < replies.size(); ++r) {
              const auto rows = wire::decode_embedding_rows(st.ctx, replies[r].bytes,
                                                            sparse && asks[r].layer == 0);
              st.work.rows_pulled += store_answer(st, asks[r], rows, step);
            }
          } catch (const std::exception& e) {
            ++st.rejected;
            drop_step(st, step, std::string("history pull: ") + e.what());
            return;
          }
          st.weights.when_ready(step, st.stages, [self, step] { finish_step(self, step); });
        },
        [self, step, owners = std::move(owners)](std::size_t r, const caf::error& err) {
          drop_step(self->state, step,
                    "history pull from partition " + std::to_string(owners[r]) +
                        " failed: " + caf::to_string(err));
        });
  } catch (const std::exception& e) {
    ++st.rejected;
    drop_step(st, step, "step " + std::to_string(step) + ": " + e.what());
  }
}

// History write-back of one step: every owned node computed below the top level, at version
// step + 1 (0 is the initial inference); a node computed in several sub-graphs keeps the last.
std::vector<history_commit> history_rows(const shard_state& st, const served_step& s,
                                         std::uint64_t step, int levels) {
  std::vector<history_commit> out;
  for (int level = 1; level <= levels; ++level) {
    std::vector<node_id> nodes;
    std::vector<const float*> rows;
    std::unordered_map<node_id, size_t> at;
    const auto cols = static_cast<size_t>(level_width(st, level));
    for (size_t g = 0; g < s.graphs.size(); ++g) {
      const local_cg& cg = s.graphs[g];
      if (level + 1 > cg.top_level) continue;
      const block& b = cg.blocks[static_cast<size_t>(level - 1)];
      const Matrix& values = s.pre[g][static_cast<size_t>(level - 1)];
      for (std::int32_t i = 0; i < b.num_dst(); ++i) {
        const node_id u = b.src_nodes[static_cast<size_t>(i)];
        const auto [it, fresh] = at.try_emplace(u, nodes.size());
        if (fresh) {
          nodes.push_back(u);
          rows.push_back(values.row(i).data());
        } else {
          rows[it->second] = values.row(i).data();
        }
      }
    }
    history_commit c{.sender = st.part->part, .level = level, .version = step + 1};
    c.nodes = std::move(nodes);
    c.values.resize(rows.size() * cols);
    for (size_t r = 0; r < rows.size(); ++r)
      std::copy_n(rows[r], cols, c.values.data() + r * cols);
    out.push_back(std::move(c));
  }
  return out;
}

// Back-propagates one computed step's returned gradients in sender order; returns its history.
std::vector<history_commit> backward_step(shard_state& st, std::uint64_t step, served_step& s) {
  stage_timer timer(st.stages, stage::backward, step);
  const auto views = views_of(s);
  const bool gat = attention_model(st);
  const Matrix none;
  std::vector<const Matrix*> grads, own_grads;
  for (size_t q = 0; q < s.pushes.size(); ++q) {
    const served_push& p = *s.pushes[q];
    // GAT: the attention return gave each listed neighbour's own gradient; a plain return
    // comes only for the own rows, when the push asked for some.
    const bool returned =
        gat ? p.attention_grads && (p.push.rows.empty() || p.grad) : p.grad.has_value();
    if (!returned)
      throw wire::wire_error("step " + std::to_string(step) + ": part " + std::to_string(q) +
                             " returned no gradient");
    grads.push_back(gat ? &p.attention_grads->rows : &p.grad->grads);
    own_grads.push_back(p.grad ? &p.grad->own_grads : &none);
  }
  if (gat) add_attention_gradients(st, s);
  auto per_graph = scatter_gradients(s.plan, views, grads, own_grads, push_width(st), gat);
  for (size_t g = 0; g < per_graph.size(); ++g) {
    if (s.graphs[g].top_level > 0)
      backward_local_cg(st.replica->model(), s.graphs[g], s.states[g], std::move(per_graph[g]));
  }
  return history_rows(st, s, step, st.settings.top_level() - 1);
}

}  // namespace

caf::result<wire_message> serve_push(self_ptr self, const wire_message& m) {
  auto& st = self->state;
  auto push = wire::decode_computation_push(st.ctx, m.bytes);
  const auto& part = *st.part;
  const auto& book = *st.book;
  const std::uint64_t step = push.h.step;
  if (push.layer != st.settings.top_level())
    throw wire::wire_error("computation_push for layer " + std::to_string(push.layer));
  if (push.h.sender < 0 || push.h.sender >= num_parts(st))
    throw wire::wire_error("computation_push from unknown part " + std::to_string(push.h.sender));
  for (const auto* list : {&push.neighbors, &push.rows}) {
    for (node_id u : *list)
      book.owned_local_id(u, part.part, "computation_push");
  }
  // The weights a push names act as its sequence number: at most one apply ahead of this
  // replica (the previous step's all-reduce may be under way), never behind it.
  const std::uint64_t applied = st.weights.applied();
  if (push.applies < applied || push.applies > applied + 1) {
    throw wire::wire_error("computation_push for step " + std::to_string(step) + " names weights " +
                           std::to_string(push.applies) + ", this replica has applied " +
                           std::to_string(applied));
  }
  const auto held = st.served.find(step);
  if (held == st.served.end() && st.served.size() >= kMaxServedSteps) {
    throw wire::wire_error("computation_push for step " + std::to_string(step) + ": " +
                           std::to_string(kMaxServedSteps) + " steps already held");
  }
  if (held != st.served.end() &&
      (held->second.computed || held->second.pushes[static_cast<size_t>(push.h.sender)])) {
    throw wire::wire_error("a second computation_push from part " + std::to_string(push.h.sender) +
                           " for step " + std::to_string(step));
  }
  // Every push of a step names the same weights; the shard computes with those.
  if (!st.weights.need(step, push.applies)) {
    throw wire::wire_error("computation_push from part " + std::to_string(push.h.sender) +
                           " needs " + std::to_string(push.applies) +
                           " applied gradients, another push of step " + std::to_string(step) +
                           " said " + std::to_string(*st.weights.needed(step)));
  }
  // Valid: only now does the step take a slot.
  served_step& s = st.served[step];
  if (s.pushes.empty()) s.pushes.resize(static_cast<size_t>(num_parts(st)));
  auto& slot = s.pushes[static_cast<size_t>(push.h.sender)];
  // GCN: a neighbour's row enters its target's sum as h_u / sqrt(d_u + 1); the owner applies
  // the target's own factor (docs/design.md section 2, the same normalisation as model/aggregate).
  std::vector<float> scale;
  if (st.replica->config().model == "gcn") {
    scale.reserve(push.neighbors.size());
    for (node_id u : push.neighbors) {
      const node_id l = book.local_id(u);
      const auto degree = static_cast<double>(part.in_degree(l));
      scale.push_back(static_cast<float>(1.0 / std::sqrt(degree + 1.0)));
    }
  }
  auto rp = self->make_response_promise<wire_message>();
  slot = served_push{.push = std::move(push), .neighbor_scale = std::move(scale), .rp = rp};
  if (++s.received == num_parts(st)) compute_step(self, step);
  return rp;
}

wire_message serve_gradient_return(shard_state& st, const wire_message& m) {
  auto g = wire::decode_gradient_return(st.ctx, m.bytes);
  const auto it = st.served.find(g.h.step);
  if (it == st.served.end() || !it->second.computed || g.h.sender < 0 ||
      static_cast<size_t>(g.h.sender) >= it->second.pushes.size()) {
    throw wire::wire_error("gradient_return for a push this shard does not hold");
  }
  served_push& p = *it->second.pushes[static_cast<size_t>(g.h.sender)];
  if (p.grad) throw wire::wire_error("a second gradient_return for one push");
  // GAT: only the own rows' gradient comes so (after the attention return), never sums'.
  if (attention_model(st) && (!p.attention_grads || g.grads.rows() != 0))
    throw wire::wire_error(
        "a GAT push's gradient_return carries own-row gradients only, after its attention_return");
  if (!attention_model(st) && g.grads.rows() != static_cast<Eigen::Index>(p.push.targets.size()))
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
  auto msg = result_message(st, it->first);
  count(st, p.grad->h.sender, msg);
  return msg;
}

caf::result<wire_message> gradient_phase(self_ptr self, const wire::control& c) {
  auto& st = self->state;
  const std::uint64_t upto = c.h.step;
  st.weights.forget_upto(upto);
  std::vector<history_commit> puts;
  const int me = st.part->part;
  while (!st.served.empty() && st.served.begin()->first <= upto) {
    const std::uint64_t step = st.served.begin()->first;
    served_step& s = st.served.begin()->second;
    if (!s.computed) {
      fail_step(st, s, "step " + std::to_string(step) + " ended before every push arrived");
      st.served.erase(st.served.begin());
      if (step == upto)
        throw wire::wire_error("gradient asked for a step whose pushes are missing");
      continue;
    }
    std::vector<history_commit> history;
    try {
      history = backward_step(st, step, s);
    } catch (...) {
      st.served.erase(st.served.begin());
      throw;
    }
    st.served.erase(st.served.begin());
    if (!st.history_ready) continue;  // history is kept from its initialisation on
    for (auto& rows : history)
      puts.push_back(std::move(rows));
  }
  st.halo.release_upto(upto);  // rows of steps that ended without their forward
  // The commits enter the store's mailbox before the gradient leaves: the next step's history
  // reads, caused by this reply, queue behind them (see commit_history).
  commit_history(self, std::move(puts));
  wire::allreduce_chunk out{.h = {upto, me}, .values = st.replica->gradient()};
  return pack(wire::kind::allreduce_chunk, wire::encode(st.ctx, out));
}

}  // namespace degnn::shard_detail
