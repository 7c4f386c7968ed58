// The shard actor's behaviour: the centralized pulls, the averaged gradient, parameters and
// counters here; evaluation and the decentralized step in their own files.
#include "actors/shard_actor.hpp"

#include "actors/reports.hpp"
#include "actors/shard_internal.hpp"
#include "model/sampler.hpp"
#include "model/sparse_input.hpp"

namespace degnn {

namespace {

using namespace shard_detail;

wire_message report(shard_state& st, const wire_message& m) {
  wire::decode_control(st.ctx, m.bytes);  // only a query of this cluster is answered
  return counters_report(st.part->part, st.ctx, st.sent, st.rejected, st.mailbox, &st.work,
                         &st.stages);
}

// The averaged gradient, handed on by this worker's batch actor.
wire_message apply(self_ptr self, const wire_message& m) {
  auto& st = self->state;
  const auto avg = decode_average(st.ctx, m, st.replica->parameters().size(), st.part->part);
  st.replica->apply_gradient(avg.values);
  // A decentralized step accumulates from pushes of several owners: start from zero.
  if (st.settings.decentralized) st.replica->model().zero_grad();
  st.weights.applied_one();
  return result_message(st, avg.h.step);
}

wire_message parameters(shard_state& st, const wire_message& m) {
  const auto c = wire::decode_control(st.ctx, m.bytes);
  wire::allreduce_chunk out{.h = {c.h.step, st.part->part}, .values = st.replica->parameters()};
  return pack(wire::kind::allreduce_chunk, wire::encode(st.ctx, out));
}

// The centralized pulls; throws std::invalid_argument for a node the request may not name.
wire_message serve_pull(const graph_partition& part, const partition_book& book,
                        const wire::context& ctx, const wire_message& request) {
  switch (static_cast<wire::kind>(request.kind)) {
    case wire::kind::sample_request: {
      const auto req = wire::decode_sample_request(ctx, request.bytes);
      wire::sample_response res;
      res.h = {req.h.step, part.part};
      const std::vector<node_id> local =
          book.owned_local_ids(req.nodes, part.part, "sample_request");
      auto row_of = [&](size_t i) { return part.in_neighbors_global(local[i]); };
      // Keyed like the single-process sampler, so a node's pick is the same wherever it is made.
      row_picks picked;
      sample_rows(req.nodes, row_of, req.fanout, req.seed, req.h.step, req.layer, picked);
      res.counts = std::move(picked.counts);
      res.neighbors = std::move(picked.picks);
      res.degrees.resize(local.size());
      for (size_t i = 0; i < local.size(); ++i)
        res.degrees[i] = static_cast<std::int32_t>(row_of(i).size());
      return {static_cast<std::uint16_t>(wire::kind::sample_response), wire::encode(ctx, res)};
    }
    case wire::kind::feature_request: {
      const auto req = wire::decode_row_request(ctx, request.bytes);
      wire::row_block res;
      res.h = {req.h.step, part.part};
      shard_detail::put_rows(part, nullptr,
                             book.owned_local_ids(req.nodes, part.part, "feature_request"), res);
      return {static_cast<std::uint16_t>(wire::kind::feature_response),
              wire::encode(ctx, res, wire::kind::feature_response)};
    }
    default:
      throw wire::wire_error("shard " + std::to_string(part.part) + " cannot serve a " +
                             wire::kind_name(static_cast<wire::kind>(request.kind)) + " message");
  }
}

}  // namespace

namespace shard_detail {

void put_rows(const graph_partition& part, const Matrix* rows, std::span<const node_id> local,
              wire::row_block& res) {
  if (!rows && part.sparse_features) {
    res.sparse = std::make_shared<const sparse_rows>(gather_rows(*part.sparse_features, local));
  } else {
    const Eigen::Map<const Matrix> from =
        rows ? Eigen::Map<const Matrix>(rows->data(), rows->rows(), rows->cols())
             : part.dense_features();
    res.rows.resize(static_cast<Eigen::Index>(local.size()), from.cols());
    for (size_t i = 0; i < local.size(); ++i)
      res.rows.row(static_cast<Eigen::Index>(i)) = from.row(local[i]);
  }
  res.degrees.reserve(local.size());
  for (const node_id l : local)
    res.degrees.push_back(part.in_degree(l));
}

}  // namespace shard_detail

wire_message serve_shard_request(const graph_partition& part, const partition_book& book,
                                 const wire::context& ctx, const wire_message& request) {
  try {
    return serve_pull(part, book, ctx, request);
  } catch (const std::invalid_argument& e) {
    throw wire::wire_error(e.what());  // a node the request may not name
  }
}

// A sample or feature request of another worker, answered from this partition; counted.
caf::result<wire_message> serve_graph_request(shard_state& st, const wire_message& m) {
  auto reply = serve_shard_request(*st.part, *st.book, st.ctx, m);
  st.sent.add(static_cast<wire::kind>(reply.kind), reply.bytes.size());
  return reply;
}

// The console's staleness, from the coordinator. Staleness 0 would ask every halo row again each
// step; more than a million steps is no bound at all.
caf::result<wire_message> take_settings(shard_state& st, const wire::control& c) {
  if (c.what != wire::control_kind::settings || c.counts.size() != 1 || c.counts[0] < 1 ||
      c.counts[0] > 1'000'000)
    throw wire::wire_error("settings carry one staleness in [1, 1000000]");
  st.settings.staleness = static_cast<int>(c.counts[0]);
  auto reply = result_message(st, c.h.step);
  count(st, kCoordinatorPart, reply);
  return reply;
}

shard_actor::behavior_type shard_behavior(self_ptr self,
                                          std::shared_ptr<const graph_partition> part,
                                          std::shared_ptr<const partition_book> book,
                                          replica_config model, worker_settings settings,
                                          wire::context ctx) {
  auto& st = self->state;
  worker_detail::init_worker(st, std::move(part), std::move(book), model, std::move(settings), ctx);
  st.halo = halo_cache(st.part->halo);
  if (st.settings.shared_parts) st.halo.share_features(*st.settings.shared_parts, *st.book);
  if (st.settings.trace) st.stages.keep_spans();
  st.scratch.assign(static_cast<size_t>(st.book->num_nodes()), -1);
  auto guarded = [self](wire::kind expected, const wire_message& m, auto&& serve,
                        bool members_only = true) -> caf::result<wire_message> {
    return worker_detail::serve_guarded(self, expected, members_only, false, m, serve);
  };
  // Work that needs the peers waits for the view (see messages.hpp).
  auto with_peers = [self, guarded](wire::kind expected, const wire_message& m,
                                    auto&& serve) -> caf::result<wire_message> {
    if (!self->state.has_view) {
      if (!outsider(self->current_sender(), self->node(), {}).empty())
        return guarded(expected, m, serve);  // refused and counted there
      return as_error(self->state, actor_errc::not_ready, "no peer view yet");
    }
    if (!self->state.commit_failure.empty())
      return as_error(self->state, actor_errc::peer_failed, self->state.commit_failure);
    return guarded(expected, m, serve);
  };
  auto control = [self](const wire_message& m) {
    return wire::decode_control(self->state.ctx, m.bytes);
  };
  return {
      [self, guarded](sample_atom, const wire_message& m) {
        return guarded(wire::kind::sample_request, m,
                       [&] { return serve_graph_request(self->state, m); });
      },
      [self, guarded](feature_atom, const wire_message& m) {
        return guarded(wire::kind::feature_request, m,
                       [&] { return serve_graph_request(self->state, m); });
      },
      [self, guarded](halo_atom, const wire_message& m) {
        return guarded(wire::kind::halo_request, m,
                       [&]() -> caf::result<wire_message> { return serve_halo(self->state, m); });
      },
      [self, with_peers, control](eval_atom, const wire_message& m) {
        return with_peers(wire::kind::control, m, [&] { return evaluate_layer(self, control(m)); });
      },
      [self, with_peers](push_atom, const wire_message& m) {
        if (m.kind == static_cast<std::uint16_t>(wire::kind::attention_push))
          return with_peers(wire::kind::attention_push, m, [&]() -> caf::result<wire_message> {
            return serve_attention_push(self->state, m);
          });
        return with_peers(wire::kind::computation_push, m, [&] { return serve_push(self, m); });
      },
      [self, guarded](grad_ret_atom, const wire_message& m) {
        if (m.kind == static_cast<std::uint16_t>(wire::kind::attention_return))
          return guarded(wire::kind::attention_return, m, [&]() -> caf::result<wire_message> {
            return serve_attention_return(self->state, m);
          });
        return guarded(wire::kind::gradient_return, m, [&]() -> caf::result<wire_message> {
          return serve_gradient_return(self->state, m);
        });
      },
      [self, with_peers, control](gradient_atom, const wire_message& m) {
        return with_peers(wire::kind::control, m, [&] { return gradient_phase(self, control(m)); });
      },
      [self, with_peers, control](init_hist_atom, const wire_message& m) {
        return with_peers(wire::kind::control, m, [&] { return init_history(self, control(m)); });
      },
      [self, with_peers, control](refresh_atom, const wire_message& m) {
        return with_peers(wire::kind::control, m, [&] { return refresh_halo(self, control(m)); });
      },
      [self, guarded](apply_atom, const wire_message& m) {
        return guarded(wire::kind::allreduce_chunk, m,
                       [&]() -> caf::result<wire_message> { return apply(self, m); });
      },
      [self, guarded](params_atom, const wire_message& m) {
        return guarded(wire::kind::control, m,
                       [&]() -> caf::result<wire_message> { return parameters(self->state, m); });
      },
      [self, with_peers, control](settings_atom, const wire_message& m) {
        return with_peers(wire::kind::control, m,
                          [&] { return take_settings(self->state, control(m)); });
      },
      [self, guarded](report_atom, const wire_message& m) {
        // Counters only, and asked of every node's actors before they all have their view.
        return guarded(
            wire::kind::control, m,
            [&]() -> caf::result<wire_message> { return report(self->state, m); }, false);
      },
      worker_detail::trace_handler(self),
      worker_detail::view_handler(self,
                                  [](shard_state& st, const peer_view& v) {
                                    st.shards = handles_of<shard_actor>(v.shards);
                                    st.stores = handles_of<store_actor>(v.stores);
                                  }),
  };
}

}  // namespace degnn
