// Codecs of the operator console's request (a command line, with TLS the operator's proof) and
// node 0's reply (JSON or text, or the error), with bounded sizes.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "serialization/wire.hpp"

namespace degnn::wire {

struct console_request {
  std::string command;
  std::string certificate;
  std::vector<std::uint8_t> signature;
  std::vector<std::uint8_t> token_mac;
  /// Through a TLS console gateway: the gateway's challenge the proof answers.
  std::vector<std::uint8_t> challenge;
};

struct console_challenge {
  std::vector<std::uint8_t> challenge;
};

struct console_reply {
  bool ok = false;
  std::string text;
};

bytes encode(const context& c, const console_request& m);
/// The cluster id is not checked (an operator does not know the run's settings).
console_request decode_console_request(const context& c, std::span<const char> b);
bytes encode(const context& c, const console_challenge& m);
console_challenge decode_console_challenge(const context& c, std::span<const char> b);
bytes encode(const context& c, const console_reply& m);
console_reply decode_console_reply(const context& c, std::span<const char> b);

}  // namespace degnn::wire
