// The batch actor's centralized step (sample hop by hop, pull features, train, return the
// gradient), the optimiser step after the all-reduce, and its share of layer-wise evaluation.
#include "actors/batch_actor.hpp"

#include <algorithm>
#include <map>

#include "actors/batch_internal.hpp"
#include "actors/gather.hpp"
#include "model/block_builder.hpp"
#include "model/sampler.hpp"

namespace degnn {

namespace {

using namespace batch_detail;

// One mini-batch in flight: blocks fill in from the seeds outwards, one hop per round trip.
struct step_job {
  std::uint64_t step = 0;
  std::vector<node_id> seeds;
  std::vector<block> blocks;
  std::vector<node_id> frontier;
  size_t hop = 0;
  Matrix inputs;
  promise rp;
  std::int64_t began_us = 0;  ///< when the step started (sampling)
};

void finish_step(self_ptr self, std::shared_ptr<step_job> job);
void run_features(self_ptr self, std::shared_ptr<step_job> job);

void run_hop(self_ptr self, std::shared_ptr<step_job> job) {
  auto& st = self->state;
  const auto& part = *st.part;
  const auto& book = *st.book;
  const int me = part.part;
  const int fanout = st.settings.fanouts[job->hop];
  const auto& frontier = job->frontier;
  auto rows = std::make_shared<std::vector<std::vector<node_id>>>(frontier.size());
  std::map<int, std::vector<size_t>> remote;  // owner -> positions in the frontier
  for (size_t i = 0; i < frontier.size(); ++i) {
    const node_id g = frontier[i];
    const int owner = book.owner(g);
    if (owner != me) {
      remote[owner].push_back(i);
      continue;
    }
    const auto row = part.in_neighbors_global(book.local_id(g));
    row_rng rng(row_seed(st.settings.seed, job->step, job->hop, g));
    auto& out = (*rows)[i];
    out.resize(row.size());
    out.resize(static_cast<size_t>(pick_uniform(row, fanout, rng, out.data())));
    st.degree[g] = static_cast<std::int32_t>(row.size());
  }
  std::vector<shard_request> requests;
  std::vector<std::vector<size_t>> positions;
  for (auto& [owner, pos] : remote) {
    wire::sample_request req{.h = {job->step, me},
                             .layer = static_cast<std::uint8_t>(job->hop),
                             .fanout = fanout,
                             .seed = st.settings.seed,
                             .nodes = {}};
    req.nodes.reserve(pos.size());
    for (size_t i : pos)
      req.nodes.push_back(frontier[i]);
    auto msg = pack(wire::kind::sample_request, wire::encode(st.ctx, req));
    count(st, owner, msg);
    requests.push_back({st.view->shards[owner], std::move(msg)});
    positions.push_back(std::move(pos));
  }
  gather(
      self, shard_atom_v, std::move(requests), st.settings.timeout,
      [self, job, rows, positions = std::move(positions)](std::vector<wire_message>& replies) {
        auto& st = self->state;
        try {
          for (size_t r = 0; r < replies.size(); ++r) {
            if (replies[r].kind != static_cast<std::uint16_t>(wire::kind::sample_response)) {
              throw wire::wire_error("expected a sample_response");
            }
            const auto res = wire::decode_sample_response(st.ctx, replies[r].bytes);
            if (res.counts.size() != positions[r].size())
              throw wire::wire_error("sample_response has the wrong row count");
            size_t at = 0;
            for (size_t k = 0; k < positions[r].size(); ++k) {
              const size_t i = positions[r][k];
              (*rows)[i].assign(
                  res.neighbors.begin() + static_cast<std::ptrdiff_t>(at),
                  res.neighbors.begin() + static_cast<std::ptrdiff_t>(at + res.counts[k]));
              at += static_cast<size_t>(res.counts[k]);
              st.degree[job->frontier[i]] = res.degrees[k];
            }
          }
          std::vector<std::int32_t> counts(rows->size());
          std::vector<node_id> picks;
          for (size_t i = 0; i < rows->size(); ++i) {
            counts[i] = static_cast<std::int32_t>((*rows)[i].size());
            picks.insert(picks.end(), (*rows)[i].begin(), (*rows)[i].end());
          }
          for (node_id u : picks) {
            if (u < 0 || u >= st.book->num_nodes())
              throw wire::wire_error("sampled node id out of range");
          }
          const size_t layers = st.settings.fanouts.size();
          block& b = job->blocks[layers - 1 - job->hop];
          b = assemble_block(job->frontier, counts, picks, st.scratch);
          job->frontier = b.src_nodes;
          if (++job->hop < layers) {
            run_hop(self, job);
          } else {
            run_features(self, job);
          }
        } catch (const std::exception& e) {
          ++st.rejected;
          job->rp.deliver(as_error(st, std::string("sampling: ") + e.what()));
        }
      },
      [self, job](const caf::error& err) {
        job->rp.deliver(as_error(self->state, "sampling request failed: " + caf::to_string(err)));
      });
}

void run_features(self_ptr self, std::shared_ptr<step_job> job) {
  auto& st = self->state;
  st.stages.add(stage::sample, job->step, job->began_us, stage_log::now_us());
  const auto& part = *st.part;
  const auto& book = *st.book;
  const int me = part.part;
  const auto& inputs = job->blocks.front().src_nodes;
  job->inputs.resize(static_cast<Eigen::Index>(inputs.size()), part.features.cols());
  std::map<int, std::vector<size_t>> remote;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const node_id g = inputs[i];
    const int owner = book.owner(g);
    if (owner != me) {
      remote[owner].push_back(i);
      continue;
    }
    const node_id l = book.local_id(g);
    job->inputs.row(static_cast<Eigen::Index>(i)) = part.features.row(l);
    st.degree[g] = static_cast<std::int32_t>(part.indptr[l + 1] - part.indptr[l]);
  }
  std::vector<shard_request> requests;
  std::vector<std::vector<size_t>> positions;
  for (auto& [owner, pos] : remote) {
    wire::row_request req{.h = {job->step, me}, .layer = 0, .nodes = {}};
    req.nodes.reserve(pos.size());
    for (size_t i : pos)
      req.nodes.push_back(inputs[i]);
    auto msg =
        pack(wire::kind::feature_request, wire::encode(st.ctx, req, wire::kind::feature_request));
    count(st, owner, msg);
    requests.push_back({st.view->shards[owner], std::move(msg)});
    positions.push_back(std::move(pos));
  }
  gather(
      self, shard_atom_v, std::move(requests), st.settings.timeout,
      [self, job, positions = std::move(positions),
       pulled_from = stage_log::now_us()](std::vector<wire_message>& replies) {
        auto& st = self->state;
        st.stages.add(stage::feature_pull, job->step, pulled_from, stage_log::now_us());
        try {
          const auto& inputs = job->blocks.front().src_nodes;
          for (size_t r = 0; r < replies.size(); ++r) {
            if (replies[r].kind != static_cast<std::uint16_t>(wire::kind::feature_response)) {
              throw wire::wire_error("expected a feature_response");
            }
            const auto res = wire::decode_row_block(st.ctx, replies[r].bytes);
            if (static_cast<size_t>(res.rows.rows()) != positions[r].size() ||
                res.rows.cols() != job->inputs.cols() ||
                res.degrees.size() != positions[r].size()) {
              throw wire::wire_error("feature_response has the wrong shape");
            }
            for (size_t k = 0; k < positions[r].size(); ++k) {
              job->inputs.row(static_cast<Eigen::Index>(positions[r][k])) =
                  res.rows.row(static_cast<Eigen::Index>(k));
              st.degree[inputs[positions[r][k]]] = res.degrees[k];
            }
          }
          finish_step(self, job);
        } catch (const std::exception& e) {
          ++st.rejected;
          job->rp.deliver(as_error(st, std::string("feature pull: ") + e.what()));
        }
      },
      [self, job](const caf::error& err) {
        job->rp.deliver(as_error(self->state, "feature request failed: " + caf::to_string(err)));
      });
}

void finish_step(self_ptr self, std::shared_ptr<step_job> job) {
  auto& st = self->state;
  stage_timer timer(st.stages, stage::compute, job->step);
  for (auto& b : job->blocks) {
    b.src_degree.resize(b.src_nodes.size());
    for (size_t i = 0; i < b.src_nodes.size(); ++i)
      b.src_degree[i] = st.degree[b.src_nodes[i]];
  }
  sampled_batch batch;
  batch.blocks = std::move(job->blocks);
  batch.output_nodes = job->seeds;
  std::vector<std::int32_t> labels(job->seeds.size());
  for (size_t i = 0; i < labels.size(); ++i)
    labels[i] = st.part->labels[st.book->local_id(job->seeds[i])];
  const step_stats s = st.replica->train_step(batch, job->inputs, labels,
                                              mix64(st.settings.seed ^ mix64(job->step)));
  wire::allreduce_chunk out{.h = {job->step, st.part->part},
                            .round = 0,
                            .offset = 0,
                            .values = st.replica->gradient(),
                            .loss = s.loss_sum,
                            .seeds = s.seeds,
                            .correct = s.correct};
  auto msg = pack(wire::kind::allreduce_chunk, wire::encode(st.ctx, out));
  count(st, kCoordinatorPart, msg);
  job->rp.deliver(std::move(msg));
}

// A step with no training nodes on this part still answers, with a zero gradient and no seeds,
// so that every worker takes part in every all-reduce.
wire_message empty_step(batch_state& st, std::uint64_t step) {
  wire::allreduce_chunk out{.h = {step, st.part->part}, .round = 0, .offset = 0, .values = {}};
  out.values.assign(st.replica->parameters().size(), 0.0f);
  auto msg = pack(wire::kind::allreduce_chunk, wire::encode(st.ctx, out));
  count(st, kCoordinatorPart, msg);
  return msg;
}

caf::result<wire_message> start_step(self_ptr self, const wire::control& c) {
  auto& st = self->state;
  if (st.train_global.empty()) return empty_step(st, c.h.step);
  if (st.batches_epoch != c.epoch) {
    st.batches = make_batches(st.train_global, st.settings.batch_size, st.settings.seed, c.epoch);
    st.batches_epoch = c.epoch;
  }
  auto job = std::make_shared<step_job>();
  job->step = c.h.step;
  // The coordinator sends the batch index in `value`; parts with fewer batches wrap around.
  const auto index = static_cast<size_t>(c.value);
  job->seeds = st.batches[index % st.batches.size()];
  job->frontier = job->seeds;
  job->blocks.resize(st.settings.fanouts.size());
  job->rp = self->make_response_promise<wire_message>();
  job->began_us = stage_log::now_us();
  run_hop(self, job);
  return job->rp;
}

// -- evaluation --

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
      const auto it = std::lower_bound(part.halo.begin(), part.halo.end(), part.src_global[e]);
      b.indices[e] = n + static_cast<std::int32_t>(it - part.halo.begin());
    }
  }
  b.src_degree.resize(b.src_nodes.size());
  for (node_id l = 0; l < n; ++l)
    b.src_degree[l] = static_cast<std::int32_t>(part.indptr[l + 1] - part.indptr[l]);
  return b;
}

