// The helpers both codec files share (wire.cpp: pulls, evaluation, all-reduce, control;
// wire_decentralized.cpp: pushes, partial sums, gradient returns, history): the header, the
// bounded reader, lists and matrices with their checks. Internal to serialization/.
#pragma once

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "serialization/wire.hpp"

namespace degnn::wire::codec {

template <class Builder>
void fill_header(Builder root, const context& c, const header& h) {
  auto hb = root.initHeader();
  hb.setVersion(kProtocolVersion);
  hb.setClusterId(c.cluster_id);
  hb.setStep(h.step);
  hb.setSender(h.sender);
  hb.setViewId(c.view_id);
}

inline bytes to_bytes(capnp::MallocMessageBuilder& mb) {
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
    return root<T>(&c);
  }
  /// The root of a message whose cluster id is the sender's claim to check later (a join).
  template <class T>
  typename T::Reader root_of_any_cluster() {
    return root<T>(nullptr);
  }
  template <class T>
  typename T::Reader root(const context* c) {
    try {
      auto r = msg_->getRoot<T>();
      auto h = r.getHeader();
      if (h.getVersion() != kProtocolVersion) {
        fail("protocol version " + std::to_string(h.getVersion()) + ", expected " +
             std::to_string(kProtocolVersion));
      }
      if (c && h.getClusterId() != c->cluster_id) {
        fail("message from another cluster (id " + std::to_string(h.getClusterId()) + ", ours " +
             std::to_string(c->cluster_id) + ")");
      }
      if (c && h.getViewId() != c->view_id) {
        fail(std::string("message of ") + (h.getViewId() < c->view_id ? "an older" : "a newer") +
             " membership view (" + std::to_string(h.getViewId()) + ", ours " +
             std::to_string(c->view_id) + ")");
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

inline void check_ids(const reader& r, const std::vector<std::int32_t>& ids, const char* field) {
  for (auto v : ids) {
    if (v < 0) r.fail(std::string(field) + " holds a negative node id (" + std::to_string(v) + ")");
  }
}

// A TLS proof (certificate PEM, signature, HMAC), the same three fields in a join request and a
// console request: bounded, so a peer cannot make the receiver hold more than a proof needs.
template <class Builder>
void put_proof(Builder r, const std::string& certificate,
               const std::vector<std::uint8_t>& signature,
               const std::vector<std::uint8_t>& token_mac) {
  r.setCertificate(certificate);
  r.setSignature(kj::arrayPtr(signature.data(), signature.size()));
  r.setTokenMac(kj::arrayPtr(token_mac.data(), token_mac.size()));
}

template <class Reader>
void get_proof(const reader& rd, Reader r, std::string& certificate,
               std::vector<std::uint8_t>& signature, std::vector<std::uint8_t>& token_mac) {
  if (r.getCertificate().size() > 16384) rd.fail("certificate longer than 16 KiB");
  if (r.getSignature().size() > 1024 || r.getTokenMac().size() > 64)
    rd.fail("signature or token longer than a signature or an HMAC");
  certificate = r.getCertificate().cStr();
  signature.assign(r.getSignature().begin(), r.getSignature().end());
  token_mac.assign(r.getTokenMac().begin(), r.getTokenMac().end());
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

/// The widest row a message may carry (features, hidden or output width): a bound far above any
/// model's, so that a peer's width alone never costs work (a 0 x 2^32 matrix holds no byte, but
/// a scan of it runs 2^32 times: found by fuzz_wire).
inline constexpr std::uint64_t kMaxWidth = std::uint64_t{1} << 24;

inline Matrix get_matrix(const reader& rd, std::uint64_t rows, std::uint64_t cols,
                         capnp::Data::Reader data) {
  if (cols > kMaxWidth)
    rd.fail("rows of width " + std::to_string(cols) + " (at most " + std::to_string(kMaxWidth) +
            ")");
  if (cols == 0 && rows != 0) rd.fail(std::to_string(rows) + " rows of width 0");
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
inline void put_rows(const Matrix& m, capnp::Data::Builder data) {
  if (m.size()) std::memcpy(data.begin(), m.data(), static_cast<size_t>(m.size()) * sizeof(float));
}
inline Matrix get_rows(const reader& rd, std::uint64_t cols, capnp::Data::Reader data,
                       const char* field) {
  if (cols > kMaxWidth)
    rd.fail(std::string(field) + ": rows of width " + std::to_string(cols) + " (at most " +
            std::to_string(kMaxWidth) + ")");
  const std::uint64_t row_bytes = cols * sizeof(float);
  if (data.size() == 0) return Matrix(0, static_cast<Eigen::Index>(cols));
  if (row_bytes == 0 || data.size() % row_bytes != 0) {
    rd.fail(std::string(field) + ": " + std::to_string(data.size()) +
            " bytes are not whole rows of " + std::to_string(cols) + " floats");
  }
  return get_matrix(rd, data.size() / row_bytes, cols, data);
}

// Values that feed a model (sums, gradients) from a peer: a NaN would poison every replica.
inline void check_finite(const reader& rd, const Matrix& m, const char* field) {
  if (m.size() != 0 && !m.allFinite())
    rd.fail(std::string(field) + " holds a non-finite value");
}

/// A SparseRows message's rows (wire.cpp); `nodes`, when not null, receives its node list.
std::shared_ptr<const sparse_rows> read_sparse_rows(reader& rd, const context& c,
                                                    std::vector<std::int32_t>* degrees,
                                                    std::vector<std::int32_t>* nodes, header& h);
bytes write_sparse_rows(const context& c, const header& h, const sparse_rows& rows,
                        const std::vector<std::int32_t>& degrees,
                        const std::vector<std::int32_t>& nodes);

}  // namespace degnn::wire::codec
