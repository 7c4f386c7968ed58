// The batch owner's centralized (DistDGL-style) step: sample the batch hop by hop, asking each
// remote shard once per hop, pull the remote input features, train the replica on the batch and
// return its gradient for the all-reduce.
#include <map>

#include "actors/batch_internal.hpp"
#include "model/block_builder.hpp"
#include "model/halo_rank.hpp"
#include "model/sampler.hpp"
#include "model/sparse_input.hpp"

namespace degnn::batch_detail {

namespace {

// One mini-batch in flight: blocks fill in from the seeds outwards, one hop per round trip.
struct step_job {
  std::uint64_t step = 0;
  std::vector<node_id> seeds;
  std::vector<block> blocks;
  std::vector<node_id> frontier;
  size_t hop = 0;
  Matrix inputs;
  /// A run on compressed feature rows: where each input row is (this part's rows or a pulled
  /// answer, kept in `pulled` until the rows are assembled into sparse_inputs).
  std::vector<sparse_row_ref> input_refs;
  std::vector<std::shared_ptr<const sparse_rows>> pulled;
  sparse_rows sparse_inputs;
  promise rp;
  std::int64_t began_us = 0;  ///< when the step started (sampling)
  bool ring = false;          ///< the workers reduce the gradient among themselves (Control.ring)
};

void finish_step(self_ptr self, std::shared_ptr<step_job> job);
void run_features(self_ptr self, std::shared_ptr<step_job> job);

// The feature cache a run with settings.halo_cache_bytes >= 0 keeps (null otherwise): the halo
// rows this worker's sampler reaches most, at any hop (each sampled node's row is an input).
halo_cache* feature_cache(batch_state& st) {
  if (st.settings.halo_cache_bytes < 0) return nullptr;
  if (!st.feature_cache) {
    const auto& part = *st.part;
    const auto levels = static_cast<int>(st.settings.fanouts.size());
    std::vector<double> reads(part.halo.size(), 0.0);
    for (const auto& level : halo_read_scores(part, st.settings.fanouts, levels))
      for (size_t i = 0; i < reads.size(); ++i)
        reads[i] += level[i];
    const std::size_t row_bytes[] = {kept_feature_row_bytes(part)};
    auto cache = std::make_unique<halo_cache>(part.halo);
    cache->bound(choose_resident({std::move(reads)}, row_bytes,
                                 static_cast<std::size_t>(st.settings.halo_cache_bytes)));
    const Eigen::Index widths[] = {part.features.cols()};
    cache->ensure_levels(widths, part.sparse_features != nullptr);
    st.feature_cache = std::move(cache);
  }
  return st.feature_cache.get();
}

// Inputs whose rows the cache holds are filled from it and leave their owner's group; groups
// left empty go.
void take_cached_rows(batch_state& st, const halo_cache& cache, step_job& job,
                      owner_groups& groups) {
  const auto& inputs = job.blocks.front().src_nodes;
  const bool sparse = st.part->sparse_features != nullptr;
  owner_groups left;
  left.own = std::move(groups.own);
  for (size_t r = 0; r < groups.owners.size(); ++r) {
    std::erase_if(groups.positions[r], [&](size_t i) {
      const std::int64_t h = cache.find(inputs[i]);
      if (h < 0 || !cache.holds(0, static_cast<size_t>(h))) return false;
      if (sparse)
        job.input_refs[i] = cache.kept_feature(static_cast<size_t>(h));
      else
        job.inputs.row(static_cast<Eigen::Index>(i)) = cache.kept_row(0, static_cast<size_t>(h));
      st.degree[inputs[i]] = st.part->halo_degree[static_cast<size_t>(h)];
      return true;
    });
    if (groups.positions[r].empty()) continue;
    left.owners.push_back(groups.owners[r]);
    left.positions.push_back(std::move(groups.positions[r]));
  }
  groups = std::move(left);
}

// The pulled rows (res answers `nodes`, in order) that the cache keeps and does not hold yet.
void keep_pulled_rows(halo_cache& cache, std::span<const node_id> nodes, const wire::row_block& res,
                      std::uint64_t step) {
  std::vector<node_id> keep;
  std::vector<Eigen::Index> rows;
  for (size_t k = 0; k < nodes.size(); ++k) {
    const std::int64_t h = cache.find(nodes[k]);
    if (h < 0 || !cache.resident(0, static_cast<size_t>(h)) ||
        cache.holds(0, static_cast<size_t>(h)))
      continue;
    keep.push_back(nodes[k]);
    rows.push_back(static_cast<Eigen::Index>(k));
  }
  if (keep.empty()) return;
  if (res.sparse) {
    std::vector<sparse_row_ref> refs;
    for (Eigen::Index r : rows)
      refs.push_back({res.sparse.get(), r});
    cache.store_features(
        keep, keep, std::make_shared<const sparse_rows>(assemble_rows(refs, res.sparse->cols())),
        step);
    return;
  }
  Matrix kept(static_cast<Eigen::Index>(rows.size()), res.rows.cols());
  for (size_t j = 0; j < rows.size(); ++j)
    kept.row(static_cast<Eigen::Index>(j)) = res.rows.row(rows[j]);
  const std::vector<std::uint64_t> versions(keep.size(), 0);
  cache.store(0, keep, keep, versions, kept, step);
}

void run_hop(self_ptr self, std::shared_ptr<step_job> job) {
  auto& st = self->state;
  const auto& part = *st.part;
  const auto& book = *st.book;
  const int me = part.part;
  const int fanout = st.settings.fanouts[job->hop];
  const auto& frontier = job->frontier;
  auto rows = std::make_shared<std::vector<std::vector<node_id>>>(frontier.size());
  owner_groups groups = group_by_owner(book, frontier, me);
  // The owned rows here, with the skeleton every sampler runs; the others at their owners.
  std::vector<node_id> own(groups.own.size());
  for (size_t j = 0; j < own.size(); ++j)
    own[j] = frontier[groups.own[j]];
  auto row_of = [&](size_t j) { return part.in_neighbors_global(book.local_id(own[j])); };
  row_picks picked;
  sample_rows(own, row_of, fanout, st.settings.seed, job->step, job->hop, picked);
  for (size_t j = 0, at = 0; j < own.size(); ++j) {
    const auto n = static_cast<size_t>(picked.counts[j]);
    (*rows)[groups.own[j]].assign(picked.picks.begin() + static_cast<std::ptrdiff_t>(at),
                                  picked.picks.begin() + static_cast<std::ptrdiff_t>(at + n));
    at += n;
    st.degree[own[j]] = static_cast<std::int32_t>(row_of(j).size());
  }
  std::vector<wire_request<shard_actor, sample_atom>> requests;
  std::vector<std::vector<size_t>> positions;
  for (size_t r = 0; r < groups.owners.size(); ++r) {
    const int owner = groups.owners[r];
    auto& pos = groups.positions[r];
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
    requests.push_back({st.shards[static_cast<size_t>(owner)], std::move(msg), owner});
    positions.push_back(std::move(pos));
  }
  gather(
      self, sample_atom_v, std::move(requests), st.settings.timeout,
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
          job->rp.deliver(as_error(st, actor_errc::rejected, std::string("sampling: ") + e.what()));
        }
      },
      [self, job, owners = groups.owners](std::size_t r, const caf::error& err) {
        job->rp.deliver(as_error(self->state, actor_errc::peer_failed,
                                 "sampling request to partition " + std::to_string(owners[r]) +
                                     " failed: " + caf::to_string(err)));
      });
}

