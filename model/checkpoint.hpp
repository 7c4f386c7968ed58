// Binary checkpoint of a training run: model config, parameters and Adam state. Layout:
// "DEGNNCKP" magic, u32 version, u32 CRC-32 of the payload, u64 payload size, payload
// (little-endian, as the machine writes it). A corrupt or truncated file throws data_error.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "model/adam.hpp"
#include "model/gnn_model.hpp"

namespace degnn {

inline constexpr std::uint32_t checkpoint_version = 1;

/// The file's bytes, header and payload (a snapshot in memory, to be written elsewhere).
std::string encode_checkpoint(const gnn_model& model, const adam& opt);
/// CRC-32 (zlib) of a whole encoded checkpoint, as commit records name it.
std::uint32_t checkpoint_crc(std::string_view bytes);

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
/// The same from bytes in memory; `file` names them in errors.
checkpoint decode_checkpoint(std::string_view bytes, const std::string& file);

}  // namespace degnn
