// The batch owner's side of a decentralized (DEGNN) step: sample the seeds' first hop from the
// owner's own in-edges, push every shard (itself included) the targets and neighbours it owns,
// add up the partial sums that come back, run the top layer and the loss with the step's
// weights, and return each shard the gradient of its partial sums.
#include "actors/batch_internal.hpp"
#include "model/sampler.hpp"

namespace degnn::batch_detail {

namespace {

// Every part answered: neighbour sums, top layer, loss, its backward, and the gradients of the
// partial sums back to their shards.
void finish_owner_step(self_ptr self, const std::shared_ptr<owner_job>& job,
                       std::vector<wire_message>& replies) {
  auto& st = self->state;
  const int me = st.part->part;
  stage_timer timer(st.stages, stage::top_layer, job->step);
  const auto b = static_cast<Eigen::Index>(job->seeds.size());
  const Eigen::Index width = push_width(st);
  Matrix sum = Matrix::Zero(b, width);
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
      sum.row(targets[t]) += pa.sums.row(static_cast<Eigen::Index>(t));
    if (static_cast<int>(q) == me) h_self = pa.own_rows;
  }
  if (h_self.rows() != b || (b > 0 && h_self.cols() != width))
    throw wire::wire_error("the owner's own rows have the wrong shape");
  std::vector<std::int32_t> labels(job->seeds.size());
  for (size_t i = 0; i < labels.size(); ++i)
    labels[i] = st.part->labels[st.book->local_id(job->seeds[i])];
  std::vector<std::int32_t> degrees(job->seeds.size());
  for (size_t i = 0; i < degrees.size(); ++i) {
    const node_id l = st.book->local_id(job->seeds[i]);
    degrees[i] = st.part->in_degree(l);
  }
  const top_step top =
      st.replica->train_top_layer(job->seeds, h_self, std::move(sum), job->counts, labels, degrees);
  std::vector<wire_request<shard_actor, grad_ret_atom>> returns;
  for (size_t q = 0; q < job->push_targets.size(); ++q) {
    wire::gradient_return g{.h = {job->step, me}};
    const auto& targets = job->push_targets[q];
    g.grads.resize(static_cast<Eigen::Index>(targets.size()), width);
    for (size_t t = 0; t < targets.size(); ++t)
      g.grads.row(static_cast<Eigen::Index>(t)) = top.grad_partial.row(targets[t]);
    if (static_cast<int>(q) == me && b > 0) g.own_grads = top.grad_self;
    auto msg = pack(wire::kind::gradient_return, wire::encode(st.ctx, g));
    count(st, static_cast<int>(q), msg);
    returns.push_back({st.shards[q], std::move(msg), static_cast<int>(q)});
  }
  auto reply = step_stats_reply(st, job->step, top.stats);
  timer.end();
  gather(
      self, grad_ret_atom_v, std::move(returns), st.settings.timeout,
      [self, job, reply = std::move(reply),
       sent_at = stage_log::now_us()](std::vector<wire_message>&) mutable {
        self->state.stages.add(stage::grad_wait, job->step, sent_at, stage_log::now_us());
        job->rp.deliver(std::move(reply));
      },
      [self, job](std::size_t q, const caf::error& err) {
        job->rp.deliver(as_error(self->state, actor_errc::peer_failed,
                                 "gradient return to partition " + std::to_string(q) +
                                     " failed: " + caf::to_string(err)));
      });
}

void send_pushes(self_ptr self, std::shared_ptr<owner_job> job,
                 std::vector<wire::computation_push> pushes) {
  auto& st = self->state;
  std::vector<wire_request<shard_actor, push_atom>> requests;
  for (size_t q = 0; q < pushes.size(); ++q) {
    auto msg = pack(wire::kind::computation_push, wire::encode(st.ctx, pushes[q]));
    count(st, static_cast<int>(q), msg);
    requests.push_back({st.shards[q], std::move(msg), static_cast<int>(q)});
  }
  gather(
      self, push_atom_v, std::move(requests), st.settings.timeout,
      [self, job, pushed_at = stage_log::now_us()](std::vector<wire_message>& replies) {
        auto& st = self->state;
        st.stages.add(stage::push_wait, job->step, pushed_at, stage_log::now_us());
        st.weights.when_ready(
            job->step, st.stages,
            [self, job, replies = std::move(replies)]() mutable {
              try {
                if (self->state.replica->config().model == "gat")
                  finish_attention_step(self, job, replies);
                else
                  finish_owner_step(self, job, replies);
              } catch (const std::exception& e) {
                ++self->state.rejected;
                job->rp.deliver(as_error(self->state, actor_errc::rejected,
                                         std::string("decentralized step: ") + e.what()));
              }
            },
            [self, job] {
              job->rp.deliver(as_error(
                  self->state, actor_errc::internal,
                  "step " + std::to_string(job->step) + " ended before its weights arrived"));
            });
      },
      [self, job](std::size_t q, const caf::error& err) {
        job->rp.deliver(as_error(self->state, actor_errc::peer_failed,
                                 "computation push to partition " + std::to_string(q) +
                                     " failed: " + caf::to_string(err)));
      });
}

}  // namespace