const Matrix& layer_rows(const batch_state& st, int layer) {
  return layer == 0 ? st.part->features : st.eval_h.at(static_cast<size_t>(layer));
}

caf::result<wire_message> start_eval_layer(self_ptr self, const wire::control& c) {
  auto& st = self->state;
  const int layer = static_cast<int>(c.epoch);  // computes h^(layer) from h^(layer-1)
  if (layer < 1 || layer > st.replica->num_layers())
    return as_error(st, "evaluate: bad layer " + std::to_string(layer));
  if (layer > 1 && st.eval_h.size() < static_cast<size_t>(layer))
    return as_error(st, "evaluate: layers out of order");
  const auto& part = *st.part;
  std::map<int, std::vector<size_t>> remote;
  for (size_t i = 0; i < part.halo.size(); ++i)
    remote[part.halo_owner[i]].push_back(i);
  std::vector<batch_request> requests;
  std::vector<std::vector<size_t>> positions;
  for (auto& [owner, pos] : remote) {
    wire::row_request req{
        .h = {c.h.step, part.part}, .layer = static_cast<std::uint8_t>(layer - 1), .nodes = {}};
    for (size_t i : pos)
      req.nodes.push_back(part.halo[i]);
    auto msg = pack(wire::kind::halo_request, wire::encode(st.ctx, req, wire::kind::halo_request));
    count(st, owner, msg);
    requests.push_back({st.view->batchers[owner], std::move(msg)});
    positions.push_back(std::move(pos));
  }
  auto rp = self->make_response_promise<wire_message>();
  gather(
      self, batch_atom_v, std::move(requests), st.settings.timeout,
      [self, rp, layer, step = c.h.step,
       positions = std::move(positions)](std::vector<wire_message>& replies) mutable {
        auto& st = self->state;
        const auto& part = *st.part;
        try {
          const Matrix& own = layer_rows(st, layer - 1);
          const node_id n = part.num_owned();
          block b = partition_block(part);
          Matrix h_src(static_cast<Eigen::Index>(b.src_nodes.size()), own.cols());
          h_src.topRows(n) = own;
          for (size_t r = 0; r < replies.size(); ++r) {
            const auto res = wire::decode_row_block(st.ctx, replies[r].bytes);
            if (static_cast<size_t>(res.rows.rows()) != positions[r].size() ||
                res.rows.cols() != own.cols() || res.degrees.size() != positions[r].size()) {
              throw wire::wire_error("halo_response has the wrong shape");
            }
            for (size_t k = 0; k < positions[r].size(); ++k) {
              h_src.row(n + static_cast<Eigen::Index>(positions[r][k])) =
                  res.rows.row(static_cast<Eigen::Index>(k));
              b.src_degree[n + positions[r][k]] = res.degrees[k];
            }
          }
          if (st.eval_h.size() <= static_cast<size_t>(layer))
            st.eval_h.resize(static_cast<size_t>(layer) + 1);
          st.eval_h[static_cast<size_t>(layer)] = st.replica->layer_forward(layer - 1, b, h_src);
          wire::control out{.h = {step, part.part}, .what = wire::control_kind::result};
          if (layer == st.replica->num_layers()) {
            // Accuracy counts: correct and total for train, valid, test.
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
          }
          auto msg = pack(wire::kind::control, wire::encode(st.ctx, out));
          count(st, kCoordinatorPart, msg);
          rp.deliver(std::move(msg));
        } catch (const std::exception& e) {
          ++st.rejected;
          rp.deliver(as_error(st, std::string("evaluate: ") + e.what()));
        }
      },
      [self, rp](const caf::error& err) mutable {
        rp.deliver(as_error(self->state, "halo request failed: " + caf::to_string(err)));
      });
  return rp;
}

