// Tests of serialization/wire.hpp: round trips, exact sizes, and rejection of truncated,
// corrupted, foreign-cluster and other-version buffers (a bounded random-mutation fuzz loop).
#include "serialization/wire.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>

#include "model/sparse_input.hpp"

using namespace degnn;
using namespace degnn::wire;

namespace {
const context ctx{.cluster_id = 77};

sample_response some_response() {
  sample_response m;
  m.h = {.step = 9, .sender = 2};
  m.counts = {2, 0, 1};
  m.neighbors = {5, 7, 11};
  m.degrees = {4, 0, 1};
  return m;
}
}  // namespace

TEST(Wire, RoundTripsASampleRequest) {
  sample_request m{
      .h = {.step = 3, .sender = 1}, .layer = 1, .fanout = 25, .seed = 99, .nodes = {1, 2, 3}};
  const auto b = encode(ctx, m);
  const auto d = decode_sample_request(ctx, b);
  EXPECT_EQ(d.h.step, 3u);
  EXPECT_EQ(d.h.sender, 1);
  EXPECT_EQ(d.layer, 1);
  EXPECT_EQ(d.fanout, 25);
  EXPECT_EQ(d.seed, 99u);
  EXPECT_EQ(d.nodes, m.nodes);
}

TEST(Wire, RoundTripsASampleResponse) {
  const auto b = encode(ctx, some_response());
  const auto d = decode_sample_response(ctx, b);
  EXPECT_EQ(d.counts, some_response().counts);
  EXPECT_EQ(d.neighbors, some_response().neighbors);
  EXPECT_EQ(d.degrees, some_response().degrees);
}

TEST(Wire, RoundTripsFeatureRowsBitExactly) {
  row_block m;
  m.rows = Matrix::Random(5, 3);
  const auto b = encode(ctx, m, kind::feature_response);
  EXPECT_TRUE(decode_row_block(ctx, b).rows == m.rows);
}

TEST(Wire, EncodesFeatureRowsInAPredictableNumberOfBytes) {
  // Segment table (8) + root pointer (8) + FeatureResponse struct (1 data word, 3 pointers:
  // header, values, degrees) + Header struct (3 data words) + payload rounded up to words.
  row_block m;
  m.rows = Matrix::Zero(10, 4);
  const auto b = encode(ctx, m, kind::feature_response);
  EXPECT_EQ(b.size(), 8u + 8u + 32u + 24u + 160u);
}

TEST(Wire, RoundTripsAllReduceChunksAndControl) {
  allreduce_chunk a{.h = {}, .round = 4, .values = {1.5f, -2.0f}};
  const auto da = decode_allreduce_chunk(ctx, encode(ctx, a));
  EXPECT_EQ(da.values, a.values);
  control c{
      .h = {}, .what = control_kind::checkpoint, .epoch = 3, .value = 0.25, .text = "ckpt/epoch3"};
  const auto dc = decode_control(ctx, encode(ctx, c));
  EXPECT_EQ(dc.what, control_kind::checkpoint);
  EXPECT_EQ(dc.text, "ckpt/epoch3");
  EXPECT_DOUBLE_EQ(dc.value, 0.25);
}

TEST(Wire, RejectsAMessageFromAnotherCluster) {
  const auto b = encode(context{.cluster_id = 1}, some_response());
  try {
    decode_sample_response(ctx, b);
    FAIL() << "accepted";
  } catch (const wire_error& e) {
    EXPECT_NE(std::string(e.what()).find("another cluster"), std::string::npos) << e.what();
  }
}

TEST(Wire, RejectsAMessageOfAnotherMembershipViewAtNoExtraByte) {
  const auto old_view = encode(context{.cluster_id = 77, .view_id = 1}, some_response());
  const context after_change{.cluster_id = 77, .view_id = 2};
  try {
    decode_sample_response(after_change, old_view);
    FAIL() << "accepted";
  } catch (const wire_error& e) {
    EXPECT_NE(std::string(e.what()).find("older membership view (1, ours 2)"), std::string::npos)
        << e.what();
  }
  const auto new_view = encode(after_change, some_response());
  EXPECT_THROW(decode_sample_response(ctx, new_view), wire_error);
  // The view id sits in a free slot of the header: stamping it costs no byte.
  EXPECT_EQ(old_view.size(), new_view.size());
  EXPECT_EQ(old_view.size(),
            encode(context{.cluster_id = 77, .view_id = 0}, some_response()).size());
  EXPECT_EQ(decode_sample_response(after_change, new_view).neighbors, some_response().neighbors);
}

TEST(Wire, RejectsAnotherProtocolVersion) {
  auto b = encode(ctx, some_response());
  // The header struct's first data word starts with the version (UInt16): find and bump it.
  bool patched = false;
  for (size_t i = 0; i + 1 < b.size(); i += 8) {
    if (b[i] == static_cast<char>(kProtocolVersion) && b[i + 1] == 0 && b[i + 8] == 77) {
      b[i] = 42;
      patched = true;
      break;
    }
  }
  ASSERT_TRUE(patched);
  EXPECT_THROW(decode_sample_response(ctx, b), wire_error);
}

