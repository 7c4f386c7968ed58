// The node process phase by phase. Its state lives in one object whose members are declared in
// the order the phases make them, so they are destroyed in the reverse: the console gateway and
// the mesh first, then the local actors stop (`stop_local_`), then the door, the actor system
// last (its destructor waits for every actor, so an error that skipped the stop would hang).
#include "runtime/cli/node_process.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "actors/coordinator.hpp"
#include "model/feature_transform.hpp"
#include "model/partition_store.hpp"
#include "runtime/cli/fault_options.hpp"
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
#include "runtime/process/config_error.hpp"
#include "runtime/process/process_stats.hpp"
#include "runtime/train/cluster_identity.hpp"
#include "runtime/train/cluster_resume.hpp"
#include "runtime/train/cluster_trainer.hpp"
#include "runtime/train/status_board.hpp"
#include "runtime/train/worker_actors.hpp"
#include "runtime/transport/endpoint.hpp"

namespace degnn {
namespace {

/// Runs `stop` when destroyed (set once there is something to stop).
struct stopper {
  std::function<void()> stop;
  ~stopper() {
    if (stop) stop();
  }
};

/// Node 0's console traces go into --trace-dir (which must be a folder); refused when the run
/// traces itself (--trace) or has no --trace-dir.
void enable_console_traces(status_board& board, const std::optional<std::string>& dir,
                           const train_settings& s) {
  if (!s.trace.empty()) {
    board.enable_traces("", "this run traces to " + s.trace + " already (--trace)");
    return;
  }
  if (!dir) return;
  if (!std::filesystem::is_directory(*dir))
    throw config_error("node: --trace-dir " + *dir + " is not a folder");
  board.enable_traces(*dir);
}

class node_process {
 public:
  explicit node_process(node_process_settings settings);
  int run();

 private:
  // The phases, in the order run() takes them.
  void load();
  void start_node_actor();
  void publish();
  void form_membership();
  void take_partitions();
  void connect_mesh();
  int serve_until_stopped();
  int coordinate();
  /// After a failed training run: true to train again from the new view's commit, false when
  /// the run's last step was saved already; throws when nothing can be recovered.
  bool recover(const std::exception& failure);
  int finish();

  void say(const std::string& line) const;
  std::shared_ptr<const graph_partition> load_part(int p) const;
  std::string serve(const membership& members);
  void fetch_missing(const wire::membership_view& v);
  void move_to(const wire::membership_view& next);
  void wire_coordinator();

  node_process_settings settings_;
  train_settings& s_ = settings_.train;
  launch_mode& mode_ = settings_.mode;
  caf::actor_system_config cfg_;
  bool configured_;  ///< set by configure(), before sys_ is made of cfg_
  caf::actor_system sys_;
  peer_door door_;  ///< the node's one door: before anything connects, after every actor stopped
  deadline join_until_;
  node_actor seed_node_;  ///< a joiner's connection to the seed
  std::optional<seed_file_client> seed_files_;
  wire::file_manifest files_;  ///< the seed's partition files (on the seed and on joiners)
  partition_meta meta_;
  std::shared_ptr<const partition_book> book_;
  std::map<int, std::shared_ptr<const graph_partition>> parts_;
  replica_config rc_;
  cluster_identity identity_;
  wire::context ctx_;
  worker_settings ws_;
  std::optional<fault_summary_at_exit> report_faults_;
  cluster_start start_;
  std::string kill_token_;
  recovery_settings recovery_;
  bool recovers_ = false;
  bool coordinates_ = false;
  std::optional<training_report> report_;
  std::shared_ptr<status_board> board_;
  std::unique_ptr<http_endpoint> http_;
  std::string me_name_;
  std::string local_key_;
  node_actor node_;
  std::optional<caf::scoped_actor> self_;
  std::vector<worker_actors> local_;
  stopper stop_local_;
  std::unique_ptr<console_gateway> gate_;  ///< destroyed before stop_local_ runs
  std::string served_;
  endpoint me_;
  membership members_;
  int id_ = 0;
  std::size_t n_ = 0;
  std::chrono::seconds connect_time_{0};
  std::optional<node_mesh> mesh_;
  cluster_start first_start_;  ///< before any commit of this run: a recovery rolls back here
  std::optional<coordinator> coord_;
  std::vector<std::size_t> train_sizes_;
  std::vector<double> losses_;
  std::uint64_t first_step_ = 0;
  std::uint64_t recoveries_ = 0;
  cluster_result result_;

