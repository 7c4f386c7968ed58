// Tests of the embedding-store actor (actors/embedding_store.hpp) on CAF's deterministic test
// coordinator: every message is handled when the test runs the scheduler, so a reply is in the
// test's mailbox exactly when the store has answered. What a put stores, what a get returns
// against the versions the asker holds, and the refusals (counted in the store's report).
#include "actors/embedding_store.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "model/dataset.hpp"
#include "model/partitioner.hpp"

#include "tests/actors/cora_half.hpp"
#include "tests/actors/deterministic_system.hpp"

namespace degnn {
namespace {

constexpr int kWidth = 4;  // level 1's width

const test::cora_half& cora_part0() {
  static const test::cora_half c = test::load_cora_half(3);
  return c;
}

// Row values a put carries for `node` at `version`: distinct per node, level and version.
std::vector<float> row_of(node_id node, std::uint64_t version) {
  const auto n = static_cast<float>(node), v = static_cast<float>(version);
  return {n, n + 0.5f, -n, v};
}

history_commit put_of(const std::vector<node_id>& nodes, std::uint64_t version, int sender = 0) {
  history_commit c{.sender = sender, .level = 1, .version = version, .nodes = nodes, .values = {}};
  for (node_id g : nodes) {
    const auto r = row_of(g, version);
    c.values.insert(c.values.end(), r.begin(), r.end());
  }
  return c;
}

class EmbeddingStore : public ::testing::Test, protected test::deterministic_system {
 protected:
  EmbeddingStore() {
    store =
        sys.spawn(store_behavior, cora_part0().part, cora_part0().book,
                  store_settings{.widths = {kWidth}, .bits = 32}, wire::context{.cluster_id = 77});
    sched.run();
  }
  ~EmbeddingStore() override {
    self->send_exit(store, caf::exit_reason::user_shutdown);
    sched.run();
  }

  /// The store's answer to a put: true, or the error's text.
  std::string put(const history_commit& c) {
    auto h = self->request(store, caf::infinite, put_atom_v, c);
    sched.run();
    std::string out = "no answer";
    h.receive([&](bool ok) { out = ok ? "true" : "false"; },
              [&](caf::error& e) { out = sys.render(e); });
    return out;
  }

  /// The store's answer to a get of `nodes` at `level` (step `step`: each request is new to the
  /// store's guard); on an error, `error` holds its text.
  wire::embedding_rows get(int level, const std::vector<node_id>& nodes,
                           const std::vector<std::uint64_t>& held, std::uint64_t step,
                           std::string* error = nullptr, const wire::context* as = nullptr) {
    const wire::embedding_get req{
        .h = {step, 1}, .layer = static_cast<std::uint8_t>(level), .nodes = nodes, .held = held};
    auto h = self->request(store, caf::infinite, get_atom_v,
                           pack(wire::kind::embedding_get, wire::encode(as ? *as : ctx, req)));
    sched.run();
    wire::embedding_rows rows;
    h.receive(
        [&](wire_message& m) {
          EXPECT_EQ(m.kind, static_cast<std::uint16_t>(wire::kind::embedding_rows));
          rows = wire::decode_embedding_rows(ctx, m.bytes);
        },
        [&](caf::error& e) {
          if (error)
            *error = sys.render(e);
          else
            ADD_FAILURE() << sys.render(e);
        });
    return rows;
  }