TEST(Wire, RejectsInconsistentCounts) {
  auto m = some_response();
  m.counts = {2, 0, 2};  // 4 promised, 3 sent
  m.degrees = {4, 0, 2};
  EXPECT_THROW(decode_sample_response(ctx, encode(ctx, m)), wire_error);
  row_block r;
  r.rows = Matrix::Zero(2, 2);
  auto b = encode(ctx, r, kind::feature_response);
  EXPECT_NO_THROW(decode_row_block(ctx, b));
}

TEST(Wire, RejectsEveryTruncation) {
  const auto b = encode(ctx, some_response());
  for (size_t n = 0; n < b.size(); ++n) {
    EXPECT_THROW(decode_sample_response(ctx, std::span(b.data(), n)), wire_error) << "length " << n;
  }
}

TEST(Wire, RejectsOversizedBuffers) {
  const context small{.cluster_id = 77, .max_bytes = 64};
  row_block r;
  r.rows = Matrix::Zero(100, 10);
  EXPECT_THROW(decode_row_block(small, encode(ctx, r, kind::feature_response)), wire_error);
}

TEST(Wire, RejectsAShapeWhoseByteCountOverflows) {
  // rows x cols x 4 = 4 (mod 2^64) for these two 32-bit counts: an unchecked product matched the
  // 4-byte payload of a 1 x 1 matrix and asked for a matrix of 4.6e18 floats.
  row_block r;
  r.rows = Matrix::Constant(1, 1, 1.5f);
  auto b = encode(ctx, r, kind::feature_response);
  // The root struct's data word follows the segment table and the root pointer: rows, cols.
  std::uint32_t rows = 0, cols = 0;
  std::memcpy(&rows, b.data() + 16, 4);
  std::memcpy(&cols, b.data() + 20, 4);
  ASSERT_EQ(rows, 1u);
  ASSERT_EQ(cols, 1u);
  rows = 1380655685u;
  cols = 3340214413u;
  ASSERT_EQ(static_cast<std::uint64_t>(rows) * cols * 4, 4u);  // the wrap this test is about
  std::memcpy(b.data() + 16, &rows, 4);
  std::memcpy(b.data() + 20, &cols, 4);
  try {
    decode_row_block(ctx, b);
    FAIL() << "accepted";
  } catch (const wire_error& e) {
    // The width bound (far below 2^32) now refuses it before the product is formed; the
    // overflow check stays behind it.
    EXPECT_NE(std::string(e.what()).find("width 3340214413"), std::string::npos) << e.what();
  }
}

TEST(Wire, NeverCrashesOnRandomlyCorruptedBuffers) {
  // Bounded fuzz loop: flip bytes of valid messages; every outcome must be a value or a
  // wire_error, never a crash or another exception type. (A libFuzzer target with a kept corpus
  // is the stronger tool; this runs in every CI build.)
  std::mt19937 rng(1234);
  const auto base = encode(ctx, some_response());
  row_block r;
  r.rows = Matrix::Random(3, 3);
  const auto rows = encode(ctx, r, kind::feature_response);
  int rejected = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    auto b = iter % 2 ? base : rows;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f)
      b[rng() % b.size()] = static_cast<char>(rng());
    try {
      if (iter % 2) {
        const auto m = decode_sample_response(ctx, b);
        EXPECT_EQ(m.counts.size(), m.degrees.size());
      } else {
        const auto m = decode_row_block(ctx, b);
        // Whatever survives decoding is a consistent block: a degree per row or none, and a
        // precision the format has.
        EXPECT_TRUE(m.degrees.empty() || m.degrees.size() == static_cast<size_t>(m.rows.rows()))
            << m.degrees.size() << " degrees for " << m.rows.rows() << " rows";
        EXPECT_TRUE(m.bits == 32 || m.bits == 16 || m.bits == 8 || m.bits == 4 || m.bits == 2)
            << int(m.bits);
      }
    } catch (const wire_error&) {
      ++rejected;
    }
  }
  std::printf("rejected %d of 20000 corrupted buffers\n", rejected);
  EXPECT_GT(rejected, 0);
}

namespace {
// Three rows of 5 values at 4 bits: ceil(5 * 4 / 8) = 3 bytes per row.
embedding_rows some_embedding_rows() {
  embedding_rows m;
  m.h = {.step = 12, .sender = 3};
  m.layer = 1;
  m.bits = 4;
  m.nodes = {4, 9, 100};
  m.versions = {10, 11, 12};
  m.cols = 5;
  m.payload = {0x10, 0x32, 0x04, 0xff, 0xff, 0x0f, 0x00, 0x00, 0x00};
  m.row_min = {-1.f, 0.f, 2.5f};
  m.row_scale = {0.1f, 0.f, 1e-3f};
  return m;
}
}  // namespace

