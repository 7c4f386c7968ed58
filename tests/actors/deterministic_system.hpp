// An actor system on CAF's deterministic test coordinator for GoogleTest (CAF's own test DSL
// belongs to its test runner): nothing runs until the test calls sched.run(), and time moves
// only when it advances sched.clock(). `self` is a hidden scoped actor that asks and receives.
#pragma once

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include "actors/messages.hpp"

namespace degnn::test {

struct deterministic_system {
  deterministic_system() : sys(configure(cfg)), self(sys, true), sched(scheduler_of(sys)) {}

  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scoped_actor self;
  caf::scheduler::test_coordinator& sched;

 private:
  static caf::actor_system_config& configure(caf::actor_system_config& c) {
    c.set("scheduler.policy", caf::atom("testing"));
    c.set("logger.file-verbosity", caf::atom("quiet"));
    add_actor_types(c);
    return c;
  }
  static caf::scheduler::test_coordinator& scheduler_of(caf::actor_system& s) {
    return dynamic_cast<caf::scheduler::test_coordinator&>(s.scheduler());
  }
};

}  // namespace degnn::test
