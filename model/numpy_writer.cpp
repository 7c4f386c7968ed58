// Writers of the NumPy layout: write_synthetic_arrays streams the synthetic graph a block at a
// time (edges drawn a few chunks ahead in parallel, feature rows in blocks), so memory is the
// planted model's per-node tables and a few blocks, whatever the edge count or feature width;
// write_numpy_dataset writes a dataset in memory (degnn convert).
#include <omp.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "model/array_file.hpp"
#include "model/dataset.hpp"
#include "model/durable_file.hpp"
#include "model/mapped_file.hpp"
#include "model/synthetic_graph.hpp"
#include "model/synthetic_model.hpp"

namespace degnn {

namespace fs = std::filesystem;

namespace {

// A file written in order, every write checked; renamed into place by commit().
class output_file {
 public:
  explicit output_file(fs::path file) : file_(std::move(file)), tmp_(file_.string() + ".partial") {
    f_ = std::fopen(tmp_.c_str(), "w+b");
    if (!f_) fail("cannot create");
  }
  ~output_file() {
    if (f_) std::fclose(f_);
    if (!committed_) {
      std::error_code ec;
      fs::remove(tmp_, ec);
    }
  }
  output_file(const output_file&) = delete;
  output_file& operator=(const output_file&) = delete;

  void write(const void* data, std::size_t bytes) {
    if (bytes && std::fwrite(data, 1, bytes, f_) != bytes) fail("cannot write");
  }
  void write_at(std::int64_t offset, const std::string& bytes) {
    if (std::fseek(f_, offset, SEEK_SET) != 0) fail("cannot seek");
    write(bytes.data(), bytes.size());
    if (std::fseek(f_, 0, SEEK_END) != 0) fail("cannot seek");
  }
  std::FILE* handle() { return f_; }
  // Written whole: closed, then renamed to its name.
  void commit() {
    if (std::fclose(f_) != 0) {
      f_ = nullptr;
      fail("cannot close");
    }
    f_ = nullptr;
    fs::rename(tmp_, file_);
    committed_ = true;
  }

