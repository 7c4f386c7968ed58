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
