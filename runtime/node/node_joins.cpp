// The seed's side of joining: forming the cluster once enough nodes joined, and taking a join
// request (before the view forms, or as the replacement node 0 waits for after a loss).
#include <algorithm>

#include "runtime/node/node_state.hpp"
#include "runtime/train/cluster_identity.hpp"
#include "serialization/wire_membership.hpp"

namespace degnn::node_detail {

// The seed forms the cluster: every waiting joiner gets the same view.
void form(node_pointer self) {
  auto& st = self->state;
  std::vector<std::uint64_t> key_of_rank;
  wire::membership_view view = st.seed->joins.close(1, key_of_rank);
  view.secret = random_hex(32);
  view.resume_step = st.seed->resume_step;
  st.view_bytes = wire::encode(st.ctx, view);
  std::string names;
  for (const auto& m : view.members)
    names += (m.rank ? ", " : "") + std::to_string(m.rank) + "=" + m.name;
  if (st.log)
    st.log("formed view 1 with " + std::to_string(view.members.size()) + " nodes (" + names + ")");
  for (auto& [key, pj] : st.joins)
    pj.reply.deliver(st.view_bytes);
  st.joins.clear();
  for (auto& w : st.formed_waiters)
    w.deliver(st.view_bytes);
  st.formed_waiters.clear();
}

caf::result<std::vector<char>> take_join(node_pointer self, const std::vector<char>& b) {
  auto& st = self->state;
  auto refuse = [&](const std::string& why) -> caf::result<std::vector<char>> {
    if (st.log) st.log("refused a join from " + sender_name(self->current_sender()) + ": " + why);
    return actor_error(actor_errc::rejected, why);
  };
  if (!st.seed) return refuse("this node is not the seed");
  wire::join_request j;
  try {
    wire::context small = st.ctx;
    small.max_bytes = 64 << 10;  // identity lines and a certificate: never more
    j = wire::decode_join_request(small, b);
  } catch (const wire::wire_error& e) {
    return refuse(e.what());
  }
  const auto sender = self->current_sender();
  if (!sender) return refuse("an anonymous sender");
  if (st.seed->tls) {
    // CAF's TLS layer checked that the peer holds some certificate of the CA; the proof binds
    // this request to that certificate's name and to this job.
    std::string certified;
    const std::string why =
        check_proof(self, *st.seed->tls, {j.certificate, j.signature, j.token_mac}, certified);
    if (!why.empty()) return refuse("joiner '" + j.name + "': " + why);
    // Operator certificates are for the console, not for serving partitions.
    if (certified.rfind("node-", 0) != 0)
      return refuse("joiner '" + j.name + "' holds a certificate of '" + certified +
                    "', not of a node (node-K)");
    if (certified != j.name) {
      return refuse("joiner calls itself '" + j.name + "' but its certificate is made out to '" +
                    certified + "'");
    }
  }
  // The settings only now: a joiner without a proof learns nothing of them.
  const std::string diff =
      cluster_identity{st.identity}.difference(j.identity, "the seed", "joiner '" + j.name + "'");
  if (!diff.empty()) return refuse("settings that must agree differ: " + diff);
  // A seed that cannot start the run (its checkpoint is damaged) tells a proven joiner why.
  if (!st.seed->refusal.empty()) return refuse(st.seed->refusal);
  const std::uint64_t key = ++st.next_key;
  // A formed cluster takes a node only as the replacement node 0 waits for after a loss.
  if (st.seed->joins.closed() && st.replacing) {
    const auto& taken = st.taken;
    for (const std::string& mine : {j.name, j.host + ":" + std::to_string(j.port)})
      if (std::find(taken.begin(), taken.end(), mine) != taken.end())
        return refuse("replacement '" + j.name + "': " + mine + " is a live member's");
    st.accepted.insert(sender->node());
    if (st.log)
      st.log("replacement " + j.name + " at " + j.host + ":" + std::to_string(j.port) + " joined");
    auto rp = self->make_response_promise<std::vector<char>>();
    st.joins[key] = {rp, caf::actor_cast<caf::actor_addr>(sender)};
    st.replacing->deliver(b);
    st.replacing.reset();
    return rp;
  }
  if (auto why = st.seed->joins.add(key, {j.host, j.port, j.rank_hint, j.name}); !why.empty())
    return refuse("joiner '" + j.name + "': " + why);
  auto& rv = st.seed->joins;
  if (st.log) {
    const std::string where = j.host + ":" + std::to_string(j.port);
    st.log(j.name + (j.name == where ? "" : " at " + where) + " joined (" +
           std::to_string(rv.size()) + " nodes)");
  }
  st.accepted.insert(sender->node());
  auto rp = self->make_response_promise<std::vector<char>>();
  st.joins[key] = {rp, caf::actor_cast<caf::actor_addr>(sender)};
  self->monitor(sender);
  if (rv.full()) {
    form(self);
  } else if (rv.enough() && !st.last_call_armed) {
    st.last_call_armed = true;
    self->delayed_send(self, st.seed->last_call, last_call_atom_v, st.local_key);
  }
  return rp;
}

// A fresh challenge for the sender to sign (joiners and operators with TLS).
caf::result<std::vector<char>> give_challenge(node_pointer self) {
  auto& st = self->state;
  const auto sender = self->current_sender();
  const bool gives = (st.seed && st.seed->tls) || (st.console && st.console->tls);
  if (!gives || !sender) return actor_error(actor_errc::rejected, "this node gives no challenges");
  if (st.challenges.size() >= 256) st.challenges.erase(st.challenges.begin());
  auto& c = st.challenges[caf::actor_cast<caf::actor_addr>(sender)];
  c = random_challenge();
  return std::vector<char>(c.begin(), c.end());
}

// The seed's runtime waits for the formed view (at once if it is formed).
caf::result<std::vector<char>> await_formed_view(node_pointer self, const std::string& key) {
  auto& st = self->state;
  if (!from_this_process(self, key) || !st.seed)
    return actor_error(actor_errc::rejected, "asked for the view outside the seed's process");
  if (!st.view_bytes.empty()) return st.view_bytes;
  auto rp = self->make_response_promise<std::vector<char>>();
  st.formed_waiters.push_back(rp);
  return rp;
}

// The seed's last call for joiners has come: form with the nodes that joined, if enough.
void take_last_call(node_pointer self, const std::string& key) {
  auto& st = self->state;
  if (!from_this_process(self, key) || !st.seed || st.seed->joins.closed()) return;
  st.last_call_armed = false;
  // A joiner may have gone away meanwhile: form only with enough nodes, else wait on.
  if (st.seed->joins.enough()) form(self);
}

}  // namespace degnn::node_detail
