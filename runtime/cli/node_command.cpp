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

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <thread>

#include "actors/coordinator.hpp"
#include "model/feature_transform.hpp"
#include "model/partition_store.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/cli/fault_options.hpp"
#include "runtime/cli/node_options.hpp"
#include "runtime/cli/train_options.hpp"
#include "runtime/console/console_commands.hpp"
#include "runtime/console/console_gateway.hpp"
#include "runtime/console/http_endpoint.hpp"
#include "runtime/node/launch_mode.hpp"
#include "runtime/node/node_actor.hpp"
#include "runtime/node/node_membership.hpp"
#include "runtime/node/node_mesh.hpp"
#include "runtime/node/node_recovery.hpp"
#include "runtime/node/partition_transfer.hpp"
#include "runtime/node/seed_discovery.hpp"
#include "runtime/node/seed_file_client.hpp"
#include "runtime/process/compute_threads.hpp"
#include "runtime/process/process_stats.hpp"
#include "runtime/train/cluster_identity.hpp"
#include "runtime/train/cluster_resume.hpp"
#include "runtime/train/cluster_trainer.hpp"
#include "runtime/train/status_board.hpp"
#include "runtime/train/worker_actors.hpp"
#include "runtime/transport/endpoint.hpp"

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
  // Without TLS, whoever reaches the port is a peer (the door bounds what a stranger costs, not
  // what a peer may ask): stay on loopback unless the operator accepts that.
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
  // Heartbeats on every connection: a peer that stops answering (SIGSTOP, a cut link) is dropped
  // after the connection timeout, which the coordinator sees as a lost actor.
  const auto heartbeat = std::chrono::milliseconds(opts.integer("heartbeat-ms", 10, 60'000));
  const auto silence = heartbeat * opts.integer("heartbeat-misses", 2, 1000);
  cfg.set("middleman.heartbeat-interval", caf::timespan{heartbeat});
  cfg.set("middleman.connection-timeout", caf::timespan{silence});
  caf::actor_system sys{cfg};
  // The node's one door (before anything connects; destroyed after every actor stopped). Its
  // refusals are logged under the address it listens on, the one name fixed from the start.
  peer_door door(
      sys, door_settings{.tls = mode.tls,
                         .log = [prefix = "node at " + mode.listen.str()](const std::string& line) {
                           std::fprintf(stderr, "%s: %s\n", prefix.c_str(), line.c_str());
                         }});
  const deadline join_until =
      std::chrono::steady_clock::now() + std::chrono::seconds(opts.integer("join-timeout", 1));
  // A joiner needs no shared filesystem: the files it lacks (or holds with another checksum)
  // come from the seed, the set's description now and its partitions once it has a rank.
  node_actor seed_node;
  std::optional<seed_file_client> seed_files;
  wire::file_manifest files;  ///< the seed's partition files (on the seed and on joiners)
  std::function<void(std::uint64_t, std::uint64_t)> fetch_progress;  // set once the node actor runs
  if (mode.kind == launch_mode::joiner) {
    seed_node = connect<node_actor>(sys, door, mode.seed_address, join_until, "seed");
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
    apply_feature_settings(*loaded, s.sparse_features, s.normalize_features);
    return std::shared_ptr<const graph_partition>(std::move(loaded));
  };
  // A static node knows its partition now and reads it before anything starts; an adopted one
  // (a recovery) is read when it is given.
  std::map<int, std::shared_ptr<const graph_partition>> parts;
  if (mode.kind == launch_mode::static_peers) parts[mode.id] = load_part(mode.id);
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
  recovery_settings recovery{read_recover_mode(opts, s, mode),
                             s.checkpoint_dir,
                             std::chrono::seconds(opts.integer("replace-timeout", 1, 86'400)),
                             {}};
  const bool recovers = recovery.mode != "off";
  identity.lines.push_back("recover=" + recovery.mode);
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
    enable_console_traces(*board, opts, s);
  }
  const auto http =
      node_http_endpoint(opts.str("http"), opts.flag("insecure"), coordinates, board.get());

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
        mode.tls, s.partitions, files, start.next_step, s.checkpoint_dir});
  }
  // The node actor logs under the name it starts with (it may outlive this function's locals).
  const std::string local_key = random_hex(16);
  const node_actor node = spawn_node_actor(
      sys, ctx, identity.lines, std::move(seed),
      [prefix = me_name](const std::string& line) {
        std::fprintf(stderr, "%s: %s\n", prefix.c_str(), line.c_str());
      },
      local_key,
      coordinates
          ? std::optional<console_role>(console_role{
                board,
                [board](const std::string& command) { return answer_console(*board, command); },
                mode.tls})
          : std::nullopt,
      kill_token, allow_faults ? ws.fault_counts : nullptr);
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
  // After the guard (a bad --console must still stop the node actor), destroyed before it runs.
  const auto gate =
      node_console_gateway(opts.str("console"), coordinates, mode.tls, sys, node, local_key);
  // This node's rank is known: spawn the workers of its partitions and tell the node actor.
  auto serve = [&](const membership& members) {
    const int id = members.rank;
    const auto n = members.view.members.size();
    const auto& mine = members.view.members[static_cast<size_t>(id)].partitions;
    ws.on_reject = log_rejections("node " + std::to_string(id) + ": ");
    node_role role{id, static_cast<std::int32_t>(n), mine,           {},
                   {}, members.view.secret,          members.view.id};
    std::string served;
    for (int p : mine) {
      auto& part = parts[p];
      if (!part) part = load_part(p);
      local.push_back(spawn_worker(sys, part, book, rc, ws, ctx));
      role.workers.batchers.push_back(caf::actor_cast<caf::strong_actor_ptr>(local.back().batch));
      role.workers.shards.push_back(caf::actor_cast<caf::strong_actor_ptr>(local.back().shard));
      role.workers.stores.push_back(caf::actor_cast<caf::strong_actor_ptr>(local.back().store));
      role.num_train.push_back(static_cast<std::int64_t>(part->train.size()));
      served += (served.empty() ? "" : ",") + std::to_string(p);
    }
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
  std::uint16_t published = 0;
  try {
    published = door.listen(mode.listen, caf::actor_cast<caf::strong_actor_ptr>(node),
                            sys.message_types(node));
  } catch (const std::exception& e) {
    throw std::runtime_error(me_name + ": " + e.what());
  }
  const endpoint me{mode.advertise, published};
  recovery.seed_address = me.str();

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
  // A joiner fetches the partitions it is given that it lacks (also those a recovery gives it).
  auto fetch_missing = [&](const wire::membership_view& v) {
    if (!seed_files) return;
    std::vector<std::string> mine;
    for (int p : v.members[static_cast<size_t>(id)].partitions)
      if (!parts.count(p)) mine.push_back(partition_file(p));
    seed_files->fetch(mine, fetch_progress);
  };
  fetch_missing(members.view);
  if (mode.kind == launch_mode::joiner && members.view.id > 1) {
    // A replacement: the state every member rolled back to comes from the seed.
    say("replacing a lost node in view " + std::to_string(members.view.id));
    start = replacement_start(sys, seed_node, mode.seed_address.str(), s.checkpoint_dir, rc,
                              ws.run_id, meta.num_parts, members.view.resume_step);
    ws.start = start.state;
  } else if (mode.kind == launch_mode::joiner && !s.resume.empty()) {
    start = load_cluster_start_at(s, rc, ws.run_id, meta.num_parts, members.view.resume_step);
    ws.start = start.state;
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
  const auto connect_time = std::chrono::seconds(opts.integer("connect-timeout", 1)) +
                            std::chrono::seconds(largest_download / 10'000'000);
  node_mesh mesh(sys, self, node, local_key, door, meta.num_parts);
  mesh.form(members, identity.lines, seed_node, kill_token,
            std::chrono::steady_clock::now() + connect_time);
  say("connected to " + std::to_string(n - 1) + " peers");

  // A recovery, on every surviving node: the workers roll back to the commit the view names and
  // serve the view's partitions (the ones kept and the ones adopted), then take every member's
  // new workers. Steps after that commit are redone exactly (see --recover).
  const cluster_start first_start = start;  // before any commit of this run, rolls back here
  auto move_to = [&](const wire::membership_view& next) {
    for (const auto& w : local)
      stop_worker(self, w);
    local.clear();
    members.view = next;
    start = next.resume_step == first_start.next_step
                ? first_start
                : load_cluster_start_in(s.checkpoint_dir, rc, ws.run_id, meta.num_parts,
                                        next.resume_step);
    ws.start = start.state;
    fetch_missing(next);
    served = serve(members);
    say("view " + std::to_string(next.id) + ": serving partition " + served +
        ", rolled back to step " + std::to_string(next.resume_step));
    mesh.rewire(members, std::chrono::steady_clock::now() + connect_time);
  };
  if (board && mode.kind == launch_mode::static_peers) board->set_view(members.view);
  if (id != 0) {
    // Serve until node 0 goes away; it said bye first if the run ended (every node stays until
    // then, so no connection closes while node 0 still says bye to the others).
    self->monitor(node);
    self->monitor(mesh.node_of(0));
    bool node0_gone = false, down = false;
    while (!down) {
      self->receive(
          [&](caf::down_msg& d) {
            down = true;
            node0_gone = d.source == mesh.node_of(0).address();
          },
          caf::after(std::chrono::milliseconds(100)) >> [] {});
      if (down || !recovers) continue;
      std::vector<char> next;
      self->request(node, std::chrono::seconds(10), recovery_atom_v, local_key)
          .receive([&](std::vector<char>& b) { next = std::move(b); }, [](caf::error&) {});
      if (next.empty()) continue;
      const wire::membership_view view = wire::decode_membership_view(ctx, next);
      const auto& replaced = view.replaced;
      if (view.members[static_cast<size_t>(id)].lost ||
          std::find(replaced.begin(), replaced.end(), id) != replaced.end())
        throw std::runtime_error(me_name + ": node 0 counted this node lost in view " +
                                 std::to_string(view.id) +
                                 " (it did not answer within the heartbeat's silence); stopping");
      move_to(view);
    }
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
  std::optional<coordinator> coord;
  std::vector<std::size_t> train_sizes;
  auto wire_coordinator = [&] {
    coord.reset();
    const auto& h = mesh.handles();
    coord.emplace(self.ptr(), h.batchers, h.shards, h.stores, ctx, ws.timeout);
    train_sizes = mesh.wait_ready(std::chrono::steady_clock::now() + connect_time);
  };
  wire_coordinator();
  std::vector<double> losses;
  cluster_result result;
  std::uint64_t first_step = start.next_step;
  std::uint64_t recoveries = 0;
  while (true) {
    try {
      const auto per_epoch = batches_per_epoch(train_sizes, s.batch_size);
      if (board) {
        board->set_steps_per_epoch(per_epoch);
        board->set_phase("training");
      }
      result = drive_training(
          *coord, s, rc, per_epoch, first_step, *report,
          [&](std::uint64_t step, double loss) {
            losses.push_back(loss);
            if (!board) return;
            board->on_step(step, loss);
            const coordinator_status st = coord->status();  // a local actor: at once
            board->on_step_times(st.steps_only_us, st.allreduce_only_us, st.overlap_us);
          },
          [&]() -> console_asks {
            if (!board) return {};
            // A paused run still notices a failed cluster within a second.
            return board->between_steps([&] {
              const coordinator_status st = coord->status();
              if (st.phase() == coordinator_phase::failed) throw std::runtime_error(st.error);
            });
          });
      break;
    } catch (const std::exception& e) {
      const std::string why = with_node_of_partition(members.view, e.what());
      stopwatch clock;
      // A member still busy with the failed step answers late, not never: it counts as lost
      // only after the silence the heartbeat allows.
      const std::vector<int> lost =
          recovers ? lost_members(self, node, local_key, mesh, members.view, silence)
                   : std::vector<int>{};
      if (lost.empty()) {
        if (board) board->set_phase("failed");
        throw std::runtime_error(me_name + ": " + why);
      }
      const coordinator_status st = coord->status();
      // Back to the last checkpoint every replica wrote (its commit records may be missing where
      // a node was lost during phase 2); before any: where this training started.
      const std::uint64_t back_to = st.durable_next_step > 0 ? st.durable_next_step : first_step;
      std::string gone;
      for (int r : lost)
        gone += (gone.empty() ? "" : ", ") + std::to_string(r);
      char probed[32];
      std::snprintf(probed, sizeof probed, "%.2f", clock.seconds());
      say("lost node " + gone + " at step " + std::to_string(st.step) + " (" + why + "; found in " +
          probed + " s)");
      if (back_to >=
          static_cast<std::uint64_t>(s.epochs) * batches_per_epoch(train_sizes, s.batch_size)) {
        say("the run's last step was saved before the loss: nothing to redo");
        break;
      }
      if (board) board->set_phase("recovering");
      const wire::membership_view next =
          next_view(self, node, local_key, ctx, members.view, lost, back_to, recovery, say);
      say("view " + std::to_string(next.id) + ": " +
          (next.replaced.empty() ? moved_partitions(members.view, next)
                                 : "node " + gone + " replaced by " +
                                       next.members[static_cast<size_t>(lost[0])].name) +
          "; every node rolls back to step " + std::to_string(back_to) +
          " (the last checkpoint every node wrote)");
      if (board) board->set_view(next);
      if (board && board->drop_trace())
        say("the console's trace ends unwritten: every actor is new");
      announce_view(self, mesh, ctx, members.view, next);
      coord.reset();
      move_to(next);
      wire_coordinator();
      losses.resize(back_to - first_start.next_step);
      first_step = back_to;
      ++recoveries;
      char took[32];
      std::snprintf(took, sizeof took, "%.2f", clock.seconds());
      say("recovered in " + std::string(took) + " s: training again from step " +
          std::to_string(back_to) + "; " + std::to_string(st.step - std::min(st.step, back_to)) +
          " steps done since that commit are redone");
    }
  }
  result.recoveries = recoveries;
  report->finish();
  if (board) board->set_phase("finished");
  print_node_summary(result, *report, losses);
  for (size_t p = 1; p < n; ++p) {
    if (members.view.members[p].lost) continue;
    self->request(mesh.node_of(p), std::chrono::seconds(10), bye_atom_v, members.view.secret)
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