TEST(WireEmbeddings, RoundTripAGetAndQuantizedAndRawRows) {
  const embedding_get g{.h = {.step = 5, .sender = 2}, .layer = 2, .nodes = {0, 8, 3}};
  const auto dg = decode_embedding_get(ctx, encode(ctx, g));
  EXPECT_EQ(dg.h.step, 5u);
  EXPECT_EQ(dg.h.sender, 2);
  EXPECT_EQ(dg.layer, 2);
  EXPECT_EQ(dg.nodes, g.nodes);

  const auto m = some_embedding_rows();
  const auto d = decode_embedding_rows(ctx, encode(ctx, m));
  EXPECT_EQ(d.h.step, 12u);
  EXPECT_EQ(d.h.sender, 3);
  EXPECT_EQ(d.layer, 1);
  EXPECT_EQ(d.bits, 4);
  EXPECT_EQ(d.nodes, m.nodes);
  EXPECT_EQ(d.versions, m.versions);
  EXPECT_EQ(d.cols, 5u);
  EXPECT_EQ(d.payload, m.payload);
  EXPECT_EQ(d.row_min, m.row_min);
  EXPECT_EQ(d.row_scale, m.row_scale);

  // 32 bits: raw float32 rows, no per-row parameters.
  embedding_rows raw{
      .h = {}, .layer = 0, .bits = 32, .nodes = {1, 2}, .versions = {7, 7}, .cols = 3};
  const float values[6] = {1.f, -2.f, 3.5f, 0.f, 1e-20f, -0.f};
  raw.payload.resize(sizeof values);
  std::memcpy(raw.payload.data(), values, sizeof values);
  const auto dr = decode_embedding_rows(ctx, encode(ctx, raw));
  EXPECT_EQ(dr.payload, raw.payload);
  EXPECT_TRUE(dr.row_min.empty() && dr.row_scale.empty());

  // Every width, odd column count: payload sizes follow ceil(cols * bits / 8) per row.
  for (const int bits : {32, 16, 8, 4, 2}) {
    embedding_rows e{.h = {},
                     .layer = 0,
                     .bits = static_cast<std::uint8_t>(bits),
                     .nodes = {1, 2, 3},
                     .versions = {1, 2, 3},
                     .cols = 7};
    e.payload.assign(3 * ((7 * bits + 7) / 8), 0xab);
    e.row_min.assign(3, 0.f);
    e.row_scale.assign(3, 1.f);
    EXPECT_EQ(decode_embedding_rows(ctx, encode(ctx, e)).payload, e.payload) << "bits " << bits;
  }
  // An empty answer is valid.
  embedding_rows none{.h = {}, .layer = 0, .bits = 8};
  EXPECT_TRUE(decode_embedding_rows(ctx, encode(ctx, none)).nodes.empty());
}

TEST(WireEmbeddings, RejectsInconsistentRows) {
  const auto rejects = [](const embedding_rows& m, const char* why) {
    try {
      decode_embedding_rows(ctx, encode(ctx, m));
      ADD_FAILURE() << "accepted: " << why;
    } catch (const wire_error& e) {
      EXPECT_NE(std::string(e.what()).find("embedding_rows"), std::string::npos) << e.what();
    }
  };
  for (const int bits : {0, 1, 3, 7, 12, 64, 255}) {
    auto m = some_embedding_rows();
    m.bits = static_cast<std::uint8_t>(bits);
    rejects(m, "bad bit width");
  }
  auto m = some_embedding_rows();
  m.versions.pop_back();
  rejects(m, "a version short");
  m = some_embedding_rows();
  m.payload.pop_back();
  rejects(m, "payload a byte short");
  m = some_embedding_rows();
  m.payload.push_back(0);
  rejects(m, "payload a byte long");
  m = some_embedding_rows();
  m.cols = 6;  // 6 values at 4 bits still fit 3 bytes per row; 7 need 4
  EXPECT_NO_THROW(decode_embedding_rows(ctx, encode(ctx, m)));
  m.cols = 7;
  rejects(m, "cols that need 4 bytes per row");
  m = some_embedding_rows();
  m.nodes[1] = -4;
  rejects(m, "negative node id");
  m = some_embedding_rows();
  m.row_min.pop_back();
  rejects(m, "a row min short");
  m = some_embedding_rows();
  m.row_scale.clear();
  rejects(m, "no scales at 4 bits");
  m = some_embedding_rows();
  m.row_scale[2] = -1.f;
  rejects(m, "negative scale");
  m = some_embedding_rows();
  m.row_min[0] = std::numeric_limits<float>::quiet_NaN();
  rejects(m, "NaN min");
  m = some_embedding_rows();
  m.bits = 32;  // 3 rows of 5 floats need 60 bytes
  rejects(m, "raw rows with a quantized payload");

  embedding_get g{.h = {}, .layer = 0, .nodes = {1, -2}};
  EXPECT_THROW(decode_embedding_get(ctx, encode(ctx, g)), wire_error);
  EXPECT_THROW(decode_embedding_get(context{.cluster_id = 78}, encode(ctx, g)), wire_error);
  const auto b = encode(ctx, some_embedding_rows());
  for (size_t n = 0; n < b.size(); ++n) {
    EXPECT_THROW(decode_embedding_rows(ctx, std::span(b.data(), n)), wire_error) << "length " << n;
  }
}

