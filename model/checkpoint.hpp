// Binary checkpoint of a training run: model config, parameters and Adam state. Layout:
// "DEGNNCKP" magic, u32 version, u32 CRC-32 of the payload, u64 payload size, payload
// (little-endian, as the machine writes it). A corrupt or truncated file throws data_error.
#pragma once

#include <cstdint>
#include <filesystem>

#include "model/adam.hpp"
#include "model/gnn_model.hpp"

namespace degnn {

inline constexpr std::uint32_t checkpoint_version = 1;

/// Writes `path` (via a temporary file renamed over it, so a crash never leaves half a
/// checkpoint). Throws data_error naming the file when it cannot be written.
void save_checkpoint(const std::filesystem::path& path, const gnn_model& model, const adam& opt);

struct checkpoint {
  gnn_model model;  ///< rebuilt from the stored config, parameters restored exactly
  adam optimizer;   ///< options and state (step, moments) restored exactly
};

/// Reads a file written by save_checkpoint. Throws data_error naming the file when it is missing,
/// truncated, has a wrong magic/version/checksum or inconsistent shapes.
checkpoint load_checkpoint(const std::filesystem::path& path);

}  // namespace degnn
