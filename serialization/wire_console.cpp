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
  r.setCertificate(m.certificate);
  r.setSignature(kj::arrayPtr(m.signature.data(), m.signature.size()));
  r.setTokenMac(kj::arrayPtr(m.token_mac.data(), m.token_mac.size()));
  return to_bytes(mb);
}

console_request decode_console_request(const context& c, std::span<const char> b) {
  return guarded("console request", [&] {
    reader rd(c, b, "console request");
    auto r = rd.root_of_any_cluster<ConsoleRequest>();
    if (r.getCommand().size() > 1024) rd.fail("command longer than 1024 bytes");
    if (r.getCertificate().size() > 16384) rd.fail("certificate longer than 16 KiB");
    if (r.getSignature().size() > 1024 || r.getTokenMac().size() > 64)
      rd.fail("signature or token longer than a signature or an HMAC");
    console_request m;
    m.command = r.getCommand().cStr();
    m.certificate = r.getCertificate().cStr();
    m.signature.assign(r.getSignature().begin(), r.getSignature().end());
    m.token_mac.assign(r.getTokenMac().begin(), r.getTokenMac().end());
    return m;
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
