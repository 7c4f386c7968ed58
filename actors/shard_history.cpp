// The decentralized pipeline's history around the steps: the shard's initial history from the
// exact evaluation pass, put into its embedding store, and the halo cache's first fill (features
// once, then the history levels) from the other partitions' stores.
#include <map>
#include <memory>

#include "actors/shard_internal.hpp"
#include "model/halo_rank.hpp"
#include "model/quantizer.hpp"

namespace degnn::shard_detail {

Eigen::Index level_width(const shard_state& st, int level) {
  return level == 0 ? st.part->features.cols() : st.replica->model().layer(level - 1).out_dim();
}

void ensure_halo_levels(shard_state& st) {
  std::vector<Eigen::Index> widths;
  for (int k = 0; k < std::max(st.settings.top_level(), 1); ++k)
    widths.push_back(level_width(st, k));
  if (st.settings.halo_cache_bytes >= 0 && !st.halo.bounded()) {
    const auto& part = *st.part;
    std::vector<std::size_t> row_bytes{kept_feature_row_bytes(part)};
    for (size_t k = 1; k < widths.size(); ++k)
      row_bytes.push_back(kept_row_bytes(widths[k]));
    const auto scores = halo_read_scores(part, st.settings.fanouts, st.settings.top_level());
    auto keep =
        choose_resident(scores, row_bytes, static_cast<std::size_t>(st.settings.halo_cache_bytes));
    keep.resize(widths.size());
    st.halo.bound(std::move(keep));
  }
  st.halo.ensure_levels(widths, st.part->sparse_features != nullptr);
}

// Stores an owner's answer to `ask` in the halo cache; returns the number of rows received.
size_t store_answer(shard_state& st, const wire::embedding_get& ask,
                    const wire::embedding_rows& rows, std::uint64_t step) {
  if (rows.layer != ask.layer) throw wire::wire_error("embedding_rows for another level");
  if (rows.nodes.size() > ask.nodes.size()) {
    throw wire::wire_error("embedding_rows has " + std::to_string(rows.nodes.size()) + " rows, " +
                           std::to_string(ask.nodes.size()) + " asked");
  }
  if (static_cast<Eigen::Index>(rows.cols) != level_width(st, ask.layer))
    throw wire::wire_error("embedding_rows of the wrong width");
  if (rows.sparse) {
    st.halo.store_features(ask.nodes, rows.nodes, rows.sparse, step);
    return rows.nodes.size();
  }
  const Matrix values = quantizer(static_cast<int>(rows.cols), rows.bits)
                            .decode(rows.payload, rows.row_min, rows.row_scale);
  st.halo.store(ask.layer, ask.nodes, rows.nodes, rows.versions, values, step);
  return rows.nodes.size();
}

caf::result<wire_message> init_history(self_ptr self, const wire::control& c) {
  auto& st = self->state;
  const int top = st.settings.top_level();
  std::vector<history_commit> puts;
  for (int level = 1; level < top; ++level) {
    const auto l = static_cast<size_t>(level);
    if (st.eval_h.size() <= l || st.eval_h[l].rows() != st.part->num_owned())
      throw wire::wire_error("init_history needs an evaluation pass first");
    const Matrix& rows = st.eval_h[l];
    history_commit put{.sender = st.part->part, .level = level, .version = 0};
    put.nodes = st.part->owned;
    put.values.assign(rows.data(), rows.data() + rows.size());
    puts.push_back(std::move(put));
    st.eval_h[l] = Matrix();  // copied: the next evaluation computes it again
  }
  auto reply = result_message(st, c.h.step);
  count(st, kCoordinatorPart, reply);
  return put_then_reply(self, std::move(puts), std::move(reply), "history initialisation");
}

caf::result<wire_message> put_then_reply(self_ptr self, std::vector<history_commit> puts,
                                         wire_message reply, const char* what) {
  auto rp = self->make_response_promise<wire_message>();
  if (puts.empty()) {
    rp.deliver(std::move(reply));
    return rp;
  }
  struct pending {
    size_t left;
    bool failed = false;
    wire_message reply;
  };
  auto p = std::make_shared<pending>(pending{puts.size(), false, std::move(reply)});
  auto& st = self->state;
  const auto store = st.stores[static_cast<size_t>(st.part->part)];
  // In order, to the store beside this shard; the rows are moved, not copied.
  for (auto& put : puts) {
    self->request(store, st.settings.timeout, put_atom_v, std::move(put))
        .then(
            [p, rp](bool) mutable {
              if (!p->failed && --p->left == 0) rp.deliver(std::move(p->reply));
            },
            [self, p, rp, what](caf::error& err) mutable {
              if (p->failed) return;
              p->failed = true;
              rp.deliver(as_error(self->state, actor_errc::peer_failed,
                                  std::string(what) + " failed: " + caf::to_string(err)));
            });
  }
  return rp;
}

void commit_history(self_ptr self, std::vector<history_commit> puts) {
  auto& st = self->state;
  const auto store = st.stores[static_cast<size_t>(st.part->part)];
  for (auto& put : puts) {
    const auto step = put.version;
    self->request(store, st.settings.timeout, put_atom_v, std::move(put))
        .then([](bool) {},
              [self, step](caf::error& err) {
                auto& st = self->state;
                if (st.commit_failure.empty()) {
                  st.commit_failure = "the history commit of version " + std::to_string(step) +
                                      " failed: " + caf::to_string(err);
                }
              });
  }
}

caf::result<wire_message> refresh_halo(self_ptr self, const wire::control& c) {
  auto& st = self->state;
  const auto& part = *st.part;
  ensure_halo_levels(st);
  // The halo's features, unless the set-up pass brought them with its first layer. No history
  // rows: a step pulls the rows it reads that it never received, so rows no step reads never
  // travel.
  std::vector<wire_request<store_actor, get_atom>> requests;
  std::vector<wire::embedding_get> asks;
  std::vector<int> owners;  ///< per request
  // A bounded cache asks only the rows it keeps; a step pulls the others it reads.
  std::vector<node_id> kept;
  for (size_t i : st.halo.resident_rows(0))
    kept.push_back(part.halo[i]);
  const owner_groups groups = split_groups(group_by_owner(*st.book, kept, part.part),
                                           rows_per_message(st.settings, feature_row_bytes(part)));
  for (size_t r = 0; r < groups.owners.size() && !st.halo_features_loaded; ++r) {
    const int q = groups.owners[r];
    wire::embedding_get req{.h = {c.h.step, part.part}, .layer = 0};
    for (size_t i : groups.positions[r])
      req.nodes.push_back(kept[i]);
    auto msg = pack(wire::kind::embedding_get, wire::encode(st.ctx, req));
    count(st, q, msg);
    requests.push_back({st.stores[static_cast<size_t>(q)], std::move(msg), static_cast<int>(q)});
    asks.push_back(std::move(req));
    owners.push_back(q);
  }
  // A few chunks out at a time, each stored as it comes: the whole halo's rows are never held
  // twice (a 10M-node graph's are gigabytes per shard).
  auto rp = self->make_response_promise<wire_message>();
  gather_stream stream{
      .window = 4,
      .each = [self, asks = std::move(asks), step = c.h.step](std::size_t r, wire_message& reply) {
        auto& st = self->state;
        try {
          const bool sparse = st.part->sparse_features != nullptr;
          store_answer(st, asks[r], wire::decode_embedding_rows(st.ctx, reply.bytes, sparse), step);
        } catch (const std::exception&) {
          ++st.rejected;
          throw;
        }
      }};
  gather(
      self, get_atom_v, std::move(requests), st.settings.timeout,
      [self, rp, step = c.h.step](std::vector<wire_message>&) mutable {
        auto& st = self->state;
        st.halo_features_loaded = true;
        st.history_ready = true;
        auto msg = result_message(st, step);
        count(st, kCoordinatorPart, msg);
        rp.deliver(std::move(msg));
      },
      [self, rp, owners = std::move(owners)](std::size_t r, const caf::error& err) mutable {
        rp.deliver(as_error(self->state, actor_errc::peer_failed,
                            "halo refresh from partition " + std::to_string(owners[r]) +
                                " failed: " + caf::to_string(err)));
      },
      std::move(stream));
  return rp;
}

}  // namespace degnn::shard_detail
