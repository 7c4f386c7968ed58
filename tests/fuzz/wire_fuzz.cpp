// Fuzzes every decoder of a message that may cross a node: the first byte picks the kind (and
// the decoder's flags), the rest is the message. A decoder may refuse (wire_error); anything
// else escaping it, or a sanitizer report, is a defect.
#include <cstdint>
#include <span>

#include "serialization/wire.hpp"
#include "serialization/wire_console.hpp"
#include "serialization/wire_files.hpp"
#include "serialization/wire_membership.hpp"

using namespace degnn::wire;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const context c{.cluster_id = 0, .view_id = 1, .max_bytes = 1 << 20};
  const std::span<const char> b(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::uint8_t bits[] = {32, 8, 4, 2};
  try {
    switch (data[0] % 27) {
      case 0:
        decode_sample_request(c, b);
        break;
      case 1:
        decode_sample_response(c, b);
        break;
      case 2:
        decode_row_request(c, b);
        break;
      case 3:
        decode_row_block(c, b, bits[(data[0] / 24) % 4], false);
        break;
      case 4:
        decode_row_block(c, b, 32, true);
        break;
      case 5:
        decode_allreduce_chunk(c, b);
        break;
      case 6:
        decode_control(c, b);
        break;
      case 7:
        decode_computation_push(c, b);
        break;
      case 8:
        decode_partial_aggregate(c, b);
        break;
      case 9:
        decode_gradient_return(c, b);
        break;
      case 10:
        decode_embedding_get(c, b);
        break;
      case 11:
        decode_embedding_rows(c, b, false);
        break;
      case 12:
        decode_embedding_rows(c, b, true);
        break;
      case 13:
        decode_console_request(c, b);
        break;
      case 14:
        decode_console_challenge(c, b);
        break;
      case 15:
        decode_console_reply(c, b);
        break;
      case 16:
        decode_file_manifest(c, b);
        break;
      case 17:
        decode_file_chunk_request(c, b);
        break;
      case 18:
        decode_file_chunk(c, b);
        break;
      case 19:
        decode_join_request(c, b);
        break;
      case 20:
        decode_membership_view(c, b);
        break;
      case 21:
        decode_attention_push(c, b);
        break;
      case 22:
        decode_attention_partial(c, b);
        break;
      case 23:
        decode_attention_return(c, b);
        break;
      default:
        decode_row_block(c, b, bits[data[0] % 4], data[0] & 1);
        break;
    }
  } catch (const wire_error&) {
  }
  return 0;
}
