// Cap'n Proto encoding and validating decoding of JoinRequest and MembershipView.
#include "serialization/wire_membership.hpp"

#include <algorithm>

#include "serialization/degnn.capnp.h"
#include "serialization/wire_codec.hpp"

namespace degnn::wire {

using namespace codec;

namespace {

constexpr std::size_t kMaxText = 1024;
constexpr std::size_t kMaxIdentityLines = 256;
constexpr std::size_t kMaxMembers = 4096;

std::string text(const reader& rd, capnp::Text::Reader t, const char* field, bool may_be_empty) {
  if (t.size() > kMaxText) rd.fail(std::string(field) + " is longer than 1024 bytes");
  if (!may_be_empty && t.size() == 0) rd.fail(std::string(field) + " is empty");
  return t.cStr();
}

}  // namespace

int membership_view::coordinator() const {
  for (const auto& m : members)
    if (!m.lost) return m.rank;
  return -1;
}

int membership_view::rank_of_partition(int p) const {
  for (const auto& m : members) {
    if (std::find(m.partitions.begin(), m.partitions.end(), p) != m.partitions.end()) return m.rank;
  }
  return -1;
}

int membership_view::num_partitions() const {
  int n = 0;
  for (const auto& m : members)
    n += static_cast<int>(m.partitions.size());
  return n;
}

bytes encode(const context& c, const join_request& m) {
  capnp::MallocMessageBuilder mb;
  auto r = mb.initRoot<JoinRequest>();
  fill_header(r, c, {0, -1});
  auto lines = r.initIdentity(static_cast<unsigned>(m.identity.size()));
  for (unsigned i = 0; i < m.identity.size(); ++i)
    lines.set(i, m.identity[i]);
  r.setHost(m.host);
  r.setPort(m.port);
  r.setRankHint(m.rank_hint);
  r.setName(m.name);
  put_proof(r, m.certificate, m.signature, m.token_mac);
  return to_bytes(mb);
}

join_request decode_join_request(const context& c, std::span<const char> b) {
  return guarded("join request", [&] {
    reader rd(c, b, "join request");
    auto r = rd.root_of_any_cluster<JoinRequest>();
    join_request m;
    m.cluster_id = r.getHeader().getClusterId();
    if (r.getIdentity().size() > kMaxIdentityLines) rd.fail("more than 256 identity lines");
    for (auto line : r.getIdentity())
      m.identity.push_back(text(rd, line, "an identity line", false));
    m.host = text(rd, r.getHost(), "host", false);
    m.port = r.getPort();
    if (m.port == 0) rd.fail("port 0");
    m.rank_hint = r.getRankHint();
    if (m.rank_hint < -1) rd.fail("rank hint " + std::to_string(m.rank_hint));
    m.name = text(rd, r.getName(), "name", false);
    get_proof(rd, r, m.certificate, m.signature, m.token_mac);
    return m;
  });
}

bytes encode(const context& c, const membership_view& m) {
  capnp::MallocMessageBuilder mb;
  auto r = mb.initRoot<MembershipView>();
  fill_header(r, c, {0, 0});
  r.setViewId(m.id);
  r.setSecret(m.secret);
  r.setResumeStep(m.resume_step);
  set_ints(r.initReplaced(static_cast<unsigned>(m.replaced.size())), m.replaced);
  auto members = r.initMembers(static_cast<unsigned>(m.members.size()));
  for (unsigned i = 0; i < m.members.size(); ++i) {
    const auto& v = m.members[i];
    auto mr = members[i];
    mr.setRank(v.rank);
    mr.setHost(v.host);
    mr.setPort(v.port);
    mr.setName(v.name);
    set_ints(mr.initPartitions(static_cast<unsigned>(v.partitions.size())), v.partitions);
    mr.setLost(v.lost);
  }
  return to_bytes(mb);
}

membership_view decode_membership_view(const context& c, std::span<const char> b) {
  return guarded("membership view", [&] {
    reader rd(c, b, "membership view");
    auto r = rd.root<MembershipView>(c);
    membership_view m;
    m.id = r.getViewId();
    m.secret = text(rd, r.getSecret(), "secret", true);
    m.resume_step = r.getResumeStep();
    m.replaced = to_vector(r.getReplaced());
    if (m.id == 0) rd.fail("view id 0");
    const auto members = r.getMembers();
    if (members.size() == 0 || members.size() > kMaxMembers)
      rd.fail(std::to_string(members.size()) + " members");
    std::vector<int> served;
    for (auto mr : members) {
      view_member v;
      v.rank = mr.getRank();
      if (v.rank != static_cast<std::int32_t>(m.members.size()))
        rd.fail("member ranks out of order (rank " + std::to_string(v.rank) + " at position " +
                std::to_string(m.members.size()) + ")");
      v.host = text(rd, mr.getHost(), "member host", false);
      v.port = mr.getPort();
      if (v.port == 0) rd.fail("member " + std::to_string(v.rank) + " has port 0");
      v.name = text(rd, mr.getName(), "member name", false);
      v.partitions = to_vector(mr.getPartitions());
      v.lost = mr.getLost();
      if (v.lost && !v.partitions.empty())
        rd.fail("member " + std::to_string(v.rank) + " is lost but still serves partitions");
      if (v.partitions.empty() && !v.lost)
        rd.fail("member " + std::to_string(v.rank) + " serves no partition");
      served.insert(served.end(), v.partitions.begin(), v.partitions.end());
      m.members.push_back(std::move(v));
    }
    for (std::int32_t rank : m.replaced) {
      if (rank <= 0 || rank >= static_cast<std::int32_t>(m.members.size()) ||
          m.members[static_cast<size_t>(rank)].lost)
        rd.fail("replaced rank " + std::to_string(rank) + " is not a serving member other than 0");
    }
    // The coordinator, the lowest live rank (node 0 until it is lost), serves partition 0: a
    // successor adopts the lost coordinator's partitions, and members find it by that partition.
    const auto coordinator = std::find_if(m.members.begin(), m.members.end(),
                                          [](const view_member& v) { return !v.lost; });
    if (coordinator == m.members.end()) rd.fail("every member is lost");
    const auto& cp = coordinator->partitions;
    if (std::find(cp.begin(), cp.end(), 0) == cp.end())
      rd.fail("the coordinator (rank " + std::to_string(coordinator->rank) +
              ", the lowest live one) does not serve partition 0");
    // Every partition 0..P-1 served by exactly one member.
    std::sort(served.begin(), served.end());
    for (size_t i = 0; i < served.size(); ++i) {
      if (served[i] != static_cast<int>(i))
        rd.fail("the partition map does not serve each partition 0.." +
                std::to_string(served.size() - 1) + " exactly once");
    }
    return m;
  });
}

}  // namespace degnn::wire
