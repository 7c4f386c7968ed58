// Cap'n Proto encoding and validating decoding of the decentralized GAT step's messages: the
// second push with the targets' er, the shards' softmax partials and the returns both ways.
#include <stdexcept>
#include <string>

#include "serialization/degnn.capnp.h"
#include "serialization/wire.hpp"
#include "serialization/wire_codec.hpp"

namespace degnn::wire {

using namespace codec;

namespace {

std::uint32_t read_heads(const reader& rd, std::uint32_t heads) {
  if (heads == 0 || heads > kMaxWidth)
    rd.fail("heads " + std::to_string(heads) + " (1 to " + std::to_string(kMaxWidth) + ")");
  return heads;
}

// A (rows, heads) field that must have `rows` rows, finite.
Matrix per_head(const reader& rd, std::uint32_t heads, std::uint64_t rows, capnp::Data::Reader data,
                const char* field) {
  Matrix m = get_rows(rd, heads, data, field);
  if (static_cast<std::uint64_t>(m.rows()) != rows)
    rd.fail(std::string(field) + " has " + std::to_string(m.rows()) + " rows for " +
            std::to_string(rows) + " targets");
  check_finite(rd, m, field);
  return m;
}

template <class Init>
void put_per_head(const Matrix& m, Eigen::Index rows, std::uint32_t heads, Init init,
                  const char* what) {
  if (m.rows() != rows || (rows > 0 && m.cols() != static_cast<Eigen::Index>(heads)))
    throw std::invalid_argument(std::string(what) + " is not targets x heads");
  put_rows(m, init(static_cast<unsigned>(m.size() * sizeof(float))));
}

// Values of `heads` heads: a width that heads divide (a row's heads are F columns each).
void check_head_width(const reader& rd, const Matrix& m, std::uint32_t heads, const char* field) {
  if (m.rows() > 0 && m.cols() % static_cast<Eigen::Index>(heads) != 0)
    rd.fail(std::string(field) + " of width " + std::to_string(m.cols()) + " for " +
            std::to_string(heads) + " heads");
}

}  // namespace

bytes encode(const context& c, const attention_push& m) {
  capnp::MallocMessageBuilder mb;
  auto r = mb.initRoot<AttentionPush>();
  fill_header(r, c, m.h);
  r.setApplies(m.applies);
  if (m.er.cols() <= 0) throw std::invalid_argument("attention_push: er has no heads");
  r.setHeads(static_cast<std::uint32_t>(m.er.cols()));
  put_rows(m.er, r.initEr(static_cast<unsigned>(m.er.size() * sizeof(float))));
  return to_bytes(mb);
}

attention_push decode_attention_push(const context& c, std::span<const char> b) {
  return guarded("attention_push", [&] {
    reader rd(c, b, "attention_push");
    auto r = rd.root<AttentionPush>(c);
    attention_push m;
    m.h = read_header(r);
    m.applies = r.getApplies();
    m.er = get_rows(rd, read_heads(rd, r.getHeads()), r.getEr(), "er");
    check_finite(rd, m.er, "er");
    return m;
  });
}

bytes encode(const context& c, const attention_partial_rows& m) {
  capnp::MallocMessageBuilder mb;
  auto r = mb.initRoot<AttentionPartial>();
  fill_header(r, c, m.h);
  if (m.score_max.cols() <= 0) throw std::invalid_argument("attention_partial: no heads");
  const auto heads = static_cast<std::uint32_t>(m.score_max.cols());
  r.setHeads(heads);
  put_matrix(r, m.values, &AttentionPartial::Builder::initValues);
  put_per_head(
      m.score_max, m.values.rows(), heads, [&](unsigned n) { return r.initScoreMax(n); },
      "attention_partial: scoreMax");
  put_per_head(
      m.exp_sum, m.values.rows(), heads, [&](unsigned n) { return r.initExpSum(n); },
      "attention_partial: expSum");
  return to_bytes(mb);
}

attention_partial_rows decode_attention_partial(const context& c, std::span<const char> b) {
  return guarded("attention_partial", [&] {
    reader rd(c, b, "attention_partial");
    auto r = rd.root<AttentionPartial>(c);
    attention_partial_rows m;
    m.h = read_header(r);
    const std::uint32_t heads = read_heads(rd, r.getHeads());
    m.values = get_matrix(rd, r.getRows(), r.getCols(), r.getValues());
    check_head_width(rd, m.values, heads, "values");
    check_finite(rd, m.values, "values");
    m.score_max = per_head(rd, heads, r.getRows(), r.getScoreMax(), "scoreMax");
    m.exp_sum = per_head(rd, heads, r.getRows(), r.getExpSum(), "expSum");
    if (m.exp_sum.size() > 0 && m.exp_sum.minCoeff() < 0) rd.fail("expSum holds a negative sum");
    return m;
  });
}

bytes encode(const context& c, const attention_return& m) {
  capnp::MallocMessageBuilder mb;
  auto r = mb.initRoot<AttentionReturn>();
  fill_header(r, c, m.h);
  if (m.heads == 0) throw std::invalid_argument("attention_return: no heads");
  r.setHeads(m.heads);
  put_matrix(r, m.grads, &AttentionReturn::Builder::initGrads);
  if (m.heads_out.size() != 0 || m.score_max.size() != 0) {
    put_per_head(
        m.score_max, m.grads.rows(), m.heads, [&](unsigned n) { return r.initScoreMax(n); },
        "attention_return: scoreMax");
    put_per_head(
        m.exp_sum, m.grads.rows(), m.heads, [&](unsigned n) { return r.initExpSum(n); },
        "attention_return: expSum");
    if (m.heads_out.rows() != m.grads.rows() ||
        (m.grads.rows() > 0 && m.heads_out.cols() != m.grads.cols()))
      throw std::invalid_argument("attention_return: headsOut is not the grads' shape");
    put_rows(m.heads_out,
             r.initHeadsOut(static_cast<unsigned>(m.heads_out.size() * sizeof(float))));
  }
  return to_bytes(mb);
}

attention_return decode_attention_return(const context& c, std::span<const char> b) {
  return guarded("attention_return", [&] {
    reader rd(c, b, "attention_return");
    auto r = rd.root<AttentionReturn>(c);
    attention_return m;
    m.h = read_header(r);
    m.heads = read_heads(rd, r.getHeads());
    m.grads = get_matrix(rd, r.getRows(), r.getCols(), r.getGrads());
    check_finite(rd, m.grads, "grads");
    // Either the merged softmax of every target (the owner's return) or nothing (the answer).
    if (r.getScoreMax().size() == 0 && r.getExpSum().size() == 0 && r.getHeadsOut().size() == 0)
      return m;
    check_head_width(rd, m.grads, m.heads, "grads");
    m.score_max = per_head(rd, m.heads, r.getRows(), r.getScoreMax(), "scoreMax");
    m.exp_sum = per_head(rd, m.heads, r.getRows(), r.getExpSum(), "expSum");
    m.heads_out = get_rows(rd, r.getCols(), r.getHeadsOut(), "headsOut");
    if (static_cast<std::uint64_t>(m.heads_out.rows()) != r.getRows())
      rd.fail("headsOut has " + std::to_string(m.heads_out.rows()) + " rows for " +
              std::to_string(r.getRows()) + " targets");
    check_finite(rd, m.heads_out, "headsOut");
    return m;
  });
}

}  // namespace degnn::wire
