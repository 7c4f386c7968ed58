// Loader of the Open Graph Benchmark raw layout: edge.csv.gz, node-feat.csv.gz,
// node-label.csv.gz, split/{train,valid,test}.csv.gz, num-node-list.csv.gz, num-edge-list.csv.gz.
// Lines are parsed in parallel a chunk at a time; every malformed field names file and line.
#include <omp.h>

#include <unistd.h>
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <mutex>
#include <optional>

#include "model/data_error.hpp"
#include "model/dataset.hpp"
#include "model/dataset_detail.hpp"
#include "model/gzip_lines.hpp"
#include "model/sparse_input.hpp"

namespace degnn {

namespace fs = std::filesystem;

namespace {

// The first error found by any thread, by lowest line number, so the message is deterministic.
class first_error {
 public:
  void record(std::int64_t line, std::string message) {
    std::lock_guard lock(mu_);
    if (!line_ || line < *line_) {
      line_ = line;
      message_ = std::move(message);
    }
  }
  void throw_if_any(const std::string& file) const {
    if (line_) throw data_error::at(file, *line_, message_);
  }

 private:
  std::mutex mu_;
  std::optional<std::int64_t> line_;
  std::string message_;
};

std::string quoted(std::string_view s) {
  if (s.size() > 40) return "'" + std::string(s.substr(0, 40)) + "...'";
  return "'" + std::string(s) + "'";
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

// Parses one integer field; returns an error text (empty on success).
template <class Int>
std::string parse_int(std::string_view field, Int& out, const char* what) {
  field = trim(field);
  auto [p, ec] = std::from_chars(field.data(), field.data() + field.size(), out);
  if (ec != std::errc() || p != field.data() + field.size() || field.empty()) {
    return std::string(what) + ": not an integer: " + quoted(field);
  }
  return {};
}

// Reads a file with exactly one integer (num-node-list / num-edge-list).
std::int64_t read_single_count(const fs::path& file) {
  std::vector<std::int64_t> values;
  std::string err;
  std::int64_t err_line = 0;
  read_lines_chunked(file, [&](std::span<const std::string_view> lines, std::int64_t first) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (trim(lines[i]).empty()) continue;
      std::int64_t v = 0;
      if (auto e = parse_int(lines[i], v, "count"); !e.empty() && err.empty()) {
        err = e;
        err_line = first + static_cast<std::int64_t>(i);
      }
      values.push_back(v);
    }
  });
  if (!err.empty()) throw data_error::at(file.string(), err_line, err);
  if (values.size() != 1) {
    throw data_error::at(file.string(), 0,
                         "expected exactly one number, found " + std::to_string(values.size()));
  }
  if (values[0] < 0) throw data_error::at(file.string(), 1, "negative count");
  return values[0];
}

void log(bool verbose, const char* fmt, auto... args) {
  if (!verbose) return;
  std::fprintf(stderr, fmt, args...);
}

// One label per node. Read first: one short line per node, so the labels check the declared node
// count before anything is allocated by it (a forged num-node-list of 688M nodes made the CSR ask
// for 5.5 GB; found by fuzz_csv).
std::vector<std::int32_t> read_labels(const fs::path& file, node_id n) {
  std::vector<std::int32_t> labels;
  first_error err;
  read_lines_chunked(file, [&](std::span<const std::string_view> lines, std::int64_t first) {
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::int64_t line = first + static_cast<std::int64_t>(i);
      std::int64_t v = 0;
      if (lines[i].find(',') != std::string_view::npos) {
        err.record(line, "expected 1 column (the class id), found more");
      } else if (auto e = parse_int(lines[i], v, "label"); !e.empty()) {
        err.record(line, e);
      } else if (v < 0 || v > 1'000'000) {
        err.record(line,
                   "label " + std::to_string(v) + " out of range (class ids are 0..num_classes-1)");
      }
      labels.push_back(static_cast<std::int32_t>(v));
    }
  });
  err.throw_if_any(file.string());
  if (static_cast<node_id>(labels.size()) != n) {
    throw data_error::at(file.string(), static_cast<std::int64_t>(labels.size()) + 1,
                         "has " + std::to_string(labels.size()) +
                             " labels, expected one per node (" + std::to_string(n) + ")");
  }
  return labels;
}

