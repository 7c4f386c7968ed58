// Fuzzes the HTTP gate's request-head parser and its reply rendering: any head is either refused
// with a 4xx/5xx status and a reason, or names a GET or HEAD of a path.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "runtime/http_gate.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string head(reinterpret_cast<const char*>(data), size);
  degnn::http_request q;
  const std::string bad = degnn::parse_request_head(head, q);
  if (bad.empty()) {
    if (q.method != "GET" && q.method != "HEAD") std::abort();
    if (q.target.empty() || q.target[0] != '/') std::abort();
  } else {
    const int status = std::atoi(bad.substr(0, 3).c_str());
    if (status < 400 || status > 599 || bad.size() < 4 || bad[3] != ' ') std::abort();
    const std::string reply = degnn::render_reply({status, "text/plain", bad}, false);
    if (reply.rfind("HTTP/1.1 " + bad.substr(0, 3), 0) != 0) std::abort();
  }
  return 0;
}