  bool configure();
};

node_process::node_process(node_process_settings settings)
    : settings_(std::move(settings)),
      configured_(configure()),
      sys_(cfg_),
      // Its refusals are logged under the address it listens on, the one name fixed from the start.
      door_(sys_,
            door_settings{.tls = mode_.tls,
                          .log =
                              [prefix = "node at " + mode_.listen.str()](const std::string& line) {
                                std::fprintf(stderr, "%s: %s\n", prefix.c_str(), line.c_str());
                              }}),
      join_until_(std::chrono::steady_clock::now() + settings_.join_timeout) {}

bool node_process::configure() {
  if (s_.threads > 0) use_compute_threads(cfg_, s_.threads);
  add_actor_types(cfg_);
  add_runtime_types(cfg_);
  cfg_.load<caf::io::middleman>();
  // Heartbeats on every connection: a peer that stops answering (SIGSTOP, a cut link) is dropped
  // after the connection timeout, which the coordinator sees as a lost actor.
  cfg_.set("middleman.heartbeat-interval", caf::timespan{settings_.heartbeat});
  cfg_.set("middleman.connection-timeout", caf::timespan{settings_.silence});
  return true;
}

int node_process::run() {
  load();
  start_node_actor();
  publish();
  form_membership();
  take_partitions();
  connect_mesh();
  return id_ == 0 ? coordinate() : serve_until_stopped();
}

void node_process::say(const std::string& line) const {
  std::fprintf(stderr, "%s: %s\n", me_name_.c_str(), line.c_str());
}

std::shared_ptr<const graph_partition> node_process::load_part(int p) const {
  auto loaded = std::make_shared<graph_partition>(load_partition(s_.partitions, p));
  apply_feature_settings(*loaded, s_.sparse_features, s_.normalize_features);
  return loaded;
}

// Everything that can be checked is checked before any actor starts: an error after that point
// must first stop the actors (stop_local_).
void node_process::load() {
  // A joiner needs no shared filesystem: the files it lacks (or holds with another checksum)
  // come from the seed, the set's description now and its partitions once it has a rank.
  if (mode_.kind == launch_mode::joiner) {
    seed_node_ = connect<node_actor>(sys_, door_, mode_.seed_address, join_until_, "seed");
    seed_files_.emplace(sys_, seed_node_, mode_.seed_address.str(), s_.partitions);
    seed_files_->fetch({kPartitionMetaName, "owner.bin"});
    files_ = seed_files_->manifest();
  }
  meta_ = load_partition_meta(s_.partitions);
  mode_.fit_partitions(meta_.num_parts);
  check_fault_links(s_.faults.get(), meta_.num_parts);
  resolve_batch_size(s_, meta_.num_parts);
  book_ = std::make_shared<const partition_book>(load_partition_book(s_.partitions));
  // A static node knows its partition now and reads it before anything starts; an adopted one
  // (a recovery) is read when it is given.
  if (mode_.kind == launch_mode::static_peers) parts_[mode_.id] = load_part(mode_.id);
  rc_ = s_.model;
  rc_.in_dim = meta_.num_features;
  rc_.num_classes = meta_.num_classes;
  identity_ = identity_of(s_, meta_);
  ctx_ = wire::context{.cluster_id = identity_.hash()};
  ws_ = make_worker_settings(s_);
  ws_.run_id = identity_.checkpoint_run_id();
  report_faults_.emplace(ws_.faults, ws_.fault_counts);
  if (settings_.crash_after_step) ws_.on_step = crash_after_step(*settings_.crash_after_step);
  // Resuming: each node reads its own copy of the run's last commit; a joiner learns the step
  // from its seed's view (every node holds the file of any commit).
  if (mode_.kind != launch_mode::joiner)
    start_ = load_cluster_start(s_, rc_, ws_.run_id, meta_.num_parts);
  ws_.start = start_.state;
  add_resume_identity(identity_, s_, mode_.kind == launch_mode::static_peers, start_);
  kill_token_ = settings_.allow_faults ? random_hex(16) : "";
  identity_.lines.push_back(std::string("fault_commands=") +
                            (settings_.allow_faults ? "allowed" : "refused"));
  recovery_ = {settings_.recover, s_.checkpoint_dir, settings_.replace_timeout, {}};
  recovers_ = recovery_.mode != "off";
  identity_.lines.push_back("recover=" + recovery_.mode);
  coordinates_ =
      mode_.kind == launch_mode::seed || (mode_.kind == launch_mode::static_peers && mode_.id == 0);
  // Node 0 opens its metrics file now: a bad path is refused before the cluster forms. Its status
  // board (read by the console and the HTTP endpoint) and its read-only HTTP endpoint are up
  // before the cluster forms too (a bad address is refused now).
  if (coordinates_) {
    report_.emplace(meta_.dataset_name + "/node-cluster", s_.metrics, s_.progress);
    board_ = std::make_shared<status_board>(meta_.dataset_name, s_.pipeline, s_.epochs);
    report_->observe([board = board_](const epoch_record& r) { board->on_epoch(r); });
    board_->enable_checkpoints(!s_.checkpoint_dir.empty());
    board_->set_faults(ws_.faults, ws_.fault_counts, settings_.allow_faults);
    if (s_.pipeline == "decentralized") board_->set_history(s_.history_bits, s_.staleness);
    enable_console_traces(*board_, settings_.trace_dir, s_);
  }
  http_ = node_http_endpoint(settings_.http, settings_.insecure, coordinates_, board_.get());
  me_name_ = mode_.kind == launch_mode::static_peers ? "node " + std::to_string(mode_.id)
             : mode_.kind == launch_mode::seed       ? "seed"
                                                     : "joiner";
}

void node_process::start_node_actor() {
  std::optional<seed_role> seed;
  if (mode_.kind == launch_mode::seed) {
    files_ = manifest_of(s_.partitions);
    seed.emplace(seed_role{
        rendezvous(mode_.nodes.first, mode_.nodes.second, meta_.num_parts,
                   {mode_.advertise, mode_.listen.port, 0,
                    mode_.name.empty() ? mode_.advertise + ":" + std::to_string(mode_.listen.port)
                                       : mode_.name}),
        settings_.last_call, mode_.tls, s_.partitions, files_, start_.next_step,
        s_.checkpoint_dir});
  }
  // The node actor logs under the name it starts with (it may outlive this object's members).
  local_key_ = random_hex(16);
  node_ = spawn_node_actor(
      sys_, ctx_, identity_.lines, std::move(seed),
      [prefix = me_name_](const std::string& line) {
        std::fprintf(stderr, "%s: %s\n", prefix.c_str(), line.c_str());
      },
      local_key_,
      coordinates_
          ? std::optional<console_role>(console_role{board_,
                                                     [board = board_](const std::string& command) {
                                                       return answer_console(*board, command);
                                                     },
                                                     mode_.tls})
          : std::nullopt,
      kill_token_, settings_.allow_faults ? ws_.fault_counts : nullptr);
  self_.emplace(sys_);
  // Whatever ends the process from here, the local actors stop first.
  stop_local_.stop = [this] {
    for (const auto& w : local_)
      stop_worker(*self_, w);
    (*self_)->send_exit(node_, caf::exit_reason::user_shutdown);
  };
  // After the guard (a bad --console must still stop the node actor), destroyed before it runs.
  gate_ = node_console_gateway(settings_.console, coordinates_, mode_.tls, sys_, node_, local_key_);
}

// This node's rank is known: spawns the workers of its partitions and tells the node actor.
std::string node_process::serve(const membership& members) {
  const int id = members.rank;
  const auto n = members.view.members.size();
  const auto& mine = members.view.members[static_cast<size_t>(id)].partitions;
  ws_.on_reject = log_rejections("node " + std::to_string(id) + ": ");
  node_role role{id, static_cast<std::int32_t>(n), mine,           {},
                 {}, members.view.secret,          members.view.id};
  std::string served;
  for (int p : mine) {
    auto& part = parts_[p];
    if (!part) part = load_part(p);
    local_.push_back(spawn_worker(sys_, part, book_, rc_, ws_, ctx_));
    role.workers.batchers.push_back(caf::actor_cast<caf::strong_actor_ptr>(local_.back().batch));
    role.workers.shards.push_back(caf::actor_cast<caf::strong_actor_ptr>(local_.back().shard));
    role.workers.stores.push_back(caf::actor_cast<caf::strong_actor_ptr>(local_.back().store));
    role.num_train.push_back(static_cast<std::int64_t>(part->train.size()));
    served += (served.empty() ? "" : ",") + std::to_string(p);
  }
  (*self_)
      ->request(node_, std::chrono::seconds(10), serve_atom_v, role, local_key_)
      .receive([](bool) {}, [&](caf::error& e) { throw std::runtime_error(sys_.render(e)); });
  return served;
}

void node_process::publish() {
  // A static node serves before it publishes: whoever reaches it finds its workers.
  if (mode_.kind == launch_mode::static_peers) {
    members_ = {static_view(mode_.peers), mode_.id};
    served_ = serve(members_);
  }
  // Published as a typed handle, so a peer of another protocol fails at connection time.
  std::uint16_t published = 0;
  try {
    published = door_.listen(mode_.listen, caf::actor_cast<caf::strong_actor_ptr>(node_),
                             sys_.message_types(node_));
  } catch (const std::exception& e) {
    throw std::runtime_error(me_name_ + ": " + e.what());
  }
  me_ = endpoint{mode_.advertise, published};
  recovery_.seed_address = me_.str();
}

// Who is in the cluster, which rank this node is, which partitions it serves.
void node_process::form_membership() {
  if (mode_.kind != launch_mode::static_peers) {
    const std::string how = mode_.found_by.empty() ? "" : " (found through " + mode_.found_by + ")";
    if (mode_.kind == launch_mode::seed) {
      say("listening on " + me_.str() + how + " as the seed, waiting for " +
          (mode_.nodes.first == mode_.nodes.second
               ? std::to_string(mode_.nodes.first)
               : std::to_string(mode_.nodes.first) + " to " + std::to_string(mode_.nodes.second)) +
          " nodes");
      members_ = await_formation(*self_, node_, ctx_, join_until_, local_key_);
      if (board_) {
        board_->set_view(members_.view);
        board_->set_phase("connecting");
      }
    } else {
      wire::join_request req{ctx_.cluster_id, identity_.lines,
                             me_.host,        me_.port,
                             mode_.rank_hint, mode_.name.empty() ? me_.str() : mode_.name};
      say("listening on " + me_.str() + ", joining the seed at " + mode_.seed_address.str() + how);
      members_ = join_cluster(sys_, *self_, seed_node_, mode_.seed_address, req, mode_.tls, ctx_,
                              join_until_);
    }
  }
  id_ = members_.rank;
  n_ = members_.view.members.size();
  me_name_ = "node " + std::to_string(id_);
}

// A joiner fetches the partitions it is given that it lacks (also those a recovery gives it);
// greetings that reach this node while it downloads say how far it is.
void node_process::fetch_missing(const wire::membership_view& v) {
  if (!seed_files_) return;
  std::vector<std::string> mine;
  for (int p : v.members[static_cast<size_t>(id_)].partitions)
    if (!parts_.count(p)) mine.push_back(partition_file(p));
  seed_files_->fetch(mine, [this](std::uint64_t done, std::uint64_t total) {
    char status[64];
    std::snprintf(status, sizeof status, "%.1f of %.1f MB", static_cast<double>(done) / 1e6,
                  static_cast<double>(total) / 1e6);
    (*self_)->send(node_, fetching_atom_v, std::string(status), local_key_);
  });
}

void node_process::take_partitions() {
  fetch_missing(members_.view);
  if (mode_.kind == launch_mode::joiner && members_.view.id > 1) {
    // A replacement: the state every member rolled back to comes from the seed.
    say("replacing a lost node in view " + std::to_string(members_.view.id));
    start_ = replacement_start(sys_, seed_node_, mode_.seed_address.str(), s_.checkpoint_dir, rc_,
                               ws_.run_id, meta_.num_parts, members_.view.resume_step);
    ws_.start = start_.state;
  } else if (mode_.kind == launch_mode::joiner && !s_.resume.empty()) {
    start_ = load_cluster_start_at(s_, rc_, ws_.run_id, meta_.num_parts, members_.view.resume_step);
    ws_.start = start_.state;
  }
  if (mode_.kind != launch_mode::static_peers) served_ = serve(members_);
  say("partition " + served_ + " (" + std::to_string(n_) + " nodes, view " +
      std::to_string(members_.view.id) + "), listening on " + me_.str());
}

void node_process::connect_mesh() {
  // Every node waits --connect-timeout for the others, plus the time the largest download may
  // take at 10 MB/s (a member fetches at most its partitions from the seed before it answers).
  std::uint64_t largest_download = 0;
  if (mode_.kind != launch_mode::static_peers) {
    for (const auto& m : members_.view.members) {
      std::uint64_t bytes = 0;
      for (int p : m.partitions)
        if (const auto* f = files_.find(partition_file(p))) bytes += f->size;
      largest_download = std::max(largest_download, bytes);
    }
  }
  connect_time_ = settings_.connect_timeout + std::chrono::seconds(largest_download / 10'000'000);
  mesh_.emplace(sys_, *self_, node_, local_key_, door_, meta_.num_parts);
  mesh_->form(members_, identity_.lines, seed_node_, kill_token_,
              std::chrono::steady_clock::now() + connect_time_);
  say("connected to " + std::to_string(n_ - 1) + " peers");
  first_start_ = start_;
  if (board_ && mode_.kind == launch_mode::static_peers) board_->set_view(members_.view);
}

// A recovery, on every surviving node: the workers roll back to the commit the view names and
// serve the view's partitions (the ones kept and the ones adopted), then take every member's
// new workers. Steps after that commit are redone exactly (see --recover).
void node_process::move_to(const wire::membership_view& next) {
  for (const auto& w : local_)
    stop_worker(*self_, w);
  local_.clear();
  members_.view = next;
  start_ = next.resume_step == first_start_.next_step
               ? first_start_
               : load_cluster_start_in(s_.checkpoint_dir, rc_, ws_.run_id, meta_.num_parts,
                                       next.resume_step);
  ws_.start = start_.state;
  fetch_missing(next);
  served_ = serve(members_);
  say("view " + std::to_string(next.id) + ": serving partition " + served_ +
      ", rolled back to step " + std::to_string(next.resume_step));
  mesh_->rewire(members_, std::chrono::steady_clock::now() + connect_time_);
}

// Any node but 0: serves until node 0 goes away; it said bye first if the run ended (every node
// stays until then, so no connection closes while node 0 still says bye to the others).
int node_process::serve_until_stopped() {
  auto& self = *self_;
  self->monitor(node_);
  self->monitor(mesh_->node_of(0));
  bool node0_gone = false, down = false;
  while (!down) {
    self->receive(
        [&](caf::down_msg& d) {
          down = true;
          node0_gone = d.source == mesh_->node_of(0).address();
        },
        caf::after(std::chrono::milliseconds(100)) >> [] {});
    if (down || !recovers_) continue;
    std::vector<char> next;
    self->request(node_, std::chrono::seconds(10), recovery_atom_v, local_key_)
        .receive([&](std::vector<char>& b) { next = std::move(b); }, [](caf::error&) {});
    if (next.empty()) continue;
    const wire::membership_view view = wire::decode_membership_view(ctx_, next);
    const auto& replaced = view.replaced;
    if (view.members[static_cast<size_t>(id_)].lost ||
        std::find(replaced.begin(), replaced.end(), id_) != replaced.end())
      throw std::runtime_error(me_name_ + ": node 0 counted this node lost in view " +
                               std::to_string(view.id) +
                               " (it did not answer within the heartbeat's silence); stopping");
    move_to(view);
  }
  bool clean = false;
  if (node0_gone) {
    self->request(node_, std::chrono::seconds(10), farewell_atom_v, local_key_)
        .receive([&](bool said) { clean = said; }, [](caf::error&) {});
  }
  if (!clean) throw std::runtime_error(me_name_ + ": lost the coordinator (node 0); stopping");
  say("stopped by the coordinator");
  return 0;
}

// Node 0: waits until every node's actors reached every other node's once.
void node_process::wire_coordinator() {
  coord_.reset();
  const auto& h = mesh_->handles();
  coord_.emplace(self_->ptr(), h.batchers, h.shards, h.stores, ctx_, ws_.timeout);
  train_sizes_ = mesh_->wait_ready(std::chrono::steady_clock::now() + connect_time_);
}

int node_process::coordinate() {
  wire_coordinator();
  first_step_ = start_.next_step;
  while (true) {
    try {
      const auto per_epoch = batches_per_epoch(train_sizes_, s_.batch_size);
      if (board_) {
        board_->set_steps_per_epoch(per_epoch);
        board_->set_phase("training");
      }
      result_ = drive_training(
          *coord_, s_, rc_, per_epoch, first_step_, *report_,
          [&](std::uint64_t step, double loss) {
            losses_.push_back(loss);
            if (!board_) return;
            board_->on_step(step, loss);
            const coordinator_status st = coord_->status();  // a local actor: at once
            board_->on_step_times(st.steps_only_us, st.allreduce_only_us, st.overlap_us);
          },
          [&]() -> console_asks {
            if (!board_) return {};
            // A paused run still notices a failed cluster within a second.
            return board_->between_steps([&] {
              const coordinator_status st = coord_->status();
              if (st.phase() == coordinator_phase::failed) throw std::runtime_error(st.error);
            });
          });
      break;
    } catch (const std::exception& e) {
      if (!recover(e)) break;
    }
  }
  return finish();
}

bool node_process::recover(const std::exception& failure) {
  const std::string why = with_node_of_partition(members_.view, failure.what());
  stopwatch clock;
  // A member still busy with the failed step answers late, not never: it counts as lost only
  // after the silence the heartbeat allows.
  const std::vector<int> lost =
      recovers_ ? lost_members(*self_, node_, local_key_, *mesh_, members_.view, settings_.silence)
                : std::vector<int>{};
  if (lost.empty()) {
    if (board_) board_->set_phase("failed");
    throw std::runtime_error(me_name_ + ": " + why);
  }
  const coordinator_status st = coord_->status();
  // Back to the last checkpoint every replica wrote (its commit records may be missing where a
  // node was lost during phase 2); before any: where this training started.
  const std::uint64_t back_to = st.durable_next_step > 0 ? st.durable_next_step : first_step_;
  std::string gone;
  for (int r : lost)
    gone += (gone.empty() ? "" : ", ") + std::to_string(r);
  char probed[32];
  std::snprintf(probed, sizeof probed, "%.2f", clock.seconds());
  say("lost node " + gone + " at step " + std::to_string(st.step) + " (" + why + "; found in " +
      probed + " s)");
  if (back_to >=
      static_cast<std::uint64_t>(s_.epochs) * batches_per_epoch(train_sizes_, s_.batch_size)) {
    say("the run's last step was saved before the loss: nothing to redo");
    return false;
  }
  if (board_) board_->set_phase("recovering");
  const wire::membership_view next =
      next_view(*self_, node_, local_key_, ctx_, members_.view, lost, back_to, recovery_,
                [this](const std::string& line) { say(line); });
  say("view " + std::to_string(next.id) + ": " +
      (next.replaced.empty()
           ? moved_partitions(members_.view, next)
           : "node " + gone + " replaced by " + next.members[static_cast<size_t>(lost[0])].name) +
      "; every node rolls back to step " + std::to_string(back_to) +
      " (the last checkpoint every node wrote)");
  if (board_) board_->set_view(next);
  if (board_ && board_->drop_trace()) say("the console's trace ends unwritten: every actor is new");
  announce_view(*self_, *mesh_, ctx_, members_.view, next);
  coord_.reset();
  move_to(next);
  wire_coordinator();
  losses_.resize(back_to - first_start_.next_step);
  first_step_ = back_to;
  ++recoveries_;
  char took[32];
  std::snprintf(took, sizeof took, "%.2f", clock.seconds());
  say("recovered in " + std::string(took) + " s: training again from step " +
      std::to_string(back_to) + "; " + std::to_string(st.step - std::min(st.step, back_to)) +
      " steps done since that commit are redone");
  return true;
}

// Node 0 after the last step: the summary, then bye to every other node.
int node_process::finish() {
  result_.recoveries = recoveries_;
  report_->finish();
  if (board_) board_->set_phase("finished");
  print_node_summary(result_, *report_, losses_);
  for (size_t p = 1; p < n_; ++p) {
    if (members_.view.members[p].lost) continue;
    (*self_)
        ->request(mesh_->node_of(p), std::chrono::seconds(10), bye_atom_v, members_.view.secret)
        .receive([](bool) {},
                 [&](caf::error& e) {
                   std::fprintf(stderr, "node 0: stopping node %zu: %s\n", p,
                                sys_.render(e).c_str());
                 });
  }
  if (!result_.replicas_identical) {
    throw std::runtime_error(
        "node 0: the replicas' parameters differ after training (the workers applied different "
        "updates; the run's results cannot be trusted)");
  }
  return 0;
}

}  // namespace

int run_node_process(node_process_settings settings) {
  node_process process(std::move(settings));
  return process.run();
}

}  // namespace degnn