void run_features(self_ptr self, std::shared_ptr<step_job> job) {
  auto& st = self->state;
  st.stages.add(stage::sample, job->step, job->began_us, stage_log::now_us());
  const auto& part = *st.part;
  const auto& book = *st.book;
  const int me = part.part;
  const auto& inputs = job->blocks.front().src_nodes;
  const bool sparse = part.sparse_features != nullptr;
  if (sparse) {
    job->input_refs.resize(inputs.size());
  } else {
    job->inputs.resize(static_cast<Eigen::Index>(inputs.size()), part.features.cols());
  }
  owner_groups groups = group_by_owner(book, inputs, me);
  halo_cache* cache = feature_cache(st);
  if (cache) take_cached_rows(st, *cache, *job, groups);
  groups = split_groups(std::move(groups), rows_per_message(st.settings, feature_row_bytes(part)));
  const auto own = static_cast<std::int64_t>(groups.own.size());
  const auto own_rows = part.dense_features();
#pragma omp parallel for schedule(static) if (own >= 4096)
  for (std::int64_t j = 0; j < own; ++j) {
    const size_t i = groups.own[static_cast<size_t>(j)];
    const node_id l = book.local_id(inputs[i]);
    if (sparse) {
      job->input_refs[i] = {part.sparse_features.get(), l};
    } else {
      job->inputs.row(static_cast<Eigen::Index>(i)) = own_rows.row(l);
    }
    st.degree[inputs[i]] = part.in_degree(l);
  }
  std::vector<wire_request<shard_actor, feature_atom>> requests;
  std::vector<std::vector<size_t>> positions;
  for (size_t r = 0; r < groups.owners.size(); ++r) {
    const int owner = groups.owners[r];
    auto& pos = groups.positions[r];
    wire::row_request req{.h = {job->step, me}, .layer = 0, .nodes = {}};
    req.nodes.reserve(pos.size());
    for (size_t i : pos)
      req.nodes.push_back(inputs[i]);
    auto msg =
        pack(wire::kind::feature_request, wire::encode(st.ctx, req, wire::kind::feature_request));
    count(st, owner, msg);
    requests.push_back({st.shards[static_cast<size_t>(owner)], std::move(msg), owner});
    positions.push_back(std::move(pos));
  }
  gather(
      self, feature_atom_v, std::move(requests), st.settings.timeout,
      [self, job, positions = std::move(positions),
       pulled_from = stage_log::now_us()](std::vector<wire_message>& replies) {
        auto& st = self->state;
        st.stages.add(stage::feature_pull, job->step, pulled_from, stage_log::now_us());
        try {
          const auto& inputs = job->blocks.front().src_nodes;
          const auto& part = *st.part;
          const bool sparse = part.sparse_features != nullptr;
          for (size_t r = 0; r < replies.size(); ++r) {
            if (replies[r].kind != static_cast<std::uint16_t>(wire::kind::feature_response)) {
              throw wire::wire_error("expected a feature_response");
            }
            const auto res = wire::decode_row_block(st.ctx, replies[r].bytes, 32, sparse);
            const auto rows = sparse ? res.sparse->rows() : res.rows.rows();
            const auto cols = sparse ? res.sparse->cols() : res.rows.cols();
            if (static_cast<size_t>(rows) != positions[r].size() || cols != part.features.cols() ||
                res.degrees.size() != positions[r].size()) {
              throw wire::wire_error("feature_response has the wrong shape");
            }
            for (size_t k = 0; k < positions[r].size(); ++k) {
              const auto row = static_cast<Eigen::Index>(k);
              if (sparse) {
                job->input_refs[positions[r][k]] = {res.sparse.get(), row};
              } else {
                job->inputs.row(static_cast<Eigen::Index>(positions[r][k])) = res.rows.row(row);
              }
              st.degree[inputs[positions[r][k]]] = res.degrees[k];
            }
            if (sparse) job->pulled.push_back(res.sparse);
            if (st.feature_cache) {
              std::vector<node_id> nodes;
              for (size_t i : positions[r])
                nodes.push_back(inputs[i]);
              keep_pulled_rows(*st.feature_cache, nodes, res, job->step);
            }
          }
          if (sparse) {
            job->sparse_inputs = assemble_rows(job->input_refs, part.features.cols());
            job->input_refs.clear();
            job->pulled.clear();
          }
          finish_step(self, job);
        } catch (const std::exception& e) {
          ++st.rejected;
          job->rp.deliver(
              as_error(st, actor_errc::rejected, std::string("feature pull: ") + e.what()));
        }
      },
      [self, job, owners = groups.owners](std::size_t r, const caf::error& err) {
        job->rp.deliver(as_error(self->state, actor_errc::peer_failed,
                                 "feature request to partition " + std::to_string(owners[r]) +
                                     " failed: " + caf::to_string(err)));
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
  const std::uint64_t dropout_seed = step_dropout_seed(st.settings.seed, job->step);
  const step_stats s = st.part->sparse_features
                           ? st.replica->train_step(batch, job->sparse_inputs, labels, dropout_seed)
                           : st.replica->train_step(batch, job->inputs, labels, dropout_seed);
  wire::allreduce_chunk out{.h = {job->step, st.part->part},
                            .round = 0,
                            .values = st.replica->gradient(),
                            .loss = s.loss_sum,
                            .seeds = s.seeds,
                            .correct = s.correct};
  timer.end();
  answer(self, job->rp, std::move(out), job->ring);
}

}  // namespace

// Star: the gradient goes to the coordinator with the step's statistics. Ring: the workers
// reduce it among themselves, apply the average, and answer with the statistics only.
void answer(self_ptr self, promise rp, wire::allreduce_chunk out, bool ring) {
  auto& st = self->state;
  if (!ring) {
    auto msg = pack(wire::kind::allreduce_chunk, wire::encode(st.ctx, out));
    count(st, kCoordinatorPart, msg);
    rp.deliver(std::move(msg));
    return;
  }
  const std::uint64_t step = out.h.step;
  const bool contributes = out.seeds > 0;
  auto gradient = std::move(out.values);
  out.values.clear();
  auto fail = [rp](const caf::error& err) mutable { rp.deliver(err); };
  ring_allreduce(
      self, step, std::move(gradient), contributes,
      [self, rp, out, step, fail](std::vector<float> avg) mutable {
        apply_average(
            self, step, std::move(avg), std::nullopt,
            [self, rp, out](wire_message) mutable {
              auto& st = self->state;
              auto msg = pack(wire::kind::allreduce_chunk, wire::encode(st.ctx, out));
              count(st, kCoordinatorPart, msg);
              rp.deliver(std::move(msg));
            },
            fail);
      },
      fail);
}

caf::result<wire_message> start_centralized_step(self_ptr self, const wire::control& c) {
  auto& st = self->state;
  // A step with no training nodes on this part still answers, with a zero gradient and no
  // seeds, so that every worker takes part in every all-reduce.
  if (st.train_global.empty()) {
    wire::allreduce_chunk out{.h = {c.h.step, st.part->part}, .round = 0, .values = {}};
    out.values.assign(st.replica->parameters().size(), 0.0f);
    auto rp = self->make_response_promise<wire_message>();
    answer(self, rp, std::move(out), c.ring);
    return rp;
  }
  auto job = std::make_shared<step_job>();
  job->ring = c.ring;
  job->step = c.h.step;
  job->seeds = seeds_of(st, c.epoch, batch_index(c));
  job->frontier = job->seeds;
  job->blocks.resize(st.settings.fanouts.size());
  job->rp = self->make_response_promise<wire_message>();
  job->began_us = stage_log::now_us();
  run_hop(self, job);
  return job->rp;
}

}  // namespace degnn::batch_detail
