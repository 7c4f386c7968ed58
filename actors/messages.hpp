// The actor protocol of DEGNN: the CAF type-ID block, atoms, and the typed actor interfaces.
// Every payload that may cross a node is a wire_message (kind + Cap'n Proto bytes), so the bytes
// that cross a process boundary are exactly the bytes that travel in-process and get counted.
#pragma once

#include <caf/all.hpp>

#include <cstdint>
#include <vector>

#include "serialization/wire.hpp"

namespace degnn {

/// One encoded message: its kind (wire::kind) and its Cap'n Proto bytes.
struct wire_message {
  std::uint16_t kind = 0;
  std::vector<char> bytes;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, wire_message& x) {
  return f(caf::meta::type_name("degnn.wire_message"), x.kind, x.bytes);
}

}  // namespace degnn

CAF_BEGIN_TYPE_ID_BLOCK(degnn, caf::first_custom_type_id)
CAF_ADD_TYPE_ID(degnn, (degnn::wire_message))
CAF_ADD_ATOM(degnn, degnn, shard_atom, "shard")
CAF_ADD_ATOM(degnn, degnn, batch_atom, "batch")
CAF_END_TYPE_ID_BLOCK(degnn)

namespace degnn {

// Every request is one encoded message in and one encoded reply out; kinds are dispatched inside
// (serialization/degnn.capnp). The leading atom makes each role its own type, so sending a batch
// owner's message to a shard fails to compile.

/// Serves its partition: sample_request -> sample_response, feature_request -> feature_response,
/// control(result) -> control with its traffic counters.
using shard_actor = caf::typed_actor<caf::replies_to<shard_atom, wire_message>::with<wire_message>>;

/// A worker's batch owner: control(step) -> allreduce_chunk (gradient and step statistics),
/// allreduce_chunk (averaged gradient) -> control(result), control(evaluate) -> control(result),
/// halo_request -> halo_response, control(result) -> traffic counters.
using batch_actor = caf::typed_actor<caf::replies_to<batch_atom, wire_message>::with<wire_message>>;

}  // namespace degnn
