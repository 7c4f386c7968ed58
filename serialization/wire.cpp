// Cap'n Proto encoding and validating decoding of the wire structs.
#include "serialization/wire.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <stdexcept>

#include "model/quantizer.hpp"
#include "model/sparse_input.hpp"
#include "serialization/degnn.capnp.h"
#include "serialization/wire_codec.hpp"

namespace degnn::wire {

using namespace codec;

namespace {

// Quantized halo rows from a peer, checked like EmbeddingRows before they are decoded.
Matrix get_quantized_rows(const reader& rd, std::uint64_t rows, std::uint64_t cols, int bits,
                          capnp::Data::Reader codes, capnp::List<float>::Reader mins,
                          capnp::List<float>::Reader scales) {
  if (cols == 0 || cols > kMaxWidth) rd.fail("quantized rows of width " + std::to_string(cols));
  std::uint64_t expected = 0;
  if (__builtin_mul_overflow(rows, quantizer::code_size(static_cast<int>(cols), bits), &expected) ||
      expected != codes.size()) {
    rd.fail(std::to_string(rows) + " rows of " + std::to_string(cols) + " values at " +
            std::to_string(bits) + " bits do not match " + std::to_string(codes.size()) +
            " code bytes");
  }
  if (mins.size() != rows || scales.size() != rows) {
    rd.fail(std::to_string(mins.size()) + " row mins and " + std::to_string(scales.size()) +
            " row scales for " + std::to_string(rows) + " rows");
  }
  std::vector<float> row_min, row_scale;
  for (std::size_t i = 0; i < rows; ++i) {
    row_min.push_back(mins[static_cast<unsigned>(i)]);
    row_scale.push_back(scales[static_cast<unsigned>(i)]);
  }
  for (std::size_t i = 0; i < row_min.size(); ++i) {
    // A non-finite or negative parameter would decode to garbage that poisons the layer.
    if (!std::isfinite(row_min[i]) || !std::isfinite(row_scale[i]) || row_scale[i] < 0)
      rd.fail("row " + std::to_string(i) + " has a non-finite min or an invalid scale");
  }
  return quantizer(static_cast<int>(cols), bits)
      .decode({reinterpret_cast<const std::uint8_t*>(codes.begin()), codes.size()}, row_min,
              row_scale);
}

}  // namespace

namespace codec {

bytes write_sparse_rows(const context& c, const header& h, const sparse_rows& rows,
                        const std::vector<std::int32_t>& degrees,
                        const std::vector<std::int32_t>& nodes) {
  capnp::MallocMessageBuilder mb;
  auto r = mb.initRoot<SparseRows>();
  fill_header(r, c, h);
  r.setCols(static_cast<std::uint32_t>(rows.cols()));
  const auto counts = row_counts(rows);
  set_ints(r.initCounts(static_cast<unsigned>(counts.size())), counts);
  const auto nnz = static_cast<unsigned>(rows.m.nonZeros());
  auto columns = r.initColumns(nnz);
  auto values = r.initValues(nnz * static_cast<unsigned>(sizeof(float)));
  unsigned at = 0;
  for (Eigen::Index row = 0; row < rows.rows(); ++row) {
    const auto begin = rows.m.outerIndexPtr()[row];
    const auto n = counts[static_cast<size_t>(row)];
    for (std::int32_t k = 0; k < n; ++k)
      columns.set(at + static_cast<unsigned>(k), rows.m.innerIndexPtr()[begin + k]);
    std::memcpy(values.begin() + at * sizeof(float), rows.m.valuePtr() + begin,
                static_cast<size_t>(n) * sizeof(float));
    at += static_cast<unsigned>(n);
  }
  if (!degrees.empty()) set_ints(r.initDegrees(static_cast<unsigned>(degrees.size())), degrees);
  if (!nodes.empty()) set_ints(r.initNodes(static_cast<unsigned>(nodes.size())), nodes);
  return to_bytes(mb);
}

std::shared_ptr<const sparse_rows> read_sparse_rows(reader& rd, const context& c,
                                                    std::vector<std::int32_t>* degrees,
                                                    std::vector<std::int32_t>* nodes, header& h) {
  auto r = rd.root<SparseRows>(c);
  h = read_header(r);
  const auto cols = r.getCols();
  if (cols == 0 || cols > kMaxWidth) rd.fail("sparse rows of width " + std::to_string(cols));
  const auto counts = to_vector(r.getCounts());
  const auto columns = to_vector(r.getColumns());
  const auto data = r.getValues();
  if (data.size() != columns.size() * sizeof(float))
    rd.fail(std::to_string(columns.size()) + " columns but " + std::to_string(data.size()) +
            " value bytes");
  std::vector<float> values(columns.size());
  if (!values.empty()) std::memcpy(values.data(), data.begin(), data.size());
  std::shared_ptr<const sparse_rows> rows;
  try {
    rows = std::make_shared<const sparse_rows>(sparse_from_parts(cols, counts, columns, values));
  } catch (const std::invalid_argument& e) {
    rd.fail(e.what());
  }
  if (degrees) {
    *degrees = to_vector(r.getDegrees());
    if (!degrees->empty() && degrees->size() != counts.size())
      rd.fail("degrees and rows differ in count");
    for (auto deg : *degrees)
      if (deg < 0) rd.fail("negative degree");
  }
  if (nodes) {
    *nodes = to_vector(r.getNodes());
    if (nodes->size() != counts.size()) rd.fail("nodes and rows differ in count");
    check_ids(rd, *nodes, "nodes");
  }
  return rows;
}

}  // namespace codec

const char* kind_name(kind k) {
  switch (k) {
    case kind::sample_request:
      return "sample_request";
    case kind::sample_response:
      return "sample_response";
    case kind::feature_request:
      return "feature_request";
    case kind::feature_response:
      return "feature_response";
    case kind::halo_request:
      return "halo_request";
    case kind::halo_response:
      return "halo_response";
    case kind::computation_push:
      return "computation_push";
    case kind::partial_aggregate:
      return "partial_aggregate";
    case kind::gradient_return:
      return "gradient_return";
    case kind::embedding_get:
      return "embedding_get";
    case kind::embedding_rows:
      return "embedding_rows";
    case kind::allreduce_chunk:
      return "allreduce_chunk";
    case kind::control:
      return "control";
    case kind::attention_push:
      return "attention_push";
    case kind::attention_partial:
      return "attention_partial";
    case kind::attention_return:
      return "attention_return";
  }
  return "unknown";
}

bytes encode(const context& c, const sample_request& m) {
  capnp::MallocMessageBuilder mb;
  auto r = mb.initRoot<SampleRequest>();
  fill_header(r, c, m.h);
  r.setLayer(m.layer);
  r.setFanout(m.fanout);
  r.setSeed(m.seed);
  set_ints(r.initNodes(static_cast<unsigned>(m.nodes.size())), m.nodes);
  return to_bytes(mb);
}

sample_request decode_sample_request(const context& c, std::span<const char> b) {
  return guarded("sample_request", [&] {
    reader rd(c, b, "sample_request");
    auto r = rd.root<SampleRequest>(c);
    sample_request m;
    m.h = read_header(r);
    m.layer = r.getLayer();
    m.fanout = r.getFanout();
    m.seed = r.getSeed();
    m.nodes = to_vector(r.getNodes());
    if (m.fanout < -1 || m.fanout == 0)
      rd.fail("fanout " + std::to_string(m.fanout) + " is not -1 or positive");
    check_ids(rd, m.nodes, "nodes");
    return m;
  });
}

bytes encode(const context& c, const sample_response& m) {
  capnp::MallocMessageBuilder mb;
  auto r = mb.initRoot<SampleResponse>();
  fill_header(r, c, m.h);
  set_ints(r.initCounts(static_cast<unsigned>(m.counts.size())), m.counts);
  set_ints(r.initNeighbors(static_cast<unsigned>(m.neighbors.size())), m.neighbors);
  set_ints(r.initDegrees(static_cast<unsigned>(m.degrees.size())), m.degrees);
  return to_bytes(mb);
}

sample_response decode_sample_response(const context& c, std::span<const char> b) {
  return guarded("sample_response", [&] {
    reader rd(c, b, "sample_response");
    auto r = rd.root<SampleResponse>(c);
    sample_response m;
    m.h = read_header(r);
    m.counts = to_vector(r.getCounts());
    m.neighbors = to_vector(r.getNeighbors());
    m.degrees = to_vector(r.getDegrees());
    std::int64_t total = 0;
    for (auto n : m.counts) {
      if (n < 0) rd.fail("negative neighbour count");
      total += n;
    }
    if (total != static_cast<std::int64_t>(m.neighbors.size())) {
      rd.fail("counts add up to " + std::to_string(total) + " but " +
              std::to_string(m.neighbors.size()) + " neighbours were sent");
    }
    if (m.degrees.size() != m.counts.size()) rd.fail("degrees and counts differ in length");
    for (size_t i = 0; i < m.counts.size(); ++i) {
      if (m.degrees[i] < m.counts[i]) rd.fail("a node has more sampled neighbours than its degree");
    }
    check_ids(rd, m.neighbors, "neighbors");
    return m;
  });
}

bytes encode(const context& c, const row_request& m, kind k) {
  capnp::MallocMessageBuilder mb;
  if (k == kind::feature_request) {
    auto r = mb.initRoot<FeatureRequest>();
    fill_header(r, c, m.h);
    set_ints(r.initNodes(static_cast<unsigned>(m.nodes.size())), m.nodes);
  } else {
    auto r = mb.initRoot<HaloRequest>();
    fill_header(r, c, m.h);
    r.setLayer(m.layer);
    set_ints(r.initNodes(static_cast<unsigned>(m.nodes.size())), m.nodes);
    if (m.bits != 32) r.setBits(m.bits);
  }
  return to_bytes(mb);
}

row_request decode_row_request(const context& c, std::span<const char> b) {
  // Both request kinds start with header and a node list; HaloRequest adds the layer.
  return guarded("row_request", [&] {
    reader rd(c, b, "row_request");
    auto r = rd.root<HaloRequest>(c);
    row_request m;
    m.h = read_header(r);
    m.layer = r.getLayer();
    m.nodes = to_vector(r.getNodes());
    check_ids(rd, m.nodes, "nodes");
    m.bits = r.getBits() == 0 ? 32 : r.getBits();
    if (!quantizer::valid_bits(m.bits))
      rd.fail("bits " + std::to_string(m.bits) + " is not one of 32, 16, 8, 4, 2");
    return m;
  });
}

bytes encode(const context& c, const row_block& m, kind) {
  if (m.sparse) return write_sparse_rows(c, m.h, *m.sparse, m.degrees, {});
  capnp::MallocMessageBuilder mb;
  if (m.bits == 32) {
    auto r = mb.initRoot<FeatureResponse>();
    fill_header(r, c, m.h);
    put_matrix(r, m.rows, &FeatureResponse::Builder::initValues);
    if (!m.degrees.empty())
      set_ints(r.initDegrees(static_cast<unsigned>(m.degrees.size())), m.degrees);
    return to_bytes(mb);
  }
  // Throws std::invalid_argument for bits the quantizer does not know or a non-finite row.
  const quantizer q(static_cast<int>(m.rows.cols()), m.bits);
  std::vector<std::uint8_t> codes;
  std::vector<float> row_min, row_scale;
  q.encode(m.rows, codes, row_min, row_scale);
  auto r = mb.initRoot<QuantizedHaloResponse>();
  fill_header(r, c, m.h);
  r.setRows(static_cast<std::uint32_t>(m.rows.rows()));
  r.setCols(static_cast<std::uint32_t>(m.rows.cols()));
  r.setBits(m.bits);
  auto data = r.initCodes(static_cast<unsigned>(codes.size()));
  if (!codes.empty()) std::memcpy(data.begin(), codes.data(), codes.size());
  auto mins = r.initRowMin(static_cast<unsigned>(row_min.size()));
  auto scales = r.initRowScale(static_cast<unsigned>(row_scale.size()));
  for (unsigned i = 0; i < row_min.size(); ++i) {
    mins.set(i, row_min[i]);
    scales.set(i, row_scale[i]);
  }
  if (!m.degrees.empty())
    set_ints(r.initDegrees(static_cast<unsigned>(m.degrees.size())), m.degrees);
  return to_bytes(mb);
}

row_block decode_row_block(const context& c, std::span<const char> b, std::uint8_t bits,
                           bool sparse) {
  return guarded("row_block", [&] {
    reader rd(c, b, "row_block");
    row_block m;
    if (sparse) {
      m.sparse = read_sparse_rows(rd, c, &m.degrees, nullptr, m.h);
      return m;
    }
    if (bits == 32) {
      auto r = rd.root<FeatureResponse>(c);
      m.h = read_header(r);
      m.rows = get_matrix(rd, r.getRows(), r.getCols(), r.getValues());
      m.degrees = to_vector(r.getDegrees());
    } else {
      auto r = rd.root<QuantizedHaloResponse>(c);
      m.h = read_header(r);
      m.bits = r.getBits();
      if (m.bits != bits)
        rd.fail("rows at " + std::to_string(m.bits) + " bits, " + std::to_string(bits) + " asked");
      m.rows = get_quantized_rows(rd, r.getRows(), r.getCols(), m.bits, r.getCodes(), r.getRowMin(),
                                  r.getRowScale());
      if (!m.rows.allFinite()) rd.fail("quantized rows decode to a non-finite value");
      m.degrees = to_vector(r.getDegrees());
    }
    if (!m.degrees.empty() && m.degrees.size() != static_cast<size_t>(m.rows.rows())) {
      rd.fail("degrees and rows differ in count");
    }
    for (auto deg : m.degrees) {
      if (deg < 0) rd.fail("negative degree");
    }
    return m;
  });
}

bytes encode(const context& c, const allreduce_chunk& m) {
  capnp::MallocMessageBuilder mb;
  auto r = mb.initRoot<AllReduceChunk>();
  fill_header(r, c, m.h);
  r.setRound(m.round);
  r.setLoss(m.loss);
  r.setSeeds(m.seeds);
  r.setCorrect(m.correct);
  const auto n = m.values.size() * sizeof(float);
  auto data = r.initValues(static_cast<unsigned>(n));
  if (n) std::memcpy(data.begin(), m.values.data(), n);
  return to_bytes(mb);
}

allreduce_chunk decode_allreduce_chunk(const context& c, std::span<const char> b) {
  return guarded("allreduce_chunk", [&] {
    reader rd(c, b, "allreduce_chunk");
    auto r = rd.root<AllReduceChunk>(c);
    allreduce_chunk m;
    m.h = read_header(r);
    m.round = r.getRound();
    m.loss = r.getLoss();
    m.seeds = r.getSeeds();
    m.correct = r.getCorrect();
    if (m.correct > m.seeds) rd.fail("more correct predictions than seeds");
    auto data = r.getValues();
    if (data.size() % sizeof(float) != 0) rd.fail("payload is not whole float32 values");
    m.values.resize(data.size() / sizeof(float));
    if (data.size()) std::memcpy(m.values.data(), data.begin(), data.size());
    return m;
  });
}

bytes encode(const context& c, const control& m) {
  capnp::MallocMessageBuilder mb;
  auto r = mb.initRoot<Control>();
  fill_header(r, c, m.h);
  r.setKind(static_cast<Control::Kind>(m.what));
  r.setEpoch(m.epoch);
  r.setValue(m.value);
  r.setText(m.text);
  r.setRing(m.ring);
  auto counts = r.initCounts(static_cast<unsigned>(m.counts.size()));
  for (unsigned i = 0; i < m.counts.size(); ++i)
    counts.set(i, m.counts[i]);
  return to_bytes(mb);
}

control decode_control(const context& c, std::span<const char> b) {
  return guarded("control", [&] {
    reader rd(c, b, "control");
    auto r = rd.root<Control>(c);
    control m;
    m.h = read_header(r);
    const auto k = static_cast<std::uint16_t>(r.getKind());
    if (k > static_cast<std::uint16_t>(control_kind::settings)) {
      rd.fail("unknown control kind " + std::to_string(k));
    }
    m.what = static_cast<control_kind>(k);
    m.epoch = r.getEpoch();
    m.value = r.getValue();
    m.text = r.getText().cStr();
    m.ring = r.getRing();
    for (auto v : r.getCounts())
      m.counts.push_back(v);
    return m;
  });
}

}  // namespace degnn::wire
