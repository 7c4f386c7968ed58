// The node process of `degnn node` as one object, its phases as methods (cli/node_process.cpp:
// from the settings to a connected mesh; cli/node_process_run.cpp: serving, or coordinating and
// recovering). Members are declared in the order the phases make them, so they are destroyed in
// the reverse: the console gateway and the mesh first, then the local actors stop (`stop_local_`),
// then the door, the actor system last. Not an interface: node_process.hpp is.
#pragma once

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
#include "runtime/process/run_gaps.hpp"
#include "runtime/train/cluster_identity.hpp"
#include "runtime/train/cluster_resume.hpp"
#include "runtime/train/cluster_trainer.hpp"
#include "runtime/train/status_board.hpp"
#include "runtime/train/worker_actors.hpp"
#include "runtime/transport/endpoint.hpp"

namespace degnn::node_process_detail {

/// "1, 3" for the log.
inline std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks)
    out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

/// `value` with `places` decimals, for the log.
inline std::string with_places(double value, int places) {
  char out[32];
  std::snprintf(out, sizeof out, "%.*f", places, value);
  return out;
}
/// "0.25" (seconds).
inline std::string two_places(double seconds) {
  return with_places(seconds, 2);
}
/// "0.7930" (an accuracy).
inline std::string four_places(double fraction) {
  return with_places(fraction, 4);
}

/// Runs `stop` when destroyed (set once there is something to stop).
struct stopper {
  std::function<void()> stop;
  ~stopper() {
    if (stop) stop();
  }
};

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
  void train_until_done();
  /// After a failed training run: true to train again from the new view's commit, false when
  /// the run's last step was saved already; throws when nothing can be recovered.
  bool recover(const std::exception& failure);
  int finish();
  /// Tells every member the run stopped on `why` (their coordinator's loss is no failover).
  void stop_members(const std::string& why);

  // A member's part when the coordinator is lost (cli/node_process_failover.cpp).
  /// Moves to an announced view, if any (a member, between the coordinator's messages).
  void take_announced_view();
  /// The coordinator went away without a bye: true when this node coordinates now, false when
  /// it moved to the successor's view; throws without a majority.
  bool fail_over();
  /// The view the successor announces, within the wait: true once moved to it, false when the
  /// successor went away or stayed silent.
  bool follow(int successor);
  /// The newest step this node's checkpoint folder committed in this run (or where it started).
  std::uint64_t own_commit_step() const;
  /// The views after losing `lost` (a further one for each member lost meanwhile), announced
  /// and moved to, rolling back to `back_to`; the coordinator wired to the last.
  void move_cluster(std::vector<int> lost, std::uint64_t back_to, bool adopt_only);
  /// Keep-majority: throws, naming `lost`, unless the members of `view` left after losing them
  /// are a strict majority of its live members (this side may be the smaller one of a split, or
  /// this node was paused past the time-out and declared lost).
  void need_majority(const wire::membership_view& view, const std::vector<int>& lost) const;
  /// The end of a node the others went on without (a member follows a later view).
  [[noreturn]] void stop_left_behind(const std::exception& e);
  /// The run's steps (every epoch's), once the coordinator knows the training-set sizes.
  std::uint64_t total_steps() const;

  void say(const std::string& line) const;
  std::shared_ptr<const graph_partition> load_part(int p) const;
  std::string serve(const membership& members);
  void fetch_missing(const wire::membership_view& v);
  void move_to(const wire::membership_view& next);
  void wire_coordinator();
  void offer_resume_checkpoint();
  /// The coordinator's report tells the board, and the members the evaluated epochs.
  void observe_epochs();
  [[noreturn]] void refuse_joiners_and_stop();

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
  std::string resume_failure_;  ///< the seed's: why its checkpoint cannot be resumed
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
  run_gaps gaps_;              ///< when this process did not run (a pause, a starved machine)
  run_gaps::clock::time_point view_since_ = run_gaps::clock::now();  ///< members_.view's start
  std::optional<coordinator> coord_;
  std::vector<std::size_t> train_sizes_;
  std::vector<double> losses_;
  std::uint64_t losses_from_ = 0;  ///< the step of losses_[0] (a successor's: its rollback step)
  std::uint64_t first_step_ = 0;
  std::uint64_t recoveries_ = 0;
  cluster_result result_;

  bool configure();
};

}  // namespace degnn::node_process_detail
