// What the batch actor and the shard do alike: the error that names the worker, the count of what
// it sends off its node, and their `trace` and `view` handlers. A worker's state has part, book,
// ctx, stages, sent, rejected, members, has_view and a static `role` ("shard", "batch actor").
#pragma once

#include <string>

#include "actors/messages.hpp"
#include "actors/reports.hpp"
#include "actors/worker_settings.hpp"

namespace degnn::worker_detail {

template <class State>
caf::error as_error(const State& st, actor_errc code, const std::string& what) {
  return actor_error(code,
                     std::string(State::role) + " " + std::to_string(st.part->part) + ": " + what);
}

/// Counts a message this worker sends, when it leaves the node.
template <class State>
void count(State& st, int to_part, const wire_message& m) {
  if (to_part != st.part->part) st.sent.add(static_cast<wire::kind>(m.kind), m.bytes.size());
}

/// trace (a control -> this worker's stage spans as Chrome trace events); refused from an actor
/// outside the view.
template <class Self>
caf::result<wire_message> answer_trace_request(Self self, const wire_message& m) {
  auto& st = self->state;
  if (auto why = outsider(self->current_sender(), self->node(), st.members); !why.empty()) {
    ++st.rejected;
    return as_error(st, actor_errc::rejected, "refused " + why);
  }
  try {
    auto msg = answer_trace(st.part->part, st.ctx, st.stages, m);
    count(st, kCoordinatorPart, msg);
    return msg;
  } catch (const wire::wire_error& e) {
    ++st.rejected;
    return as_error(st, actor_errc::rejected, e.what());
  }
}

/// view (every partition's workers, from this process only): take(state, view) keeps the handles
/// this worker talks to; a view from elsewhere, or one that does not fit the partition book, is
/// refused and counted.
template <class Self, class Take>
void take_view(Self self, const peer_view& v, Take take) {
  auto& st = self->state;
  if (!outsider(self->current_sender(), self->node(), {}).empty() ||
      !acceptable_view(v, st.has_view, static_cast<size_t>(st.book->num_parts()))) {
    ++st.rejected;
    return;
  }
  take(st, v);
  st.members = member_nodes(v);
  st.has_view = true;
}

}  // namespace degnn::worker_detail
