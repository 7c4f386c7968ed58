// degnn node: one node process of a cluster. The cluster forms through a seed (`--is-seed` on one
// node, `--join HOST:PORT` or `--join auto` on the others: the seed assigns ranks and partitions
// and sends the view) or from a static --peers list. Node K loads its partitions, spawns their
// worker actors (batch actor, shard, embedding store), connects to every other node and takes the
// handles of their actors; then node 0 coordinates training while the others serve until told
// to stop.
//   degnn node --is-seed --listen 127.0.0.1:24800 --nodes 4 --partitions DIR [settings]
//   degnn node --join 127.0.0.1:24800 --partitions DIR [settings]      (three times)
//   degnn node --config-file=cluster.conf --id K                          (static peers)
#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <thread>

#include "actors/coordinator.hpp"
#include "model/feature_transform.hpp"
#include "model/partition_store.hpp"
#include "runtime/cluster_identity.hpp"
#include "runtime/cluster_resume.hpp"
#include "runtime/cluster_trainer.hpp"
#include "runtime/commands.hpp"
#include "runtime/compute_threads.hpp"
#include "runtime/endpoint.hpp"
#include "runtime/fault_injection.hpp"
#include "runtime/http_endpoint.hpp"
#include "runtime/launch_mode.hpp"
#include "runtime/node_actor.hpp"
#include "runtime/node_membership.hpp"
#include "runtime/partition_transfer.hpp"
#include "runtime/process_stats.hpp"
#include "runtime/seed_discovery.hpp"
#include "runtime/seed_file_client.hpp"
#include "runtime/status_board.hpp"
#include "runtime/train_options.hpp"
#include "runtime/worker_actors.hpp"

