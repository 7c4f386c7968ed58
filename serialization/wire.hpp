// Codecs between DEGNN's plain message structs and their Cap'n Proto encodings (degnn.capnp).
// Decoding validates everything a hostile or broken peer could get wrong and throws wire_error;
// it never returns a half-read message.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/tensor.hpp"

namespace degnn {
struct sparse_rows;
}

namespace degnn::wire {

/// Every message carries it, and nodes compare it at the greeting: 2 since actors' counter
/// reports end with their mailbox counts, 3 since the history set-up sends no history rows
/// (steps pull every row they read first) and halo requests may ask for quantized rows, 4 since
/// workers' reports add each stage's median and 95th percentile per step, 5 since the workers may
/// all-reduce the gradient in a ring among themselves (Control.ring), 6 since feature rows may
/// travel compressed (SparseRows), 7 since decentralized GAT steps send attention pushes,
/// partials and returns (three new kinds).
inline constexpr std::uint16_t kProtocolVersion = 7;

class wire_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What every message is checked against: the protocol version, this run's cluster id and the
/// membership view (a message of an older view, sent before a membership change, is refused).
struct context {
  std::uint64_t cluster_id = 0;
  std::uint16_t view_id = 1;
  std::size_t max_bytes = std::size_t{1} << 30;  ///< larger buffers are rejected unread
};

/// Kinds, one per schema root; also the keys of the byte counters.
enum class kind : std::uint16_t {
  sample_request = 1,
  sample_response,
  feature_request,
  feature_response,
  halo_request,
  halo_response,
  computation_push,
  partial_aggregate,
  gradient_return,
  embedding_get,
  embedding_rows,
  allreduce_chunk,
  control,
  attention_push,
  attention_partial,
  attention_return,
};
inline constexpr int kNumKinds = 17;  ///< array size for per-kind counters (index = kind value)
const char* kind_name(kind k);

struct header {
  std::uint64_t step = 0;
  std::int32_t sender = 0;
};

struct sample_request {
  header h;
  std::uint8_t layer = 0;
  std::int32_t fanout = -1;
  std::uint64_t seed = 0;
  std::vector<node_id> nodes;
};

struct sample_response {
  header h;
  std::vector<std::int32_t> counts;
  std::vector<node_id> neighbors;
  std::vector<std::int32_t> degrees;
};

/// Feature pulls and evaluation halo requests share one shape (layer is 0 for features).
struct row_request {
  header h;
  std::uint8_t layer = 0;
  std::vector<node_id> nodes;
  std::uint8_t bits = 32;  ///< halo requests: the rows wanted at 32 (exact), 16, 8, 4 or 2 bits
};

/// Rows of a float matrix: feature rows, halo rows. Below 32 bits (halo rows only) the encoder
/// quantizes the rows per row (model/quantizer) and the decoder hands back the decoded values.
struct row_block {
  header h;
  Matrix rows;
  std::vector<std::int32_t> degrees;  ///< empty, or one per row (feature pulls)
  std::uint8_t bits = 32;             ///< precision on the wire: 32, 16, 8, 4 or 2
  /// Feature rows of a run on compressed rows, instead of `rows` (which then stays empty): they
  /// travel as a SparseRows.
  std::shared_ptr<const sparse_rows> sparse;
};

struct allreduce_chunk {
  header h;
  std::uint32_t round = 0;
  std::vector<float> values;
  double loss = 0;  ///< summed over the step's labelled seeds
  std::uint32_t seeds = 0;
  std::uint32_t correct = 0;
};

enum class control_kind : std::uint16_t {
  step,
  epoch,
  evaluate,
  checkpoint,
  shutdown,
  result,
  gradient,      ///< decentralized: send the gradient accumulated over the step
  refresh,       ///< decentralized: pull the halo's historical embeddings
  init_history,  ///< decentralized: seed the history from the last evaluation
  trace,         ///< the actor's stage timeline (Chrome trace events in text)
  commit,        ///< a checkpoint every replica confirmed: write its commit record
  settings,      ///< decentralized: settings changed between steps (counts = [staleness])
};
struct control {
  header h;
  control_kind what = control_kind::step;
  std::uint32_t epoch = 0;
  double value = 0;
  std::string text;
  std::vector<std::uint64_t> counts;
  /// step, gradient: the workers reduce the gradient in a ring among themselves and apply the
  /// average, instead of sending it to the coordinator.
  bool ring = false;
};

/// Read of historical embeddings at one layer (kind embedding_get).
struct embedding_get {
  header h;
  std::uint8_t layer = 0;
  std::vector<node_id> nodes;
  /// Empty, or per node the version the asker holds (kNoVersion: none): only newer rows return.
  std::vector<std::uint64_t> held;
};
inline constexpr std::uint64_t kNoVersion = ~std::uint64_t{0};

/// Historical embedding rows (kind embedding_rows): the answer to embedding_get, and (float32) the
/// body of a shard's put to its own embedding store. payload holds nodes.size() rows of ceil(cols *
/// bits / 8) bytes each, in the layout of model/quantizer.hpp (raw float32 when bits == 32);
/// row_min / row_scale hold one float per row (empty allowed when bits == 32); versions[i] is the
/// step row i was computed at.
struct embedding_rows {
  header h;
  std::uint8_t layer = 0;
  std::uint8_t bits = 32;
  std::vector<node_id> nodes;
  std::vector<std::uint64_t> versions;
  std::uint32_t cols = 0;
  std::vector<std::uint8_t> payload;
  std::vector<float> row_min, row_scale;
  /// Level 0 of a run on compressed feature rows: the rows, instead of payload (they travel as a
  /// SparseRows; every version is 0).
  std::shared_ptr<const sparse_rows> sparse;
};

/// Decentralized pipeline: the owner's seeds (targets) and, per target, its sampled neighbours
/// owned by the receiver, which returns one partial neighbour sum per target.
struct computation_push {
  header h;
  std::uint8_t layer = 0;  ///< level of the neighbours (their h^(layer) is summed)
  std::vector<node_id> targets;
  std::vector<std::int32_t> counts;  ///< per target
  std::vector<node_id> neighbors;    ///< concatenated
  std::vector<node_id> rows;         ///< nodes whose own row is wanted (the owner's seeds)
  std::uint64_t applies = 0;  ///< averaged gradients applied before computing (this step's weights)
};

struct partial_aggregate {
  header h;
  Matrix sums;                       ///< (targets, width): sum of the neighbours' rows here
  std::vector<std::int32_t> counts;  ///< per target: neighbours summed
  Matrix own_rows;                   ///< (push rows, width): the rows asked for, or empty
};

struct gradient_return {
  header h;
  Matrix grads;      ///< (targets, width): d loss / d partial sum
  Matrix own_grads;  ///< (push rows, width): d loss / d own row, or empty
};

/// GAT's second push of a step: per target of the step's computation_push, er (targets, heads).
struct attention_push {
  header h;
  std::uint64_t applies = 0;  ///< the step's weights
  Matrix er;
};

/// Per target and head the softmax partial over the shard's edges (model/attention.hpp).
struct attention_partial_rows {
  header h;
  Matrix values;              ///< (targets, heads * F)
  Matrix score_max, exp_sum;  ///< (targets, heads)
};

/// Owner to shard: grads = d loss / d the targets' attention outputs (targets, heads * F) with
/// the merged softmax (score_max, exp_sum (targets, heads)) and the outputs (heads_out). Shard to
/// owner: grads = d loss / d er (targets, heads), the rest empty.
struct attention_return {
  header h;
  std::uint32_t heads = 0;
  Matrix grads;
  Matrix score_max, exp_sum, heads_out;
};

using bytes = std::vector<char>;

bytes encode(const context& c, const sample_request& m);
bytes encode(const context& c, const sample_response& m);
bytes encode(const context& c, const row_request& m, kind k /*feature_request or halo_request*/);
bytes encode(const context& c, const row_block& m, kind k /*feature_response or halo_response*/);
bytes encode(const context& c, const allreduce_chunk& m);
bytes encode(const context& c, const control& m);
bytes encode(const context& c, const embedding_get& m);
bytes encode(const context& c, const embedding_rows& m);

sample_request decode_sample_request(const context& c, std::span<const char> b);
sample_response decode_sample_response(const context& c, std::span<const char> b);
row_request decode_row_request(const context& c, std::span<const char> b);
/// bits: what the request asked for (a halo response below 32 bits is a QuantizedHaloResponse);
/// sparse: the run's feature rows are compressed and the request asked for features (layer 0),
/// so the answer is a SparseRows.
row_block decode_row_block(const context& c, std::span<const char> b, std::uint8_t bits = 32,
                           bool sparse = false);
allreduce_chunk decode_allreduce_chunk(const context& c, std::span<const char> b);
control decode_control(const context& c, std::span<const char> b);
bytes encode(const context& c, const computation_push& m);
bytes encode(const context& c, const partial_aggregate& m);
bytes encode(const context& c, const gradient_return& m);
computation_push decode_computation_push(const context& c, std::span<const char> b);
partial_aggregate decode_partial_aggregate(const context& c, std::span<const char> b);
gradient_return decode_gradient_return(const context& c, std::span<const char> b);
bytes encode(const context& c, const attention_push& m);
bytes encode(const context& c, const attention_partial_rows& m);
bytes encode(const context& c, const attention_return& m);
attention_push decode_attention_push(const context& c, std::span<const char> b);
attention_partial_rows decode_attention_partial(const context& c, std::span<const char> b);
attention_return decode_attention_return(const context& c, std::span<const char> b);
embedding_get decode_embedding_get(const context& c, std::span<const char> b);
/// sparse: the answer to a get of level 0 in a run on compressed feature rows (a SparseRows).
embedding_rows decode_embedding_rows(const context& c, std::span<const char> b,
                                     bool sparse = false);

}  // namespace degnn::wire
