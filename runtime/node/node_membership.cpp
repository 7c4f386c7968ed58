// Static views, forming a cluster on the seed, joining one through it.
#include "runtime/node/node_membership.hpp"

#include <regex>

namespace degnn {

namespace {

std::chrono::milliseconds left(deadline until) {
  const auto d = std::chrono::duration_cast<std::chrono::milliseconds>(
      until - std::chrono::steady_clock::now());
  return std::max(d, std::chrono::milliseconds(1));
}

}  // namespace

wire::membership_view static_view(const std::vector<endpoint>& peers) {
  wire::membership_view v;
  v.id = 1;
  for (size_t p = 0; p < peers.size(); ++p) {
    const auto r = static_cast<std::int32_t>(p);
    v.members.push_back({r, peers[p].host, peers[p].port, "node " + std::to_string(p), {r}});
  }
  return v;
}

membership await_formation(caf::scoped_actor& self, const node_actor& node,
                           const wire::context& ctx, deadline until, const std::string& local_key) {
  std::vector<char> bytes;
  std::string failure;
  self->request(node, left(until), formed_atom_v, local_key)
      .receive([&](std::vector<char>& b) { bytes = std::move(b); },
               [&](caf::error& e) { failure = caf::to_string(e); });
  if (bytes.empty()) {
    throw std::runtime_error(
        "the cluster did not form before --join-timeout (too few nodes joined; the seed's log "
        "lists who did): " +
        failure);
  }
  return {wire::decode_membership_view(ctx, bytes), 0};
}

membership join_cluster(caf::actor_system& sys, caf::scoped_actor& self, const node_actor& node,
                        const endpoint& seed, wire::join_request me,
                        const std::optional<tls_files>& tls, const wire::context& ctx,
                        deadline until) {
  std::vector<char> bytes;
  std::string failure;
  if (tls) {
    std::vector<char> challenge;
    self->request(node, left(until), challenge_atom_v)
        .receive([&](std::vector<char>& c) { challenge = std::move(c); },
                 [&](caf::error& e) { failure = sys.render(e); });
    if (challenge.empty())
      throw std::runtime_error("the seed at " + seed.str() + " gave no challenge: " + failure);
    join_proof proof = prove(*tls, std::vector<std::uint8_t>(challenge.begin(), challenge.end()));
    me.certificate = std::move(proof.certificate);
    me.signature = std::move(proof.signature);
    me.token_mac = std::move(proof.token_mac);
  }
  self->request(node, left(until), join_atom_v, wire::encode(ctx, me))
      .receive([&](std::vector<char>& b) { bytes = std::move(b); },
               [&](caf::error& e) { failure = sys.render(e); });
  if (bytes.empty())
    throw std::runtime_error("the seed at " + seed.str() + " did not take us: " + failure);
  membership m{wire::decode_membership_view(ctx, bytes), -1};
  for (const auto& member : m.view.members) {
    if (member.host == me.host && member.port == me.port && member.name == me.name)
      m.rank = member.rank;
  }
  if (m.rank < 0) throw std::runtime_error("the seed's view does not list this node");
  return m;
}

std::string with_node_of_partition(const wire::membership_view& view, std::string what) {
  std::smatch m;
  if (std::regex_search(what, m, std::regex(R"(partition (\d+)'s)"))) {
    const int rank = view.rank_of_partition(std::stoi(m[1].str()));
    if (rank >= 0) {
      const auto& who = view.members[static_cast<size_t>(rank)];
      what += " [partition " + m[1].str() + " is node " + std::to_string(rank) + ", " + who.name +
              " at " + who.host + ":" + std::to_string(who.port) + "]";
    }
  }
  return what;
}

}  // namespace degnn
