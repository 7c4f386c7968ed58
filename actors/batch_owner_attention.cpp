// The batch owner's side of a decentralized GAT step (docs/design.md section 2), after the
// computation pushes were answered with the seeds' own rows: the seeds' er to every shard (an
// attention push), their attention partials merged with the seeds' own edges, the top layer and
// the loss, the merged softmax and the heads' gradient back to every shard (an attention return,
// answered with d loss / d er), and last the seeds' own-row gradient to the owner's own shard
// (a gradient return), which needs every shard's d loss / d er.
#include <limits>

#include "actors/batch_internal.hpp"
#include "model/gat_push.hpp"

namespace degnn::batch_detail {

namespace {

// What the rounds after the first share.
struct attention_job {
  std::shared_ptr<owner_job> job;
  gat_top_state top;
  Matrix grad_heads;   ///< (seeds, H*F)
  wire_message reply;  ///< the step's statistics, sent last
};

Matrix rows_of(const Matrix& m, const std::vector<std::int32_t>& rows) {
  Matrix out(static_cast<Eigen::Index>(rows.size()), m.cols());
  for (size_t t = 0; t < rows.size(); ++t)
    out.row(static_cast<Eigen::Index>(t)) = m.row(rows[t]);
  return out;
}

// An answer names the step and the part it answers for.
void check_answer(const wire::header& h, std::uint64_t step, size_t q, const char* what) {
  if (h.step != step || h.sender != static_cast<std::int32_t>(q))
    throw wire::wire_error(std::string(what) + " for step " + std::to_string(h.step) +
                           " from part " + std::to_string(h.sender) + " answers step " +
                           std::to_string(step) + " of part " + std::to_string(q));
}

void fail(self_ptr self, const std::shared_ptr<owner_job>& job, actor_errc code,
          const std::string& why) {
  job->rp.deliver(as_error(self->state, code, why));
}

// Runs f; a wire or model error fails the step (counted as a rejected answer).
template <class F>
void guarded(self_ptr self, const std::shared_ptr<owner_job>& job, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    ++self->state.rejected;
    fail(self, job, actor_errc::rejected, std::string("decentralized GAT step: ") + e.what());
  }
}

template <class Atom>
void ask_every_part(self_ptr self, const std::shared_ptr<attention_job>& a, Atom atom,
                    wire::kind kind, std::vector<wire::bytes> bodies, const char* what,
                    std::function<void(std::vector<wire_message>&)> then) {
  auto& st = self->state;
  std::vector<wire_request<shard_actor, Atom>> requests;
  for (size_t q = 0; q < bodies.size(); ++q) {
    auto msg = pack(kind, std::move(bodies[q]));
    count(st, static_cast<int>(q), msg);
    requests.push_back({st.shards[q], std::move(msg), static_cast<int>(q)});
  }
  gather(self, atom, std::move(requests), st.settings.timeout, std::move(then),
         [self, job = a->job, what](std::size_t q, const caf::error& err) {
           fail(self, job, actor_errc::peer_failed,
                std::string(what) + " to partition " + std::to_string(q) +
                    " failed: " + caf::to_string(err));
         });
}

// Last round: the own rows' gradient to the owner's own shard, then the statistics.
void return_own_rows(self_ptr self, const std::shared_ptr<attention_job>& a,
                     std::vector<wire_message>& answers) {
  auto& st = self->state;
  auto& job = *a->job;
  const int me = st.part->part;
  const gat_layer& layer = pushed_gat_layer(st.replica->model());
  const auto b = static_cast<Eigen::Index>(job.seeds.size());
  Matrix grad_er = Matrix::Zero(b, layer.heads());
  for (size_t q = 0; q < answers.size(); ++q) {
    if (answers[q].kind != static_cast<std::uint16_t>(wire::kind::attention_return))
      throw wire::wire_error("expected an attention_return with d loss / d er");
    const auto g = wire::decode_attention_return(st.ctx, answers[q].bytes);
    check_answer(g.h, job.step, q, "attention_return");
    const auto& targets = job.push_targets[q];
    if (g.grads.rows() != static_cast<Eigen::Index>(targets.size()) ||
        (!targets.empty() && g.grads.cols() != layer.heads()))
      throw wire::wire_error("d loss / d er from part " + std::to_string(q) +
                             " has the wrong shape");
    for (size_t t = 0; t < targets.size(); ++t)
      grad_er.row(targets[t]) += g.grads.row(static_cast<Eigen::Index>(t));
  }
  if (b == 0) {
    job.rp.deliver(std::move(a->reply));
    return;
  }
  wire::gradient_return own{.h = {job.step, me}, .grads = Matrix(0, push_width(st))};
  gat_top_backward_finish(pushed_gat_layer(st.replica->model()), a->top, a->grad_heads, grad_er,
                          own.own_grads);
  if (!own.own_grads.allFinite())
    throw wire::wire_error("the shards' d loss / d er made the own rows' gradient non-finite");
  auto msg = pack(wire::kind::gradient_return, wire::encode(st.ctx, own));
  count(st, me, msg);
  std::vector<wire_request<shard_actor, grad_ret_atom>> requests;
  requests.push_back({st.shards[static_cast<size_t>(me)], std::move(msg), me});
  gather(
      self, grad_ret_atom_v, std::move(requests), st.settings.timeout,
      [self, a, sent_at = stage_log::now_us()](std::vector<wire_message>&) {
        self->state.stages.add(stage::grad_wait, a->job->step, sent_at, stage_log::now_us());
        a->job->rp.deliver(std::move(a->reply));
      },
      [self, job = a->job](std::size_t, const caf::error& err) {
        fail(self, job, actor_errc::peer_failed,
             "own-row gradient to this partition's shard failed: " + caf::to_string(err));
      });
}

// The shards' partials are in: merge, top layer, loss, backward, and the first returns.
void finish_top(self_ptr self, const std::shared_ptr<attention_job>& a,
                std::vector<wire_message>& partials) {
  auto& st = self->state;
  const auto& job = *a->job;
  const int me = st.part->part;
  stage_timer timer(st.stages, stage::top_layer, job.step);
  gat_layer& layer = pushed_gat_layer(st.replica->model());
  const auto b = static_cast<Eigen::Index>(job.seeds.size());
  const Eigen::Index heads = layer.heads(), values = heads * layer.head_width();
  attention_partial shards{
      .max = Matrix::Constant(b, heads, -std::numeric_limits<float>::infinity()),
      .sum = Matrix::Zero(b, heads),
      .value = Matrix::Zero(b, values)};
  for (size_t q = 0; q < partials.size(); ++q) {
    if (partials[q].kind != static_cast<std::uint16_t>(wire::kind::attention_partial))
      throw wire::wire_error("expected an attention_partial");
    const auto pa = wire::decode_attention_partial(st.ctx, partials[q].bytes);
    check_answer(pa.h, job.step, q, "attention_partial");
    const auto& targets = job.push_targets[q];
    const auto n = static_cast<Eigen::Index>(targets.size());
    if (pa.values.rows() != n || pa.score_max.rows() != n ||
        (n > 0 && (pa.values.cols() != values || pa.score_max.cols() != heads)))
      throw wire::wire_error("attention partials from part " + std::to_string(q) +
                             " have the wrong shape");
    if (n == 0) continue;
    // Each target has an edge here, so its largest score's exp(0) is in the sum: below 1, the
    // merged sum could reach 0 and the backward divide by it.
    if (!(pa.exp_sum.array() >= 1.0f).all())
      throw wire::wire_error("attention partials from part " + std::to_string(q) +
                             " hold a sum below 1");
    // Spread over every seed (a seed without edges here keeps -inf and merges as nothing).
    attention_partial spread{
        .max = Matrix::Constant(b, heads, -std::numeric_limits<float>::infinity()),
        .sum = Matrix::Zero(b, heads),
        .value = Matrix::Zero(b, values)};
    for (Eigen::Index t = 0; t < n; ++t) {
      const auto i = targets[static_cast<size_t>(t)];
      spread.max.row(i) = pa.score_max.row(t);
      spread.sum.row(i) = pa.exp_sum.row(t);
      spread.value.row(i) = pa.values.row(t);
    }
    merge_partials(shards, spread);
  }
  step_stats stats;
  std::vector<wire::bytes> bodies;
  if (b > 0) {
    const std::uint64_t seed = attention_dropout_seed(step_dropout_seed(st.settings.seed, job.step),
                                                      st.settings.top_level());
    const Matrix logits = gat_top_finish(layer, job.seeds, &shards, &seed, a->top);
    std::vector<std::int32_t> labels(job.seeds.size());
    for (size_t i = 0; i < labels.size(); ++i)
      labels[i] = st.part->labels[st.book->local_id(job.seeds[i])];
    Matrix grad_logits;
    stats = classification_loss(logits, labels, grad_logits);
    a->grad_heads = gat_top_backward(layer, grad_logits);
    if (!logits.allFinite() || !a->grad_heads.allFinite())
      throw wire::wire_error("the shards' attention partials made the top layer non-finite");
  } else {
    a->top.merged = {.max = Matrix(0, heads), .sum = Matrix(0, heads), .value = {}};
    a->top.heads_out.resize(0, values);
    a->grad_heads.resize(0, values);
  }
  for (size_t q = 0; q < job.push_targets.size(); ++q) {
    const auto& targets = job.push_targets[q];
    wire::attention_return g{.h = {job.step, me},
                             .heads = static_cast<std::uint32_t>(heads),
                             .grads = rows_of(a->grad_heads, targets)};
    g.score_max = rows_of(a->top.merged.max, targets);
    g.exp_sum = rows_of(a->top.merged.sum, targets);
    g.heads_out = rows_of(a->top.heads_out, targets);
    bodies.push_back(wire::encode(st.ctx, g));
  }
  a->reply = step_stats_reply(st, job.step, stats);
  timer.end();
  ask_every_part(
      self, a, grad_ret_atom_v, wire::kind::attention_return, std::move(bodies), "attention return",
      [self, a, sent_at = stage_log::now_us()](std::vector<wire_message>& answers) {
        self->state.stages.add(stage::grad_wait, a->job->step, sent_at, stage_log::now_us());
        guarded(self, a->job, [&] { return_own_rows(self, a, answers); });
      });
}

}  // namespace

