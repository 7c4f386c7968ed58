// The node process up to a connected mesh: options made settings, the actor system and the door,
// the partitions and run settings, the node actor, publishing, the membership, the partitions
// this node serves, the connections to every member. runtime/cli/node_process_phases.hpp holds
// the class; node_process_run.cpp the phases after.
#include "runtime/cli/node_process.hpp"

#include <cstdio>
#include <filesystem>
#include <thread>

#include "model/commit_record.hpp"
#include "model/data_error.hpp"
#include "runtime/cli/node_process_phases.hpp"

namespace degnn {
namespace node_process_detail {
namespace {

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

}  // namespace

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
  if (!resume_failure_.empty()) refuse_joiners_and_stop();
  form_membership();
  take_partitions();
  connect_mesh();
  const int rc = id_ == 0 ? coordinate() : serve_until_stopped();
  char line[64];
  std::snprintf(line, sizeof line, "peak RSS %.0f MiB", peak_rss_mib());
  say(line);
  return rc;
}

void node_process::say(const std::string& line) const {
  std::fprintf(stderr, "%s: %s\n", me_name_.c_str(), line.c_str());
}

std::shared_ptr<const graph_partition> node_process::load_part(int p) const {
  const stopwatch clock;
  const part_loading how =
      part_loading_for(s_.partition_in_memory, s_.sparse_features, s_.normalize_features);
  auto loaded = std::make_shared<graph_partition>(load_partition(s_.partitions, p, how));
  apply_feature_settings(*loaded, s_.sparse_features, s_.normalize_features);
  char line[160];
  std::snprintf(line, sizeof line,
                "part-%d/partition.bin %s in %.2f s: %.0f MiB resident, peak %.0f MiB", p,
                loaded->mapped_features ? "mapped" : "read into memory", clock.seconds(), rss_mib(),
                peak_rss_mib());
  say(line);
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
  // A seed whose copy cannot be read still publishes, to tell every joiner why at once. A
  // joiner with --init reads the file itself (the greeting compares its checksum).
  if (mode_.kind != launch_mode::joiner || (s_.resume.empty() && !s_.init.empty())) {
    try {
      start_ = load_cluster_start(s_, rc_, ws_.run_id, meta_.num_parts);
    } catch (const data_error& e) {
      if (mode_.kind != launch_mode::seed) throw;
      resume_failure_ = e.what();
    }
  }
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
  // before the cluster forms too (a bad address is refused now). A member given --http keeps a
  // board too: it shows the view (who coordinates, and where), and the training once this
  // member takes over as coordinator.
  if (coordinates_ || !settings_.http.empty()) {
    board_ = std::make_shared<status_board>(meta_.dataset_name, s_.pipeline, s_.epochs);
    board_->enable_checkpoints(!s_.checkpoint_dir.empty());
    board_->set_faults(ws_.faults, ws_.fault_counts, settings_.allow_faults);
    if (s_.pipeline == "decentralized") board_->set_history(s_.history_bits, s_.staleness);
  }
  if (coordinates_) {
    report_.emplace(meta_.dataset_name + "/node-cluster", s_.metrics, s_.progress);
    observe_epochs();
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
        settings_.last_call, mode_.tls, s_.partitions, files_, start_.next_step, s_.checkpoint_dir,
        resume_failure_.empty() ? "" : "the seed cannot resume the run: " + resume_failure_});
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
  offer_resume_checkpoint();
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

// The seed, resuming: its copy of the commit it resumes from, offered to the members it accepts
// (a joiner whose own copy is damaged restores it from this one).
void node_process::offer_resume_checkpoint() {
  if (mode_.kind != launch_mode::seed || start_.next_step == 0 || s_.checkpoint_dir.empty()) return;
  try {
    offer_checkpoint_of_step(*self_, node_, local_key_, s_.checkpoint_dir, start_.next_step);
  } catch (const data_error& e) {
    say("the resumed checkpoint is not under --checkpoint-dir, so it is not offered (" +
        std::string(e.what()) + ")");
  } catch (const std::exception& e) {
    say(e.what());
  }
}

// The seed cannot start the run: it stays up 3 s so that the joiners started with it
// learn why from their join's refusal instead of waiting for --join-timeout, then stops.
void node_process::refuse_joiners_and_stop() {
  say("cannot resume: " + resume_failure_ + "; refusing joiners for 3 s, then stopping");
  std::this_thread::sleep_for(
      std::min<std::chrono::seconds>(std::chrono::seconds(3), settings_.join_timeout));
  throw data_error(resume_failure_);
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
  // Any survivor may adopt any partition, the coordinator's too once the seed (node 0) is gone:
  // with --recover every member holds every partition's file from the start.
  if (recovers_ && seed_files_) {
    std::vector<std::string> all;
    for (int p = 0; p < meta_.num_parts; ++p)
      all.push_back(partition_file(p));
    seed_files_->fetch(all);
  }
  if (mode_.kind == launch_mode::joiner && members_.view.id > 1) {
    // A replacement: the state every member rolled back to comes from the seed.
    say("replacing a lost node in view " + std::to_string(members_.view.id));
    start_ = replacement_start(sys_, seed_node_, mode_.seed_address.str(), s_.checkpoint_dir, rc_,
                               ws_.run_id, meta_.num_parts, members_.view.resume_step);
    // No commit yet: the members rolled back to where the run started, --init's weights if any.
    if (!start_.state && s_.resume.empty() && !s_.init.empty())
      start_ = load_cluster_start(s_, rc_, ws_.run_id, meta_.num_parts);
    ws_.start = start_.state;
  } else if (mode_.kind == launch_mode::joiner && !s_.resume.empty()) {
    const std::uint64_t step = members_.view.resume_step;
    try {
      start_ = load_cluster_start_at(s_, rc_, ws_.run_id, meta_.num_parts, step);
    } catch (const data_error& e) {
      // Every member holds the same file: the seed's copy replaces a damaged or missing one.
      say(std::string(e.what()) + "; restoring it from the seed's copy");
      const std::string name = restore_checkpoint_from_seed(
          sys_, seed_node_, mode_.seed_address.str(), s_.resume,
          members_.view.members[static_cast<size_t>(id_)].partitions, step);
      say("restored " + name + " from the seed at " + mode_.seed_address.str());
      start_ = load_cluster_start_at(s_, rc_, ws_.run_id, meta_.num_parts, step);
    }
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
  losses_from_ = start_.next_step;
  if (board_ && (mode_.kind == launch_mode::static_peers || !coordinates_))
    board_->set_view(members_.view);
  if (board_ && !coordinates_) board_->set_phase("serving");
}

}  // namespace node_process_detail

int run_node_process(node_process_settings settings) {
  node_process_detail::node_process process(std::move(settings));
  return process.run();
}

}  // namespace degnn