TEST(WireEmbeddings, NeverCrashesOnRandomlyCorruptedRows) {
  // The bounded fuzz loop of NeverCrashesOnRandomlyCorruptedBuffers, on an embedding_rows buffer:
  // every outcome is a wire_error or a message that meets all the decoder's promises.
  std::mt19937 rng(4321);
  const auto base = encode(ctx, some_embedding_rows());
  int rejected = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    auto b = base;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f)
      b[rng() % b.size()] = static_cast<char>(rng());
    try {
      const auto m = decode_embedding_rows(ctx, b);
      const size_t n = m.nodes.size();
      EXPECT_TRUE(m.bits == 32 || m.bits == 16 || m.bits == 8 || m.bits == 4 || m.bits == 2);
      EXPECT_EQ(m.versions.size(), n);
      EXPECT_EQ(m.payload.size(), n * ((static_cast<size_t>(m.cols) * m.bits + 7) / 8));
      if (!(m.bits == 32 && m.row_min.empty())) {
        EXPECT_EQ(m.row_min.size(), n);
        EXPECT_EQ(m.row_scale.size(), n);
      }
      for (auto v : m.nodes)
        EXPECT_GE(v, 0);
    } catch (const wire_error&) {
      ++rejected;
    }
  }
  std::printf("rejected %d of 20000 corrupted embedding_rows buffers\n", rejected);
  EXPECT_GT(rejected, 0);
}

// -- decentralized pipeline: computation push, partial aggregate, gradient return --

namespace {
// Three targets with 2, 0 and 3 neighbours on the receiver.
computation_push some_push() {
  return computation_push{.h = {.step = 21, .sender = 1},
                          .layer = 2,
                          .targets = {10, 11, 12},
                          .counts = {2, 0, 3},
                          .neighbors = {40, 41, 42, 43, 44}};
}

partial_aggregate some_partial_aggregate() {
  partial_aggregate m{.h = {.step = 21, .sender = 3}};
  m.sums = Matrix::Random(3, 4);
  m.counts = {2, 0, 3};
  return m;
}
}  // namespace

TEST(WireDecentralized, RoundTripsAPushAPartialAggregateAndAGradientReturn) {
  const auto p = decode_computation_push(ctx, encode(ctx, some_push()));
  EXPECT_EQ(p.h.step, 21u);
  EXPECT_EQ(p.h.sender, 1);
  EXPECT_EQ(p.layer, 2);
  EXPECT_EQ(p.targets, some_push().targets);
  EXPECT_EQ(p.counts, some_push().counts);
  EXPECT_EQ(p.neighbors, some_push().neighbors);

  const auto pa = some_partial_aggregate();
  const auto dpa = decode_partial_aggregate(ctx, encode(ctx, pa));
  EXPECT_EQ(dpa.h.step, 21u);
  EXPECT_EQ(dpa.h.sender, 3);
  EXPECT_TRUE(dpa.sums == pa.sums) << "sums are not bit-exact";
  EXPECT_EQ(dpa.counts, pa.counts);

  gradient_return g{.h = {.step = 22, .sender = 0}};
  g.grads = Matrix::Random(5, 7);
  g.grads(0, 0) = -0.0f;
  g.grads(1, 1) = 1e-38f;
  const auto dg = decode_gradient_return(ctx, encode(ctx, g));
  EXPECT_EQ(dg.h.step, 22u);
  EXPECT_EQ(dg.h.sender, 0);
  ASSERT_EQ(dg.grads.rows(), 5);
  ASSERT_EQ(dg.grads.cols(), 7);
  EXPECT_EQ(std::memcmp(dg.grads.data(), g.grads.data(), sizeof(float) * 35), 0);

  // Empty messages are valid: a push of no targets, sums of no rows.
  EXPECT_TRUE(decode_computation_push(ctx, encode(ctx, computation_push{})).targets.empty());
  partial_aggregate none;
  EXPECT_EQ(decode_partial_aggregate(ctx, encode(ctx, none)).sums.rows(), 0);
  // Another cluster's messages are refused.
  EXPECT_THROW(decode_computation_push(context{.cluster_id = 78}, encode(ctx, some_push())),
               wire_error);
  EXPECT_THROW(decode_gradient_return(context{.cluster_id = 78}, encode(ctx, g)), wire_error);
}