void finish_attention_step(self_ptr self, const std::shared_ptr<owner_job>& job,
                           std::vector<wire_message>& replies) {
  auto& st = self->state;
  const int me = st.part->part;
  stage_timer timer(st.stages, stage::top_layer, job->step);
  const auto b = static_cast<Eigen::Index>(job->seeds.size());
  const Eigen::Index width = push_width(st);
  Matrix h_self;
  for (size_t q = 0; q < replies.size(); ++q) {
    if (replies[q].kind != static_cast<std::uint16_t>(wire::kind::partial_aggregate))
      throw wire::wire_error("expected a partial_aggregate");
    auto pa = wire::decode_partial_aggregate(st.ctx, replies[q].bytes);
    check_answer(pa.h, job->step, q, "partial_aggregate");
    if (pa.sums.rows() != 0)
      throw wire::wire_error("part " + std::to_string(q) +
                             " answered a GAT step's first push with neighbour sums");
    if (static_cast<int>(q) == me) h_self = std::move(pa.own_rows);
  }
  if (h_self.rows() != b || (b > 0 && h_self.cols() != width))
    throw wire::wire_error("the owner's own rows have the wrong shape");
  auto a = std::make_shared<attention_job>();
  a->job = job;
  const gat_layer& layer = pushed_gat_layer(st.replica->model());
  const Matrix er = b > 0 ? gat_top_begin(layer, h_self, a->top) : Matrix(0, layer.heads());
  std::vector<wire::bytes> bodies;
  for (size_t q = 0; q < job->push_targets.size(); ++q) {
    const wire::attention_push p{
        .h = {job->step, me}, .applies = job->applies, .er = rows_of(er, job->push_targets[q])};
    bodies.push_back(wire::encode(st.ctx, p));
  }
  timer.end();
  ask_every_part(
      self, a, push_atom_v, wire::kind::attention_push, std::move(bodies), "attention push",
      [self, a, sent_at = stage_log::now_us()](std::vector<wire_message>& partials) {
        self->state.stages.add(stage::push_wait, a->job->step, sent_at, stage_log::now_us());
        guarded(self, a->job, [&] { finish_top(self, a, partials); });
      });
}

}  // namespace degnn::batch_detail
