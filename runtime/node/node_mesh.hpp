// One node's connections to the other members and every partition's worker handles: formed once
// the view is known, the handles taken again after every view change (a recovery respawns every
// worker). Blocking calls of the runtime thread, each bounded by a deadline; failures throw.
#pragma once

#include <caf/all.hpp>

#include <string>
#include <vector>

#include "runtime/node/node_actor.hpp"
#include "runtime/node/node_membership.hpp"

namespace degnn {

class node_mesh {
 public:
  /// `node`: this process's node actor; `local_key`: what this process's runtime shows it.
  node_mesh(caf::actor_system& sys, caf::scoped_actor& self, node_actor node, std::string local_key,
            peer_door& door, int parts);

  /// Connects to every other member of `members` (this node greets each lower rank; each higher
  /// rank greets this node), takes every member's workers and hands them to this node's actor.
  /// `seed_node`: a joiner's connection to the seed (rank 0), reused; `kill_token`: given to node
  /// 0 alone in this node's greeting.
  void form(const membership& members, const std::vector<std::string>& identity,
            const node_actor& seed_node, const std::string& kill_token, deadline until);

  /// After a view change (same connections, new workers): every member's workers of the new
  /// view, handed to this node's actor.
  void rewire(const membership& members, deadline until);

  /// Node 0: waits until every member serving partitions reached every other member's actors
  /// once; the training-set size of each partition.
  std::vector<std::size_t> wait_ready(deadline until);

  const cluster_handles& handles() const { return handles_; }
  const node_actor& node_of(size_t rank) const { return nodes_[rank]; }
  /// Whether rank p's node actor is known down to this node's (its process went away).
  bool gone(size_t p) const;

 private:
  [[noreturn]] void fail(const std::string& what) const;
  template <class Ask>
  void ask_until_ready(size_t p, const char* what, deadline until, Ask&& ask);
  void take_workers(size_t p, deadline until);
  /// Rank p connected to this node (it greeted): its node actor, then its workers.
  void await_greeting(size_t p, deadline until);
  void hand_view();

  caf::actor_system& sys_;
  caf::scoped_actor& self_;
  node_actor node_;
  std::string local_key_;
  peer_door& door_;
  membership members_;
  std::string me_;
  std::vector<node_actor> nodes_;
  cluster_handles handles_;
};

}  // namespace degnn
