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
#include "serialization/degnn.capnp.h"

namespace degnn::wire {

namespace {

template <class Builder>
void fill_header(Builder root, const context& c, const header& h) {
  auto hb = root.initHeader();
  hb.setVersion(kProtocolVersion);
  hb.setClusterId(c.cluster_id);
  hb.setStep(h.step);
  hb.setSender(h.sender);
}

bytes to_bytes(capnp::MallocMessageBuilder& mb) {
  const auto words = capnp::messageToFlatArray(mb);
  const auto raw = words.asChars();
  return bytes(raw.begin(), raw.end());
}

// Owns an aligned copy of the buffer (Cap'n Proto reads whole words) and a bounded reader.
class reader {
 public:
  reader(const context& c, std::span<const char> b, const char* what) : what_(what) {
    if (b.size() > c.max_bytes)
      fail("message of " + std::to_string(b.size()) + " bytes exceeds the limit");
    if (b.empty() || b.size() % sizeof(capnp::word) != 0) {
      fail("truncated message (" + std::to_string(b.size()) + " bytes, not whole words)");
    }
    words_ = kj::heapArray<capnp::word>(b.size() / sizeof(capnp::word));
    std::memcpy(words_.begin(), b.data(), b.size());
    capnp::ReaderOptions opts;
    // Traversal bounded by the buffer size: a hostile message cannot amplify reads.
    opts.traversalLimitInWords = words_.size() * 4 + 64;
    opts.nestingLimit = 16;
    try {
      msg_.emplace(words_.asPtr(), opts);
    } catch (const kj::Exception& e) {
      fail(std::string("malformed message: ") + e.getDescription().cStr());
    }
  }
  template <class T>
  typename T::Reader root(const context& c) {
    try {
      auto r = msg_->getRoot<T>();
      auto h = r.getHeader();
      if (h.getVersion() != kProtocolVersion) {
        fail("protocol version " + std::to_string(h.getVersion()) + ", expected " +
             std::to_string(kProtocolVersion));
      }
      if (h.getClusterId() != c.cluster_id) {
        fail("message from another cluster (id " + std::to_string(h.getClusterId()) + ", ours " +
             std::to_string(c.cluster_id) + ")");
      }
      return r;
    } catch (const kj::Exception& e) {
      fail(std::string("malformed message: ") + e.getDescription().cStr());
    }
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw wire_error(std::string(what_) + ": " + why);
  }
  const char* what() const { return what_; }

 private:
  const char* what_;
  kj::Array<capnp::word> words_;
  std::optional<capnp::FlatArrayMessageReader> msg_;
};

template <class R>
header read_header(R r) {
  return {r.getHeader().getStep(), r.getHeader().getSender()};
}

template <class List>
std::vector<std::int32_t> to_vector(List l) {
  std::vector<std::int32_t> v(l.size());
  for (unsigned i = 0; i < l.size(); ++i)
    v[i] = l[i];
  return v;
}

template <class Builder>
void set_ints(Builder list, const std::vector<std::int32_t>& v) {
  for (unsigned i = 0; i < v.size(); ++i)
    list.set(i, v[i]);
}

// Every decode runs inside this, so a kj exception from a lazily-validated pointer surfaces as
// a wire_error naming the message kind.
template <class F>
auto guarded(const char* what, F&& f) {
  try {
    return f();
  } catch (const kj::Exception& e) {
    throw wire_error(std::string(what) + ": malformed message: " + e.getDescription().cStr());
  }
}

void check_ids(const reader& r, const std::vector<std::int32_t>& ids, const char* field) {
  for (auto v : ids) {
    if (v < 0) r.fail(std::string(field) + " holds a negative node id (" + std::to_string(v) + ")");
  }
}

// Float matrices travel as rows, cols and a float32 Data blob.
template <class Builder>
void put_matrix(Builder r, const Matrix& m, capnp::Data::Builder (Builder::*init)(unsigned)) {
  r.setRows(static_cast<std::uint32_t>(m.rows()));
  r.setCols(static_cast<std::uint32_t>(m.cols()));
  const auto n = static_cast<size_t>(m.size()) * sizeof(float);
  auto data = (r.*init)(static_cast<unsigned>(n));
  if (n) std::memcpy(data.begin(), m.data(), n);
}

Matrix get_matrix(const reader& rd, std::uint64_t rows, std::uint64_t cols,
                  capnp::Data::Reader data) {
  // Checked: rows and cols come from the peer, and 2^31 x 2^31 x 4 wraps to 0 in 64 bits.
  std::uint64_t floats = 0, bytes = 0;
  if (__builtin_mul_overflow(rows, cols, &floats) ||
      __builtin_mul_overflow(floats, sizeof(float), &bytes) || bytes != data.size()) {
    rd.fail(std::to_string(rows) + " x " + std::to_string(cols) + " floats do not match " +
            std::to_string(data.size()) + " payload bytes");
  }
  Matrix m(static_cast<Eigen::Index>(rows), static_cast<Eigen::Index>(cols));
  if (data.size()) std::memcpy(m.data(), data.begin(), data.size());
  return m;
}

// A second matrix of the same width in one message: its row count is implied by the data size.
void put_rows(const Matrix& m, capnp::Data::Builder data) {
  if (m.size()) std::memcpy(data.begin(), m.data(), static_cast<size_t>(m.size()) * sizeof(float));
}
Matrix get_rows(const reader& rd, std::uint64_t cols, capnp::Data::Reader data, const char* field) {
  const std::uint64_t row_bytes = cols * sizeof(float);
  if (data.size() == 0) return Matrix(0, static_cast<Eigen::Index>(cols));
  if (row_bytes == 0 || data.size() % row_bytes != 0) {
    rd.fail(std::string(field) + ": " + std::to_string(data.size()) +
            " bytes are not whole rows of " + std::to_string(cols) + " floats");
  }
  return get_matrix(rd, data.size() / row_bytes, cols, data);
}

// Values that feed a model (sums, gradients) from a peer: a NaN would poison every replica.
void check_finite(const reader& rd, const Matrix& m, const char* field) {
  if (!m.allFinite()) rd.fail(std::string(field) + " holds a non-finite value");
}

}  // namespace

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
    return m;
  });
}

bytes encode(const context& c, const row_block& m, kind) {
  capnp::MallocMessageBuilder mb;
  auto r = mb.initRoot<FeatureResponse>();
  fill_header(r, c, m.h);
  put_matrix(r, m.rows, &FeatureResponse::Builder::initValues);
  if (!m.degrees.empty())
    set_ints(r.initDegrees(static_cast<unsigned>(m.degrees.size())), m.degrees);
  return to_bytes(mb);
}

row_block decode_row_block(const context& c, std::span<const char> b) {
  return guarded("row_block", [&] {
    reader rd(c, b, "row_block");
    auto r = rd.root<FeatureResponse>(c);
    row_block m;
    m.h = read_header(r);
    m.rows = get_matrix(rd, r.getRows(), r.getCols(), r.getValues());
    m.degrees = to_vector(r.getDegrees());
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
    if (k > static_cast<std::uint16_t>(control_kind::trace)) {
      rd.fail("unknown control kind " + std::to_string(k));
    }
    m.what = static_cast<control_kind>(k);
    m.epoch = r.getEpoch();
    m.value = r.getValue();
    m.text = r.getText().cStr();
    for (auto v : r.getCounts())
      m.counts.push_back(v);
    return m;
  });
}

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

embedding_rows decode_embedding_rows(const context& c, std::span<const char> b) {
  return guarded("embedding_rows", [&] {
    reader rd(c, b, "embedding_rows");
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
