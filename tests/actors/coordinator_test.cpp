// Tests of the coordinator actor (actors/coordinator.hpp) on CAF's deterministic test
// coordinator, against stand-in workers that take a step and never answer: a lost worker fails
// the running command at once, naming it, and every later command with it; a worker that does
// not answer fails the step when the request's time-out fires (the test moves the clock), and
// `status` answers throughout.
#include "actors/coordinator.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/actors/deterministic_system.hpp"

namespace degnn {
namespace {

constexpr auto kTimeout = std::chrono::seconds(5);

/// Takes steps and holds them (answers none); counts them.
caf::behavior silent_batcher(caf::event_based_actor* self, std::shared_ptr<int> steps) {
  auto held = std::make_shared<std::vector<caf::response_promise>>();
  return {
      [=](step_atom, const wire_message&) {
        ++*steps;
        held->push_back(self->make_response_promise());
        return held->back();
      },
  };
}

/// A shard or store the coordinator only monitors here.
caf::behavior idle_worker(caf::event_based_actor*) {
  return {[](int) {}};
}

class Coordinator : public ::testing::Test, protected test::deterministic_system {
 protected:
  Coordinator() {
    std::vector<batch_actor> batchers;
    std::vector<shard_actor> shards;
    std::vector<store_actor> stores;
    for (int p = 0; p < 2; ++p) {
      steps.push_back(std::make_shared<int>(0));
      raw_batchers.push_back(sys.spawn(silent_batcher, steps.back()));
      batchers.push_back(caf::actor_cast<batch_actor>(raw_batchers.back()));
      shards.push_back(caf::actor_cast<shard_actor>(sys.spawn(idle_worker)));
      stores.push_back(caf::actor_cast<store_actor>(sys.spawn(idle_worker)));
      others.push_back(caf::actor_cast<caf::actor>(shards.back()));
      others.push_back(caf::actor_cast<caf::actor>(stores.back()));
    }
    coord =
        spawn_coordinator(sys, batchers, shards, stores, wire::context{.cluster_id = 5}, kTimeout);
    sched.run();
  }
  ~Coordinator() override {
    self->send_exit(coord, caf::exit_reason::user_shutdown);
    for (const auto& a : raw_batchers)
      self->send_exit(a, caf::exit_reason::user_shutdown);
    for (const auto& a : others)
      self->send_exit(a, caf::exit_reason::user_shutdown);
    sched.run();
  }

  coordinator_status status() {
    auto h = self->request(coord, caf::infinite, status_atom_v);
    sched.run();
    coordinator_status out;
    h.receive([&](coordinator_status& s) { out = s; },
              [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
    return out;
  }

  std::vector<std::shared_ptr<int>> steps;
  std::vector<caf::actor> raw_batchers, others;
  coordinator_actor coord;
};

TEST_F(Coordinator, ALostBatchActorFailsTheRunningStepAndEveryLaterCommandNamingIt) {
  auto step = self->request(coord, caf::infinite, run_step_atom_v, std::uint32_t{0},
                            std::uint64_t{0}, std::uint64_t{0}, false);
  sched.run();
  ASSERT_EQ(*steps[0], 1);  // both workers were asked
  ASSERT_EQ(*steps[1], 1);
  EXPECT_EQ(status().phase(), coordinator_phase::stepping);
  self->send_exit(raw_batchers[1], caf::exit_reason::kill);
  sched.run();
  std::string why;
  step.receive([](step_result&) { ADD_FAILURE() << "the step succeeded without partition 1"; },
               [&](caf::error& e) { why = sys.render(e); });
  EXPECT_NE(why.find("partition 1's batch actor is gone"), std::string::npos) << why;
  const coordinator_status st = status();
  EXPECT_EQ(st.phase(), coordinator_phase::failed);
  EXPECT_NE(st.error.find("partition 1's batch actor is gone"), std::string::npos) << st.error;
  // A later command fails at once with the same cause, asking no worker.
  auto next = self->request(coord, caf::infinite, run_step_atom_v, std::uint32_t{0},
                            std::uint64_t{1}, std::uint64_t{1}, false);
  sched.run();
  std::string later;
  next.receive([](step_result&) { ADD_FAILURE() << "a failed coordinator stepped"; },
               [&](caf::error& e) { later = sys.render(e); });
  EXPECT_NE(later.find("partition 1's batch actor is gone (exit_reason(kill))"), std::string::npos)
      << later;
  EXPECT_EQ(*steps[0], 1);
}

TEST_F(Coordinator, AWorkerThatDoesNotAnswerFailsTheStepWhenItsTimeOutFires) {
  auto step = self->request(coord, caf::infinite, run_step_atom_v, std::uint32_t{0},
                            std::uint64_t{0}, std::uint64_t{0}, false);
  sched.run();
  ASSERT_EQ(*steps[0], 1);
  // Nothing happens until the clock reaches the requests' time-out.
  EXPECT_EQ(status().phase(), coordinator_phase::stepping);
  sched.clock().advance_time(kTimeout - std::chrono::milliseconds(1));
  sched.run();
  EXPECT_EQ(status().phase(), coordinator_phase::stepping);
  sched.clock().advance_time(std::chrono::milliseconds(2));
  sched.run();
  std::string why;
  step.receive([](step_result&) { ADD_FAILURE() << "the step succeeded without answers"; },
               [&](caf::error& e) { why = sys.render(e); });
  EXPECT_NE(why.find("step on partition 0 failed: system_error(request_timeout)"),
            std::string::npos)
      << why;
  EXPECT_EQ(status().phase(), coordinator_phase::failed);
}

}  // namespace
}  // namespace degnn
