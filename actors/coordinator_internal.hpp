// Internals shared by the coordinator's source files: its state, the command queue, and the
// scatter-gather over one role's actors every command is made of. Not part of the protocol.
#pragma once

#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "actors/coordinator.hpp"
#include "actors/gather.hpp"
#include "actors/worker_settings.hpp"

namespace degnn::coordinator_detail {

struct coordinator_state {
  static constexpr const char* name = "degnn.coordinator";
  std::vector<batch_actor> batchers;
  std::vector<shard_actor> shards;
  std::vector<store_actor> stores;
  wire::context ctx;
  std::chrono::milliseconds timeout{60000};
  wire::traffic sent;
  stage_log stages;
  overlap_clock activity;  ///< wall time of step phases (0) and all-reduces (1), and both at once
  bool pipelined = false;
  bool ring = true;  ///< the workers all-reduce in a ring (else each gradient comes here: a star)
  struct unreduced_step {
    std::uint64_t step;
    int contributors;
  };
  std::optional<unreduced_step> unreduced;  ///< a step whose gradient phase has not run yet
  coordinator_status status;
  link_sender link;  ///< numbers the commands; the fault policy leaves the cluster's commands alone
  std::deque<std::function<void()>> queue;  ///< commands behind the running one
  bool busy = false;
  std::function<void(const std::string&)> running_fail;  ///< fails the running command
  bool checkpoint_pending = false;                  ///< a checkpoint is being written or committed
  std::vector<std::function<void()>> after_commit;  ///< checkpoints waiting for that one
};

using self_ptr = coordinator_actor::stateful_pointer<coordinator_state>;

// A failed coordinator stays failed: a chain still running after its command failed (the other
// half of a pipelined step) must not make it look busy or idle again.
inline void enter(coordinator_state& st, coordinator_phase p) {
  if (st.status.phase() != coordinator_phase::failed) st.status.set_phase(p);
}
using done_fn = std::function<void()>;
using fail_fn = std::function<void(const std::string&)>;
inline constexpr int kStepActivity = 0, kReduceActivity = 1;

/// Runs the next queued command if none is running.
void run_next(self_ptr self);
/// The running command answered: back to idle (unless failed), then the next one.
void command_done(self_ptr self);
/// One control message per partition, counted when it leaves partition 0's node.
std::vector<wire_message> control_messages(coordinator_state& st, const wire::control& c);
/// Decodes each reply as an allreduce_chunk; throws std::runtime_error for any other kind.
std::vector<wire::allreduce_chunk> chunks(const coordinator_state& st,
                                          const std::vector<wire_message>& replies,
                                          const char* what);
// -- steps and the all-reduce (coordinator_steps.cpp) --

/// A centralized step: every worker's batch, then its gradients averaged and applied.
void centralized_step(self_ptr self, caf::typed_response_promise<step_result> rp, fail_fn fail,
                      std::uint32_t epoch, std::uint64_t index, std::uint64_t step);
/// A decentralized step, with the previous step's gradient phase when one is in flight.
void decentralized_step(self_ptr self, caf::typed_response_promise<step_result> rp, fail_fn fail,
                        std::uint32_t epoch, std::uint64_t index, std::uint64_t step);
/// The gradient phase of a decentralized step still in flight, if any.
void finish_steps(self_ptr self, done_fn done, fail_fn fail);

/// Sends message p to actor p of one role at once; then(replies in partition order), or fail
/// naming the partition whose request failed (or took longer than `timeout`, by default the
/// coordinator's request timeout).
template <class Handle, class Atom, class Then>
void all(self_ptr self, const std::vector<Handle>& to, Atom atom, std::vector<wire_message> msgs,
         const char* what, Then then, fail_fn fail,
         std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
  std::vector<wire_request<Handle, Atom>> requests;
  for (size_t p = 0; p < to.size(); ++p)
    requests.push_back({to[p], std::move(msgs[p])});
  // A reply that cannot be read (a malformed or hostile peer) fails the command.
  auto guarded = [then = std::move(then), fail, what](std::vector<wire_message>& replies) mutable {
    try {
      then(replies);
    } catch (const std::exception& e) {
      fail(std::string(what) + ": " + e.what());
    }
  };
  gather(self, atom, std::move(requests), timeout.value_or(self->state.timeout), std::move(guarded),
         [self, what, fail](std::size_t p, const caf::error& e) {
           fail(std::string(what) + " on partition " + std::to_string(p) +
                " failed: " + self->system().render(e));
         });
}

// -- evaluation, history set-up, counters, traces (coordinator_reports.cpp) --

void evaluate(self_ptr self, int layers, std::uint64_t step,
              std::function<void(const eval_result&)> done, fail_fn fail);
void init_history(self_ptr self, caf::typed_response_promise<bool> rp, fail_fn fail, int layers,
                  std::uint64_t step);
void report(self_ptr self, caf::typed_response_promise<cluster_report> rp, fail_fn fail);
void trace(self_ptr self, caf::typed_response_promise<std::string> rp, fail_fn fail);
/// Every worker (and the coordinator) starts keeping stage spans anew (on) or stops (off).
void set_tracing(self_ptr self, caf::typed_response_promise<bool> rp, fail_fn fail, bool on);

// -- coordinated checkpoints (coordinator_checkpoint.cpp) --

/// Finishes a step in flight, has every batch actor save its replica, then commit. Answers
/// next_step once the saves were sent, or (wait) once every commit record was written.
void checkpoint(self_ptr self, caf::typed_response_promise<std::uint64_t> rp, fail_fn fail,
                std::uint64_t next_step, bool wait);

}  // namespace degnn::coordinator_detail
