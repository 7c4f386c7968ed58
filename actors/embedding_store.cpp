// Request handling of the embedding-store actor.
#include "actors/embedding_store.hpp"

#include "actors/reports.hpp"
#include "model/sparse_input.hpp"

namespace degnn {

namespace {

using self_ptr = store_actor::stateful_pointer<store_state>;

wire_message serve_get(store_state& st, const wire_message& m) {
  const auto req = wire::decode_embedding_get(st.ctx, m.bytes);
  const int level = req.layer;
  const bool features = level == 0;
  if (!features && !st.table->holds(level)) {
    throw wire::wire_error("embedding_get for level " + std::to_string(level) +
                           ", which holds no history");
  }
  if (!req.held.empty() && req.held.size() != req.nodes.size())
    throw wire::wire_error("embedding_get holds versions for some of its nodes only");
  wire::embedding_rows res{.h = {req.h.step, st.part->part}, .layer = req.layer};
  quantized_rows rows;
  rows.bits = features ? 32 : st.table->bits();
  rows.cols = features ? static_cast<int>(st.part->features.cols()) : st.table->width(level);
  const auto local = st.book->owned_local_ids(req.nodes, st.part->part, "embedding_get");
  // Compressed features go as rows of the part's matrix (versions are 0); the rest as codes.
  const bool compressed = features && st.part->sparse_features;
  std::vector<node_id> feature_rows;
  for (size_t i = 0; i < req.nodes.size(); ++i) {
    const node_id g = req.nodes[i];
    const node_id l = local[i];
    const std::uint64_t version = features ? 0 : st.table->version(level, l);
    if (!req.held.empty() && req.held[i] != wire::kNoVersion && version <= req.held[i])
      continue;  // the asker holds this version already
    if (compressed) {
      feature_rows.push_back(l);
    } else if (features) {
      const auto* row =
          reinterpret_cast<const std::uint8_t*>(st.part->dense_features().row(l).data());
      rows.codes.insert(rows.codes.end(), row, row + rows.cols * sizeof(float));
      rows.versions.push_back(0);
    } else {
      st.table->append_row(level, l, rows);
    }
    res.nodes.push_back(g);
  }
  if (compressed) {
    res.sparse =
        std::make_shared<const sparse_rows>(gather_rows(*st.part->sparse_features, feature_rows));
    rows.versions.assign(res.nodes.size(), 0);
  }
  res.bits = static_cast<std::uint8_t>(rows.bits);
  res.cols = static_cast<std::uint32_t>(rows.cols);
  res.versions = std::move(rows.versions);
  res.payload = std::move(rows.codes);
  res.row_min = std::move(rows.row_min);
  res.row_scale = std::move(rows.row_scale);
  auto msg = pack(wire::kind::embedding_rows, wire::encode(st.ctx, res));
  if (req.h.sender != st.part->part) st.sent.add(wire::kind::embedding_rows, msg.bytes.size());
  return msg;
}

// A put is one step's rows of one level; the first put of a level is the exact evaluation pass
// and names every owned node in order.
void serve_put(store_state& st, history_commit& c) {
  if (c.sender != st.part->part)
    throw wire::wire_error("put from partition " + std::to_string(c.sender) +
                           ": only the store's own shard commits history");
  const int level = c.level;
  if (level < 1 || level > st.table->num_levels())
    throw wire::wire_error("put of level " + std::to_string(level) +
                           ", which this store does not keep");
  const auto width = static_cast<size_t>(st.table->width(level));
  if (c.values.size() != c.nodes.size() * width)
    throw wire::wire_error("put has " + std::to_string(c.values.size()) + " values for " +
                           std::to_string(c.nodes.size()) + " rows of " + std::to_string(width));
  const Eigen::Map<const Matrix> values(c.values.data(), static_cast<Eigen::Index>(c.nodes.size()),
                                        static_cast<Eigen::Index>(width));
  std::vector<node_id> local(c.nodes.size());
  for (size_t i = 0; i < local.size(); ++i)
    local[i] = st.book->owned_local_id(c.nodes[i], st.part->part, "put");
  if (!st.table->holds(level)) {
    if (c.nodes != st.part->owned)
      throw wire::wire_error("the first put of level " + std::to_string(level) +
                             " must hold every owned node");
    st.table->init(level, std::move(c.values), c.version);  // taken over, not copied
  } else if (!local.empty()) {
    st.table->put(level, local, values, c.version);
  }
}

}  // namespace

store_actor::behavior_type store_behavior(self_ptr self,
                                          std::shared_ptr<const graph_partition> part,
                                          std::shared_ptr<const partition_book> book,
                                          store_settings settings, wire::context ctx) {
  auto& st = self->state;
  st.part = std::move(part);
  st.book = std::move(book);
  st.ctx = ctx;
  st.table = std::make_unique<embedding_table>(
      st.part->num_owned(), settings.widths, settings.bits,
      settings.stochastic_rounding ? rounding::stochastic : rounding::nearest);
  st.on_reject = std::move(settings.on_reject);
  // Every handler: validate, answer; a bad request is refused, counted, named and logged.
  auto refuse = [self](const std::string& why) {
    auto& st = self->state;
    ++st.rejected;
    const std::string me = "embedding store " + std::to_string(st.part->part);
    if (st.on_reject)
      st.on_reject(me + " refused a request of " + sender_name(self->current_sender()) + ": " +
                   why);
    return actor_error(actor_errc::rejected, me + ": " + why);
  };
  auto guarded = [refuse, self](auto&& serve, const wire_message& m,
                                bool members_only = true) -> caf::result<wire_message> {
    note_mailbox(self->state.mailbox, self->mailbox().size());
    if (auto r = self->state.guard.admit(self->current_sender(), m, members_only)) {
      refuse(r->why);
      return actor_error(
          r->code, "embedding store " + std::to_string(self->state.part->part) + ": " + r->why);
    }
    try {
      return serve(self->state, m);
    } catch (const std::exception& e) {
      return refuse(e.what());
    }
  };
  return {
      [self, guarded, refuse](get_atom, const wire_message& m) -> caf::result<wire_message> {
        if (auto why = outsider(self->current_sender(), self->node(), self->state.members);
            !why.empty())
          return refuse("refused " + why);
        if (!self->state.failed_commit.empty()) return refuse(self->state.failed_commit);
        return guarded(serve_get, m);
      },
      [self, refuse](put_atom, history_commit& c) -> caf::result<bool> {
        // Only the shard beside it commits, and never across nodes.
        if (auto why = outsider(self->current_sender(), self->node(), {}); !why.empty())
          return refuse("refused a put: " + why);
        try {
          serve_put(self->state, c);
          return true;
        } catch (const std::exception& e) {
          self->state.failed_commit = std::string("a history commit failed: ") + e.what();
          return refuse(e.what());
        }
      },
      [guarded](report_atom, const wire_message& m) {
        return guarded(
            [](store_state& st, const wire_message& m) {
              wire::decode_control(st.ctx, m.bytes);  // only a query of this cluster is answered
              return counters_report(st.part->part, st.ctx, st.sent, st.rejected, st.mailbox);
            },
            m, false);
      },
      [self](view_atom, const peer_view& v) {
        auto& st = self->state;
        if (!outsider(self->current_sender(), self->node(), {}).empty() || !st.members.empty() ||
            v.stores.size() != static_cast<size_t>(st.book->num_parts())) {
          ++st.rejected;
          return;
        }
        st.members = member_nodes(v);
      },
  };
}

}  // namespace degnn
