// Cap'n Proto encoding and validating decoding of the decentralized pipeline's messages:
// history gets and rows, computation pushes, partial sums and their gradients.
#include <cmath>
#include <stdexcept>

#include "model/quantizer.hpp"
#include "model/sparse_input.hpp"
#include "serialization/degnn.capnp.h"
#include "serialization/wire.hpp"
#include "serialization/wire_codec.hpp"

namespace degnn::wire {

using namespace codec;

bytes encode(const context& c, const embedding_get& m) {
  capnp::MallocMessageBuilder mb;
  auto r = mb.initRoot<EmbeddingGet>();
  fill_header(r, c, m.h);
  r.setLayer(m.layer);
  set_ints(r.initNodes(static_cast<unsigned>(m.nodes.size())), m.nodes);
  auto held = r.initHeld(static_cast<unsigned>(m.held.size()));
  for (unsigned i = 0; i < m.held.size(); ++i)
    held.set(i, m.held[i]);
  return to_bytes(mb);
}

embedding_get decode_embedding_get(const context& c, std::span<const char> b) {
  return guarded("embedding_get", [&] {
    reader rd(c, b, "embedding_get");
    auto r = rd.root<EmbeddingGet>(c);
    embedding_get m;
    m.h = read_header(r);
    m.layer = r.getLayer();
    m.nodes = to_vector(r.getNodes());
    check_ids(rd, m.nodes, "nodes");
    for (auto v : r.getHeld())
      m.held.push_back(v);
    if (!m.held.empty() && m.held.size() != m.nodes.size())
      rd.fail("held has " + std::to_string(m.held.size()) + " versions for " +
              std::to_string(m.nodes.size()) + " nodes");
    return m;
  });
}

namespace {

// Bytes of one packed row, and the widths there are: the quantizer's (model/quantizer.hpp) is
// the one definition.
std::uint64_t embedding_row_bytes(std::uint32_t cols, unsigned bits) {
  return quantizer::code_size(static_cast<int>(cols), static_cast<int>(bits));
}

bool valid_embedding_bits(unsigned bits) {
  return quantizer::valid_bits(static_cast<int>(bits));
}

}  // namespace

bytes encode(const context& c, const embedding_rows& m) {
  if (m.sparse) return write_sparse_rows(c, m.h, *m.sparse, {}, m.nodes);
  capnp::MallocMessageBuilder mb;
  auto r = mb.initRoot<EmbeddingRows>();
  fill_header(r, c, m.h);
  r.setLayer(m.layer);
  r.setBits(m.bits);
  set_ints(r.initNodes(static_cast<unsigned>(m.nodes.size())), m.nodes);
  auto versions = r.initVersions(static_cast<unsigned>(m.versions.size()));
  for (unsigned i = 0; i < m.versions.size(); ++i)
    versions.set(i, m.versions[i]);
  r.setCols(m.cols);
  auto payload = r.initPayload(static_cast<unsigned>(m.payload.size()));
  if (!m.payload.empty()) std::memcpy(payload.begin(), m.payload.data(), m.payload.size());
  auto mins = r.initRowMin(static_cast<unsigned>(m.row_min.size()));
  for (unsigned i = 0; i < m.row_min.size(); ++i)
    mins.set(i, m.row_min[i]);
  auto scales = r.initRowScale(static_cast<unsigned>(m.row_scale.size()));
  for (unsigned i = 0; i < m.row_scale.size(); ++i)
    scales.set(i, m.row_scale[i]);
  return to_bytes(mb);
}

embedding_rows decode_embedding_rows(const context& c, std::span<const char> b, bool sparse) {
  return guarded("embedding_rows", [&] {
    reader rd(c, b, "embedding_rows");
    if (sparse) {
      embedding_rows m;
      m.sparse = read_sparse_rows(rd, c, nullptr, &m.nodes, m.h);
      m.cols = static_cast<std::uint32_t>(m.sparse->cols());
      m.versions.assign(m.nodes.size(), 0);
      return m;
    }
    auto r = rd.root<EmbeddingRows>(c);
    embedding_rows m;
    m.h = read_header(r);
    m.layer = r.getLayer();
    m.bits = r.getBits();
    if (!valid_embedding_bits(m.bits))
      rd.fail("bits " + std::to_string(m.bits) + " is not one of 32, 16, 8, 4, 2");
    m.nodes = to_vector(r.getNodes());
    check_ids(rd, m.nodes, "nodes");
    const std::size_t n = m.nodes.size();
    for (auto v : r.getVersions())
      m.versions.push_back(v);
    if (m.versions.size() != n) {
      rd.fail(std::to_string(m.versions.size()) + " versions for " + std::to_string(n) + " rows");
    }
    m.cols = r.getCols();
    auto payload = r.getPayload();
    const std::uint64_t expected = n * embedding_row_bytes(m.cols, m.bits);
    if (payload.size() != expected) {
      rd.fail(std::to_string(n) + " rows of " + std::to_string(m.cols) + " values at " +
              std::to_string(m.bits) + " bits need " + std::to_string(expected) +
              " payload bytes, not " + std::to_string(payload.size()));
    }
    m.payload.assign(payload.begin(), payload.end());
    for (auto v : r.getRowMin())
      m.row_min.push_back(v);
    for (auto v : r.getRowScale())
      m.row_scale.push_back(v);
    const bool params_optional = m.bits == 32 && m.row_min.empty() && m.row_scale.empty();
    if (!params_optional && (m.row_min.size() != n || m.row_scale.size() != n)) {
      rd.fail(std::to_string(m.row_min.size()) + " row mins and " +
              std::to_string(m.row_scale.size()) + " row scales for " + std::to_string(n) +
              " rows");
    }
    // A non-finite or negative parameter would decode to garbage rows that poison training.
    for (std::size_t i = 0; i < m.row_min.size(); ++i) {
      if (!std::isfinite(m.row_min[i]) || !std::isfinite(m.row_scale[i]) || m.row_scale[i] < 0)
        rd.fail("row " + std::to_string(i) + " has a non-finite min or an invalid scale");
    }
    return m;
  });
}

bytes encode(const context& c, const computation_push& m) {
  capnp::MallocMessageBuilder mb;
  auto r = mb.initRoot<ComputationPush>();
  fill_header(r, c, m.h);
  r.setLayer(m.layer);
  set_ints(r.initTargets(static_cast<unsigned>(m.targets.size())), m.targets);
  set_ints(r.initCounts(static_cast<unsigned>(m.counts.size())), m.counts);
  set_ints(r.initNeighbors(static_cast<unsigned>(m.neighbors.size())), m.neighbors);
  set_ints(r.initRows(static_cast<unsigned>(m.rows.size())), m.rows);
  r.setApplies(m.applies);
  return to_bytes(mb);
}

computation_push decode_computation_push(const context& c, std::span<const char> b) {
  return guarded("computation_push", [&] {
    reader rd(c, b, "computation_push");
    auto r = rd.root<ComputationPush>(c);
    computation_push m;
    m.h = read_header(r);
    m.layer = r.getLayer();
    m.targets = to_vector(r.getTargets());
    m.counts = to_vector(r.getCounts());
    m.neighbors = to_vector(r.getNeighbors());
    if (m.counts.size() != m.targets.size()) rd.fail("targets and counts differ in length");
    std::int64_t total = 0;
    for (auto n : m.counts) {
      if (n < 0) rd.fail("negative neighbour count");
      total += n;
    }
    if (total != static_cast<std::int64_t>(m.neighbors.size()))
      rd.fail("counts do not add up to the neighbours");
    check_ids(rd, m.targets, "targets");
    check_ids(rd, m.neighbors, "neighbors");
    m.rows = to_vector(r.getRows());
    check_ids(rd, m.rows, "rows");
    m.applies = r.getApplies();
    return m;
  });
}

bytes encode(const context& c, const partial_aggregate& m) {
  capnp::MallocMessageBuilder mb;
  auto r = mb.initRoot<PartialAggregate>();
  fill_header(r, c, m.h);
  put_matrix(r, m.sums, &PartialAggregate::Builder::initSums);
  set_ints(r.initCounts(static_cast<unsigned>(m.counts.size())), m.counts);
  if (m.own_rows.rows() > 0 && m.own_rows.cols() != m.sums.cols())
    throw std::invalid_argument("partial_aggregate: own rows and sums differ in width");
  put_rows(m.own_rows, r.initOwnRows(static_cast<unsigned>(m.own_rows.size() * sizeof(float))));
  return to_bytes(mb);
}

partial_aggregate decode_partial_aggregate(const context& c, std::span<const char> b) {
  return guarded("partial_aggregate", [&] {
    reader rd(c, b, "partial_aggregate");
    auto r = rd.root<PartialAggregate>(c);
    partial_aggregate m;
    m.h = read_header(r);
    m.sums = get_matrix(rd, r.getRows(), r.getCols(), r.getSums());
    m.counts = to_vector(r.getCounts());
    if (m.counts.size() != static_cast<size_t>(m.sums.rows())) rd.fail("counts and rows differ");
    for (auto n : m.counts) {
      if (n < 0) rd.fail("negative neighbour count");
    }
    check_finite(rd, m.sums, "sums");
    m.own_rows = get_rows(rd, r.getCols(), r.getOwnRows(), "ownRows");
    check_finite(rd, m.own_rows, "ownRows");
    return m;
  });
}

bytes encode(const context& c, const gradient_return& m) {
  capnp::MallocMessageBuilder mb;
  auto r = mb.initRoot<GradientReturn>();
  fill_header(r, c, m.h);
  put_matrix(r, m.grads, &GradientReturn::Builder::initGrads);
  if (m.own_grads.rows() > 0 && m.own_grads.cols() != m.grads.cols())
    throw std::invalid_argument("gradient_return: own grads and grads differ in width");
  put_rows(m.own_grads, r.initOwnGrads(static_cast<unsigned>(m.own_grads.size() * sizeof(float))));
  return to_bytes(mb);
}

gradient_return decode_gradient_return(const context& c, std::span<const char> b) {
  return guarded("gradient_return", [&] {
    reader rd(c, b, "gradient_return");
    auto r = rd.root<GradientReturn>(c);
    gradient_return m;
    m.h = read_header(r);
    m.grads = get_matrix(rd, r.getRows(), r.getCols(), r.getGrads());
    check_finite(rd, m.grads, "grads");
    m.own_grads = get_rows(rd, r.getCols(), r.getOwnGrads(), "ownGrads");
    check_finite(rd, m.own_grads, "ownGrads");
    return m;
  });
}

}  // namespace degnn::wire
