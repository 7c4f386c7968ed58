// What the batch actor and the shard do alike: the error that names the worker, the count of what
// it sends off its node, and their `trace` and `view` handlers. A worker's state has part, book,
// ctx, stages, sent, rejected, members, has_view and a static `role` ("shard", "batch actor").
#pragma once

#include <memory>
#include <string>
#include <type_traits>

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

/// The start every worker makes: its partition, book, replica, settings, numbered sender and
/// context (the caller adds its own).
template <class State>
void init_worker(State& st, std::shared_ptr<const graph_partition> part,
                 std::shared_ptr<const partition_book> book, const replica_config& model,
                 worker_settings settings, const wire::context& ctx) {
  st.part = std::move(part);
  st.book = std::move(book);
  st.replica = make_replica(model, settings);
  st.settings = std::move(settings);
  st.link = link_sender(st.part->part, st.settings.faults, st.settings.fault_counts);
  st.ctx = ctx;
}

/// Every request handler: check the sender (members_only: an actor of the view; needs_view: the
/// view has come, else not_ready), the message guard and the kind, then serve; a request that
/// fails is refused with an error naming the worker, logged and counted.
template <class Self, class Serve>
caf::result<wire_message> serve_guarded(Self self, wire::kind expected, bool members_only,
                                        bool needs_view, const wire_message& m, Serve&& serve) {
  auto& st = self->state;
  using state_type = std::decay_t<decltype(st)>;
  note_mailbox(st.mailbox, self->mailbox().size());
  auto refuse = [&](const std::string& why) {
    ++st.rejected;
    log_refusal(st.settings.on_reject,
                std::string(state_type::role) + " " + std::to_string(st.part->part), m,
                self->current_sender(), why);
    return as_error(st, actor_errc::rejected, why);
  };
  if (members_only) {
    if (auto why = outsider(self->current_sender(), self->node(), st.members); !why.empty())
      return refuse("refused " + why);
    if (needs_view && !st.has_view)
      return as_error(st, actor_errc::not_ready, "not connected to every peer yet");
  }
  if (auto r = st.guard.admit(self->current_sender(), m, members_only)) {
    refuse(r->why);
    return as_error(st, r->code, r->why);
  }
  try {
    expect_kind(m, expected);
    return serve();
  } catch (const std::exception& e) {
    return refuse(e.what());
  }
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

/// The behaviour's trace handler (answer_trace_request), the same in every worker.
template <class Self>
auto trace_handler(Self self) {
  return [self](trace_atom, const wire_message& m) -> caf::result<wire_message> {
    return answer_trace_request(self, m);
  };
}

/// The behaviour's view handler (take_view with the worker's own `take`).
template <class Self, class Take>
auto view_handler(Self self, Take take) {
  return [self, take](view_atom, const peer_view& v) { take_view(self, v, take); };
}

}  // namespace degnn::worker_detail