// GAT's rounds (docs/design.md section 2): bit-exact round trips, and every shape a peer could
// get wrong refused with the field named.
TEST(WireAttention, RoundTripsThePushThePartialAndBothReturns) {
  const attention_push p{.h = {.step = 5, .sender = 2}, .applies = 4, .er = Matrix::Random(3, 2)};
  const auto dp = decode_attention_push(ctx, encode(ctx, p));
  EXPECT_EQ(dp.h.step, 5u);
  EXPECT_EQ(dp.h.sender, 2);
  EXPECT_EQ(dp.applies, 4u);
  EXPECT_TRUE(dp.er == p.er);
  // No targets: the heads still travel.
  const auto empty = decode_attention_push(ctx, encode(ctx, attention_push{.er = Matrix(0, 4)}));
  EXPECT_EQ(empty.er.rows(), 0);
  EXPECT_EQ(empty.er.cols(), 4);

  attention_partial_rows a{.h = {.step = 5, .sender = 1}};
  a.values = Matrix::Random(3, 6);
  a.score_max = Matrix::Random(3, 2);
  a.exp_sum = Matrix::Constant(3, 2, 1.5f);
  const auto da = decode_attention_partial(ctx, encode(ctx, a));
  EXPECT_TRUE(da.values == a.values);
  EXPECT_TRUE(da.score_max == a.score_max);
  EXPECT_TRUE(da.exp_sum == a.exp_sum);

  attention_return r{.h = {.step = 5, .sender = 2}, .heads = 2, .grads = Matrix::Random(3, 6)};
  r.score_max = Matrix::Random(3, 2);
  r.exp_sum = Matrix::Constant(3, 2, 2.0f);
  r.heads_out = Matrix::Random(3, 6);
  const auto dr = decode_attention_return(ctx, encode(ctx, r));
  EXPECT_EQ(dr.heads, 2u);
  EXPECT_TRUE(dr.grads == r.grads);
  EXPECT_TRUE(dr.score_max == r.score_max);
  EXPECT_TRUE(dr.exp_sum == r.exp_sum);
  EXPECT_TRUE(dr.heads_out == r.heads_out);
  // The shard's answer: d loss / d er only.
  const attention_return answer{
      .h = {.step = 5, .sender = 1}, .heads = 2, .grads = Matrix::Random(3, 2)};
  const auto dans = decode_attention_return(ctx, encode(ctx, answer));
  EXPECT_TRUE(dans.grads == answer.grads);
  EXPECT_EQ(dans.heads_out.size(), 0);
  EXPECT_THROW(decode_attention_push(context{.cluster_id = 78}, encode(ctx, p)), wire_error);
}

