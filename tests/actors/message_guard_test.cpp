// The message envelope (issue 12): a damaged message is refused as such, a repeated or stale
// number from the same sender is refused, numbers from different senders and a late message
// inside the window pass; fault decisions depend on the seed, the link and the message only.
#include "actors/message_guard.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "actors/faults/delayed_relay.hpp"
#include "actors/faults/link_faults.hpp"

namespace degnn {
namespace {

wire_message numbered(std::uint64_t seq, std::vector<char> bytes = {'a', 'b', 'c'}) {
  wire_message m{7, std::move(bytes)};
  m.seq = seq;
  seal(m);
  return m;
}

struct two_senders : ::testing::Test {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor a{sys}, b{sys};
  caf::strong_actor_ptr pa = caf::actor_cast<caf::strong_actor_ptr>(a);
  caf::strong_actor_ptr pb = caf::actor_cast<caf::strong_actor_ptr>(b);
};

TEST_F(two_senders, DamagedMessagesAreRefusedAsDamaged) {
  message_guard g;
  wire_message m = numbered(1);
  m.bytes[1] ^= 0x10;
  const auto r = g.admit(pa, m);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->code, actor_errc::damaged);
  // A damaged copy does not use up its number: the intact one still passes.
  EXPECT_FALSE(g.admit(pa, numbered(1)).has_value());
}

TEST_F(two_senders, RepeatedAndStaleNumbersAreRefusedPerSender) {
  message_guard g;
  EXPECT_FALSE(g.admit(pa, numbered(1)));
  EXPECT_FALSE(g.admit(pb, numbered(1)));  // another sender's own numbering
  const auto again = g.admit(pa, numbered(1));
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->code, actor_errc::rejected);
  EXPECT_NE(again->why.find("repeated"), std::string::npos) << again->why;
  EXPECT_FALSE(g.admit(pa, numbered(5)));
  EXPECT_FALSE(g.admit(pa, numbered(3)));  // late, inside the window, not seen: served once
  EXPECT_TRUE(g.admit(pa, numbered(3)));
  EXPECT_FALSE(g.admit(pa, numbered(5 + message_guard::kWindow)));
  const auto stale = g.admit(pa, numbered(4));
  ASSERT_TRUE(stale.has_value());
  EXPECT_NE(stale->why.find("stale"), std::string::npos) << stale->why;
  // Unnumbered messages (within a node) are only checked for damage.
  EXPECT_FALSE(g.admit(pa, numbered(0)));
  EXPECT_FALSE(g.admit(pa, numbered(0)));
}

TEST(WireMessage, RenumberingKeepsTheChecksumOfTheWholeMessage) {
  for (std::size_t n : {0u, 1u, 7u, 4096u}) {
    wire_message m{9, std::vector<char>(n, 'q')};
    for (std::uint64_t seq : {1ull, 2ull, 1ull << 40, 0ull}) {
      renumber(m, seq);
      EXPECT_EQ(m.seq, seq);
      EXPECT_EQ(m.crc, message_crc(m)) << n << " bytes, number " << seq;
      EXPECT_TRUE(intact(m));
    }
  }
}

TEST(LinkSender, FaultsDependOnSeedLinkAndMessageOnly) {
  auto policy = std::make_shared<fault_policy>();
  policy->seed = 11;
  policy->corrupt = 0.3;
  policy->duplicate = 0.3;
  auto counts = std::make_shared<fault_counters>();
  link_sender one(1, policy, counts), other(1, policy, counts);
  int corrupt = 0, duplicate = 0;
  for (int i = 0; i < 400; ++i) {
    wire_message m{7, {static_cast<char>(i), static_cast<char>(i >> 8)}};
    wire_message n = m;
    one.number(m);
    other.number(n);
    other.number(n);  // another number: the fate follows the content, not the numbering
    const auto f = one.decide(m, 2, 1), g = other.decide(n, 2, 1);
    EXPECT_EQ(f.corrupt, g.corrupt);
    EXPECT_EQ(f.duplicate, g.duplicate);
    corrupt += f.corrupt;
    duplicate += f.duplicate;
    // Within a partition nothing crosses a link; other links are not chosen here.
    EXPECT_FALSE(one.decide(m, 1, 1).corrupt || one.decide(m, 1, 1).duplicate);
    wire_message damaged = m;
    one.damage(damaged);
    EXPECT_FALSE(intact(damaged));
  }
  EXPECT_NEAR(corrupt / 400.0, 0.3, 0.08);
  EXPECT_NEAR(duplicate / 400.0, 0.3, 0.08);
  // A message that meets a fault on link 1-2 meets none once the policy names link 0-2 only.
  wire_message m;
  for (char c = 0; c < 100; ++c) {
    m = wire_message{7, {'x', c}};
    one.number(m);
    if (one.decide(m, 2, 1).corrupt) break;
  }
  ASSERT_TRUE(one.decide(m, 2, 1).corrupt);
  policy->links = {{0, 2}};
  EXPECT_FALSE(one.decide(m, 2, 1).corrupt || one.decide(m, 2, 1).duplicate);
  policy->links = {{1, 2}};
  EXPECT_TRUE(one.decide(m, 2, 1).corrupt);
}

// The console's cut: a partition's bit in the mask holds the links between it and the others.
TEST(FaultCounters, ACutHoldsTheLinksAcrossItOnly) {
  fault_counters c;
  EXPECT_FALSE(c.cut_between(0, 1));
  c.cut_parts = 0b10;  // partition 1 cut off
  EXPECT_TRUE(c.cut_between(0, 1));
  EXPECT_TRUE(c.cut_between(1, 2));
  EXPECT_FALSE(c.cut_between(0, 2));
  EXPECT_FALSE(c.cut_between(1, 1));
  EXPECT_FALSE(c.cut_between(-1, 1)) << "a sender of no partition (the coordinator) is not held";
  c.cut_parts = 0b110;  // 1 and 2 on one side
  EXPECT_FALSE(c.cut_between(1, 2));
  EXPECT_TRUE(c.cut_between(0, 2));
}

// A held relay sends its request on once the hold ends, and gives up after its limit instead of
// outliving the run (the actor system waits for every actor before the process ends).
TEST(HeldRelay, WaitsForTheHealAndGivesUpAfterItsLimit) {
  caf::actor_system_config cfg;
  add_actor_types(cfg);
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto echo =
      sys.spawn([]() -> caf::behavior { return {[](const std::string& s) { return s + "!"; }}; });
  std::atomic<bool> hold{true};
  auto relay = spawn_held_relay(
      sys, echo, caf::make_message(std::string("ping")), [&hold] { return hold.load(); },
      std::chrono::seconds(10));
  std::thread heal([&hold] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    hold = false;
  });
  const auto t0 = std::chrono::steady_clock::now();
  std::string got;
  self->request(relay, std::chrono::seconds(10), relay_atom_v)
      .receive([&](std::string& r) { got = r; },
               [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
  heal.join();
  EXPECT_EQ(got, "ping!");
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(250));
  auto stuck = spawn_held_relay(
      sys, echo, caf::make_message(std::string("ping")), [] { return true; },
      std::chrono::milliseconds(200));
  bool gave_up = false;
  self->request(stuck, std::chrono::seconds(10), relay_atom_v)
      .receive(
          [&](std::string&) { ADD_FAILURE() << "a held request went through"; },
          [&](caf::error& e) { gave_up = sys.render(e).find("cut link") != std::string::npos; });
  EXPECT_TRUE(gave_up);
  self->send_exit(echo, caf::exit_reason::user_shutdown);
}

}  // namespace
}  // namespace degnn
