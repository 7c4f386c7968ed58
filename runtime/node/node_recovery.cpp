// Node 0's part of a recovery: finding the lost, the next view, announcing it.
#include "runtime/node/node_recovery.hpp"

#include <algorithm>
#include <filesystem>

#include "model/commit_record.hpp"
#include "model/data_error.hpp"
#include "model/durable_file.hpp"
#include "runtime/node/partition_transfer.hpp"
#include "runtime/node/seed_file_client.hpp"
#include "runtime/transport/port_probe.hpp"

namespace degnn {

namespace {

bool superseded_error(const caf::error& e) {
  return e.category() == caf::atom("degnn") &&
         e.code() == static_cast<std::uint8_t>(actor_errc::superseded);
}

// The member's own words of a superseded answer, for the log line it ends in.
std::string superseded_words(const caf::error& e) {
  const caf::message& m = e.context();
  if (m.size() == 1 && m.match_element<std::string>(0)) return m.get_as<std::string>(0);
  return caf::to_string(e);
}

// Asks `to` something it answers with true; throws "WHAT: the error" otherwise.
template <class Handle, class... Ts>
void ask_true(caf::scoped_actor& self, const Handle& to, std::chrono::seconds wait,
              const std::string& what, Ts&&... xs) {
  std::string failure;
  self->request(to, wait, std::forward<Ts>(xs)...)
      .receive([](bool) {}, [&](caf::error& e) { failure = caf::to_string(e); });
  if (!failure.empty()) throw std::runtime_error(what + ": " + failure);
}

// The view after `view`: the next id, resuming at `step`, no rank replaced yet.
wire::membership_view successor(const wire::membership_view& view, std::uint64_t step) {
  wire::membership_view next = view;
  next.id = view.id + 1;
  next.resume_step = step;
  next.replaced.clear();
  return next;
}

// Fetches the seed's copy of the checkpoint of `step` (offered under checkpoint/) into
// `here`/checkpoint/; false when the seed offers none.
bool fetch_seed_checkpoint(caf::actor_system& sys, const node_actor& seed,
                           const std::string& seed_address, const std::filesystem::path& here,
                           std::uint64_t step) {
  seed_file_client files(sys, seed, seed_address, here);
  const std::string suffix = "/" + checkpoint_file_name(step);
  for (const auto& f : files.manifest().files) {
    if (f.path.rfind(kSeedCheckpointPrefix, 0) != 0 || !f.path.ends_with(suffix)) continue;
    files.fetch({f.path});
    return true;
  }
  return false;
}

}  // namespace

std::vector<int> lost_members(caf::scoped_actor& self, const node_actor& node,
                              const std::string& local_key, const node_mesh& mesh,
                              const wire::membership_view& view, std::chrono::milliseconds wait,
                              int me, const std::vector<int>& known_lost) {
  // A request to a process that is gone is not answered (CAF 0.17 drops it): ask the node actor,
  // which watched the node actors that greeted it, then probe the others.
  std::vector<std::int32_t> gone;
  self->request(node, std::chrono::seconds(10), gone_atom_v, local_key)
      .receive([&](std::vector<std::int32_t>& g) { gone = std::move(g); }, [](caf::error&) {});
  auto in = [](const auto& list, int p) {
    return std::find(list.begin(), list.end(), p) != list.end();
  };
  // All asked at once: the wait is paid once, by the slowest.
  using handle = decltype(self->request(mesh.node_of(0), wait, node_stats_atom_v));
  std::vector<std::pair<int, handle>> asked;
  std::vector<int> lost = known_lost;
  for (size_t i = 0; i < view.members.size(); ++i) {
    const int p = static_cast<int>(i);
    if (view.members[i].lost || p == me || in(known_lost, p)) continue;
    if (in(gone, p))
      lost.push_back(p);
    else
      asked.emplace_back(p, self->request(mesh.node_of(i), wait, node_stats_atom_v));
  }
  // Only silence counts: a member that answers with an error (its figures are for the
  // coordinator only) is there.
  std::string ahead;  // a member's word that it follows a later view
  for (auto& [rank, h] : asked) {
    bool silent = false;
    h.receive([](std::vector<std::int64_t>&) {},
              [&](caf::error& e) {
                silent = e == caf::sec::request_timeout;
                if (superseded_error(e) && ahead.empty()) ahead = superseded_words(e);
              });
    if (silent) lost.push_back(rank);
  }
  if (!ahead.empty()) throw left_behind(ahead);
  std::sort(lost.begin(), lost.end());
  lost.erase(std::unique(lost.begin(), lost.end()), lost.end());
  return lost;
}

std::string without_majority(const wire::membership_view& view, const std::vector<int>& lost,
                             const std::vector<int>& gone) {
  auto in = [](const std::vector<int>& list, int r) {
    return std::find(list.begin(), list.end(), r) != list.end();
  };
  std::size_t live = 0, left = 0, dead = 0;
  for (const auto& m : view.members) {
    if (m.lost) continue;
    ++live;
    if (!in(lost, m.rank))
      ++left;
    else if (in(gone, m.rank))
      ++dead;
  }
  const std::size_t counted = live - dead;
  if (2 * left > counted) return "";
  std::string line = std::to_string(left) + " of view " + std::to_string(view.id) + "'s " +
                     std::to_string(live) + " members are left";
  if (dead > 0)
    line += " and " + std::to_string(dead) + " of the lost no longer run" + (dead == 1 ? "s" : "") +
            " (" + std::to_string(left) + " of " + std::to_string(counted) + " counted)";
  return line + ", not a majority (" + std::to_string(counted / 2 + 1) + " needed)";
}

std::vector<int> no_longer_running(const wire::membership_view& view, const std::vector<int>& lost,
                                   std::chrono::milliseconds wait) {
  std::vector<endpoint> at;
  std::vector<int> ranks;
  for (int r : lost) {
    if (r < 0 || static_cast<std::size_t>(r) >= view.members.size()) continue;
    const auto& m = view.members[static_cast<std::size_t>(r)];
    if (m.lost || m.port == 0) continue;
    at.push_back({m.host, m.port});
    ranks.push_back(r);
  }
  const std::vector<bool> refused = refused_connections(at, wait);
  std::vector<int> gone;
  for (std::size_t i = 0; i < ranks.size(); ++i)
    if (refused[i]) gone.push_back(ranks[i]);
  return gone;
}

wire::membership_view adopted_view(const wire::membership_view& view, const std::vector<int>& lost,
                                   std::uint64_t step) {
  wire::membership_view next = successor(view, step);
  const auto n = static_cast<int>(view.members.size());
  const int old_coordinator = view.coordinator();
  for (int r : lost)
    next.members[static_cast<size_t>(r)].lost = true;
  const int coord = next.coordinator();
  if (coord < 0) throw std::runtime_error("adopted_view: every member of the view is lost");
  auto give = [&](int to, std::int32_t part) {
    auto& heir = next.members[static_cast<size_t>(to)].partitions;
    heir.push_back(part);
    std::sort(heir.begin(), heir.end());
  };
  for (int r : lost) {
    const std::vector<std::int32_t> orphans =
        std::exchange(next.members[static_cast<size_t>(r)].partitions, {});
    if (r == old_coordinator) {
      for (std::int32_t part : orphans)
        give(coord, part);
      continue;
    }
    // The ranks after the lost one, cyclically, the coordinator (the busiest) last.
    std::vector<int> order;
    for (int k = 1; k < n; ++k)
      if ((r + k) % n != coord) order.push_back((r + k) % n);
    order.push_back(coord);
    for (std::int32_t part : orphans) {
      int best = -1;
      for (int cand : order) {
        const auto& m = next.members[static_cast<size_t>(cand)];
        if (m.lost) continue;
        if (best < 0 ||
            m.partitions.size() < next.members[static_cast<size_t>(best)].partitions.size())
          best = cand;
      }
      give(best, part);
    }
  }
  return next;
}

wire::join_request await_replacement(caf::scoped_actor& self, const node_actor& node,
                                     const std::string& local_key, const wire::context& ctx,
                                     const std::vector<std::string>& taken,
                                     std::chrono::seconds wait) {
  std::vector<char> bytes;
  std::string failure;
  self->request(node, wait, replace_atom_v, taken, local_key)
      .receive([&](std::vector<char>& b) { bytes = std::move(b); },
               [&](caf::error& e) { failure = caf::to_string(e); });
  if (bytes.empty())
    throw std::runtime_error("no replacement joined within --replace-timeout (" +
                             std::to_string(wait.count()) + " s): " + failure);
  return wire::decode_join_request(ctx, bytes);
}

wire::membership_view replaced_view(const wire::membership_view& view, const std::vector<int>& lost,
                                    const std::vector<wire::join_request>& joiners,
                                    std::uint64_t step) {
  wire::membership_view next = successor(view, step);
  for (size_t i = 0; i < lost.size(); ++i) {
    auto& m = next.members[static_cast<size_t>(lost[i])];
    m.host = joiners[i].host;
    m.port = joiners[i].port;
    m.name = joiners[i].name;
    next.replaced.push_back(lost[i]);
  }
  return next;
}

std::string moved_partitions(const wire::membership_view& before,
                             const wire::membership_view& after) {
  std::string out;
  for (const auto& m : before.members) {
    for (std::int32_t part : m.partitions) {
      const int now = after.rank_of_partition(part);
      if (now == m.rank) continue;
      out += (out.empty() ? "" : ", ") + std::string("partition ") + std::to_string(part) +
             " (node " + std::to_string(m.rank) + ") to node " + std::to_string(now);
    }
  }
  return out;
}

void offer_checkpoint_of_step(caf::scoped_actor& self, const node_actor& node,
                              const std::string& local_key, const std::string& dir,
                              std::uint64_t step) {
  const committed_checkpoint c = load_checkpoint_of_step(dir, step);
  const std::string file = std::filesystem::relative(c.folder / c.record.file, dir).string();
  ask_true(self, node, std::chrono::seconds(30), "offering " + file, offer_atom_v, file, local_key);
}

wire::membership_view next_view(caf::scoped_actor& self, const node_actor& node,
                                const std::string& local_key, const wire::context& ctx,
                                const wire::membership_view& view, const std::vector<int>& lost,
                                std::uint64_t step, const recovery_settings& rs,
                                const std::function<void(const std::string&)>& say) {
  // The state every member rolls back to, offered to the members (one whose own copy is damaged
  // restores it from this one) and to the replacements (none: a fresh start).
  try {
    offer_checkpoint_of_step(self, node, local_key, rs.checkpoint_dir, step);
  } catch (const data_error&) {
    if (step != 0) throw;
  }
  if (rs.mode != "replace") return adopted_view(view, lost, step);
  // A replacement may take a lost member's name (its certificate), not a live one's.
  std::vector<std::string> taken;
  for (const auto& m : view.members) {
    if (m.lost || std::find(lost.begin(), lost.end(), m.rank) != lost.end()) continue;
    taken.push_back(m.name);
    taken.push_back(m.host + ":" + std::to_string(m.port));
  }
  std::vector<wire::join_request> joiners;
  for (int r : lost) {
    say("waiting up to " + std::to_string(rs.replace_wait.count()) +
        " s for a node to replace node " + std::to_string(r) + " (degnn node --join " +
        rs.seed_address + " with the cluster's settings)");
    joiners.push_back(await_replacement(self, node, local_key, ctx, taken, rs.replace_wait));
    taken.push_back(joiners.back().name);
    taken.push_back(joiners.back().host + ":" + std::to_string(joiners.back().port));
  }
  wire::membership_view next = replaced_view(view, lost, joiners, step);
  ask_true(self, node, std::chrono::seconds(10), "placing the replacements", place_atom_v,
           wire::encode(ctx, next), local_key);
  return next;
}

cluster_start replacement_start(caf::actor_system& sys, const node_actor& seed,
                                const std::string& seed_address, const std::string& checkpoint_dir,
                                const replica_config& rc, std::uint64_t run_id, int parts,
                                std::uint64_t step) {
  const auto here = std::filesystem::path(checkpoint_dir) / "from-seed";
  if (fetch_seed_checkpoint(sys, seed, seed_address, here, step))
    return load_cluster_start_in((here / kSeedCheckpointPrefix).string(), rc, run_id, parts, step);
  if (step != 0)
    throw std::runtime_error("the seed at " + seed_address + " offers no checkpoint of step " +
                             std::to_string(step) + ", which the cluster rolled back to");
  return {};
}

std::string restore_checkpoint_from_seed(caf::actor_system& sys, const node_actor& seed,
                                         const std::string& seed_address, const std::string& dir,
                                         const std::vector<std::int32_t>& partitions,
                                         std::uint64_t step) {
  const auto here = std::filesystem::path(dir) / "from-seed";
  const std::string name = checkpoint_file_name(step);
  if (!fetch_seed_checkpoint(sys, seed, seed_address, here, step))
    throw std::runtime_error("the seed at " + seed_address + " offers no copy of " + name);
  // Decoded and checked before it replaces anything (the seed's copy could be damaged too).
  const committed_checkpoint c = load_checkpoint_of_step(here / kSeedCheckpointPrefix, step);
  const auto bytes = read_whole_file(c.folder / c.record.file);
  if (!bytes) throw data_error::at((c.folder / c.record.file).string(), 0, "cannot be read");
  for (std::int32_t p : partitions) {
    const auto folder = replica_checkpoint_dir(dir, p);
    std::filesystem::create_directories(folder);
    write_file_durably(folder / name, *bytes);
  }
  std::error_code ignored;
  std::filesystem::remove_all(here, ignored);
  return name;
}

void announce_view(caf::scoped_actor& self, const node_mesh& mesh, const wire::context& ctx,
                   const wire::membership_view& before, const wire::membership_view& next, int me) {
  const std::vector<char> bytes = wire::encode(ctx, next);
  for (size_t p = 0; p < next.members.size(); ++p) {
    if (static_cast<int>(p) == me) continue;
    // The member lost at p, if it still runs (counted lost for its silence), learns that it
    // is out and stops; nobody waits for it. A replacement got the view as its join's answer.
    const auto& r = next.replaced;
    if (next.members[p].lost || std::find(r.begin(), r.end(), static_cast<int>(p)) != r.end()) {
      if (!before.members[p].lost) self->send(mesh.node_of(p), recover_atom_v, bytes, next.secret);
      continue;
    }
    // Asked every 2 s for up to 10 s: a member lost meanwhile (a second loss during the recovery)
    // is found gone between the asks instead of after the whole wait. A repeat is answered as
    // the first was.
    const std::string what = "node " + std::to_string(me) + ": node " + std::to_string(p) +
                             " did not take view " + std::to_string(next.id);
    for (int ask = 1;; ++ask) {
      bool late = false, behind = false;
      std::string failure;
      self->request(mesh.node_of(p), std::chrono::seconds(2), recover_atom_v, bytes, next.secret)
          .receive([](bool) {},
                   [&](caf::error& e) {
                     behind = superseded_error(e);
                     late = e == caf::sec::request_timeout;
                     failure = behind ? superseded_words(e) : caf::to_string(e);
                   });
      if (behind) throw left_behind(what + ": " + failure);
      if (failure.empty()) break;
      if (!late || ask == 5) throw std::runtime_error(what + ": " + failure);
      if (mesh.gone(p)) throw std::runtime_error(what + ": it is gone");
    }
  }
}

}  // namespace degnn
