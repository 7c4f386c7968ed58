// The coordinator's side of a coordinated two-phase checkpoint (docs/design.md section 9): phase 1
// has every batch actor snapshot and persist its replica; only when every one confirmed a file of
// the same size and CRC-32 (the replicas agree) does phase 2 write the commit records. A resumed
// run takes the newest commit, so a crash between the phases loses only the checkpoint in progress.
#include "actors/coordinator_internal.hpp"

namespace degnn::coordinator_detail {
namespace {

// A checkpoint that fails after its command answered fails the coordinator: every later command
// is refused with the cause, and the one running now fails too.
void background_failure(self_ptr self, const std::string& why) {
  auto& st = self->state;
  st.checkpoint_pending = false;
  st.after_commit.clear();
  st.status.set_phase(coordinator_phase::failed);
  st.status.error = why;
  if (st.running_fail) st.running_fail(why);
}

// The size and CRC-32 every replica reported; throws when a reply is malformed or differs.
std::vector<std::uint64_t> agreed_file(const coordinator_state& st,
                                       const std::vector<wire_message>& replies) {
  std::vector<std::uint64_t> file;
  for (size_t p = 0; p < replies.size(); ++p) {
    if (replies[p].kind != static_cast<std::uint16_t>(wire::kind::control))
      throw std::runtime_error("partition " + std::to_string(p) + " answered with a " +
                               wire::kind_name(static_cast<wire::kind>(replies[p].kind)));
    const auto c = wire::decode_control(st.ctx, replies[p].bytes);
    if (c.what != wire::control_kind::result || c.counts.size() != 2)
      throw std::runtime_error("partition " + std::to_string(p) + " did not confirm a file");
    if (p == 0) {
      file = c.counts;
    } else if (c.counts != file) {
      throw std::runtime_error("partition " + std::to_string(p) +
                               " wrote another file than partition 0 (size or CRC-32): the "
                               "replicas differ");
    }
  }
  return file;
}

}  // namespace

void checkpoint(self_ptr self, caf::typed_response_promise<std::uint64_t> rp, fail_fn fail,
                std::uint64_t next_step, bool wait) {
  auto start = [=]() mutable {
    finish_steps(
        self,
        [=]() mutable {
          auto& st = self->state;
          st.checkpoint_pending = true;
          // Either way the checkpoint is over when it fails: a waiting command answers with the
          // cause, a background one fails the coordinator (and the command waiting behind it).
          const fail_fn phase_fail = [self, wait, fail](const std::string& why) {
            if (!wait) return background_failure(self, why);
            self->state.checkpoint_pending = false;
            fail(why);
          };
          auto committed = [=](std::vector<wire_message>&) mutable {
            auto& st = self->state;
            st.checkpoint_pending = false;
            ++st.status.commits;
            st.status.committed_next_step = next_step;
            auto waiting = std::move(st.after_commit);
            st.after_commit.clear();
            if (wait) {
              rp.deliver(next_step);
              command_done(self);
            }
            // Each waiting start belongs to the command running now; one that throws fails that
            // command through running_fail, which answers it once (never this finished one).
            for (auto& f : waiting) {
              try {
                f();
              } catch (const std::exception& e) {
                background_failure(self, std::string("checkpoint: ") + e.what());
              }
            }
          };
          // The batch actors' writers time out after the request timeout: their error (which
          // names the file) must arrive before this side gives up on them.
          const auto save_timeout = 2 * st.timeout;
          all(
              self, st.batchers, save_atom_v,
              control_messages(st, {.h = {next_step, 0}, .what = wire::control_kind::checkpoint}),
              "checkpoint",
              [=](std::vector<wire_message>& replies) mutable {
                auto& st = self->state;
                wire::control commit{.h = {next_step, 0}, .what = wire::control_kind::commit};
                commit.counts = agreed_file(st, replies);
                st.status.durable_next_step = next_step;
                all(self, st.batchers, save_atom_v, control_messages(st, commit),
                    "checkpoint commit", committed, phase_fail);
              },
              phase_fail, save_timeout);
          if (!wait) {
            rp.deliver(next_step);
            command_done(self);
          }
        },
        fail);
  };
  // One checkpoint at a time: a second one starts after the first committed.
  if (self->state.checkpoint_pending)
    self->state.after_commit.push_back(start);
  else
    start();
}

}  // namespace degnn::coordinator_detail