namespace {
// The decoder's refusal of `b`, or "" when it accepted.
template <class Decode>
std::string refusal(Decode decode, const bytes& b) {
  try {
    decode(ctx, b);
  } catch (const wire_error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(WireAttention, RefusesShapesAPeerGotWrong) {
  // Past the encoder's own checks: the heads field patched in an encoded push. Its data section
  // follows the segment table and the root pointer: applies (8 bytes), then heads.
  auto push = [](const context& c, std::span<const char> b) { decode_attention_push(c, b); };
  const auto good = encode(ctx, attention_push{.applies = 9, .er = Matrix::Random(2, 2)});
  std::uint32_t heads = 0;
  std::memcpy(&heads, good.data() + 24, 4);
  ASSERT_EQ(heads, 2u);
  EXPECT_EQ(refusal(push, good), "");
  auto with_heads = [&](std::uint32_t h) {
    auto b = good;
    std::memcpy(b.data() + 24, &h, 4);
    return b;
  };
  EXPECT_NE(refusal(push, with_heads(0)).find("heads 0"), std::string::npos);
  EXPECT_NE(refusal(push, with_heads(3)).find("er: 16 bytes are not whole rows of 3"),
            std::string::npos);
  EXPECT_NE(refusal(push, with_heads(1u << 30)).find("heads 1073741824"), std::string::npos);

  auto partial = [](const context& c, std::span<const char> b) { decode_attention_partial(c, b); };
  attention_partial_rows a;
  a.values = Matrix::Random(2, 6);
  a.score_max = Matrix::Random(2, 2);
  a.exp_sum = Matrix::Constant(2, 2, 1.0f);
  EXPECT_EQ(refusal(partial, encode(ctx, a)), "");
  auto nan = a;
  nan.values(1, 1) = std::nanf("");
  EXPECT_NE(refusal(partial, encode(ctx, nan)).find("values holds a non-finite"),
            std::string::npos);
  auto negative = a;
  negative.exp_sum(0, 1) = -1.0f;
  EXPECT_NE(refusal(partial, encode(ctx, negative)).find("negative"), std::string::npos);
  auto odd = a;
  odd.values = Matrix::Random(2, 5);
  EXPECT_NE(refusal(partial, encode(ctx, odd)).find("values of width 5 for 2 heads"),
            std::string::npos);
  // Fewer per-head rows than targets cannot be encoded.
  EXPECT_THROW(
      {
        auto short_rows = a;
        short_rows.score_max = Matrix::Random(1, 2);
        (void)encode(ctx, short_rows);
      },
      std::invalid_argument);

  auto ret = [](const context& c, std::span<const char> b) { decode_attention_return(c, b); };
  attention_return r{.heads = 2, .grads = Matrix::Random(2, 6)};
  r.score_max = Matrix::Random(2, 2);
  r.exp_sum = Matrix::Constant(2, 2, 1.0f);
  r.heads_out = Matrix::Random(2, 6);
  EXPECT_EQ(refusal(ret, encode(ctx, r)), "");
  auto inf = r;
  inf.heads_out(1, 5) = std::numeric_limits<float>::infinity();
  EXPECT_NE(refusal(ret, encode(ctx, inf)).find("headsOut holds a non-finite"), std::string::npos);
  auto odd_grads = r;
  odd_grads.grads = Matrix::Random(2, 5);
  odd_grads.heads_out = Matrix::Random(2, 5);
  EXPECT_NE(refusal(ret, encode(ctx, odd_grads)).find("grads of width 5 for 2 heads"),
            std::string::npos);
  auto short_out = r;
  short_out.heads_out = Matrix::Random(1, 6);  // one row short: not encoded
  EXPECT_THROW((void)encode(ctx, short_out), std::invalid_argument);
}

TEST(WireDecentralized, RejectsAWidthNoModelHasEvenWithNoRows) {
  // fuzz_wire found it: a 0 x 4294967295 gradient holds no byte, so its byte count matched the
  // empty payload, and the finiteness check then scanned 2^32 columns (minutes for 88 bytes).
  gradient_return g;
  g.grads = Matrix(0, 1);
  g.own_grads = Matrix(0, 1);
  auto b = encode(ctx, g);
  // The root struct's data word follows the segment table and the root pointer: rows, cols.
  std::uint32_t rows = 1, cols = 0;
  std::memcpy(&rows, b.data() + 16, 4);
  std::memcpy(&cols, b.data() + 20, 4);
  ASSERT_EQ(rows, 0u);
  ASSERT_EQ(cols, 1u);
  cols = 0xffffffffu;
  std::memcpy(b.data() + 20, &cols, 4);
  try {
    decode_gradient_return(ctx, b);
    FAIL() << "accepted";
  } catch (const wire_error& e) {
    EXPECT_NE(std::string(e.what()).find("width 4294967295"), std::string::npos) << e.what();
  }
}

TEST(WireDecentralized, RejectsInconsistentCountsAndShapes) {
  const auto rejects_push = [](const computation_push& m, const char* why) {
    try {
      decode_computation_push(ctx, encode(ctx, m));
      ADD_FAILURE() << "accepted: " << why;
    } catch (const wire_error& e) {
      EXPECT_NE(std::string(e.what()).find("computation_push"), std::string::npos) << e.what();
    }
  };
  auto m = some_push();
  m.counts = {2, 0, 2};  // 4 promised, 5 sent
  rejects_push(m, "counts adding up to fewer than the neighbours");
  m.counts = {2, 1, 3};  // 6 promised, 5 sent
  rejects_push(m, "counts adding up to more than the neighbours");
  m = some_push();
  m.counts = {2, 3};
  rejects_push(m, "fewer counts than targets");
  m = some_push();
  m.targets.push_back(13);
  rejects_push(m, "more targets than counts");
  m = some_push();
  m.counts = {3, -1, 3};  // adds up to 5, but a count is negative
  rejects_push(m, "a negative count");
  m = some_push();
  m.neighbors[2] = -5;
  rejects_push(m, "a negative neighbour id");
  m = some_push();
  m.targets[0] = -1;
  rejects_push(m, "a negative target id");

  // partial_aggregate: one count per row of sums.
  auto pa = some_partial_aggregate();
  pa.counts.pop_back();
  EXPECT_THROW(decode_partial_aggregate(ctx, encode(ctx, pa)), wire_error);
  pa = some_partial_aggregate();
  pa.counts.push_back(1);
  EXPECT_THROW(decode_partial_aggregate(ctx, encode(ctx, pa)), wire_error);
  pa = some_partial_aggregate();
  pa.sums = Matrix::Zero(2, 4);
  EXPECT_THROW(decode_partial_aggregate(ctx, encode(ctx, pa)), wire_error);
}

TEST(WireDecentralized, RejectsEveryTruncationAndPayloadsThatDoNotMatchTheirShape) {
  const auto push = encode(ctx, some_push());
  for (size_t n = 0; n < push.size(); ++n) {
    EXPECT_THROW(decode_computation_push(ctx, std::span(push.data(), n)), wire_error)
        << "push of length " << n;
  }
  const auto pa = encode(ctx, some_partial_aggregate());
  for (size_t n = 0; n < pa.size(); ++n) {
    EXPECT_THROW(decode_partial_aggregate(ctx, std::span(pa.data(), n)), wire_error)
        << "partial_aggregate of length " << n;
  }
  gradient_return g{.h = {.step = 1, .sender = 2}};
  g.grads = Matrix::Random(3, 2);
  const auto gb = encode(ctx, g);
  for (size_t n = 0; n < gb.size(); ++n) {
    EXPECT_THROW(decode_gradient_return(ctx, std::span(gb.data(), n)), wire_error)
        << "gradient_return of length " << n;
  }
  // A rows field that disagrees with the payload: patch the (rows, cols) data word, which holds
  // the UInt32 pair (3, 2) right after the header pointer's struct data.
  auto bad = gb;
  bool patched = false;
  for (size_t i = 0; i + 8 <= bad.size(); i += 8) {
    std::uint32_t rc[2];
    std::memcpy(rc, bad.data() + i, 8);
    if (rc[0] == 3 && rc[1] == 2) {
      rc[0] = 4;
      std::memcpy(bad.data() + i, rc, 8);
      patched = true;
      break;
    }
  }
  ASSERT_TRUE(patched);
  EXPECT_THROW(decode_gradient_return(ctx, bad), wire_error);
}

TEST(WireDecentralized, NeverCrashesOnRandomlyCorruptedPushes) {
  // The bounded fuzz loop on a computation_push: every outcome is a wire_error or a message that
  // keeps the decoder's promises (one count per target, counts adding up to the neighbours,
  // no negative ids or counts).
  std::mt19937 rng(2468);
  const auto base = encode(ctx, some_push());
  int rejected = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    auto b = base;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f)
      b[rng() % b.size()] = static_cast<char>(rng());
    try {
      const auto m = decode_computation_push(ctx, b);
      ASSERT_EQ(m.counts.size(), m.targets.size());
      std::int64_t total = 0;
      for (auto n : m.counts) {
        EXPECT_GE(n, 0);
        total += n;
      }
      EXPECT_EQ(total, static_cast<std::int64_t>(m.neighbors.size()));
      for (auto v : m.targets)
        EXPECT_GE(v, 0);
      for (auto v : m.neighbors)
        EXPECT_GE(v, 0);
    } catch (const wire_error&) {
      ++rejected;
    }
  }
  std::printf("rejected %d of 20000 corrupted computation_push buffers\n", rejected);
  EXPECT_GT(rejected, 0);
}

// -- quantized halo rows (the decentralized history set-up) --

TEST(Wire, HaloRequestCarriesTheBitsItAsksFor) {
  row_request m{.h = {.step = 4, .sender = 3}, .layer = 2, .nodes = {8, 9}, .bits = 8};
  const auto d = decode_row_request(ctx, encode(ctx, m, kind::halo_request));
  EXPECT_EQ(d.bits, 8);
  EXPECT_EQ(d.layer, 2);
  m.bits = 32;  // the default, sent as nothing: an exact request is as long as before
  const auto exact = encode(ctx, m, kind::halo_request);
  EXPECT_EQ(decode_row_request(ctx, exact).bits, 32);
  m.bits = 7;
  EXPECT_THROW(decode_row_request(ctx, encode(ctx, m, kind::halo_request)), wire_error);
}

TEST(Wire, QuantizedHaloRowsDecodeWithinHalfAStepAndAreAQuarterOfTheBytes) {
  row_block m;
  m.rows = Matrix::Random(50, 64);
  m.degrees.assign(50, 3);
  m.bits = 8;
  const auto q = encode(ctx, m, kind::halo_response);
  const auto d = decode_row_block(ctx, q, 8);
  ASSERT_EQ(d.rows.rows(), 50);
  ASSERT_EQ(d.rows.cols(), 64);
  EXPECT_EQ(d.degrees, m.degrees);
  for (Eigen::Index i = 0; i < 50; ++i) {
    const float step = (m.rows.row(i).maxCoeff() - m.rows.row(i).minCoeff()) / 255.0f;
    EXPECT_LE((d.rows.row(i) - m.rows.row(i)).cwiseAbs().maxCoeff(), step / 2 + 1e-6f) << i;
  }
  row_block exact = m;
  exact.bits = 32;
  const auto e = encode(ctx, exact, kind::halo_response);
  // 64 codes + min + scale per row against 256 float bytes.
  EXPECT_LT(static_cast<double>(q.size()), 0.3 * static_cast<double>(e.size()));
  // Read as what was asked: exact bytes are not quantized rows, nor the other way round.
  EXPECT_THROW(decode_row_block(ctx, q, 32), wire_error);
  EXPECT_THROW(decode_row_block(ctx, e, 8), wire_error);
  EXPECT_THROW(decode_row_block(ctx, q, 4), wire_error);
}

TEST(Wire, RejectsQuantizedHaloRowsThatDoNotAddUp) {
  row_block m;
  m.rows = Matrix::Random(4, 10);
  m.bits = 8;
  const auto b = encode(ctx, m, kind::halo_response);
  for (size_t n = 0; n < b.size(); ++n)
    EXPECT_THROW(decode_row_block(ctx, std::span(b.data(), n), 8), wire_error) << "length " << n;
  // A row whose values are not finite cannot be quantized: the sender fails, nothing is sent.
  m.rows(1, 3) = std::numeric_limits<float>::infinity();
  EXPECT_THROW(encode(ctx, m, kind::halo_response), std::invalid_argument);
}

namespace {
sparse_rows some_sparse_rows() {
  Matrix x = Matrix::Zero(4, 300);
  x(0, 3) = 1.5f;
  x(0, 299) = -2;
  x(2, 0) = 7;  // row 1 and row 3 are empty
  return to_sparse(x);
}
}  // namespace

TEST(Wire, CompressedFeatureRowsRoundTripInEveryMessageThatCarriesThem) {
  const auto rows = std::make_shared<const sparse_rows>(some_sparse_rows());
  row_block r;
  r.h = {.step = 3, .sender = 1};
  r.sparse = rows;
  r.degrees = {4, 0, 2, 9};
  for (kind k : {kind::feature_response, kind::halo_response}) {
    const auto b = encode(ctx, r, k);
    const auto m = decode_row_block(ctx, b, 32, true);
    ASSERT_TRUE(m.sparse);
    EXPECT_EQ(to_dense(*m.sparse), to_dense(*rows));
    EXPECT_EQ(m.degrees, r.degrees);
    EXPECT_EQ(m.h.step, 3u);
    EXPECT_EQ(m.h.sender, 1);
    // Three non-zeros cost far less than 4 dense rows of 300 floats.
    EXPECT_LT(b.size(), 200u);
    // Every cut is refused.
    for (size_t n = 0; n < b.size(); n += 8)
      EXPECT_THROW(decode_row_block(ctx, std::span(b.data(), n), 32, true), wire_error) << n;
  }
  embedding_rows e;
  e.h = {.step = 5, .sender = 2};
  e.nodes = {10, 11, 12, 13};
  e.sparse = rows;
  const auto m = decode_embedding_rows(ctx, encode(ctx, e), true);
  ASSERT_TRUE(m.sparse);
  EXPECT_EQ(to_dense(*m.sparse), to_dense(*rows));
  EXPECT_EQ(m.nodes, e.nodes);
  EXPECT_EQ(m.versions, std::vector<std::uint64_t>(4, 0));
  EXPECT_EQ(m.cols, 300u);
  EXPECT_EQ(m.layer, 0);
}

TEST(Wire, RejectsCompressedRowsThatDoNotAddUp) {
  const auto rows = std::make_shared<const sparse_rows>(some_sparse_rows());
  // A column out of range, written by a peer that does not check: the decoder must.
  auto hostile = std::make_shared<sparse_rows>(*rows);
  hostile->m.innerIndexPtr()[1] = 300;
  row_block r;
  r.sparse = hostile;
  try {
    decode_row_block(ctx, encode(ctx, r, kind::feature_response), 32, true);
    ADD_FAILURE() << "a column out of range was taken";
  } catch (const wire_error& e) {
    EXPECT_NE(std::string(e.what()).find("column 300"), std::string::npos) << e.what();
  }
  // Degrees for some rows only, and nodes for some rows only.
  r.sparse = rows;
  r.degrees = {1, 2};
  EXPECT_THROW(decode_row_block(ctx, encode(ctx, r, kind::feature_response), 32, true), wire_error);
  embedding_rows e;
  e.sparse = rows;
  e.nodes = {1, 2, 3};
  EXPECT_THROW(decode_embedding_rows(ctx, encode(ctx, e), true), wire_error);
  // Random damage never crashes.
  std::mt19937 rng(99);
  r.degrees = {4, 0, 2, 9};
  const auto base = encode(ctx, r, kind::feature_response);
  int rejected = 0;
  for (int iter = 0; iter < 5000; ++iter) {
    auto b = base;
    for (int f = 0; f < 1 + static_cast<int>(rng() % 4); ++f)
      b[rng() % b.size()] = static_cast<char>(rng());
    try {
      const auto m = decode_row_block(ctx, b, 32, true);
      EXPECT_TRUE(m.degrees.empty() || m.degrees.size() == static_cast<size_t>(m.sparse->rows()));
    } catch (const wire_error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
}
