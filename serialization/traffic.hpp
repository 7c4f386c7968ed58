// Byte and message counters per wire kind: what the metrics report as communication. They count
// encoded Cap'n Proto sizes, so in-process and cross-process runs count the same bytes.
#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "serialization/wire.hpp"

namespace degnn::wire {

struct traffic {
  std::array<std::uint64_t, kNumKinds> bytes{};
  std::array<std::uint64_t, kNumKinds> messages{};

  void add(kind k, std::size_t n) {
    bytes[static_cast<size_t>(k)] += n;
    messages[static_cast<size_t>(k)] += 1;
  }
  std::uint64_t total_bytes() const {
    std::uint64_t t = 0;
    for (auto b : bytes)
      t += b;
    return t;
  }
  traffic& operator+=(const traffic& o) {
    for (int i = 0; i < kNumKinds; ++i)
      bytes[i] += o.bytes[i], messages[i] += o.messages[i];
    return *this;
  }
  bool operator==(const traffic&) const = default;

  /// The counters as a traffic report (control message counts): bytes per kind, messages per
  /// kind, then the number of rejected requests.
  std::vector<std::uint64_t> to_report(std::uint64_t rejected) const {
    std::vector<std::uint64_t> out(bytes.begin(), bytes.end());
    out.insert(out.end(), messages.begin(), messages.end());
    out.push_back(rejected);
    return out;
  }
  /// Adds a report made by to_report; returns its rejected count. Throws std::invalid_argument
  /// for a report of the wrong size.
  std::uint64_t add_report(const std::vector<std::uint64_t>& report) {
    if (report.size() != 2 * kNumKinds + 1)
      throw std::invalid_argument("traffic report has the wrong size");
    for (int i = 0; i < kNumKinds; ++i) {
      bytes[i] += report[i];
      messages[i] += report[kNumKinds + i];
    }
    return report[2 * kNumKinds];
  }
  /// {"sample_request":123,...} with the non-zero kinds only, for JSON metrics lines.
  std::string bytes_json() const {
    std::string s = "{";
    for (int i = 1; i < kNumKinds; ++i) {
      if (!bytes[i]) continue;
      if (s.size() > 1) s += ",";
      s += "\"" + std::string(kind_name(static_cast<kind>(i))) + "\":" + std::to_string(bytes[i]);
    }
    return s + "}";
  }
};

}  // namespace degnn::wire
