// Cap'n Proto encoding and validating decoding of ConsoleRequest and ConsoleReply.
#include "serialization/wire_console.hpp"

#include "serialization/degnn.capnp.h"
#include "serialization/wire_codec.hpp"

namespace degnn::wire {

using namespace codec;

bytes encode(const context& c, const console_request& m) {
  capnp::MallocMessageBuilder mb;
  auto r = mb.initRoot<ConsoleRequest>();
  fill_header(r, c, {0, -1});
  r.setCommand(m.command);
  put_proof(r, m.certificate, m.signature, m.token_mac);
  if (!m.challenge.empty()) {
    auto c = r.initChallenge(static_cast<unsigned>(m.challenge.size()));
    std::memcpy(c.begin(), m.challenge.data(), m.challenge.size());
  }
  return to_bytes(mb);
}

console_request decode_console_request(const context& c, std::span<const char> b) {
  return guarded("console request", [&] {
    reader rd(c, b, "console request");
    auto r = rd.root_of_any_cluster<ConsoleRequest>();
    if (r.getCommand().size() > 1024) rd.fail("command longer than 1024 bytes");
    console_request m;
    m.command = r.getCommand().cStr();
    get_proof(rd, r, m.certificate, m.signature, m.token_mac);
    const auto c = r.getChallenge();
    if (c.size() > 64) rd.fail("challenge longer than 64 bytes");
    m.challenge.assign(c.begin(), c.end());
    return m;
  });
}

bytes encode(const context& c, const console_challenge& m) {
  capnp::MallocMessageBuilder mb;
  auto r = mb.initRoot<ConsoleChallenge>();
  fill_header(r, c, {0, 0});
  auto b = r.initChallenge(static_cast<unsigned>(m.challenge.size()));
  if (!m.challenge.empty()) std::memcpy(b.begin(), m.challenge.data(), m.challenge.size());
  return to_bytes(mb);
}

console_challenge decode_console_challenge(const context& c, std::span<const char> b) {
  return guarded("console challenge", [&] {
    reader rd(c, b, "console challenge");
    auto r = rd.root_of_any_cluster<ConsoleChallenge>();
    const auto ch = r.getChallenge();
    if (ch.size() < 16 || ch.size() > 64)
      rd.fail("a challenge of " + std::to_string(ch.size()) + " bytes");
    return console_challenge{{ch.begin(), ch.end()}};
  });
}

bytes encode(const context& c, const console_reply& m) {
  capnp::MallocMessageBuilder mb;
  auto r = mb.initRoot<ConsoleReply>();
  fill_header(r, c, {0, 0});
  r.setOk(m.ok);
  r.setText(m.text);
  return to_bytes(mb);
}

console_reply decode_console_reply(const context& c, std::span<const char> b) {
  return guarded("console reply", [&] {
    reader rd(c, b, "console reply");
    auto r = rd.root_of_any_cluster<ConsoleReply>();
    return console_reply{r.getOk(), r.getText().cStr()};
  });
}

}  // namespace degnn::wire