wire_message serve_halo(batch_state& st, const wire_message& m) {
  const auto req = wire::decode_row_request(st.ctx, m.bytes);
  if (req.layer >= std::max<size_t>(1, st.eval_h.size()))
    throw wire::wire_error("halo_request for a layer not computed yet");
  const Matrix& rows = layer_rows(st, req.layer);
  wire::row_block res;
  res.h = {req.h.step, st.part->part};
  res.rows.resize(static_cast<Eigen::Index>(req.nodes.size()), rows.cols());
  for (size_t i = 0; i < req.nodes.size(); ++i) {
    const node_id g = req.nodes[i];
    if (g < 0 || g >= st.book->num_nodes() || st.book->owner(g) != st.part->part) {
      throw wire::wire_error("halo_request names node " + std::to_string(g) + ", not owned here");
    }
    const node_id l = st.book->local_id(g);
    res.rows.row(static_cast<Eigen::Index>(i)) = rows.row(l);
    res.degrees.push_back(static_cast<std::int32_t>(st.part->indptr[l + 1] - st.part->indptr[l]));
  }
  auto msg = pack(wire::kind::halo_response, wire::encode(st.ctx, res, wire::kind::halo_response));
  count(st, req.h.sender, msg);
  return msg;
}

// Readiness probe. value 0: answer. value 1: first have every peer's batch actor and shard answer
// once, so that every route between nodes has carried a message before training starts (a
// message racing a connection being set up is retried here, with a short timeout, not lost in
// a step).
caf::result<wire_message> probe(self_ptr self, const wire::control& c) {
  auto& st = self->state;
  wire::control out{.h = {c.h.step, st.part->part}, .what = wire::control_kind::result};
  if (c.value == 2) {
    st.greeted.insert(c.h.sender);
  } else if (c.value == 3) {
    for (auto who : c.counts)
      out.counts.push_back(st.greeted.count(static_cast<int>(who)));
  }
  auto reply = pack(wire::kind::control, wire::encode(st.ctx, out));
  if (c.value != 1) return reply;
  const int me = st.part->part;
  const wire::control ping{.h = {c.h.step, me}, .what = wire::control_kind::epoch};
  const wire::control ask{.h = {c.h.step, me}, .what = wire::control_kind::result};
  std::vector<batch_request> to_batchers;
  std::vector<shard_request> to_shards;
  for (size_t p = 0; p < st.view->batchers.size(); ++p) {
    if (static_cast<int>(p) == me) continue;
    to_batchers.push_back(
        {st.view->batchers[p], pack(wire::kind::control, wire::encode(st.ctx, ping))});
    to_shards.push_back({st.view->shards[p], pack(wire::kind::control, wire::encode(st.ctx, ask))});
  }
  auto rp = self->make_response_promise<wire_message>();
  const auto timeout = std::chrono::milliseconds(2000);
  gather(
      self, batch_atom_v, std::move(to_batchers), timeout,
      [self, rp, reply, timeout,
       to_shards = std::move(to_shards)](std::vector<wire_message>&) mutable {
        gather(
            self, shard_atom_v, std::move(to_shards), timeout,
            [rp, reply](std::vector<wire_message>&) mutable { rp.deliver(reply); },
            [self, rp](const caf::error& e) mutable {
              rp.deliver(
                  as_error(self->state, "a peer's shard did not answer: " + caf::to_string(e)));
            });
      },
      [self, rp](const caf::error& e) mutable {
        rp.deliver(
            as_error(self->state, "a peer's batch actor did not answer: " + caf::to_string(e)));
      });
  return rp;
}

