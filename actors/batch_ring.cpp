// The batch actors' ring all-reduce (docs/design.md section 4): each worker sends its gradient's
// chunks to the next worker and sums or copies what the previous one sends, round by round
// (model/ring_reduction.hpp), so no node carries more than 2(P-1)/P of the gradient each way.
// A chunk that comes early waits for its round; every chunk is acknowledged, so a lost worker
// fails the ring with the error that names it.
#include <algorithm>

#include "actors/batch_internal.hpp"

namespace degnn::batch_detail {

namespace {

using job_ptr = std::shared_ptr<batch_state::ring_job>;

// Ends the job once (held by value: st.ring may be the only owner): the worker is free for the
// next step's ring before `then` or `fail` runs.
void end_ring(self_ptr self, job_ptr job, const caf::error* err) {
  auto& st = self->state;
  if (st.ring != job) return;
  st.ring.reset();
  if (err) {
    job->fail(*err);
    return;
  }
  st.ring_finished = static_cast<std::int64_t>(job->step);
  st.stages.add(stage::allreduce, job->step, job->began_us, stage_log::now_us());
  job->then(job->ring.take_average());
}

void fail_ring(self_ptr self, job_ptr job, const std::string& why) {
  const auto err = as_error(self->state, actor_errc::peer_failed, why);
  end_ring(self, job, &err);
}

// Takes every chunk whose round came and sends every round that may go; ends the job once all
// rounds went both ways and the next worker took each chunk.
void advance(self_ptr self, job_ptr job) {
  auto& st = self->state;
  const int me = st.part->part;
  const int parts = static_cast<int>(st.batchers.size());
  const int next = (me + 1) % parts;
  for (bool moved = true; moved && st.ring == job;) {
    moved = false;
    auto early = st.ring_early.find({job->step, job->ring.next_receive()});
    if (early != st.ring_early.end()) {
      try {
        job->ring.receive(early->first.second, early->second.values, early->second.seeds);
      } catch (const std::exception& e) {
        st.ring_early.erase(early);
        fail_ring(self, job,
                  std::string("a chunk from partition ") +
                      std::to_string((me + parts - 1) % parts) + ": " + e.what());
        return;
      }
      st.ring_early.erase(early);
      moved = true;
    }
    if (job->ring.can_send()) {
      const auto out = job->ring.send();
      wire::allreduce_chunk chunk{
          .h = {job->step, me},
          .round = out.round,
          .values = std::vector<float>(out.values.begin(), out.values.end()),
          .seeds = out.count};
      auto msg = pack(wire::kind::allreduce_chunk, wire::encode(st.ctx, chunk));
      count(st, next, msg);
      ++job->acks_out;
      std::vector<wire_request<batch_actor, ring_atom>> one;
      one.push_back({st.batchers[static_cast<size_t>(next)], std::move(msg), next});
      gather(
          self, ring_atom_v, std::move(one), st.settings.timeout,
          [self, job](std::vector<wire_message>&) {
            --job->acks_out;
            advance(self, job);
          },
          [self, job, next](const caf::error& err) {
            fail_ring(self, job,
                      "all-reduce chunk to partition " + std::to_string(next) +
                          " failed: " + caf::to_string(err));
          });
      moved = true;
    }
  }
  if (st.ring == job && job->ring.complete() && job->acks_out == 0) end_ring(self, job, nullptr);
}

}  // namespace

void ring_allreduce(self_ptr self, std::uint64_t step, std::vector<float> gradient,
                    bool contributes, std::function<void(std::vector<float>)> then,
                    std::function<void(const caf::error&)> fail) {
  auto& st = self->state;
  if (st.ring) {
    if (st.ring->step == step) {
      fail(as_error(st, actor_errc::rejected,
                    "the all-reduce of step " + std::to_string(step) + " is already running"));
      return;
    }
    fail_ring(self, st.ring,
              "left behind by the all-reduce of step " + std::to_string(step) +
                  " (a worker did not finish this one)");
  }
  // Chunks of older steps can no longer be used.
  std::erase_if(st.ring_early, [step](const auto& e) { return e.first.first < step; });
  auto job = std::make_shared<batch_state::ring_job>(batch_state::ring_job{
      .step = step,
      .ring = ring_reduction(st.part->part, static_cast<int>(st.batchers.size()),
                             std::move(gradient), contributes ? 1u : 0u),
      .acks_out = 0,
      .began_us = stage_log::now_us(),
      .then = std::move(then),
      .fail = std::move(fail)});
  st.ring = job;
  advance(self, job);
}

wire_message take_ring_chunk(self_ptr self, const wire_message& m) {
  auto& st = self->state;
  auto chunk = wire::decode_allreduce_chunk(st.ctx, m.bytes);
  const int parts = static_cast<int>(st.batchers.size());
  const int previous = (st.part->part + parts - 1) % parts;
  const std::uint64_t step = chunk.h.step;
  const std::uint32_t round = chunk.round;
  const std::uint32_t rounds = static_cast<std::uint32_t>(2 * (parts - 1));
  if (chunk.h.sender != previous)
    throw wire::wire_error("an all-reduce chunk from partition " + std::to_string(chunk.h.sender) +
                           "; only partition " + std::to_string(previous) + " sends to this one");
  if (chunk.round >= rounds)
    throw wire::wire_error("all-reduce round " + std::to_string(chunk.round) + " of " +
                           std::to_string(rounds));
  if (static_cast<std::int64_t>(step) <= st.ring_finished ||
      (st.ring && st.ring->step == step && chunk.round < st.ring->ring.next_receive()))
    throw wire::wire_error("all-reduce round " + std::to_string(chunk.round) + " of step " +
                           std::to_string(step) + " came after it was taken");
  // Early chunks are at most the rounds of two steps (the pipeline keeps at most two in flight).
  if (st.ring_early.size() >= 2 * static_cast<size_t>(rounds))
    throw wire::wire_error("too many all-reduce chunks ahead of their round");
  if (!st.ring_early.emplace(std::make_pair(step, round), std::move(chunk)).second)
    throw wire::wire_error("all-reduce round " + std::to_string(round) + " of step " +
                           std::to_string(step) + " came twice");
  if (st.ring && st.ring->step == step) advance(self, st.ring);
  wire::control ack{.h = {step, st.part->part}, .what = wire::control_kind::result};
  auto msg = pack(wire::kind::control, wire::encode(st.ctx, ack));
  count(st, previous, msg);
  return msg;
}

}  // namespace degnn::batch_detail
