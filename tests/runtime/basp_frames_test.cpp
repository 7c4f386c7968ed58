// basp_frames: a peer's stream is passed on in whole frames only, the first must be the expected
// handshake, and no announced length is taken before its bytes arrive.
#include "runtime/transport/basp_frames.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>

using degnn::basp_frames;

namespace {

// A BASP header alone (operation, payload length big-endian).
std::string header_of(std::uint8_t op, std::uint32_t payload) {
  std::string f(basp_frames::kHeaderBytes, '\0');
  f[0] = static_cast<char>(op);
  f[4] = static_cast<char>(payload >> 24);
  f[5] = static_cast<char>(payload >> 16);
  f[6] = static_cast<char>(payload >> 8);
  f[7] = static_cast<char>(payload);
  return f;
}

// A BASP header and `payload` bytes of `fill`.
std::string frame(std::uint8_t op, std::uint32_t payload, char fill = 'x') {
  std::string f(basp_frames::kHeaderBytes, '\0');
  f[0] = static_cast<char>(op);
  f[4] = static_cast<char>(payload >> 24);
  f[5] = static_cast<char>(payload >> 16);
  f[6] = static_cast<char>(payload >> 8);
  f[7] = static_cast<char>(payload);
  f[31] = 7;  // a destination actor, never looked at
  return f + std::string(payload, fill);
}

std::string taken(basp_frames& f) {
  std::string out(f.pending(), f.pending_bytes());
  f.consumed(out.size());
  return out;
}

}  // namespace

TEST(BaspFrames, PassesWholeFramesOnlyWhateverTheReadSizes) {
  const std::string stream = frame(1, 100, 'h') + frame(2, 5000, 'a') + frame(6, 0) +
                             frame(2, 1, 'b') + frame(2, 70'000, 'c');
  for (std::size_t step : {1u, 7u, 32u, 33u, 4096u, 100'000u}) {
    basp_frames f(basp_frames::opening::client_handshake, 1 << 10, 1 << 20);
    std::string out;
    std::size_t frame_ends[] = {132, 132 + 5032, 132 + 5032 + 32, 132 + 5032 + 32 + 33,
                                stream.size()};
    for (std::size_t at = 0; at < stream.size(); at += step) {
      const std::size_t n = std::min(step, stream.size() - at);
      ASSERT_EQ(f.feed(stream.data() + at, n), "") << "step " << step << " at " << at;
      out += taken(f);
      // Only ever a prefix ending on a frame boundary.
      bool on_boundary = out.empty();
      for (std::size_t e : frame_ends)
        on_boundary = on_boundary || out.size() == e;
      ASSERT_TRUE(on_boundary) << "step " << step << ": " << out.size() << " bytes passed";
    }
    EXPECT_EQ(out, stream) << "step " << step;
    EXPECT_EQ(f.frames(), 5u);
    EXPECT_EQ(f.partial_bytes(), 0u);
  }
}

TEST(BaspFrames, RefusesAFirstFrameThatIsNotTheExpectedHandshake) {
  basp_frames client(basp_frames::opening::client_handshake, 1 << 10, 1 << 20);
  EXPECT_NE(client.feed(frame(2, 10).data(), 42).find("not the client handshake"),
            std::string::npos);
  basp_frames server(basp_frames::opening::server_handshake, 1 << 10, 1 << 20);
  EXPECT_NE(server.feed(frame(1, 10).data(), 42).find("not the server handshake"),
            std::string::npos);
  basp_frames ok(basp_frames::opening::server_handshake, 1 << 10, 1 << 20);
  EXPECT_EQ(ok.feed(frame(0, 10).data(), 42), "");
  EXPECT_TRUE(ok.handshake_passed());
}

TEST(BaspFrames, RefusesAnOversizedAnnouncementBeforeAnyPayloadArrives) {
  // 1 GiB announced in the first header: refused on the header alone, nothing buffered beyond it.
  basp_frames f(basp_frames::opening::client_handshake, 64 << 10, 160 << 20);
  const std::string header = header_of(1, 1u << 30);
  const std::string why = f.feed(header.data(), header.size());
  EXPECT_NE(why.find("1073741824 bytes, over the limit of 65536 before the handshake"),
            std::string::npos)
      << why;
  EXPECT_EQ(f.pending_bytes(), 0u);
  // After the handshake the larger limit applies.
  basp_frames g(basp_frames::opening::client_handshake, 64 << 10, 1 << 20);
  const std::string hs = frame(1, 10);
  ASSERT_EQ(g.feed(hs.data(), hs.size()), "");
  const std::string within = header_of(2, 1 << 20);
  EXPECT_EQ(g.feed(within.data(), within.size()), "");
  basp_frames h(basp_frames::opening::client_handshake, 64 << 10, 1 << 20);
  ASSERT_EQ(h.feed(hs.data(), hs.size()), "");
  const std::string over = header_of(2, (1 << 20) + 1);
  EXPECT_NE(h.feed(over.data(), over.size()).find("over the limit of 1048576"), std::string::npos);
}

TEST(BaspFrames, AnnouncedBytesCostNothingUntilTheyArrive) {
  basp_frames f(basp_frames::opening::client_handshake, 64 << 10, 160 << 20);
  const std::string hs = frame(1, 10);
  ASSERT_EQ(f.feed(hs.data(), hs.size()), "");
  taken(f);
  const std::string big = header_of(2, 150u << 20) + std::string(100, 'y');
  ASSERT_EQ(f.feed(big.data(), big.size()), "");
  EXPECT_EQ(f.pending_bytes(), 0u);
  EXPECT_EQ(f.partial_bytes(), 132u);
}

TEST(BaspFrames, RefusesOperationsBaspDoesNotHave) {
  std::mt19937 rng(5);
  int refused = 0;
  for (int i = 0; i < 2000; ++i) {
    basp_frames f(basp_frames::opening::client_handshake, 64 << 10, 1 << 20);
    std::string junk(100, '\0');
    for (auto& ch : junk)
      ch = static_cast<char>(rng());
    const std::string why = f.feed(junk.data(), junk.size());
    // Random bytes pass only as the start of a client handshake within the limit.
    if (why.empty()) {
      EXPECT_EQ(static_cast<unsigned char>(junk[0]), 1u);
    } else {
      ++refused;
    }
    EXPECT_LE(f.partial_bytes() + f.pending_bytes(), 100u);
  }
  EXPECT_GT(refused, 1950);
}