wire_message traffic_report(batch_state& st, std::uint64_t step) {
  wire::control out{.h = {step, st.part->part}, .what = wire::control_kind::result};
  out.counts = st.sent.to_report(st.rejected);
  // Then the work counters (the coordinator tells the two apart by length).
  const auto work = st.work.to_list();
  out.counts.insert(out.counts.end(), work.begin(), work.end());
  const auto& stage_us = st.stages.total_us();
  out.counts.insert(out.counts.end(), stage_us.begin(), stage_us.end());
  return pack(wire::kind::control, wire::encode(st.ctx, out));
}

}  // namespace

batch_actor::behavior_type batch_behavior(self_ptr self,
                                          std::shared_ptr<const graph_partition> part,
                                          std::shared_ptr<const partition_book> book,
                                          std::shared_ptr<const cluster_view> view,
                                          replica_config model, batch_settings settings,
                                          wire::context ctx) {
  auto& st = self->state;
  st.part = std::move(part);
  st.book = std::move(book);
  st.view = std::move(view);
  st.replica = std::make_unique<model_replica>(model);
  st.settings = std::move(settings);
  st.ctx = ctx;
  if (st.settings.trace) st.stages.keep_spans();
  for (node_id l : st.part->train)
    st.train_global.push_back(st.part->owned[l]);
  st.scratch.assign(static_cast<size_t>(st.book->num_nodes()), -1);
  st.degree.assign(static_cast<size_t>(st.book->num_nodes()), 0);
  return {
      [self](batch_atom, const wire_message& m) -> caf::result<wire_message> {
        auto& st = self->state;
        try {
          switch (static_cast<wire::kind>(m.kind)) {
            case wire::kind::control: {
              const auto c = wire::decode_control(st.ctx, m.bytes);
              // epoch with value 2 / 3: a peer's greeting, and the question whether one came
              // (connection set-up, see degnn node); every other probe needs the whole view.
              const bool greeting = c.what == wire::control_kind::epoch && c.value >= 2;
              const bool needs_peers = c.what == wire::control_kind::step ||
                                       c.what == wire::control_kind::evaluate ||
                                       c.what == wire::control_kind::refresh ||
                                       (c.what == wire::control_kind::epoch && !greeting);
              if (needs_peers && !st.view->ready.load(std::memory_order_acquire)) {
                return as_error(st, "not connected to every peer yet");
              }
              switch (c.what) {
                case wire::control_kind::epoch:
                  return probe(self, c);
                case wire::control_kind::shutdown: {
                  wire::control out{.h = {c.h.step, st.part->part},
                                    .what = wire::control_kind::result};
                  auto msg = pack(wire::kind::control, wire::encode(st.ctx, out));
                  self->quit();
                  return msg;
                }
                case wire::control_kind::step:
                  return st.settings.decentralized ? start_decentralized_step(self, c)
                                                   : start_step(self, c);
                case wire::control_kind::gradient: {
                  if (st.settings.decentralized) backward_served_steps(st, c.h.step);
                  wire::allreduce_chunk out{.h = {c.h.step, st.part->part},
                                            .values = st.replica->gradient()};
                  auto msg = pack(wire::kind::allreduce_chunk, wire::encode(st.ctx, out));
                  count(st, kCoordinatorPart, msg);
                  return msg;
                }
                case wire::control_kind::refresh:
                  return refresh_halo(self, c);
                case wire::control_kind::init_history:
                  return init_history(st, c);
                case wire::control_kind::evaluate:
                  return start_eval_layer(self, c);
                case wire::control_kind::result:
                  return traffic_report(st, c.h.step);
                case wire::control_kind::trace: {
                  wire::control out{.h = {c.h.step, st.part->part},
                                    .what = wire::control_kind::result,
                                    .text = st.stages.chrome_events(st.part->part)};
                  auto msg = pack(wire::kind::control, wire::encode(st.ctx, out));
                  count(st, kCoordinatorPart, msg);
                  return msg;
                }
                case wire::control_kind::checkpoint: {
                  wire::allreduce_chunk out{.h = {c.h.step, st.part->part},
                                            .values = st.replica->parameters()};
                  auto msg = pack(wire::kind::allreduce_chunk, wire::encode(st.ctx, out));
                  count(st, kCoordinatorPart, msg);
                  return msg;
                }
                default:
                  throw wire::wire_error("unexpected control message");
              }
            }
            case wire::kind::allreduce_chunk: {
              const auto avg = wire::decode_allreduce_chunk(st.ctx, m.bytes);
              // Only the coordinator's averaged gradient (round 1) is applied.
              if (avg.round != 1 || avg.h.sender != kCoordinatorPart)
                throw wire::wire_error(
                    "allreduce_chunk is not an averaged gradient of the coordinator");
              if (avg.values.size() != st.replica->parameters().size()) {
                throw wire::wire_error("averaged gradient has " +
                                       std::to_string(avg.values.size()) + " values, the model " +
                                       std::to_string(st.replica->parameters().size()));
              }
              st.replica->apply_gradient(avg.values);
              ++st.applies_done;
              // A decentralized step accumulates from pushes of several owners: start from zero.
              if (st.settings.decentralized) st.replica->model().zero_grad();
              wire::control out{.h = {avg.h.step, st.part->part},
                                .what = wire::control_kind::result};
              auto msg = pack(wire::kind::control, wire::encode(st.ctx, out));
              count(st, kCoordinatorPart, msg);
              if (st.settings.decentralized) run_ready_work(self);
              return msg;
            }
            case wire::kind::halo_request:
              return serve_halo(st, m);
            case wire::kind::computation_push:
              return serve_push(self, m);
            case wire::kind::gradient_return:
              return serve_gradient_return(st, m);
            case wire::kind::embedding_get:
              return serve_embedding_get(st, m);
            default:
              throw wire::wire_error(std::string("cannot serve a ") +
                                     wire::kind_name(static_cast<wire::kind>(m.kind)) + " message");
          }
        } catch (const std::exception& e) {
          ++st.rejected;
          return as_error(st, e.what());
        }
      },
  };
}

}  // namespace degnn