Eigen::Index push_width(const batch_state& st) {
  const int top = st.settings.top_level();
  return top > 0 ? st.replica->model().layer(top - 1).out_dim() : st.part->features.cols();
}

wire_message step_stats_reply(batch_state& st, std::uint64_t step, const step_stats& stats) {
  if (stats.seeds > 0) st.seeded_steps.insert(step);
  wire::allreduce_chunk out{.h = {step, st.part->part},
                            .loss = stats.loss_sum,
                            .seeds = stats.seeds,
                            .correct = stats.correct};
  auto reply = pack(wire::kind::allreduce_chunk, wire::encode(st.ctx, out));
  count(st, kCoordinatorPart, reply);
  return reply;
}

caf::result<wire_message> start_decentralized_step(self_ptr self, const wire::control& c) {
  auto& st = self->state;
  const auto& part = *st.part;
  const auto& book = *st.book;
  const int me = part.part;
  const auto parts = st.shards.size();
  auto job = std::make_shared<owner_job>();
  job->step = c.h.step;
  // The weights this step's forward needs (the previous step may still be in its all-reduce).
  if (c.counts.size() != 1) throw wire::wire_error("step control without the weights it needs");
  job->applies = c.counts.front();
  if (!st.weights.need(job->step, c.counts.front()))
    throw wire::wire_error("a second step control for step " + std::to_string(job->step) +
                           " names different weights");
  stage_timer sampling(st.stages, stage::sample, job->step);
  job->seeds = seeds_of(st, c.epoch, batch_index(c));
  const auto b = job->seeds.size();
  // Hop 0 from the owner's own in-edges (the seeds are owned here), grouped by owner. Every part
  // gets a push, empty or not, so a shard knows when it has all of a step's pushes.
  std::vector<wire::computation_push> pushes(parts);
  job->push_targets.resize(parts);
  for (auto& p : pushes) {
    p.h = {job->step, me};
    p.layer = static_cast<std::uint8_t>(st.settings.top_level());
    p.applies = c.counts.front();
  }
  pushes[static_cast<size_t>(me)].rows = job->seeds;
  row_picks picked;
  sample_rows(
      job->seeds, [&](size_t i) { return part.in_neighbors_global(book.local_id(job->seeds[i])); },
      st.settings.fanouts[0], st.settings.seed, job->step, 0, picked);
  job->counts = picked.counts;
  size_t at = 0;
  for (size_t i = 0; i < b; ++i) {
    for (std::int32_t k = 0; k < job->counts[i]; ++k) {
      const node_id u = picked.picks[at++];
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
  job->rp = self->make_response_promise<wire_message>();
  sampling.end();
  if (st.gradient_phases_open > 0) {
    st.after_gradient_phase.push_back({[self, job, pushes = std::move(pushes)]() mutable {
                                         send_pushes(self, job, std::move(pushes));
                                       },
                                       [self, job](const std::string& why) {
                                         job->rp.deliver(
                                             as_error(self->state, actor_errc::internal, why));
                                       }});
  } else {
    send_pushes(self, job, std::move(pushes));
  }
  return job->rp;
}

}  // namespace degnn::batch_detail