struct edge_list {
  std::vector<node_id> src, dst;
};

// The edge lines, each "src,dst" with both ids below n; `declared` (-1: none) is the count in
// `count_file`, which the lines must match.
edge_list read_edges(const fs::path& file, node_id n, std::int64_t declared,
                     const fs::path& count_file) {
  edge_list e;
  // Reserved by the declared count only up to 16M edges (128 MB): the count is checked against
  // the lines only after they are read, and a forged 555,856,855 made this reserve 4.4 GB (found
  // by fuzz_csv). Beyond it the vectors grow as the lines come.
  if (declared >= 0) {
    const auto reserve = static_cast<size_t>(std::min<std::int64_t>(declared, 1 << 24));
    e.src.reserve(reserve);
    e.dst.reserve(reserve);
  }
  first_error err;
  read_lines_chunked(file, [&](std::span<const std::string_view> lines, std::int64_t first) {
    const size_t base = e.src.size();
    e.src.resize(base + lines.size());
    e.dst.resize(base + lines.size());
    const auto count = static_cast<std::int64_t>(lines.size());
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < count; ++i) {
      const std::string_view line = lines[i];
      const auto comma = line.find(',');
      if (comma == std::string_view::npos || line.find(',', comma + 1) != std::string_view::npos) {
        const auto cols = comma == std::string_view::npos ? 1 : 3;
        err.record(first + i, "expected 2 columns (src,dst), found " +
                                  std::string(cols == 1 ? "1" : "more than 2"));
        continue;
      }
      std::int64_t s = 0, t = 0;
      if (auto e1 = parse_int(line.substr(0, comma), s, "src"); !e1.empty()) {
        err.record(first + i, e1);
      } else if (auto e2 = parse_int(line.substr(comma + 1), t, "dst"); !e2.empty()) {
        err.record(first + i, e2);
      } else if (s < 0 || s >= n || t < 0 || t >= n) {
        err.record(first + i, "node id " + std::to_string((s < 0 || s >= n) ? s : t) +
                                  " out of range [0, " + std::to_string(n) + ")");
      }
      e.src[base + i] = static_cast<node_id>(s);
      e.dst[base + i] = static_cast<node_id>(t);
    }
  });
  err.throw_if_any(file.string());
  const auto lines = static_cast<std::int64_t>(e.src.size());
  if (declared >= 0 && declared != lines) {
    throw data_error::at(file.string(), 0,
                         "has " + std::to_string(lines) + " edges but " +
                             count_file.filename().string() + " says " + std::to_string(declared));
  }
  return e;
}

// One feature row of `width` columns (line `line_no`): into `out` when dense, else its non-zeros
// into `nonzeros`. A malformed or non-finite field is recorded in `err`.
void parse_feature_row(std::string_view text, std::int64_t line_no, std::int64_t width, float* out,
                       std::vector<std::pair<std::int32_t, float>>* nonzeros, first_error& err) {
  const char* p = text.data();
  const char* end = p + text.size();
  std::int64_t col = 0;
  while (true) {
    const char* comma = static_cast<const char*>(std::memchr(p, ',', static_cast<size_t>(end - p)));
    const char* field_end = comma ? comma : end;
    if (col >= width) {
      err.record(line_no, "expected " + std::to_string(width) + " columns, found more");
      return;
    }
    std::string_view field = trim(std::string_view(p, static_cast<size_t>(field_end - p)));
    float v = 0;
    auto [q, ec] = std::from_chars(field.data(), field.data() + field.size(), v);
    if (field.empty() || ec != std::errc() || q != field.data() + field.size()) {
      err.record(line_no, "column " + std::to_string(col + 1) + ": not a number: " + quoted(field));
      return;
    }
    // A NaN or infinite input would poison every layer it reaches.
    if (!std::isfinite(v)) {
      err.record(line_no, "column " + std::to_string(col + 1) + ": not finite: " + quoted(field));
      return;
    }
    if (out) {
      out[col] = v;
    } else if (v != 0.0f) {
      nonzeros->emplace_back(static_cast<std::int32_t>(col), v);
    }
    ++col;
    if (!comma) break;
    p = comma + 1;
  }
  if (col < width) {
    err.record(line_no,
               "expected " + std::to_string(width) + " columns, found " + std::to_string(col));
  }
}

