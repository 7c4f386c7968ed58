// Views after a loss as the node actor takes them: the coordinator's announcement on every member
// (node 0's, or its successor's after node 0 was lost), and on
// the seed the replacements it waits for and places.
#include <algorithm>

#include "runtime/node/node_recovery.hpp"
#include "runtime/node/node_state.hpp"
#include "serialization/wire_membership.hpp"

namespace degnn::node_detail {

namespace {

// A rank a new node serves in `view` greets again (with its new node actor).
void forget_replaced(node_state& st, const wire::membership_view& view) {
  for (std::int32_t r : view.replaced) {
    st.greeted.erase(r);
    st.refused.erase(r);
    st.gone.erase(r);
    st.watched.erase(r);
  }
}

// Whether the sender serves, in the current view, a partition that `view`'s coordinator serves:
// the current coordinator (it serves partition 0 in both), or, when `view` counts that one lost,
// the member it names coordinator (its lowest live rank, the successor). The caller checked the
// view's secret.
bool from_coordinator_of(node_pointer self, const wire::membership_view& view) {
  const auto& st = self->state;
  const auto sender = self->current_sender();
  const int coord = view.coordinator();
  if (!sender || coord < 0) return false;
  for (std::int32_t part : view.members[static_cast<size_t>(coord)].partitions) {
    const auto p = static_cast<size_t>(part);
    if (p < st.part_nodes.size() && st.part_nodes[p] == sender->node()) return true;
  }
  return false;
}

}  // namespace

// A newer view the coordinator (or its successor) announced after losing a member, kept for this
// node's runtime.
caf::result<bool> take_new_view(node_pointer self, const std::vector<char>& bytes,
                                const std::string& secret) {
  auto& st = self->state;
  if (!st.role || secret != st.role->view_secret)
    return actor_error(actor_errc::rejected, "a new view is taken from the coordinator only");
  wire::membership_view view;
  try {
    view = wire::decode_membership_view(st.ctx, bytes);
  } catch (const wire::wire_error& e) {
    return actor_error(actor_errc::rejected, std::string("a malformed view: ") + e.what());
  }
  if (view.id == st.announced_view && bytes == st.announced_bytes) return true;  // asked again
  // A coordinator of an earlier view that announces one now was left behind (paused or cut off
  // while the others went on): it learns so, and stops.
  const std::uint64_t newest = std::max(st.role->view_id, st.announced_view);
  if (view.id <= newest && view.secret == st.role->view_secret)
    return actor_error(actor_errc::superseded, st.me() + " is in view " + std::to_string(newest) +
                                                   " already, not before view " +
                                                   std::to_string(view.id));
  if (!from_coordinator_of(self, view))
    return actor_error(actor_errc::rejected, "a new view is taken from the coordinator only");
  if (view.members.size() != static_cast<size_t>(st.role->nodes))
    return actor_error(actor_errc::rejected, "a view of another cluster size");
  if (view.id <= st.role->view_id || view.secret != st.role->view_secret)
    return actor_error(actor_errc::rejected, "view " + std::to_string(view.id) +
                                                 " is not after view " +
                                                 std::to_string(st.role->view_id));
  st.recovery = bytes;
  st.announced_view = view.id;
  st.announced_bytes = bytes;
  forget_replaced(st, view);
  if (st.log)
    st.log("view " + std::to_string(view.id) + " announced by node " +
           std::to_string(view.coordinator()));
  return true;
}

// The seed's runtime waits for a replacement to join (a lost member's rank).
caf::result<std::vector<char>> await_replacement(node_pointer self, std::vector<std::string>& taken,
                                                 const std::string& key) {
  auto& st = self->state;
  if (!from_this_process(self, key) || !st.seed)
    return actor_error(actor_errc::rejected, "asked outside the seed's process");
  st.taken = std::move(taken);
  if (st.replacing) st.replacing->deliver(actor_error(actor_errc::rejected, "asked again"));
  st.replacing = self->make_response_promise<std::vector<char>>();
  return *st.replacing;
}

// The seed gives the replacements the view they take part in.
caf::result<bool> place_replacement(node_pointer self, const std::vector<char>& bytes,
                                    const std::string& key) {
  auto& st = self->state;
  if (!from_this_process(self, key) || !st.seed)
    return actor_error(actor_errc::rejected, "asked outside the seed's process");
  wire::membership_view view;
  try {
    view = wire::decode_membership_view(st.ctx, bytes);
  } catch (const wire::wire_error& e) {
    return actor_error(actor_errc::rejected, e.what());
  }
  forget_replaced(st, view);
  for (auto& [k, pj] : st.joins)
    pj.reply.deliver(bytes);
  st.joins.clear();
  return true;
}

// The newer view kept for this node's runtime (taken once; empty if none).
caf::result<std::vector<char>> give_recovery(node_pointer self, const std::string& key) {
  if (!from_this_process(self, key))
    return actor_error(actor_errc::rejected, "asked outside this node's process");
  return std::exchange(self->state.recovery, {});
}

// The coordinator's bye at the end of the run (with why it stopped, if it did).
caf::result<bool> take_bye(node_pointer self, const std::string& secret, std::string& failure) {
  auto& st = self->state;
  if (!from_node0(self, secret) && !from_this_process(self, secret))
    return actor_error(actor_errc::rejected, "bye is taken from the coordinator only");
  // The node ends when the coordinator has gone, not now: closing a connection before it
  // said bye to every node could drop its routes to the others (CAF 0.17 with TLS).
  st.farewell = true;
  st.farewell_failure = std::move(failure);
  return true;
}

// Whether the coordinator said bye, to this node's runtime: {} if not, else {why it stopped}.
caf::result<std::vector<std::string>> give_farewell(node_pointer self, const std::string& key) {
  if (!from_this_process(self, key))
    return actor_error(actor_errc::rejected, "asked outside this node's process");
  const auto& st = self->state;
  if (!st.farewell) return std::vector<std::string>{};
  return std::vector<std::string>{st.farewell_failure};
}

// The run's evaluated epochs from the coordinator, kept for a successor.
void take_validation(node_pointer self, std::vector<validation_point>& points,
                     const std::string& secret) {
  if (from_node0(self, secret)) self->state.validation = std::move(points);
}

// The evaluated epochs this node keeps, to its runtime.
caf::result<std::vector<validation_point>> give_validation(node_pointer self,
                                                           const std::string& key) {
  if (!from_this_process(self, key))
    return actor_error(actor_errc::rejected, "asked outside this node's process");
  return self->state.validation;
}

}  // namespace degnn::node_detail
