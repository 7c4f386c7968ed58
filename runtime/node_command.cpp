// degnn node: one node process of a static cluster. Node K loads partition K, spawns its worker
// actors (batch actor, shard, embedding store) and publishes its node actor on port P (the K-th
// entry of --peers), connects to every other node and takes the handles of their actors, and then
// node 0 coordinates training while the others serve until told to stop.
//   degnn node --config-file=cluster.conf --id 0     (and --id 1 ... in other processes)
#include <arpa/inet.h>
#include <netinet/in.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <charconv>
#include <cstdio>
#include <functional>
#include <optional>
#include <thread>

#include "actors/coordinator.hpp"
#include "model/feature_transform.hpp"
#include "model/partition_store.hpp"
#include "runtime/cluster_identity.hpp"
#include "runtime/cluster_trainer.hpp"
#include "runtime/commands.hpp"
#include "runtime/compute_threads.hpp"
#include "runtime/node_actor.hpp"
#include "runtime/process_stats.hpp"
#include "runtime/train_options.hpp"
#include "runtime/worker_actors.hpp"

namespace degnn {

namespace {

struct endpoint {
  std::string host;
  std::uint16_t port = 0;
};

std::vector<endpoint> parse_peers(const std::string& text) {
  std::vector<endpoint> out;
  std::string s = text;
  if (!s.empty() && s.front() == '[' && s.back() == ']') s = s.substr(1, s.size() - 2);
  size_t pos = 0;
  while (pos < s.size()) {
    auto comma = s.find(',', pos);
    std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    item.erase(0, item.find_first_not_of(" \t\""));
    item.erase(item.find_last_not_of(" \t\"") + 1);
    const auto colon = item.rfind(':');
    if (colon == std::string::npos) throw config_error("--peers: '" + item + "' is not HOST:PORT");
    // The whole text after the colon must be the number: "24811abc" is refused, not 24811.
    const std::string digits = item.substr(colon + 1);
    int port = -1;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
    if (ec != std::errc() || end != digits.data() + digits.size()) port = -1;
    if (port < 1 || port > 65535)
      throw config_error("--peers: bad port in '" + item + "' (1..65535)");
    out.push_back({item.substr(0, colon), static_cast<std::uint16_t>(port)});
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (out.empty()) throw config_error("--peers: no HOST:PORT given");
  return out;
}

bool is_loopback(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4{};
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return ::inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

// Retries a connection until it succeeds or the deadline passes: peers start in any order.
template <class Handle>
Handle connect(caf::actor_system& sys, const endpoint& e,
               std::chrono::steady_clock::time_point deadline, const char* what) {
  while (true) {
    auto h = sys.middleman().remote_actor<Handle>(e.host, e.port);
    if (h) return *h;
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error(std::string("cannot reach the ") + what + " at " + e.host + ":" +
                               std::to_string(e.port) + ": " + sys.render(h.error()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace

int run_node(int argc, char** argv) {
  auto specs = train_option_specs();
  specs.push_back({"id", "", "this node's index into --peers (node 0 coordinates)"});
  specs.push_back(
      {"peers", "", "HOST:PORT of every node, in node order (its node actor listens there)"});
  specs.push_back({"connect-timeout", "60", "seconds to wait for all peers"});
  specs.push_back({"insecure", "false",
                   "publish on an address other than loopback without TLS (anyone who reaches "
                   "the port can talk to the node; see README)",
                   true});
  specs.push_back({"heartbeat-ms", "500", "milliseconds between heartbeats on each connection"});
  specs.push_back({"heartbeat-misses", "20",
                   "a connection silent for this many heartbeat intervals is dropped and its "
                   "node counted lost"});
  option_set opts(
      "node",
      "degnn node --config-file=F --id K  (F names peers, partitions and training settings)",
      std::move(specs));
  if (!opts.parse(argc, argv, 0)) return 0;
  if (!opts.given("id")) throw config_error("node: --id K is required");
  if (opts.given("data")) {
    throw config_error(
        "node: --data is not used by a node, which reads only its partition from "
        "--partitions (made by degnn partition); remove it");
  }
  for (const char* key : {"parts", "compare-with", "cache-dir"}) {
    if (opts.given(key)) {
      throw config_error(std::string("node: --") + key +
                         " is not used by a node (the partition set and --peers define the "
                         "cluster); remove it");
    }
  }
  if (!opts.given("partitions"))
    throw config_error("node: --partitions DIR is required (made by degnn partition)");
  const auto peers = parse_peers(opts.str("peers"));
  const int id =
      static_cast<int>(opts.integer("id", 0, static_cast<std::int64_t>(peers.size()) - 1));
  train_settings s = read_train_settings(opts);
  resolve_batch_size(s, static_cast<int>(peers.size()));
  const std::string me_name = "node " + std::to_string(id);
  // Without TLS, whoever reaches the port is a peer, and CAF 0.17 allocates whatever payload a
  // connecting peer announces: stay on loopback unless the operator accepts that.
  if (!is_loopback(peers[static_cast<size_t>(id)].host) && !opts.flag("insecure")) {
    throw config_error("node: " + peers[static_cast<size_t>(id)].host +
                       " is not a loopback address, and nodes do not authenticate each other "
                       "yet; pass --insecure to publish there anyway (on a trusted network only)");
  }
  // Everything that can be checked is checked before any actor starts: an error after that point
  // must first stop the actors (see `stopper` below).
  const partition_meta meta = load_partition_meta(s.partitions);
  if (meta.num_parts != static_cast<int>(peers.size())) {
    throw config_error("node: " + s.partitions + " has " + std::to_string(meta.num_parts) +
                       " partitions but --peers names " + std::to_string(peers.size()) + " nodes");
  }
  auto book = std::make_shared<const partition_book>(load_partition_book(s.partitions));
  auto part = [&] {
    auto loaded = std::make_shared<graph_partition>(load_partition(s.partitions, id));
    apply_feature_transform(s.normalize_features, loaded->features);
    return std::shared_ptr<const graph_partition>(std::move(loaded));
  }();
  replica_config rc = s.model;
  rc.in_dim = meta.num_features;
  rc.num_classes = meta.num_classes;
  const cluster_identity identity = identity_of(s, meta);
  const wire::context ctx{.cluster_id = identity.hash()};
  worker_settings ws = make_worker_settings(s);
  ws.on_reject = log_rejections(me_name + ": ");
  // Node 0 opens its metrics file now: a bad path is refused before the cluster forms.
  std::optional<training_report> report;
  if (id == 0) report.emplace(meta.dataset_name + "/node-cluster", s.metrics, s.progress);

  caf::actor_system_config cfg;
  if (s.threads > 0) use_compute_threads(cfg, s.threads);
  add_actor_types(cfg);
  add_runtime_types(cfg);
  cfg.load<caf::io::middleman>();
  // Heartbeats on every connection: a peer that stops answering (SIGSTOP, a cut link) is dropped
  // after the connection timeout, which the coordinator sees as a lost actor.
  const auto heartbeat = std::chrono::milliseconds(opts.integer("heartbeat-ms", 10, 60'000));
  cfg.set("middleman.heartbeat-interval", caf::timespan{heartbeat});
  cfg.set("middleman.connection-timeout",
          caf::timespan{heartbeat * opts.integer("heartbeat-misses", 2, 1000)});
  caf::actor_system sys{cfg};
  const worker_actors local = spawn_worker(sys, part, book, rc, ws, ctx);
  const node_actor node = spawn_node_actor(sys, id, local, ctx, identity.lines,
                                           static_cast<std::int64_t>(part->train.size()),
                                           static_cast<int>(peers.size()));
  caf::scoped_actor self{sys};
  // Whatever ends this function, the local actors stop first: the actor system's destructor waits
  // for every actor, so an error that skipped this would hang the process.
  struct stopper {
    std::function<void()> stop;
    ~stopper() { stop(); }
  } stop_local{[&] {
    stop_worker(self, local);
    self->send_exit(node, caf::exit_reason::user_shutdown);
  }};
  const auto& me = peers[static_cast<size_t>(id)];
  // Published as a typed handle, so a peer of another protocol fails at connection time.
  if (auto published = sys.middleman().publish(node, me.port, me.host.c_str(), true); !published) {
    throw std::runtime_error(me_name + ": cannot listen on " + me.host + ":" +
                             std::to_string(me.port) + ": " + sys.render(published.error()));
  }
  std::fprintf(stderr, "%s: partition %d (%d nodes), listening on %s:%u\n", me_name.c_str(), id,
               part->num_owned(), me.host.c_str(), me.port);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(opts.integer("connect-timeout", 1));
  // A pair of nodes never sets up its connection at the same time: CAF 0.17's BASP can leave a
  // route that drops every message when two nodes connect to each other concurrently (seen here
  // about once in ten 4-node runs). Node K connects to every p < K at once and greets it; p
  // connects back to K only after K's greeting arrived, over the connection K made.
  const auto n = peers.size();
  std::vector<node_actor> nodes(n);
  nodes[static_cast<size_t>(id)] = node;
  cluster_handles view;
  view.batchers.resize(n);
  view.shards.resize(n);
  view.stores.resize(n);
  auto fail = [&](const std::string& what) { throw std::runtime_error(me_name + ": " + what); };
  // Node p's worker actors, whose handles come in the reply of its node actor.
  auto take_workers = [&](size_t p) {
    bool ok = false;
    std::string failure;
    self->request(nodes[p], std::chrono::seconds(10), workers_atom_v)
        .receive(
            [&](peer_view& w) {
              if (w.batchers.size() != 1 || w.shards.size() != 1 || w.stores.size() != 1) return;
              view.batchers[p] = caf::actor_cast<batch_actor>(w.batchers[0]);
              view.shards[p] = caf::actor_cast<shard_actor>(w.shards[0]);
              view.stores[p] = caf::actor_cast<store_actor>(w.stores[0]);
              ok = true;
            },
            [&](caf::error& e) { failure = sys.render(e); });
    if (!ok) fail("node " + std::to_string(p) + " did not name its actors: " + failure);
  };
  auto connect_to = [&](size_t p) {
    nodes[p] = connect<node_actor>(sys, peers[p], deadline, "node");
    std::string failure;
    self->request(nodes[p], std::chrono::seconds(10), greet_atom_v,
                  node_greeting{static_cast<std::int32_t>(id), identity.lines})
        .receive([](std::int32_t) {}, [&](caf::error& e) { failure = sys.render(e); });
    if (!failure.empty()) fail("greeting node " + std::to_string(p) + " failed: " + failure);
    take_workers(p);
  };
  auto greeted_by = [&](size_t p) {
    bool yes = false;
    std::string refused;
    self->request(node, std::chrono::seconds(10), greeted_atom_v, static_cast<std::int32_t>(p))
        .receive([&](bool b) { yes = b; }, [&](caf::error& e) { refused = sys.render(e); });
    if (!refused.empty()) fail("refused node " + std::to_string(p) + ": " + refused);
    return yes;
  };
  take_workers(static_cast<size_t>(id));
  for (size_t p = 0; p < static_cast<size_t>(id); ++p)
    connect_to(p);
  for (size_t p = static_cast<size_t>(id) + 1; p < n; ++p) {
    while (!greeted_by(p)) {
      if (std::chrono::steady_clock::now() > deadline)
        fail("node " + std::to_string(p) + " never connected (see --connect-timeout)");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    connect_to(p);
  }
  const peer_view all = view.view();
  // Through the node actor, which answers node 0's readiness question only from now on.
  self->request(node, std::chrono::seconds(10), view_atom_v, all)
      .receive([](bool) {}, [&](caf::error& e) { fail("the view: " + sys.render(e)); });
  std::fprintf(stderr, "%s: connected to %zu peers\n", me_name.c_str(), n - 1);

  if (id != 0) {
    // Serve until node 0 says bye (this node actor then quits) or node 0 disappears.
    self->monitor(node);
    self->monitor(nodes[0]);
    bool clean = false;
    self->receive([&](caf::down_msg& d) { clean = d.source == node.address(); });
    if (!clean) {
      // Node 0 ends right after our bye reply, so its down message may overtake our own node
      // actor's; give that one a moment before calling the coordinator lost.
      self->receive([&](caf::down_msg& d) { clean = d.source == node.address(); },
                    caf::after(std::chrono::seconds(2)) >> [] {});
    }
    if (!clean) throw std::runtime_error(me_name + ": lost the coordinator (node 0); stopping");
    std::fprintf(stderr, "%s: stopped by the coordinator\n", me_name.c_str());
    return 0;
  }

  // Node 0: wait until every node's actors reached every other node's once, then train.
  coordinator coord(self.ptr(), view.batchers, view.shards, view.stores, ctx, ws.timeout);
  std::vector<std::size_t> train_sizes(n);
  for (size_t p = 0; p < n; ++p) {
    while (true) {
      bool ok = false;
      self->request(nodes[p], std::chrono::seconds(10), ready_atom_v, all)
          .receive(
              [&](std::int64_t num_train) {
                train_sizes[p] = static_cast<std::size_t>(num_train);
                ok = true;
              },
              [&](caf::error&) {});
      if (ok) break;
      if (std::chrono::steady_clock::now() > deadline)
        fail("node " + std::to_string(p) + " never became ready");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  std::vector<double> losses;
  cluster_result result;
  try {
    result = drive_training(coord, s, rc, batches_per_epoch(train_sizes, s.batch_size), *report,
                            [&](std::uint64_t, double loss) { losses.push_back(loss); });
  } catch (const std::exception& e) {
    throw std::runtime_error(me_name + ": " + e.what());  // partition p is node p's
  }
  report->finish();
  // Summary for scripts and the two-process test: per-step losses and the run's traffic.
  std::printf(
      "{\"node_summary\":true,\"replicas_identical\":%s,\"test_acc\":%.6f,\"valid_acc\":%.6f,"
      "\"bytes\":%llu,"
      "\"bytes_by_kind\":%s,\"rejected\":%llu,\"step_losses\":[",
      result.replicas_identical ? "true" : "false", report->test_at_best(), report->best_valid(),
      static_cast<unsigned long long>(result.traffic.sent.total_bytes()),
      result.traffic.sent.bytes_json().c_str(),
      static_cast<unsigned long long>(result.traffic.rejected));
  for (size_t i = 0; i < losses.size(); ++i)
    std::printf("%s%.9g", i ? "," : "", losses[i]);
  std::printf("]}\n");
  std::fflush(stdout);
  for (size_t p = 1; p < n; ++p) {
    self->request(nodes[p], std::chrono::seconds(10), bye_atom_v)
        .receive([](bool) {},
                 [&](caf::error& e) {
                   std::fprintf(stderr, "node 0: stopping node %zu: %s\n", p,
                                sys.render(e).c_str());
                 });
  }
  if (!result.replicas_identical) {
    throw std::runtime_error(
        "node 0: the replicas' parameters differ after training (the workers applied different "
        "updates; the run's results cannot be trusted)");
  }
  return 0;
}

}  // namespace degnn
