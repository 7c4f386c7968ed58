// Fuzzes the array and model files a user hands DEGNN (train --init, infer --model, --nodes .npy):
// the first byte picks the decoder (.npy, .npz, safetensors, a whole model file), the rest is the
// file. A decoder may refuse with data_error; anything else escaping it, or a sanitizer report,
// is a defect.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "model/array_file.hpp"
#include "model/data_error.hpp"
#include "model/model_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 4) {
      case 0:
        degnn::decode_npy(bytes, "fuzz.npy");
        break;
      case 1:
        degnn::decode_npz(bytes, "fuzz.npz");
        break;
      case 2:
        degnn::decode_safetensors(bytes, "fuzz.safetensors", nullptr);
        break;
      default:
        degnn::decode_model_file(bytes, "fuzz.model");
        break;
    }
  } catch (const degnn::data_error&) {
  }
  return 0;
}
