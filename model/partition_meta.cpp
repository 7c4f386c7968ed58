// partitions.meta: the text file that describes a partition set (its dataset, sizes, method,
// seed, the book's checksum and optionally the dataset folder), written last and read first.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "model/data_error.hpp"
#include "model/partition_store.hpp"

namespace degnn {

namespace fs = std::filesystem;

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

template <class T>
T parse_number(std::string_view v, const std::string& file, std::int64_t line, std::string_view key,
               int base = 10) {
  T out{};
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out, base);
  if (ec != std::errc() || end != v.data() + v.size()) {
    throw data_error::at(
        file, line,
        "value of " + std::string(key) + " is not a valid number: '" + std::string(v) + "'");
  }
  return out;
}

}  // namespace

std::string partition_meta_text(const partition_meta& m) {
  std::ostringstream s;
  char sum[17];
  std::snprintf(sum, sizeof sum, "%016llx", static_cast<unsigned long long>(m.owner_checksum));
  s << "# DEGNN graph partitions: owner.bin is the partition book, part-K/partition.bin part K.\n"
    << "format_version=" << m.format_version << "\n"
    << "dataset=" << m.dataset_name << "\n"
    << "num_nodes=" << m.num_nodes << "\n"
    << "num_edges=" << m.num_edges << "\n"
    << "num_features=" << m.num_features << "\n"
    << "num_classes=" << m.num_classes << "\n"
    << "num_parts=" << m.num_parts << "\n"
    << "method=" << m.method << "\n"
    << "seed=" << m.seed << "\n"
    << "owner_checksum=" << sum << "\n";
  if (!m.source.empty()) s << "source=" << m.source << "\n";
  return s.str();
}

partition_meta load_partition_meta(const fs::path& dir) {
  const fs::path path = dir / kPartitionMetaName;
  const std::string file = path.string();
  std::ifstream in(path);
  if (!in)
    throw data_error::at(file, 0, "missing or unreadable (not a partitioned dataset directory?)");
  partition_meta m;
  std::vector<std::string> seen;
  std::string text;
  std::int64_t line_no = 0;
  while (std::getline(in, text)) {
    ++line_no;
    const std::string_view line = trim(text);
    if (line.empty() || line.front() == '#') continue;
    const auto eq = line.find('=');
    if (eq == std::string_view::npos) throw data_error::at(file, line_no, "expected key=value");
    const std::string key(trim(line.substr(0, eq)));
    const std::string_view value = trim(line.substr(eq + 1));
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      throw data_error::at(file, line_no, "key " + key + " appears twice");
    }
    seen.push_back(key);
    if (key == "format_version") {
      m.format_version = parse_number<std::int32_t>(value, file, line_no, key);
      if (m.format_version != kPartitionFormatVersion) {
        throw data_error::at(file, line_no,
                             "unsupported format_version " + std::string(value) +
                                 " (this build reads " + std::to_string(kPartitionFormatVersion) +
                                 "; write the partition set again with degnn partition)");
      }
    } else if (key == "dataset") {
      m.dataset_name = std::string(value);
    } else if (key == "num_nodes") {
      m.num_nodes = parse_number<node_id>(value, file, line_no, key);
    } else if (key == "num_edges") {
      m.num_edges = parse_number<edge_offset>(value, file, line_no, key);
    } else if (key == "num_features") {
      m.num_features = parse_number<std::int32_t>(value, file, line_no, key);
    } else if (key == "num_classes") {
      m.num_classes = parse_number<std::int32_t>(value, file, line_no, key);
    } else if (key == "num_parts") {
      m.num_parts = parse_number<std::int32_t>(value, file, line_no, key);
    } else if (key == "method") {
      m.method = std::string(value);
    } else if (key == "seed") {
      m.seed = parse_number<std::uint64_t>(value, file, line_no, key);
    } else if (key == "owner_checksum") {
      m.owner_checksum = parse_number<std::uint64_t>(value, file, line_no, key, 16);
    } else if (key == "source") {
      m.source = std::string(value);
    } else {
      throw data_error::at(file, line_no, "unknown key '" + key + "'");
    }
  }
  for (const char* key : {"format_version", "dataset", "num_nodes", "num_edges", "num_features",
                          "num_classes", "num_parts", "method", "seed", "owner_checksum"}) {
    if (std::find(seen.begin(), seen.end(), key) == seen.end()) {
      throw data_error::at(file, 0, std::string("missing key ") + key);
    }
  }
  if (m.num_nodes < 0 || m.num_edges < 0 || m.num_features < 0 || m.num_classes < 0 ||
      m.num_parts < 1 || m.num_parts > std::max<node_id>(m.num_nodes, 1)) {
    throw data_error::at(
        file, 0, "sizes out of range (negative counts, or num_parts not in [1, num_nodes])");
  }
  return m;
}

dataset dataset_outline(const partition_meta& meta) {
  dataset d;
  d.name = meta.dataset_name;
  d.graph.num_nodes = meta.num_nodes;
  d.graph.indptr.assign(static_cast<size_t>(meta.num_nodes) + 1, 0);
  d.features = Matrix(0, meta.num_features);
  d.num_classes = meta.num_classes;
  return d;
}

}  // namespace degnn
