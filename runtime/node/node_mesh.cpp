// Forming the mesh of node actors and taking every partition's worker handles.
#include "runtime/node/node_mesh.hpp"

#include <algorithm>
#include <thread>

namespace degnn {

namespace {

// How long one question to a member may go unanswered before it is asked again: short, so that
// a member lost meanwhile (a request to a closed connection is never answered) is noticed soon.
constexpr std::chrono::seconds kShortWait{2};

}  // namespace

node_mesh::node_mesh(caf::actor_system& sys, caf::scoped_actor& self, node_actor node,
                     std::string local_key, peer_door& door, int parts)
    : sys_(sys),
      self_(self),
      node_(std::move(node)),
      local_key_(std::move(local_key)),
      door_(door) {
  handles_.batchers.resize(static_cast<size_t>(parts));
  handles_.shards.resize(static_cast<size_t>(parts));
  handles_.stores.resize(static_cast<size_t>(parts));
}

void node_mesh::fail(const std::string& what) const {
  throw std::runtime_error(me_ + ": " + what);
}

// Whether rank p's node actor is known down (it greeted this node, and its connection closed):
// a member lost while the view changes is not waited for until the deadline.
bool node_mesh::gone(size_t p) const {
  bool down = false;
  self_->request(node_, std::chrono::seconds(10), gone_atom_v, local_key_)
      .receive(
          [&](std::vector<std::int32_t>& g) {
            down = std::find(g.begin(), g.end(), static_cast<std::int32_t>(p)) != g.end();
          },
          [](caf::error&) {});
  return down;
}

// Asks `what` of rank p until it stops answering not_ready (it may still load its partitions,
// or still be moving to a new view).
template <class Ask>
void node_mesh::ask_until_ready(size_t p, const char* what, deadline until, Ask&& ask) {
  while (true) {
    if (gone(p)) fail(std::string(what) + " node " + std::to_string(p) + ": it is gone");
    const caf::error e = ask();
    if (!e) return;
    // Not ready yet, or no answer within the short wait (asked again unless it is gone).
    const bool not_ready = (e.category() == caf::detail::error_factory<actor_errc>::category &&
                            e.code() == static_cast<std::uint8_t>(actor_errc::not_ready)) ||
                           e == caf::sec::request_timeout;
    if (!not_ready || std::chrono::steady_clock::now() > until)
      fail(std::string(what) + " node " + std::to_string(p) + " failed: " + sys_.render(e));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// Rank p's worker actors of the current view, whose handles come in the reply of its node actor.
void node_mesh::take_workers(size_t p, deadline until) {
  const auto& theirs = members_.view.members[p].partitions;
  if (theirs.empty()) return;  // a lost member: its partitions moved to others
  ask_until_ready(p, "asking for the actors of", until, [&] {
    caf::error failure;
    self_->request(nodes_[p], kShortWait, workers_atom_v, members_.view.id)
        .receive(
            [&](peer_view& w) {
              if (w.batchers.size() != theirs.size() || w.shards.size() != theirs.size() ||
                  w.stores.size() != theirs.size()) {
                failure = actor_error(actor_errc::rejected, "it named the wrong number of actors");
                return;
              }
              for (size_t i = 0; i < theirs.size(); ++i) {
                const auto part = static_cast<size_t>(theirs[i]);
                handles_.batchers[part] = caf::actor_cast<batch_actor>(w.batchers[i]);
                handles_.shards[part] = caf::actor_cast<shard_actor>(w.shards[i]);
                handles_.stores[part] = caf::actor_cast<store_actor>(w.stores[i]);
              }
            },
            [&](caf::error& e) { failure = std::move(e); });
    return failure;
  });
}

// Through the node actor, which answers node 0's readiness question only from now on.
void node_mesh::hand_view() {
  self_->request(node_, std::chrono::seconds(10), view_atom_v, handles_.view(), local_key_)
      .receive([](bool) {}, [&](caf::error& e) { fail("the view: " + sys_.render(e)); });
}

void node_mesh::form(const membership& members, const std::vector<std::string>& identity,
                     const node_actor& seed_node, const std::string& kill_token, deadline until) {
  members_ = members;
  const int id = members.rank;
  const size_t n = members.view.members.size();
  me_ = "node " + std::to_string(id);
  nodes_.assign(n, node_actor{});
  nodes_[static_cast<size_t>(id)] = node_;
  // Node K connects to every p < K and greets it with its own node actor; p reaches K through
  // that actor over the same connection. One connection per pair of nodes, made by the higher
  // rank: CAF 0.17's BASP can leave a route that drops every message when two nodes connect to
  // each other (seen about once in ten 4-node runs when both did), and with TLS a second
  // connection between two nodes never carries a reply.
  auto connect_to = [&](size_t p) {
    const auto& m = members.view.members[p];
    // One connection per pair of nodes: a joiner already reached the seed (rank 0). With TLS a
    // member's name in the view is its certificate's.
    const std::string expected = door_.tls() && m.name.rfind("node-", 0) == 0 ? m.name : "";
    nodes_[p] = p == 0 && seed_node
                    ? seed_node
                    : connect<node_actor>(sys_, door_, {m.host, m.port}, until, "node", expected);
    ask_until_ready(p, "greeting", until, [&] {
      caf::error failure;
      self_
          ->request(nodes_[p], std::chrono::seconds(10), greet_atom_v,
                    node_greeting{static_cast<std::int32_t>(id), identity,
                                  caf::actor_cast<caf::strong_actor_ptr>(node_),
                                  members.view.secret, p == 0 ? kill_token : ""})
          .receive([](std::int32_t) {}, [&](caf::error& e) { failure = std::move(e); });
      return failure;
    });
    // Its loss is known at once too (the node actor watches the ranks that greeted it).
    self_
        ->request(node_, std::chrono::seconds(10), watch_atom_v, static_cast<std::int32_t>(p),
                  caf::actor_cast<caf::strong_actor_ptr>(nodes_[p]), local_key_)
        .receive([](bool) {}, [&](caf::error& e) { fail("watching: " + sys_.render(e)); });
    take_workers(p, until);
  };
  take_workers(static_cast<size_t>(id), until);
  // A replacement (a view after the first) joins a running mesh: it connects to every member,
  // each of which waits for its greeting.
  const bool replacement = members.view.id > 1;
  for (size_t p = 0; p < n; ++p) {
    if (p == static_cast<size_t>(id) || members.view.members[p].lost) continue;
    if (p < static_cast<size_t>(id) || replacement)
      connect_to(p);
    else
      await_greeting(p, until);
  }
  hand_view();
}

void node_mesh::await_greeting(size_t p, deadline until) {
  caf::strong_actor_ptr theirs;
  while (true) {
    std::string refused;
    self_->request(node_, std::chrono::seconds(10), greeted_atom_v, static_cast<std::int32_t>(p))
        .receive([&](node_greeting& g) { theirs = g.node; },
                 [&](caf::error& e) { refused = sys_.render(e); });
    if (!refused.empty()) fail("refused node " + std::to_string(p) + ": " + refused);
    if (theirs) break;
    if (std::chrono::steady_clock::now() > until)
      fail("node " + std::to_string(p) + " never connected (see --connect-timeout)");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  nodes_[p] = caf::actor_cast<node_actor>(theirs);
  take_workers(p, until);
}

void node_mesh::rewire(const membership& members, deadline until) {
  members_ = members;
  const auto& replaced = members.view.replaced;
  for (size_t p = 0; p < nodes_.size(); ++p) {
    if (std::find(replaced.begin(), replaced.end(), static_cast<std::int32_t>(p)) != replaced.end())
      await_greeting(p, until);  // a new node at that rank
    else
      take_workers(p, until);
  }
  hand_view();
}

std::vector<std::size_t> node_mesh::wait_ready(deadline until) {
  const peer_view all = handles_.view();
  std::vector<std::size_t> train_sizes(handles_.batchers.size());
  for (size_t p = 0; p < nodes_.size(); ++p) {
    const auto& theirs = members_.view.members[p].partitions;
    if (theirs.empty()) continue;
    while (true) {
      bool ok = false;
      self_->request(nodes_[p], kShortWait, ready_atom_v, all)
          .receive(
              [&](std::vector<std::int64_t>& num_train) {
                if (num_train.size() != theirs.size()) return;
                for (size_t i = 0; i < theirs.size(); ++i)
                  train_sizes[static_cast<size_t>(theirs[i])] =
                      static_cast<std::size_t>(num_train[i]);
                ok = true;
              },
              [&](caf::error&) {});
      if (ok) break;
      if (gone(p)) fail("node " + std::to_string(p) + " is gone");
      if (std::chrono::steady_clock::now() > until)
        fail("node " + std::to_string(p) + " never became ready");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  return train_sizes;
}

}  // namespace degnn