// One row per node; the first line fixes the width. Into d.features (dense) or, with `sparse`,
// d.sparse_features (each chunk's rows parsed in parallel into their non-zeros, then appended).
void read_features(const fs::path& file, node_id n, bool sparse, dataset& d) {
  first_error err;
  std::int64_t rows = 0;
  std::int64_t width = -1;
  std::vector<std::int32_t> counts, columns;
  std::vector<float> values;
  std::vector<std::vector<std::pair<std::int32_t, float>>> chunk_nonzeros;
  read_lines_chunked(file, [&](std::span<const std::string_view> lines, std::int64_t first) {
    if (width < 0) {
      width = static_cast<std::int64_t>(std::count(lines[0].begin(), lines[0].end(), ',')) + 1;
      if (sparse) {
        d.features = Matrix(0, width);
        counts.reserve(static_cast<size_t>(n));
      } else {
        d.features.setZero(n, width);
      }
    }
    const auto count = static_cast<std::int64_t>(lines.size());
    if (sparse) chunk_nonzeros.assign(lines.size(), {});
#pragma omp parallel for schedule(dynamic, 64)
    for (std::int64_t i = 0; i < count; ++i) {
      const std::int64_t row = rows + i;
      if (row >= n) {
        err.record(first + i, "more feature rows than nodes (" + std::to_string(n) + ")");
        continue;
      }
      parse_feature_row(lines[i], first + i, width, sparse ? nullptr : d.features.row(row).data(),
                        sparse ? &chunk_nonzeros[static_cast<size_t>(i)] : nullptr, err);
    }
    for (const auto& row : chunk_nonzeros) {
      counts.push_back(static_cast<std::int32_t>(row.size()));
      for (const auto& [c, v] : row) {
        columns.push_back(c);
        values.push_back(v);
      }
    }
    chunk_nonzeros.clear();
    rows += count;
  });
  err.throw_if_any(file.string());
  if (rows != n) {
    throw data_error::at(
        file.string(), rows + 1,
        "has " + std::to_string(rows) + " rows, expected one per node (" + std::to_string(n) + ")");
  }
  if (!sparse) return;
  if (values.size() > static_cast<size_t>(std::numeric_limits<std::int32_t>::max()))
    throw data_error::at(file.string(), 0, "more than 2^31 non-zero features");
  try {
    d.sparse_features =
        std::make_shared<const sparse_rows>(sparse_from_parts(width, counts, columns, values));
  } catch (const std::invalid_argument& e) {
    throw data_error::at(file.string(), 0, e.what());
  }
}

// No node in two splits (the error names the later split's file).
void check_disjoint_splits(const fs::path& dir, const dataset& d) {
  auto check = [&](const std::vector<node_id>& a, const std::vector<node_id>& b,
                   const char* bname) {
    std::vector<node_id> both;
    std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
    if (!both.empty()) {
      throw data_error::at((dir / "split" / bname).string(), 0,
                           "node " + std::to_string(both.front()) + " is in more than one split");
    }
  };
  check(d.train, d.valid, "valid.csv.gz");
  check(d.train, d.test, "test.csv.gz");
  check(d.valid, d.test, "test.csv.gz");
}

}  // namespace

