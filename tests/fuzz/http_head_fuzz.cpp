// Fuzzes the HTTP gate's request-head parser and its reply rendering, as the read-only status
// endpoint and as the console gateway use it: any head is either refused with a 4xx/5xx status
// and a reason, or names a method that endpoint takes, a path, and a body within its limit.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "runtime/transport/http_gate.hpp"

namespace {

void check(const std::string& head, const degnn::http_limits& limits) {
  degnn::http_request q;
  const std::string bad = degnn::parse_request_head(head, q, limits);
  if (bad.empty()) {
    if (limits.post_only ? q.method != "POST" : q.method != "GET" && q.method != "HEAD")
      std::abort();
    if (q.target.empty() || q.target[0] != '/') std::abort();
    if (q.content_length > limits.max_body) std::abort();
  } else {
    const int status = std::atoi(bad.substr(0, 3).c_str());
    if (status < 400 || status > 599 || bad.size() < 4 || bad[3] != ' ') std::abort();
    const std::string reply = degnn::render_reply({status, "text/plain", bad}, false);
    if (reply.rfind("HTTP/1.1 " + bad.substr(0, 3), 0) != 0) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string head(reinterpret_cast<const char*>(data), size);
  check(head, {});
  check(head, {.max_body = 64 << 10, .post_only = true});
  return 0;
}
