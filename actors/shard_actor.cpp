// Request handling of the shard actor.
#include "actors/shard_actor.hpp"

#include "model/sampler.hpp"

namespace degnn {

namespace {

// The node ids of a request must all be owned here: a wrong one is a routing bug or a hostile
// peer, never something to answer with another partition's data.
node_id local_row(const graph_partition& part, const partition_book& book, node_id g) {
  if (g < 0 || g >= book.num_nodes() || book.owner(g) != part.part) {
    throw wire::wire_error("request names node " + std::to_string(g) + ", which partition " +
                           std::to_string(part.part) + " does not own");
  }
  return book.local_id(g);
}

}  // namespace

wire_message serve_shard_request(const graph_partition& part, const partition_book& book,
                                 const wire::context& ctx, const wire_message& request) {
  switch (static_cast<wire::kind>(request.kind)) {
    case wire::kind::sample_request: {
      const auto req = wire::decode_sample_request(ctx, request.bytes);
      wire::sample_response res;
      res.h = {req.h.step, part.part};
      res.counts.reserve(req.nodes.size());
      res.degrees.reserve(req.nodes.size());
      std::vector<node_id> picked;
      for (node_id g : req.nodes) {
        const auto row = part.in_neighbors_global(local_row(part, book, g));
        // Keyed like the single-process sampler, so a node's pick is the same wherever it is made.
        row_rng rng(row_seed(req.seed, req.h.step, req.layer, g));
        picked.resize(row.size());
        const auto n = pick_uniform(row, req.fanout, rng, picked.data());
        res.counts.push_back(n);
        res.degrees.push_back(static_cast<std::int32_t>(row.size()));
        res.neighbors.insert(res.neighbors.end(), picked.begin(), picked.begin() + n);
      }
      return {static_cast<std::uint16_t>(wire::kind::sample_response), wire::encode(ctx, res)};
    }
    case wire::kind::feature_request: {
      const auto req = wire::decode_row_request(ctx, request.bytes);
      wire::row_block res;
      res.h = {req.h.step, part.part};
      res.rows.resize(static_cast<Eigen::Index>(req.nodes.size()), part.features.cols());
      res.degrees.reserve(req.nodes.size());
      for (size_t i = 0; i < req.nodes.size(); ++i) {
        const node_id l = local_row(part, book, req.nodes[i]);
        res.rows.row(static_cast<Eigen::Index>(i)) = part.features.row(l);
        res.degrees.push_back(static_cast<std::int32_t>(part.indptr[l + 1] - part.indptr[l]));
      }
      return {static_cast<std::uint16_t>(wire::kind::feature_response),
              wire::encode(ctx, res, wire::kind::feature_response)};
    }
    default:
      throw wire::wire_error("shard " + std::to_string(part.part) + " cannot serve a " +
                             wire::kind_name(static_cast<wire::kind>(request.kind)) + " message");
  }
}

shard_actor::behavior_type shard_behavior(shard_actor::stateful_pointer<shard_state> self,
                                          std::shared_ptr<const graph_partition> part,
                                          std::shared_ptr<const partition_book> book,
                                          wire::context ctx) {
  self->state.part = std::move(part);
  self->state.book = std::move(book);
  self->state.ctx = ctx;
  return {
      [self](shard_atom, const wire_message& request) -> caf::result<wire_message> {
        auto& st = self->state;
        try {
          if (static_cast<wire::kind>(request.kind) == wire::kind::control) {
            // Traffic report (see wire::traffic::to_report).
            wire::control c = wire::decode_control(st.ctx, request.bytes);
            wire::control out{.h = {c.h.step, st.part->part}, .what = wire::control_kind::result};
            out.counts = st.sent.to_report(st.rejected);
            return wire_message{static_cast<std::uint16_t>(wire::kind::control),
                                wire::encode(st.ctx, out)};
          }
          wire_message reply = serve_shard_request(*st.part, *st.book, st.ctx, request);
          st.sent.add(static_cast<wire::kind>(reply.kind), reply.bytes.size());
          return reply;
        } catch (const std::exception& e) {
          ++st.rejected;
          return caf::make_error(
              caf::sec::invalid_argument,
              std::string("shard ") + std::to_string(st.part->part) + ": " + e.what());
        }
      },
  };
}

}  // namespace degnn