  /// The rejected count of the store's report.
  std::uint64_t rejected() {
    const wire::control ask{.h = {0, 1}, .what = wire::control_kind::result};
    auto h = self->request(store, caf::infinite, report_atom_v,
                           pack(wire::kind::control, wire::encode(ctx, ask)));
    sched.run();
    std::uint64_t n = ~std::uint64_t{0};
    h.receive(
        [&](wire_message& m) {
          n = parse_report(wire::decode_control(ctx, m.bytes).counts).rejected;
        },
        [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
    return n;
  }

  const std::vector<node_id>& owned() const { return cora_part0().part->owned; }

  store_actor store;
  const wire::context ctx{.cluster_id = 77};
};

// The float32 rows of a reply, in its node order.
std::vector<float> floats_of(const wire::embedding_rows& r) {
  std::vector<float> out(r.payload.size() / sizeof(float));
  std::memcpy(out.data(), r.payload.data(), out.size() * sizeof(float));
  return out;
}

TEST_F(EmbeddingStore, AGetReturnsThePutRowsAndOnlyThoseNewerThanTheAskerHolds) {
  ASSERT_EQ(put(put_of(owned(), 1)), "true");  // the set-up pass: every owned node
  const std::vector<node_id> asked = {owned()[0], owned()[5], owned()[9]};
  const auto first = get(1, asked, {}, 10);
  ASSERT_EQ(first.nodes, asked);
  EXPECT_EQ(first.versions, (std::vector<std::uint64_t>{1, 1, 1}));
  EXPECT_EQ(first.bits, 32);
  EXPECT_EQ(first.cols, static_cast<std::uint32_t>(kWidth));
  std::vector<float> expected;
  for (node_id g : asked) {
    const auto r = row_of(g, 1);
    expected.insert(expected.end(), r.begin(), r.end());
  }
  EXPECT_EQ(floats_of(first), expected);

  // A step's put of one node at version 5: an asker holding version 1 of all three gets that
  // node alone; one holding nothing of the third (kNoVersion) gets it too.
  ASSERT_EQ(put(put_of({owned()[5]}, 5)), "true");
  const auto newer = get(1, asked, {1, 1, 1}, 11);
  ASSERT_EQ(newer.nodes, (std::vector<node_id>{owned()[5]}));
  EXPECT_EQ(newer.versions, (std::vector<std::uint64_t>{5}));
  EXPECT_EQ(floats_of(newer), row_of(owned()[5], 5));
  const auto some = get(1, asked, {1, 5, wire::kNoVersion}, 12);
  EXPECT_EQ(some.nodes, (std::vector<node_id>{owned()[9]}));
  EXPECT_EQ(rejected(), 0u);
}

TEST_F(EmbeddingStore, ServesLevelZeroFromThePartitionsFeatures) {
  const auto& part = *cora_part0().part;
  const auto r = get(0, {owned()[2]}, {}, 20);
  ASSERT_EQ(r.nodes, (std::vector<node_id>{owned()[2]}));
  ASSERT_EQ(r.cols, static_cast<std::uint32_t>(part.features.cols()));
  const std::vector<float> row(part.features.row(2).data(),
                               part.features.row(2).data() + part.features.cols());
  EXPECT_EQ(floats_of(r), row);
}

TEST_F(EmbeddingStore, BadRequestsAreRefusedNamedAndCounted) {
  std::string why;
  get(1, {owned()[0]}, {}, 30, &why);  // before any put: level 1 holds no history
  EXPECT_NE(why.find("holds no history"), std::string::npos) << why;
  why.clear();
  ASSERT_EQ(put(put_of(owned(), 1)), "true");
  get(2, {owned()[0]}, {}, 31, &why);
  EXPECT_NE(why.find("level 2, which holds no history"), std::string::npos) << why;
  why.clear();
  get(1, {owned()[0], owned()[1]}, {1}, 32, &why);
  EXPECT_NE(why.find("held has 1 versions for 2 nodes"), std::string::npos) << why;
  why.clear();
  // A node part 0 does not own.
  node_id foreign = 0;
  while (cora_part0().book->owner(foreign) == 0)
    ++foreign;
  get(1, {foreign}, {}, 33, &why);
  EXPECT_NE(why.find("names node " + std::to_string(foreign) + ", which partition 0 does not own"),
            std::string::npos)
      << why;
  why.clear();
  // A request of another cluster is not read.
  const wire::context other{.cluster_id = 78};
  get(1, {owned()[0]}, {}, 34, &why, &other);
  EXPECT_NE(why.find("embedding store 0: "), std::string::npos) << why;
  EXPECT_EQ(rejected(), 5u);
  // The store still serves a good request afterwards.
  EXPECT_EQ(get(1, {owned()[3]}, {}, 35).nodes, (std::vector<node_id>{owned()[3]}));
}

TEST_F(EmbeddingStore, AFailedPutRefusesEveryLaterGetWithItsCause) {
  ASSERT_EQ(put(put_of(owned(), 1)), "true");
  // Another partition's shard may not commit here; a first put must name every owned node.
  const std::string other = put(put_of({owned()[0]}, 2, 1));
  EXPECT_NE(other.find("only the store's own shard commits history"), std::string::npos) << other;
  std::string why;
  get(1, {owned()[0]}, {}, 40, &why);
  EXPECT_NE(why.find("a history commit failed"), std::string::npos) << why;
  EXPECT_EQ(rejected(), 2u);
}

TEST_F(EmbeddingStore, TheFirstPutOfALevelMustHoldEveryOwnedNode) {
  const std::string why = put(put_of({owned()[0]}, 1));
  EXPECT_NE(why.find("the first put of level 1 must hold every owned node"), std::string::npos)
      << why;
  // Nothing was kept: a get of level 1 is refused as before any put.
  std::string after;
  get(1, {owned()[0]}, {}, 50, &after);
  EXPECT_NE(after.find("a history commit failed"), std::string::npos) << after;
}

}  // namespace
}  // namespace degnn