namespace degnn {

int run_node(int argc, char** argv) {
  option_set opts(
      "node",
      "degnn node (--is-seed | --join HOST:PORT | --join auto | --config-file=F --id K) "
      "--partitions DIR [settings]",
      node_option_specs());
  if (!opts.parse(argc, argv, 0)) return 0;
  if (opts.given("data")) {
    throw config_error(
        "node: --data is not used by a node, which reads only its partition from "
        "--partitions (made by degnn partition); remove it");
  }
  for (const char* key : {"parts", "compare-with", "cache-dir"}) {
    if (opts.given(key)) {
      throw config_error(std::string("node: --") + key +
                         " is not used by a node (the partition set and the cluster's members "
                         "define it); remove it");
    }
  }
  if (!opts.given("partitions"))
    throw config_error("node: --partitions DIR is required (made by degnn partition)");
  train_settings s = read_train_settings(opts);
  launch_mode mode = read_launch_mode(opts);
  // Without TLS, whoever reaches the port is a peer, and CAF 0.17 allocates whatever payload a
  // connecting peer announces: stay on loopback unless the operator accepts that.
  if (!mode.tls && !is_loopback(mode.listen.host) && !opts.flag("insecure")) {
    throw config_error("node: " + mode.listen.host +
                       " is not a loopback address, and nodes do not authenticate each other "
                       "yet without --tls DIR (see degnn certs); pass --insecure to publish there "
                       "anyway (on a trusted network only)");
  }
  caf::actor_system_config cfg;
  if (s.threads > 0) use_compute_threads(cfg, s.threads);
  add_actor_types(cfg);
  add_runtime_types(cfg);
  cfg.load<caf::io::middleman>();
  if (mode.tls) use_tls(cfg, *mode.tls);
  // Heartbeats on every connection: a peer that stops answering (SIGSTOP, a cut link) is dropped
  // after the connection timeout, which the coordinator sees as a lost actor.
  const auto heartbeat = std::chrono::milliseconds(opts.integer("heartbeat-ms", 10, 60'000));
  cfg.set("middleman.heartbeat-interval", caf::timespan{heartbeat});
  cfg.set("middleman.connection-timeout",
          caf::timespan{heartbeat * opts.integer("heartbeat-misses", 2, 1000)});
  caf::actor_system sys{cfg};
  const deadline join_until =
      std::chrono::steady_clock::now() + std::chrono::seconds(opts.integer("join-timeout", 1));
  // A joiner needs no shared filesystem: the files it lacks (or holds with another checksum)
  // come from the seed, the set's description now and its partitions once it has a rank.
  node_actor seed_node;
  std::optional<seed_file_client> seed_files;
  wire::file_manifest files;  ///< the seed's partition files (on the seed and on joiners)
  std::function<void(std::uint64_t, std::uint64_t)> fetch_progress;  // set once the node actor runs
  if (mode.kind == launch_mode::joiner) {
    seed_node =
        connect<node_actor>(sys, mode.seed_address, join_until, "seed", mode.tls.has_value());
    seed_files.emplace(sys, seed_node, mode.seed_address.str(), s.partitions);
    seed_files->fetch({kPartitionMetaName, "owner.bin"});
    files = seed_files->manifest();
  }
  // Everything that can be checked is checked before any actor starts: an error after that point
  // must first stop the actors (see `stopper` below).
  const partition_meta meta = load_partition_meta(s.partitions);
  mode.fit_partitions(meta.num_parts);
  check_fault_links(s.faults.get(), meta.num_parts);
  resolve_batch_size(s, meta.num_parts);
  auto book = std::make_shared<const partition_book>(load_partition_book(s.partitions));
  auto load_part = [&](int p) {
    auto loaded = std::make_shared<graph_partition>(load_partition(s.partitions, p));
    apply_feature_transform(s.normalize_features, loaded->features);
    return std::shared_ptr<const graph_partition>(std::move(loaded));
  };
  // A static node knows its partition now and reads it before anything starts.
  std::vector<std::shared_ptr<const graph_partition>> parts;
  if (mode.kind == launch_mode::static_peers) parts.push_back(load_part(mode.id));
  replica_config rc = s.model;
  rc.in_dim = meta.num_features;
  rc.num_classes = meta.num_classes;
  cluster_identity identity = identity_of(s, meta);
  const wire::context ctx{.cluster_id = identity.hash()};
  worker_settings ws = make_worker_settings(s);
  ws.run_id = identity.checkpoint_run_id();
  const fault_summary_at_exit report_faults{ws.faults, ws.fault_counts};
  if (opts.given("crash-after-step"))
    ws.on_step = crash_after_step(static_cast<std::uint64_t>(opts.integer("crash-after-step", 0)));
  // Resuming: each node reads its own copy of the run's last commit; a joiner learns the step
  // from its seed's view (every node holds the file of any commit).
  cluster_start start;
  if (mode.kind != launch_mode::joiner)
    start = load_cluster_start(s, rc, ws.run_id, meta.num_parts);
  ws.start = start.state;
  add_resume_identity(identity, s, mode.kind == launch_mode::static_peers, start);
  const bool allow_faults = opts.flag("allow-faults");
  const std::string kill_token = allow_faults ? random_hex(16) : "";
  identity.lines.push_back(std::string("fault_commands=") + (allow_faults ? "allowed" : "refused"));
  const bool coordinates =
      mode.kind == launch_mode::seed || (mode.kind == launch_mode::static_peers && mode.id == 0);
  // Node 0 opens its metrics file now: a bad path is refused before the cluster forms.
  std::optional<training_report> report;
  if (coordinates) report.emplace(meta.dataset_name + "/node-cluster", s.metrics, s.progress);
  // Node 0's status board (read by the console and the HTTP endpoint) and its read-only HTTP
  // endpoint, up before the cluster forms (a bad address is refused now).
  std::shared_ptr<status_board> board;
  if (coordinates) {
    board = std::make_shared<status_board>(meta.dataset_name, s.pipeline, s.epochs);
    report->observe([board](const epoch_record& r) { board->on_epoch(r); });
    board->enable_checkpoints(!s.checkpoint_dir.empty());
    board->set_faults(ws.faults, ws.fault_counts, allow_faults);
    if (s.pipeline == "decentralized") board->set_history(s.history_bits, s.staleness);
  }
  std::optional<http_endpoint> http;
  if (opts.given("http")) {
    if (coordinates) {
      const endpoint where = parse_endpoint(opts.str("http"), "--http", true);
      if (!is_loopback(where.host) && !opts.flag("insecure")) {
        throw config_error("node: --http " + where.host +
                           " is not a loopback address; pass --insecure to serve the training's "
                           "status there (read-only, unauthenticated)");
      }
      http.emplace(where, *board);
      std::fprintf(stderr, "node 0: status on http://%s:%u/status and /metrics\n",
                   where.host.c_str(), http->port());
    } else {
      std::fprintf(stderr, "node: --http is served by node 0 only; not serving it here\n");
    }
  }

  std::string me_name = mode.kind == launch_mode::static_peers ? "node " + std::to_string(mode.id)
                        : mode.kind == launch_mode::seed       ? "seed"
                                                               : "joiner";
  auto say = [&](const std::string& line) {
    std::fprintf(stderr, "%s: %s\n", me_name.c_str(), line.c_str());
  };
  std::optional<seed_role> seed;
  if (mode.kind == launch_mode::seed) {
    files = manifest_of(s.partitions);
    seed.emplace(seed_role{
        rendezvous(mode.nodes.first, mode.nodes.second, meta.num_parts,
                   {mode.advertise, mode.listen.port, 0,
                    mode.name.empty() ? mode.advertise + ":" + std::to_string(mode.listen.port)
                                      : mode.name}),
        std::chrono::milliseconds(
            static_cast<std::int64_t>(opts.real("last-call", 0, 3600) * 1000)),
        mode.tls, s.partitions, files, start.next_step});
  }
  // The node actor logs under the name it starts with (it may outlive this function's locals).
  const std::string local_key = random_hex(16);
  const node_actor node = spawn_node_actor(
      sys, ctx, identity.lines, std::move(seed),
      [prefix = me_name](const std::string& line) {
        std::fprintf(stderr, "%s: %s\n", prefix.c_str(), line.c_str());
      },
      local_key,
      coordinates ? std::optional<console_role>(console_role{board, mode.tls}) : std::nullopt,
      kill_token);
  caf::scoped_actor self{sys};
  // Whatever ends this function, the local actors stop first: the actor system's destructor waits
  // for every actor, so an error that skipped this would hang the process.
  std::vector<worker_actors> local;
  struct stopper {
    std::function<void()> stop;
    ~stopper() { stop(); }
  } stop_local{[&] {
    for (const auto& w : local)
      stop_worker(self, w);
    self->send_exit(node, caf::exit_reason::user_shutdown);
  }};
  // This node's rank is known: spawn the workers of its partitions and tell the node actor.
  auto serve = [&](const membership& members) {
    const int id = members.rank;
    const auto n = members.view.members.size();
    const auto& mine = members.view.members[static_cast<size_t>(id)].partitions;
    ws.on_reject = log_rejections("node " + std::to_string(id) + ": ");
    if (mode.kind == launch_mode::joiner && !s.resume.empty()) {
      start = load_cluster_start_at(s, rc, ws.run_id, meta.num_parts, members.view.resume_step);
      ws.start = start.state;
    }
    if (parts.empty()) {
      for (int p : mine)
        parts.push_back(load_part(p));
    }
    node_role role{id, static_cast<std::int32_t>(n), mine, {}, {}};
    for (size_t i = 0; i < mine.size(); ++i) {
      local.push_back(spawn_worker(sys, parts[i], book, rc, ws, ctx));
      role.workers.batchers.push_back(caf::actor_cast<caf::strong_actor_ptr>(local.back().batch));
      role.workers.shards.push_back(caf::actor_cast<caf::strong_actor_ptr>(local.back().shard));
      role.workers.stores.push_back(caf::actor_cast<caf::strong_actor_ptr>(local.back().store));
      role.num_train.push_back(static_cast<std::int64_t>(parts[i]->train.size()));
    }
    std::string served;
    for (size_t i = 0; i < mine.size(); ++i)
      served += (i ? "," : "") + std::to_string(mine[i]);
    role.view_secret = members.view.secret;
    self->request(node, std::chrono::seconds(10), serve_atom_v, role, local_key)
        .receive([](bool) {}, [&](caf::error& e) { throw std::runtime_error(sys.render(e)); });
    return served;
  };
  // A static node serves before it publishes: whoever reaches it finds its workers.
  membership served_static;
  std::string served;
  if (mode.kind == launch_mode::static_peers) {
    served_static = {static_view(mode.peers), mode.id};
    served = serve(served_static);
  }
  // Published as a typed handle, so a peer of another protocol fails at connection time.
  const auto published =
      mode.tls ? caf::openssl::publish(node, mode.listen.port, mode.listen.host.c_str(), true)
               : sys.middleman().publish(node, mode.listen.port, mode.listen.host.c_str(), true);
  if (!published) {
    throw std::runtime_error(me_name + ": cannot listen on " + mode.listen.str() + ": " +
                             sys.render(published.error()));
  }
  const endpoint me{mode.advertise, *published};

  // -- membership: who is in the cluster, which rank this node is, which partitions it serves --
  membership members;
  if (mode.kind == launch_mode::static_peers) {
    members = served_static;
  } else {
    const deadline until = join_until;
    const std::string how = mode.found_by.empty() ? "" : " (found through " + mode.found_by + ")";
    if (mode.kind == launch_mode::seed) {
      say("listening on " + me.str() + how + " as the seed, waiting for " +
          (mode.nodes.first == mode.nodes.second
               ? std::to_string(mode.nodes.first)
               : std::to_string(mode.nodes.first) + " to " + std::to_string(mode.nodes.second)) +
          " nodes");
      members = await_formation(self, node, ctx, until, local_key);
      if (board) {
        board->set_view(members.view);
        board->set_phase("connecting");
      }
    } else {
      wire::join_request req{ctx.cluster_id, identity.lines,
                             me.host,        me.port,
                             mode.rank_hint, mode.name.empty() ? me.str() : mode.name};
      say("listening on " + me.str() + ", joining the seed at " + mode.seed_address.str() + how);
      members = join_cluster(sys, self, seed_node, mode.seed_address, req, mode.tls, ctx, until);
    }
  }
  const int id = members.rank;
  const auto n = members.view.members.size();
  me_name = "node " + std::to_string(id);
  // Greetings that reach this node while it downloads say how far it is.
  fetch_progress = [&](std::uint64_t done, std::uint64_t total) {
    char status[64];
    std::snprintf(status, sizeof status, "%.1f of %.1f MB", static_cast<double>(done) / 1e6,
                  static_cast<double>(total) / 1e6);
    self->send(node, fetching_atom_v, std::string(status), local_key);
  };
  if (mode.kind == launch_mode::joiner) {
    std::vector<std::string> mine;
    for (int p : members.view.members[static_cast<size_t>(id)].partitions)
      mine.push_back(partition_file(p));
    seed_files->fetch(mine, fetch_progress);
  }
  if (mode.kind != launch_mode::static_peers) served = serve(members);
  say("partition " + served + " (" + std::to_string(n) + " nodes, view " +
      std::to_string(members.view.id) + "), listening on " + me.str());
  // Every node waits --connect-timeout for the others, plus the time the largest download may
  // take at 10 MB/s (a member fetches at most its partitions from the seed before it answers).
  std::uint64_t largest_download = 0;
  if (mode.kind != launch_mode::static_peers) {
    for (const auto& m : members.view.members) {
      std::uint64_t bytes = 0;
      for (int p : m.partitions)
        if (const auto* f = files.find(partition_file(p))) bytes += f->size;
      largest_download = std::max(largest_download, bytes);
    }
  }
  const deadline until = std::chrono::steady_clock::now() +
                         std::chrono::seconds(opts.integer("connect-timeout", 1)) +
                         std::chrono::seconds(largest_download / 10'000'000);
  std::vector<node_actor> nodes(n);
  nodes[static_cast<size_t>(id)] = node;
  cluster_handles view;
  view.batchers.resize(static_cast<size_t>(meta.num_parts));
  view.shards.resize(static_cast<size_t>(meta.num_parts));
  view.stores.resize(static_cast<size_t>(meta.num_parts));
  auto fail = [&](const std::string& what) { throw std::runtime_error(me_name + ": " + what); };
  // Ask `what` of rank p until it stops answering not_ready (it may still load its partitions).
  auto ask_until_ready = [&](size_t p, const char* what, auto&& ask) {
    while (true) {
      const caf::error e = ask();
      if (!e) return;
      const bool not_ready = e.category() == caf::detail::error_factory<actor_errc>::category &&
                             e.code() == static_cast<std::uint8_t>(actor_errc::not_ready);
      if (!not_ready || std::chrono::steady_clock::now() > until)
        fail(std::string(what) + " node " + std::to_string(p) + " failed: " + sys.render(e));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  };
  // Rank p's worker actors, whose handles come in the reply of its node actor.
  auto take_workers = [&](size_t p) {
    const auto& theirs = members.view.members[p].partitions;
    ask_until_ready(p, "asking for the actors of", [&] {
      caf::error failure;
      self->request(nodes[p], std::chrono::seconds(10), workers_atom_v)
          .receive(
              [&](peer_view& w) {
                if (w.batchers.size() != theirs.size() || w.shards.size() != theirs.size() ||
                    w.stores.size() != theirs.size()) {
                  failure =
                      actor_error(actor_errc::rejected, "it named the wrong number of actors");
                  return;
                }
                for (size_t i = 0; i < theirs.size(); ++i) {
                  const auto part = static_cast<size_t>(theirs[i]);
                  view.batchers[part] = caf::actor_cast<batch_actor>(w.batchers[i]);
                  view.shards[part] = caf::actor_cast<shard_actor>(w.shards[i]);
                  view.stores[part] = caf::actor_cast<store_actor>(w.stores[i]);
                }
              },
              [&](caf::error& e) { failure = std::move(e); });
      return failure;
    });
  };
  // Node K connects to every p < K and greets it with its own node actor; p reaches K through
  // that actor over the same connection. One connection per pair of nodes, made by the higher
  // rank: CAF 0.17's BASP can leave a route that drops every message when two nodes connect to
  // each other (seen about once in ten 4-node runs when both did), and with TLS a second
  // connection between two nodes never carries a reply.
  auto connect_to = [&](size_t p) {
    const auto& m = members.view.members[p];
    // One connection per pair of nodes: a joiner already reached the seed (rank 0).
    nodes[p] = p == 0 && seed_node ? seed_node
                                   : connect<node_actor>(sys, {m.host, m.port}, until, "node",
                                                         mode.tls.has_value());
    ask_until_ready(p, "greeting", [&] {
      caf::error failure;
      self->request(nodes[p], std::chrono::seconds(10), greet_atom_v,
                    node_greeting{static_cast<std::int32_t>(id), identity.lines,
                                  caf::actor_cast<caf::strong_actor_ptr>(node), members.view.secret,
                                  p == 0 ? kill_token : ""})
          .receive([](std::int32_t) {}, [&](caf::error& e) { failure = std::move(e); });
      return failure;
    });
    take_workers(p);
  };
  auto greeting_of = [&](size_t p) {
    caf::strong_actor_ptr theirs;
    std::string refused;
    self->request(node, std::chrono::seconds(10), greeted_atom_v, static_cast<std::int32_t>(p))
        .receive([&](node_greeting& g) { theirs = g.node; },
                 [&](caf::error& e) { refused = sys.render(e); });
    if (!refused.empty()) fail("refused node " + std::to_string(p) + ": " + refused);
    return theirs;
  };
  take_workers(static_cast<size_t>(id));
  for (size_t p = 0; p < static_cast<size_t>(id); ++p)
    connect_to(p);
  for (size_t p = static_cast<size_t>(id) + 1; p < n; ++p) {
    caf::strong_actor_ptr theirs;
    while (!(theirs = greeting_of(p))) {
      if (std::chrono::steady_clock::now() > until)
        fail("node " + std::to_string(p) + " never connected (see --connect-timeout)");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    nodes[p] = caf::actor_cast<node_actor>(theirs);
    take_workers(p);
  }
  const peer_view all = view.view();
  // Through the node actor, which answers node 0's readiness question only from now on.
  self->request(node, std::chrono::seconds(10), view_atom_v, all, local_key)
      .receive([](bool) {}, [&](caf::error& e) { fail("the view: " + sys.render(e)); });
  say("connected to " + std::to_string(n - 1) + " peers");

  if (board && mode.kind == launch_mode::static_peers) board->set_view(members.view);
  if (id != 0) {
    // Serve until node 0 goes away; it said bye first if the run ended (every node stays until
    // then, so no connection closes while node 0 still says bye to the others).
    self->monitor(node);
    self->monitor(nodes[0]);
    bool node0_gone = false;
    self->receive([&](caf::down_msg& d) { node0_gone = d.source == nodes[0].address(); });
    bool clean = false;
    if (node0_gone) {
      self->request(node, std::chrono::seconds(10), farewell_atom_v, local_key)
          .receive([&](bool said) { clean = said; }, [](caf::error&) {});
    }
    if (!clean) throw std::runtime_error(me_name + ": lost the coordinator (node 0); stopping");
    say("stopped by the coordinator");
    return 0;
  }

  // Node 0: wait until every node's actors reached every other node's once, then train.
  coordinator coord(self.ptr(), view.batchers, view.shards, view.stores, ctx, ws.timeout);
  std::vector<std::size_t> train_sizes(static_cast<size_t>(meta.num_parts));
  for (size_t p = 0; p < n; ++p) {
    const auto& theirs = members.view.members[p].partitions;
    while (true) {
      bool ok = false;
      self->request(nodes[p], std::chrono::seconds(10), ready_atom_v, all)
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
      if (std::chrono::steady_clock::now() > until)
        fail("node " + std::to_string(p) + " never became ready");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  std::vector<double> losses;
  cluster_result result;
  try {
    const auto per_epoch = batches_per_epoch(train_sizes, s.batch_size);
    if (board) {
      board->set_steps_per_epoch(per_epoch);
      board->set_phase("training");
    }
    result = drive_training(
        coord, s, rc, per_epoch, start.next_step, *report,
        [&](std::uint64_t step, double loss) {
          losses.push_back(loss);
          if (board) board->on_step(step, loss);
        },
        [&]() -> console_asks {
          if (!board) return {};
          // A paused run still notices a failed cluster within a second.
          return board->between_steps([&] {
            const coordinator_status st = coord.status();
            if (st.phase() == coordinator_phase::failed) throw std::runtime_error(st.error);
          });
        });
  } catch (const std::exception& e) {
    if (board) board->set_phase("failed");
    throw std::runtime_error(me_name + ": " + with_node_of_partition(members.view, e.what()));
  }
  report->finish();
  if (board) board->set_phase("finished");
  print_node_summary(result, *report, losses);
  for (size_t p = 1; p < n; ++p) {
    self->request(nodes[p], std::chrono::seconds(10), bye_atom_v, members.view.secret)
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