namespace dataset_detail {

// Optional DIR/dataset.ini: `key = value` lines, '#' or ';' comments, [sections] ignored.
dataset_meta read_meta(const fs::path& dir) {
  dataset_meta meta;
  meta.name = fs::absolute(dir).lexically_normal().filename().string();
  if (meta.name.empty())
    meta.name = fs::absolute(dir).lexically_normal().parent_path().filename().string();
  const fs::path file = dir / "dataset.ini";
  std::ifstream in(file);
  if (!in) return meta;
  std::string line;
  std::int64_t no = 0;
  while (std::getline(in, line)) {
    ++no;
    std::string_view s = trim(line);
    if (s.empty() || s[0] == '#' || s[0] == ';' || s[0] == '[') continue;
    auto eq = s.find('=');
    if (eq == std::string_view::npos)
      throw data_error::at(file.string(), no, "expected key = value");
    auto key = trim(s.substr(0, eq));
    auto value = trim(s.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
      value = value.substr(1, value.size() - 2);
    if (key == "directed") {
      if (value != "true" && value != "false")
        throw data_error::at(file.string(), no, "directed: expected true or false");
      meta.directed = value == "true";
    } else if (key == "name") {
      meta.name = std::string(value);
    }  // other keys describe how the data was made (generator settings); not needed to load it
  }
  return meta;
}

std::vector<node_id> read_split(const fs::path& file, node_id n) {
  std::vector<node_id> ids;
  first_error err;
  read_lines_chunked(file, [&](std::span<const std::string_view> lines, std::int64_t first) {
    const size_t base = ids.size();
    ids.resize(base + lines.size());
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::int64_t line = first + static_cast<std::int64_t>(i);
      std::int64_t v = 0;
      if (auto e = parse_int(lines[i], v, "node id"); !e.empty()) {
        err.record(line, e);
      } else if (v < 0 || v >= n) {
        err.record(line, "unknown node " + std::to_string(v) + " (the graph has nodes 0.." +
                             std::to_string(n - 1) + ")");
      }
      ids[base + i] = static_cast<node_id>(v);
    }
  });
  err.throw_if_any(file.string());
  std::vector<node_id> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  if (auto dup = std::adjacent_find(sorted.begin(), sorted.end()); dup != sorted.end()) {
    const auto at = std::find(ids.begin(), ids.end(), *dup);
    const auto second = std::find(at + 1, ids.end(), *dup);
    throw data_error::at(file.string(), second - ids.begin() + 1,
                         "node " + std::to_string(*dup) + " listed twice");
  }
  return sorted;
}

}  // namespace dataset_detail

using namespace dataset_detail;

dataset load_ogb_csv(const fs::path& dir, bool verbose, bool sparse_features) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!fs::is_directory(dir)) throw data_error::at(dir.string(), 0, "dataset directory not found");
  const dataset_meta meta = read_meta(dir);
  dataset d;
  d.name = meta.name;
  d.directed = meta.directed;

  const std::int64_t n64 = read_single_count(dir / "num-node-list.csv.gz");
  if (n64 > std::numeric_limits<node_id>::max()) {
    throw data_error::at((dir / "num-node-list.csv.gz").string(), 1,
                         "too many nodes for 32-bit ids");
  }
  const auto n = static_cast<node_id>(n64);
  const fs::path edge_count_file = dir / "num-edge-list.csv.gz";
  // -1: no num-edge-list file, so nothing to check the edge count against.
  const std::int64_t declared_edges =
      fs::exists(edge_count_file) ? read_single_count(edge_count_file) : -1;

  d.labels = read_labels(dir / "node-label.csv.gz", n);
  d.num_classes = d.labels.empty() ? 0 : *std::max_element(d.labels.begin(), d.labels.end()) + 1;

  {
    edge_list e = read_edges(dir / "edge.csv.gz", n, declared_edges, edge_count_file);
    d.raw_edges = static_cast<edge_offset>(e.src.size());
    log(verbose, "  edges: %lld lines\n", static_cast<long long>(d.raw_edges));
    d.graph =
        build_in_csr(n, e.src, e.dst,
                     {.symmetrize = !d.directed, .deduplicate = true, .drop_self_loops = false});
  }  // the edge lists go before the features come

  read_features(dir / "node-feat.csv.gz", n, sparse_features, d);
  log(verbose, "  features: %lld x %lld%s\n", static_cast<long long>(n),
      static_cast<long long>(d.features.cols()), sparse_features ? " (compressed rows)" : "");

  d.train = read_split(dir / "split" / "train.csv.gz", n);
  d.valid = read_split(dir / "split" / "valid.csv.gz", n);
  d.test = read_split(dir / "split" / "test.csv.gz", n);
  check_disjoint_splits(dir, d);

  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  log(verbose, "  parsed %s in %.2f s\n", dir.string().c_str(), secs);
  return d;
}

}  // namespace degnn