 private:
  [[noreturn]] void fail(const char* what) {
    throw std::runtime_error(std::string(what) + " " + tmp_.string() + ": " + std::strerror(errno));
  }
  fs::path file_, tmp_;
  std::FILE* f_ = nullptr;
  bool committed_ = false;
};

void write_array(const fs::path& file, array_dtype t, std::vector<std::int64_t> shape,
                 const void* data) {
  output_file out(file);
  const array_ref a{"", t, std::move(shape), data};
  const std::string header = npy_header(a);
  out.write(header.data(), header.size());
  out.write(data, array_bytes(a));
  out.commit();
}

// What both writers end with: node_label.npy, split/*.npy, then dataset.ini (last: a folder
// with it holds the whole dataset).
void write_labels_splits_and_ini(const fs::path& dir, const std::vector<std::int32_t>& labels,
                                 const std::vector<node_id>& train,
                                 const std::vector<node_id>& valid,
                                 const std::vector<node_id>& test, const std::string& ini) {
  write_array(dir / "node_label.npy", array_dtype::i32, {static_cast<std::int64_t>(labels.size())},
              labels.data());
  for (const auto& [name, ids] : {std::pair{"train", &train}, {"valid", &valid}, {"test", &test}})
    write_array(dir / "split" / (std::string(name) + ".npy"), array_dtype::i32,
                {static_cast<std::int64_t>(ids->size())}, ids->data());
  write_file_durably(dir / "dataset.ini", ini);
}

// Removes the files of an earlier NumPy dataset in dir, so an interrupted write leaves a folder
// that fails to load (a missing array) rather than one mixing old and new arrays.
void clear_numpy_layout(const fs::path& dir) {
  for (const char* name : {"dataset.ini", "edge_index.npy", "node_feat.npy", "node_label.npy",
                           "split/train.npy", "split/valid.npy", "split/test.npy"})
    fs::remove(dir / name);
}

}  // namespace

synthetic_arrays_summary write_synthetic_arrays(const synthetic_options& o, const fs::path& dir,
                                                const progress_fn& progress) {
  fs::create_directories(dir / "split");
  clear_numpy_layout(dir);
  const synthetic_model model(o);
  const node_id n = o.num_nodes;
  synthetic_arrays_summary summary;

  // Edges, self-loops left out (generate_synthetic's graph drops them; every other draw is
  // kept, and the loader symmetrizes and de-duplicates as generate_synthetic does). Row 0 (the
  // sources) goes straight into the file after a header sized for the largest possible count;
  // row 1 (the destinations) into a second file appended once the count is known.
  {
    output_file edges(dir / "edge_index.npy");
    const std::string reserved = npy_header({"", array_dtype::i32, {2, o.num_edges}, nullptr});
    edges.write(reserved.data(), reserved.size());
    output_file second(dir / "edge_index.dst");
    const edge_offset chunks = model.edge_chunks();
    const int ahead = 2 * std::max(1, omp_get_max_threads());
    std::vector<std::vector<node_id>> src(static_cast<size_t>(ahead)), dst(src.size());
    edge_offset kept = 0;
    for (edge_offset first = 0; first < chunks; first += ahead) {
      const auto count = static_cast<int>(std::min<edge_offset>(ahead, chunks - first));
#pragma omp parallel for schedule(dynamic, 1)
      for (int i = 0; i < count; ++i) {
        model.draw_edges(first + i, src[i], dst[i]);
        std::size_t k = 0;
        for (std::size_t e = 0; e < src[i].size(); ++e) {
          if (src[i][e] == dst[i][e]) continue;
          src[i][k] = src[i][e];
          dst[i][k++] = dst[i][e];
        }
        src[i].resize(k);
        dst[i].resize(k);
      }
      for (int i = 0; i < count; ++i) {
        edges.write(src[i].data(), src[i].size() * sizeof(node_id));
        second.write(dst[i].data(), dst[i].size() * sizeof(node_id));
        kept += static_cast<edge_offset>(src[i].size());
      }
      if (progress) progress("edges", first + count, chunks);
    }
    // Row 1 after row 0, then the header with the count of edges kept.
    std::fflush(second.handle());
    std::rewind(second.handle());
    std::vector<char> buf(std::size_t{16} << 20);
    for (std::size_t got; (got = std::fread(buf.data(), 1, buf.size(), second.handle())) > 0;)
      edges.write(buf.data(), got);
    if (std::ferror(second.handle()))
      throw std::runtime_error("cannot read back " + (dir / "edge_index.dst").string());
    const std::string header = npy_header({"", array_dtype::i32, {2, kept}, nullptr});
    if (header.size() != reserved.size())
      throw std::logic_error("write_synthetic_arrays: edge_index header changed size");
    edges.write_at(0, header);
    edges.commit();
    summary.edges = kept;
  }  // edge_index.dst.partial is removed here

  // Feature rows in blocks drawn in parallel, written in order.
  {
    output_file feats(dir / "node_feat.npy");
    const std::string header = npy_header({"", array_dtype::f32, {n, o.num_features}, nullptr});
    feats.write(header.data(), header.size());
    const node_id rows = std::max<node_id>(1, (4 << 20) / o.num_features);
    Matrix block(rows, o.num_features);
    for (node_id begin = 0; begin < n; begin += rows) {
      const node_id end = std::min(n, begin + rows);
#pragma omp parallel for schedule(static)
      for (node_id v = begin; v < end; ++v)
        model.feature_row(v, block.row(v - begin).data());
      feats.write(block.data(), static_cast<std::size_t>(end - begin) *
                                    static_cast<std::size_t>(o.num_features) * sizeof(float));
      if (progress) progress("features", end, n);
    }
    feats.commit();
  }
  std::vector<node_id> train, valid, test;
  model.draw_splits(train, valid, test);
  std::ostringstream ini;
  ini << "# DEGNN synthetic dataset (NumPy arrays beside it)\nname = synthetic-" << n
      << "\ndirected = false\nnum_classes = " << o.num_classes << "\nseed = " << o.seed
      << "\nedges_drawn = " << o.num_edges << "\nhomophily = " << o.homophily
      << "\ndegree_exponent = " << o.degree_exponent << "\nfeature_signal = " << o.feature_signal
      << "\n";
  write_labels_splits_and_ini(dir, model.labels(), train, valid, test, ini.str());
  return summary;
}

void write_numpy_dataset(const dataset& d, const fs::path& dir) {
  if (d.sparse_features)
    throw std::invalid_argument("write_numpy_dataset: features held as compressed rows");
  const node_id n = d.num_nodes();
  const auto f = static_cast<std::int64_t>(d.num_features());
  fs::create_directories(dir / "split");
  clear_numpy_layout(dir);
  // Each stored edge once: an undirected graph's CSR holds both directions, and the loader
  // symmetrizes again, so src <= dst is the whole of it.
  std::vector<node_id> src, dst;
  for (node_id v = 0; v < n; ++v)
    for (node_id u : d.graph.in_neighbors(v))
      if (d.directed || u <= v) src.push_back(u), dst.push_back(v);
  {
    output_file edges(dir / "edge_index.npy");
    const auto m = static_cast<std::int64_t>(src.size());
    const std::string header = npy_header({"", array_dtype::i32, {2, m}, nullptr});
    edges.write(header.data(), header.size());
    edges.write(src.data(), src.size() * sizeof(node_id));
    edges.write(dst.data(), dst.size() * sizeof(node_id));
    edges.commit();
  }
  src = {};
  dst = {};
  {
    output_file feats(dir / "node_feat.npy");
    const std::string header = npy_header({"", array_dtype::f32, {n, f}, nullptr});
    feats.write(header.data(), header.size());
    if (d.mapped_features) {
      for (node_id v = 0; v < n; ++v)
        feats.write(d.mapped_features->row(v), static_cast<std::size_t>(f) * sizeof(float));
      d.mapped_features->release();
    } else {
      feats.write(d.features.data(), static_cast<std::size_t>(d.features.size()) * sizeof(float));
    }
    feats.commit();
  }
  write_labels_splits_and_ini(
      dir, d.labels, d.train, d.valid, d.test,
      "# converted by degnn convert (NumPy arrays beside it)\nname = " + d.name +
          "\ndirected = " + (d.directed ? "true" : "false") + "\n");
}

}  // namespace degnn
