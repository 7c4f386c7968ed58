// Tests of serialization/wire_membership.hpp: join requests and views round-trip; a view that
// does not serve each partition once, ranks out of order, empty or overlong texts, another
// protocol version and truncations are rejected; random corruption never crashes.
#include "serialization/wire_membership.hpp"

#include <gtest/gtest.h>

#include <random>

#include "serialization/wire_console.hpp"

using namespace degnn::wire;

namespace {
const context ctx{.cluster_id = 77};

membership_view three_members() {
  membership_view v;
  v.id = 1;
  v.members = {{0, "10.0.0.1", 24800, "seed", {0, 3}},
               {1, "10.0.0.2", 24801, "b", {1}},
               {2, "host-c", 40000, "c", {2}}};
  return v;
}

template <class F>
std::string rejection(F&& f) {
  try {
    f();
  } catch (const wire_error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(WireMembership, RoundTripsAJoinRequestOfAnyClusterAndAView) {
  const join_request j{.cluster_id = 5,
                       .identity = {"lr=0.01", "parts=4"},
                       .host = "127.0.0.1",
                       .port = 4242,
                       .rank_hint = 2,
                       .name = "gpu07"};
  // The joiner's cluster id is read, not checked: the seed compares the identity lines.
  const join_request d = decode_join_request(ctx, encode(context{.cluster_id = 5}, j));
  EXPECT_EQ(d.cluster_id, 5u);
  EXPECT_EQ(d.identity, j.identity);
  EXPECT_EQ(d.host, j.host);
  EXPECT_EQ(d.port, j.port);
  EXPECT_EQ(d.rank_hint, 2);
  EXPECT_EQ(d.name, "gpu07");

  const membership_view v = decode_membership_view(ctx, encode(ctx, three_members()));
  ASSERT_EQ(v.members.size(), 3u);
  EXPECT_EQ(v.id, 1u);
  EXPECT_EQ(v.members[2].host, "host-c");
  EXPECT_EQ(v.members[0].partitions, (std::vector<std::int32_t>{0, 3}));
  EXPECT_EQ(v.num_partitions(), 4);
  EXPECT_EQ(v.rank_of_partition(3), 0);
  EXPECT_EQ(v.rank_of_partition(9), -1);
}

TEST(WireMembership, RejectsViewsThatAreNotAPartitionMapAndBadJoins) {
  auto view_error = [](membership_view v) {
    return rejection([&] { decode_membership_view(ctx, encode(ctx, v)); });
  };
  auto v = three_members();
  v.members[1].partitions = {1, 3};  // partition 3 twice
  EXPECT_NE(view_error(v).find("exactly once"), std::string::npos);
  v = three_members();
  v.members[2].partitions = {5};  // 2 missing
  EXPECT_NE(view_error(v).find("exactly once"), std::string::npos);
  v = three_members();
  std::swap(v.members[1].rank, v.members[2].rank);
  EXPECT_NE(view_error(v).find("out of order"), std::string::npos);
  v = three_members();
  v.members[1].host = "";
  EXPECT_NE(view_error(v).find("member host is empty"), std::string::npos);
  v = three_members();
  v.members[1].port = 0;
  EXPECT_NE(view_error(v).find("port 0"), std::string::npos);
  v = three_members();
  v.members[1].name = std::string(2000, 'x');
  EXPECT_NE(view_error(v).find("longer than 1024"), std::string::npos);
  v = three_members();
  v.members[1].partitions.clear();
  EXPECT_NE(view_error(v).find("serves no partition"), std::string::npos);
  v = three_members();
  v.id = 0;
  EXPECT_NE(view_error(v).find("view id 0"), std::string::npos);
  v = three_members();
  v.members.clear();
  EXPECT_NE(view_error(v).find("0 members"), std::string::npos);
  // Another cluster's view.
  EXPECT_NE(rejection([] {
              decode_membership_view(ctx, encode(context{.cluster_id = 78}, three_members()));
            }).find("another cluster"),
            std::string::npos);

  join_request j{.identity = {"a=1"}, .host = "h", .port = 1, .rank_hint = -1, .name = "n"};
  auto join_error = [](join_request x) {
    return rejection([&] { decode_join_request(ctx, encode(ctx, x)); });
  };
  EXPECT_EQ(join_error(j), "");
  auto k = j;
  k.port = 0;
  EXPECT_NE(join_error(k), "");
  k = j;
  k.rank_hint = -2;
  EXPECT_NE(join_error(k), "");
  k = j;
  k.identity = std::vector<std::string>(300, "a=1");
  EXPECT_NE(join_error(k).find("256"), std::string::npos);
  k = j;
  k.name = "";
  EXPECT_NE(join_error(k).find("name is empty"), std::string::npos);
}

// A recovery's views: a lost member keeps its rank and serves nothing; replaced ranks are named.
TEST(WireMembership, ARecoveryViewRoundTripsAndItsLostAndReplacedRanksAreChecked) {
  membership_view v = three_members();
  v.id = 2;
  v.resume_step = 40;
  v.members[2].lost = true;
  v.members[1].partitions = {1, 2};
  v.members[2].partitions.clear();
  const membership_view d = decode_membership_view(ctx, encode(ctx, v));
  EXPECT_TRUE(d.members[2].lost);
  EXPECT_FALSE(d.members[1].lost);
  EXPECT_EQ(d.rank_of_partition(2), 1);
  EXPECT_EQ(d.resume_step, 40u);

  membership_view r = three_members();
  r.id = 2;
  r.replaced = {2};
  EXPECT_EQ(decode_membership_view(ctx, encode(ctx, r)).replaced, (std::vector<std::int32_t>{2}));

  auto refused = [](membership_view bad) {
    return rejection([&] { decode_membership_view(ctx, encode(ctx, bad)); });
  };
  membership_view still_serving = v;
  still_serving.members[2].partitions = {2};
  still_serving.members[1].partitions = {1};
  EXPECT_NE(refused(still_serving).find("is lost but still serves"), std::string::npos);
  // Node 0 lost: its successor, the lowest live rank, coordinates and serves partition 0.
  membership_view lost_coordinator = three_members();
  lost_coordinator.members[0].lost = true;
  lost_coordinator.members[0].partitions.clear();
  lost_coordinator.members[1].partitions = {0, 1, 3};
  EXPECT_TRUE(decode_membership_view(ctx, encode(ctx, lost_coordinator)).members[0].lost);
  membership_view misplaced = lost_coordinator;
  misplaced.members[1].partitions = {1, 3};
  misplaced.members[2].partitions = {0, 2};
  EXPECT_NE(refused(misplaced).find("the coordinator (rank 1, the lowest live one) does not serve "
                                    "partition 0"),
            std::string::npos);
  for (std::int32_t bad_rank : {0, 3, -1}) {
    membership_view odd = three_members();
    odd.replaced = {bad_rank};
    EXPECT_NE(refused(odd).find("replaced rank"), std::string::npos) << bad_rank;
  }
  membership_view replaced_lost = v;
  replaced_lost.replaced = {2};
  EXPECT_NE(refused(replaced_lost).find("replaced rank 2"), std::string::npos);
}

TEST(WireMembership, RejectsEveryTruncationAndSurvivesRandomCorruption) {
  const auto view = encode(ctx, three_members());
  for (size_t n = 0; n < view.size(); ++n) {
    EXPECT_THROW(decode_membership_view(ctx, std::span<const char>(view.data(), n)), wire_error)
        << n;
  }
  const auto join = encode(
      ctx,
      join_request{
          .identity = {"a=1", "b=2"}, .host = "127.0.0.1", .port = 9, .rank_hint = 1, .name = "x"});
  std::mt19937 rng(99);
  int rejected = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    auto b = iter % 2 ? view : join;
    for (int f = 0, flips = 1 + static_cast<int>(rng() % 4); f < flips; ++f)
      b[rng() % b.size()] = static_cast<char>(rng());
    try {
      if (iter % 2) {
        const auto v = decode_membership_view(ctx, b);
        EXPECT_GE(v.num_partitions(), 1);
      } else {
        const auto j = decode_join_request(ctx, b);
        EXPECT_NE(j.port, 0);
      }
    } catch (const wire_error&) {
      ++rejected;
    }
  }
  std::printf("rejected %d of 20000 corrupted membership buffers\n", rejected);
  EXPECT_GT(rejected, 0);
}

// The console's messages: a request through the TLS gateway carries the challenge it answers,
// the gateway's challenge travels as its own message, and out-of-bounds sizes are refused.
TEST(WireConsole, RequestsChallengesAndRepliesRoundTripWithinTheirBounds) {
  const context any{};
  console_request req{"progress", "PEM", {1, 2, 3}, {4, 5}, std::vector<std::uint8_t>(32, 7)};
  const auto back = decode_console_request(any, encode(any, req));
  EXPECT_EQ(back.command, "progress");
  EXPECT_EQ(back.certificate, "PEM");
  EXPECT_EQ(back.signature, req.signature);
  EXPECT_EQ(back.token_mac, req.token_mac);
  EXPECT_EQ(back.challenge, req.challenge);
  req.challenge.assign(65, 1);
  EXPECT_THROW(decode_console_request(any, encode(any, req)), wire_error);
  req.challenge.clear();
  req.command.assign(1025, 'x');
  EXPECT_THROW(decode_console_request(any, encode(any, req)), wire_error);

  const console_challenge c{std::vector<std::uint8_t>(32, 9)};
  EXPECT_EQ(decode_console_challenge(any, encode(any, c)).challenge, c.challenge);
  for (const std::size_t n : {0, 8, 65}) {
    const console_challenge bad{std::vector<std::uint8_t>(n, 1)};
    EXPECT_THROW(decode_console_challenge(any, encode(any, bad)), wire_error) << n << " bytes";
  }
  const auto bytes = encode(any, c);
  for (size_t cut = 0; cut < bytes.size(); cut += 8)
    EXPECT_THROW(decode_console_challenge(any, std::span(bytes.data(), cut)), wire_error);
  const console_reply r{true, "{}"};
  const auto rb = decode_console_reply(any, encode(any, r));
  EXPECT_TRUE(rb.ok);
  EXPECT_EQ(rb.text, "{}");
}
