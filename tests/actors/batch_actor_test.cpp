// Tests of the batch actor (actors/batch_actor.hpp) on CAF's deterministic test coordinator,
// with its own shard beside it and stand-ins for the other partition's actors: nothing is
// served before the view, the view is taken once, a replica's parameters are its seed's (and the
// shard's, which it checks), and a message of the wrong kind or of another cluster is refused and
// counted.
#include "actors/batch_actor.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "actors/reports.hpp"
#include "actors/shard_actor.hpp"
#include "model/dataset.hpp"
#include "model/partitioner.hpp"
#include "tests/actors/cora_half.hpp"
#include "tests/actors/deterministic_system.hpp"

namespace degnn {
namespace {

constexpr std::uint64_t kCluster = 41;

struct cora_parts {
  std::shared_ptr<const partition_book> book;
  std::shared_ptr<const graph_partition> part0;
  replica_config rc;
};

const cora_parts& cora2() {
  static const cora_parts c = [] {
    const test::cora_half half = test::load_cora_half(5);
    cora_parts c;
    c.book = half.book;
    c.part0 = half.part;
    c.rc = {.model = "sage",
            .in_dim = half.in_dim,
            .hidden = 16,
            .num_classes = half.num_classes,
            .num_layers = 2,
            .dropout = 0.5f,
            .lr = 0.01f,
            .weight_decay = 0.0f,
            .seed = 3};
    return c;
  }();
  return c;
}

caf::behavior idle_worker(caf::event_based_actor*) {
  return {[](int) {}};
}

wire_message control_msg(wire::control_kind what, std::uint64_t step,
                         std::uint64_t cluster = kCluster) {
  const wire::control c{.h = {step, 0}, .what = what};
  return pack(wire::kind::control, wire::encode(wire::context{.cluster_id = cluster}, c));
}

class BatchActor : public ::testing::Test, protected test::deterministic_system {
 protected:
  BatchActor() {
    const worker_settings ws{
        .fanouts = {5, 5}, .batch_size = 8, .seed = 1, .timeout = std::chrono::seconds(5)};
    const auto& c = cora2();
    batch = sys.spawn(batch_behavior, c.part0, c.book, c.rc, ws, ctx);
    shard = sys.spawn(shard_behavior, c.part0, c.book, c.rc, ws, ctx);
    for (int i = 0; i < 3; ++i)
      stand_ins.push_back(sys.spawn(idle_worker));
    view.batchers = {caf::actor_cast<caf::strong_actor_ptr>(batch),
                     caf::actor_cast<caf::strong_actor_ptr>(stand_ins[0])};
    view.shards = {caf::actor_cast<caf::strong_actor_ptr>(shard),
                   caf::actor_cast<caf::strong_actor_ptr>(stand_ins[1])};
    view.stores = {caf::actor_cast<caf::strong_actor_ptr>(stand_ins[2]),
                   caf::actor_cast<caf::strong_actor_ptr>(stand_ins[2])};
    sched.run();
  }
  ~BatchActor() override {
    self->send_exit(batch, caf::exit_reason::user_shutdown);
    self->send_exit(shard, caf::exit_reason::user_shutdown);
    for (const auto& a : stand_ins)
      self->send_exit(a, caf::exit_reason::user_shutdown);
    sched.run();
  }

  void give_view() {
    self->send(batch, view_atom_v, view);
    self->send(shard, view_atom_v, view);
    sched.run();
  }

  /// The batch actor's answer to `atom` with `m`: the reply, or the error's text in `error`.
  template <class Atom>
  wire_message ask(Atom atom, const wire_message& m, std::string& error) {
    auto h = self->request(batch, caf::infinite, atom, m);
    sched.run();
    wire_message out;
    h.receive([&](wire_message& r) { out = std::move(r); },
              [&](caf::error& e) { error = sys.render(e); });
    return out;
  }

  std::uint64_t rejected() {
    std::string error;
    const auto r = ask(report_atom_v, control_msg(wire::control_kind::result, 0), error);
    EXPECT_EQ(error, "");
    return parse_report(wire::decode_control(ctx, r.bytes).counts).rejected;
  }

  const wire::context ctx{.cluster_id = kCluster};
  batch_actor batch;
  shard_actor shard;
  std::vector<caf::actor> stand_ins;
  peer_view view;
};

TEST_F(BatchActor, ServesNothingThatNeedsItsPeersBeforeTheViewAndCountsNoRefusalForIt) {
  std::string error;
  ask(step_atom_v, control_msg(wire::control_kind::step, 0), error);
  EXPECT_NE(error.find("not connected to every peer yet"), std::string::npos) << error;
  error.clear();
  ask(params_atom_v, control_msg(wire::control_kind::checkpoint, 0), error);
  EXPECT_NE(error.find("not connected to every peer yet"), std::string::npos) << error;
  EXPECT_EQ(rejected(), 0u);
}

TEST_F(BatchActor, AReplicasParametersAreThoseItsSeedGivesAndTheShardsAgree) {
  give_view();
  std::string error;
  const wire_message r = ask(params_atom_v, control_msg(wire::control_kind::checkpoint, 0), error);
  ASSERT_EQ(error, "");
  ASSERT_EQ(r.kind, static_cast<std::uint16_t>(wire::kind::allreduce_chunk));
  const auto chunk = wire::decode_allreduce_chunk(ctx, r.bytes);
  EXPECT_EQ(chunk.values, model_replica(cora2().rc).parameters());
  replica_config other = cora2().rc;
  other.seed = 4;
  EXPECT_NE(chunk.values, model_replica(other).parameters());  // the check can tell seeds apart
  EXPECT_EQ(rejected(), 0u);
}

TEST_F(BatchActor, TakesTheViewOnceAndRefusesAndCountsWhatIsNotItsClustersOrOfTheWrongKind) {
  give_view();
  self->send(batch, view_atom_v, view);  // a second view
  sched.run();
  EXPECT_EQ(rejected(), 1u);
  std::string error;
  ask(params_atom_v, control_msg(wire::control_kind::checkpoint, 1, kCluster + 1), error);
  EXPECT_NE(error.find("message from another cluster (id 42, ours 41)"), std::string::npos)
      << error;
  EXPECT_EQ(rejected(), 2u);
  error.clear();
  const wire::sample_request wrong{.h = {2, 1}, .layer = 1, .fanout = 5, .seed = 1, .nodes = {}};
  ask(params_atom_v, pack(wire::kind::sample_request, wire::encode(ctx, wrong)), error);
  EXPECT_NE(error.find("expected a control"), std::string::npos) << error;
  EXPECT_EQ(rejected(), 3u);
  // Still serving: the parameters come back.
  error.clear();
  ask(params_atom_v, control_msg(wire::control_kind::checkpoint, 3), error);
  EXPECT_EQ(error, "");
}

}  // namespace
}  // namespace degnn
