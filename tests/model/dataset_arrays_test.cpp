// Tests of the array layouts (model/dataset_arrays.cpp, model/array_stream.cpp): the bundled graphs
// written as NumPy files and as OGB's binary layout load to the dataset their CSV files give; the
// streamed synthetic writer gives generate_synthetic's graph; each kind of bad array is a clear
// error naming its file.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "model/array_file.hpp"
#include "model/array_stream.hpp"
#include "model/crc32.hpp"
#include "model/data_error.hpp"
#include "model/dataset.hpp"
#include "model/dataset_arrays.hpp"
#include "model/mapped_file.hpp"
#include "model/partition_book.hpp"
#include "model/partition_store.hpp"
#include "model/partitioner.hpp"
#include "model/sparse_input.hpp"
#include "model/synthetic_graph.hpp"
#include "tests/model/temp_dir.hpp"

using namespace degnn;
namespace fs = std::filesystem;

namespace {

load_options no_cache(bool map_features = false) {
  load_options o;
  o.use_cache = false;
  o.map_features = map_features;
  return o;
}

std::string read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

fs::path bundled(const char* name) {
  return fs::path(DEGNN_SOURCE_DIR) / "data" / name;
}

void write_file(const fs::path& file, const std::string& bytes) {
  std::ofstream out(file, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << file;
}

template <class T>
array_ref ref(const char* name, array_dtype t, std::vector<std::int64_t> shape,
              const std::vector<T>& v) {
  return {name, t, std::move(shape), v.data()};
}

// The undirected edges of a symmetrized dataset once each (u < v), as OGB's edge_index (2, E).
std::vector<std::int64_t> edge_index_of(const dataset& d) {
  std::vector<std::int64_t> src, dst;
  for (node_id v = 0; v < d.num_nodes(); ++v)
    for (node_id u : d.graph.in_neighbors(v))
      if (u < v) src.push_back(u), dst.push_back(v);
  src.insert(src.end(), dst.begin(), dst.end());
  return src;
}

// A zip of .npy entries, each deflated (as numpy.savez_compressed writes them; OGB's data.npz).
std::string deflated_npz(const std::vector<array_ref>& arrays) {
  std::string out, central;
  auto put16 = [](std::string& s, std::uint16_t v) { s.append(reinterpret_cast<char*>(&v), 2); };
  auto put32 = [](std::string& s, std::uint32_t v) { s.append(reinterpret_cast<char*>(&v), 4); };
  for (const array_ref& a : arrays) {
    const std::string data = encode_npy(a), name = a.name + ".npy";
    std::string packed(compressBound(static_cast<uLong>(data.size())) + 64, '\0');
    z_stream z{};
    deflateInit2(&z, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    z.avail_in = static_cast<uInt>(data.size());
    z.next_out = reinterpret_cast<Bytef*>(packed.data());
    z.avail_out = static_cast<uInt>(packed.size());
    EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
    packed.resize(z.total_out);
    deflateEnd(&z);
    const std::uint32_t crc = crc32_update(0, data.data(), data.size());
    const auto offset = static_cast<std::uint32_t>(out.size());
    auto common = [&](std::string& h) {
      put16(h, 20), put16(h, 0), put16(h, 8), put16(h, 0), put16(h, 0);
      put32(h, crc), put32(h, static_cast<std::uint32_t>(packed.size()));
      put32(h, static_cast<std::uint32_t>(data.size()));
      put16(h, static_cast<std::uint16_t>(name.size())), put16(h, 0);
    };
    put32(out, 0x04034b50), common(out), out += name, out += packed;
    put32(central, 0x02014b50), put16(central, 20), common(central);
    put16(central, 0), put16(central, 0), put16(central, 0), put32(central, 0);
    put32(central, offset), central += name;
  }
  const auto at = static_cast<std::uint32_t>(out.size());
  out += central;
  put32(out, 0x06054b50), put16(out, 0), put16(out, 0);
  put16(out, static_cast<std::uint16_t>(arrays.size())),
      put16(out, static_cast<std::uint16_t>(arrays.size()));
  put32(out, static_cast<std::uint32_t>(central.size())), put32(out, at), put16(out, 0);
  return out;
}

void expect_same(const dataset& a, const dataset& b) {
  EXPECT_EQ(a.graph.indptr, b.graph.indptr);
  EXPECT_EQ(a.graph.indices, b.graph.indices);
  ASSERT_EQ(a.features.rows(), b.features.rows());
  ASSERT_EQ(a.features.cols(), b.features.cols());
  EXPECT_TRUE(a.features == b.features);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.num_classes, b.num_classes);
  EXPECT_EQ(a.train, b.train);
  EXPECT_EQ(a.valid, b.valid);
  EXPECT_EQ(a.test, b.test);
}

std::vector<std::int64_t> widen(const std::vector<node_id>& v) {
  return {v.begin(), v.end()};
}

// d as NumPy files in dir: edge_index int64 (2, E), node_feat float32, node_label int64 (N, 1),
// split/*.npy int64.
void write_numpy_layout(const dataset& d, const fs::path& dir) {
  fs::create_directories(dir / "split");
  const auto edges = edge_index_of(d);
  const std::int64_t n = d.num_nodes();
  write_file(dir / "edge_index.npy",
             encode_npy(ref("", array_dtype::i64, {2, static_cast<std::int64_t>(edges.size() / 2)},
                            edges)));
  write_file(dir / "node_feat.npy",
             encode_npy({"", array_dtype::f32, {n, d.features.cols()}, d.features.data()}));
  const auto labels = widen(std::vector<node_id>(d.labels.begin(), d.labels.end()));
  write_file(dir / "node_label.npy", encode_npy(ref("", array_dtype::i64, {n, 1}, labels)));
  for (const auto& [name, ids] :
       {std::pair{"train", &d.train}, {"valid", &d.valid}, {"test", &d.test}}) {
    const auto wide = widen(*ids);
    write_file(
        dir / "split" / (std::string(name) + ".npy"),
        encode_npy(ref("", array_dtype::i64, {static_cast<std::int64_t>(wide.size())}, wide)));
  }
}

std::string load_error(const fs::path& dir) {
  try {
    load_dataset(dir, no_cache());
  } catch (const data_error& e) {
    return e.what();
  }
  ADD_FAILURE() << "loading " << dir << " succeeded";
  return {};
}

}  // namespace

TEST(ArrayLayouts, NumpyFilesLoadAsTheCsvLayoutOnTheBundledGraphs) {
  for (const char* name : {"cora", "citeseer", "pubmed"}) {
    SCOPED_TRACE(name);
    degnn::testing::temp_dir t("degnn_arrays_");
    const dataset csv = load_ogb_csv(bundled(name));
    write_numpy_layout(csv, t.path / name);
    EXPECT_EQ(detect_layout(t.path / name), dataset_layout::numpy_arrays);
    const dataset arrays = load_dataset(t.path / name, no_cache());
    expect_same(arrays, csv);
    EXPECT_EQ(arrays.raw_edges, csv.raw_edges);
    EXPECT_EQ(arrays.name, name);
  }
}

TEST(ArrayLayouts, SparseFeaturesFromArraysEqualTheDenseRows) {
  degnn::testing::temp_dir t("degnn_arrays_");
  const dataset csv = load_ogb_csv(bundled("cora"));
  write_numpy_layout(csv, t.path / "cora");
  const dataset sparse = load_array_dataset(t.path / "cora", false, true);
  ASSERT_NE(sparse.sparse_features, nullptr);
  EXPECT_EQ(sparse.features.rows(), 0);
  EXPECT_TRUE(to_dense(*sparse.sparse_features) == csv.features);
}

// OGB's binary layout as ogbn-papers100M ships it: raw/data.npz deflated with int64 edges and
// (here) float64 features, raw/node-label.npz with float64 labels that are NaN for nodes in no
// split, the split in split/<name>/ as CSV.
TEST(ArrayLayouts, OgbBinaryLayoutWithDeflatedEntriesConvertsDtypesAndReadsNanLabels) {
  degnn::testing::temp_dir t("degnn_arrays_");
  const dataset csv = load_ogb_csv(bundled("pubmed"));
  const fs::path dir = t.path / "ogbn_pubmed";
  fs::create_directories(dir / "raw");
  fs::create_directories(dir / "split" / "public");
  const auto edges = edge_index_of(csv);
  const std::int64_t n = csv.num_nodes(), f = csv.features.cols();
  std::vector<double> feat(csv.features.data(), csv.features.data() + csv.features.size());
  const std::vector<std::int64_t> nodes{n}, edge_count{static_cast<std::int64_t>(edges.size() / 2)};
  write_file(dir / "raw" / "data.npz",
             deflated_npz({ref("edge_index", array_dtype::i64, {2, edge_count[0]}, edges),
                           ref("node_feat", array_dtype::f64, {n, f}, feat),
                           ref("num_nodes_list", array_dtype::i64, {1}, nodes),
                           ref("num_edges_list", array_dtype::i64, {1}, edge_count)}));
  std::vector<double> labels(static_cast<std::size_t>(n), std::nan(""));
  for (const auto* split : {&csv.train, &csv.valid, &csv.test})
    for (node_id v : *split)
      labels[static_cast<std::size_t>(v)] = csv.labels[static_cast<std::size_t>(v)];
  write_file(dir / "raw" / "node-label.npz",
             deflated_npz({ref("node_label", array_dtype::f64, {n, 1}, labels)}));
  for (const char* s : {"train", "valid", "test"})
    fs::copy_file(bundled("pubmed") / "split" / (std::string(s) + ".csv.gz"),
                  dir / "split" / "public" / (std::string(s) + ".csv.gz"));

  EXPECT_EQ(detect_layout(dir), dataset_layout::ogb_binary);
  dataset d = load_dataset(dir, no_cache());
  // Nodes without a label read as class 0 (never read: they are in no split).
  dataset want = csv;
  for (std::size_t v = 0; v < labels.size(); ++v)
    if (std::isnan(labels[v])) want.labels[v] = 0;
  expect_same(d, want);
}

TEST(ArrayLayouts, EachBadArrayIsAnErrorNamingItsFile) {
  degnn::testing::temp_dir t("degnn_arrays_");
  const std::vector<std::int64_t> good_edges{0, 1, 2, 1, 2, 3};
  const std::vector<float> feat{1, 0, 0, 1, 0.5f, 0.25f, -1, 2};
  const std::vector<std::int32_t> labels{0, 1, 1, 0};
  auto write_tiny = [&](const fs::path& dir) {
    fs::create_directories(dir / "split");
    write_file(dir / "edge_index.npy", encode_npy(ref("", array_dtype::i64, {2, 3}, good_edges)));
    write_file(dir / "node_feat.npy", encode_npy(ref("", array_dtype::f32, {4, 2}, feat)));
    write_file(dir / "node_label.npy", encode_npy(ref("", array_dtype::i32, {4}, labels)));
    const std::vector<std::int32_t> tr{0, 1}, va{2}, te{3};
    write_file(dir / "split" / "train.npy", encode_npy(ref("", array_dtype::i32, {2}, tr)));
    write_file(dir / "split" / "valid.npy", encode_npy(ref("", array_dtype::i32, {1}, va)));
    write_file(dir / "split" / "test.npy", encode_npy(ref("", array_dtype::i32, {1}, te)));
  };
  int k = 0;
  // Writes the tiny dataset, lets `breaker` damage it, and returns the load error.
  auto error_after = [&](auto breaker) {
    const fs::path dir = t.path / std::to_string(k++);
    write_tiny(dir);
    breaker(dir);
    return load_error(dir);
  };
  auto has = [](const std::string& e, const std::string& part) {
    EXPECT_NE(e.find(part), std::string::npos) << "'" << part << "' not in: " << e;
  };
  {
    SCOPED_TRACE("the tiny dataset itself loads");
    const fs::path dir = t.path / "ok";
    write_tiny(dir);
    const dataset d = load_dataset(dir, no_cache());
    EXPECT_EQ(d.num_nodes(), 4);
    EXPECT_EQ(d.graph.num_edges(), 6);
  }
  std::string e = error_after([&](const fs::path& dir) {
    const std::vector<float> f{0, 1, 2, 1, 2, 3};
    write_file(dir / "edge_index.npy", encode_npy(ref("", array_dtype::f32, {2, 3}, f)));
  });
  has(e, "edge_index.npy"), has(e, "expected integers");
  e = error_after([&](const fs::path& dir) {
    write_file(dir / "edge_index.npy", encode_npy(ref("", array_dtype::i64, {3, 2}, good_edges)));
  });
  has(e, "edge_index.npy"), has(e, "shape (3, 2): expected (2, edges)");
  e = error_after([&](const fs::path& dir) {
    const std::vector<std::int64_t> bad{0, 1, 2, 1, 2, 9};
    write_file(dir / "edge_index.npy", encode_npy(ref("", array_dtype::i64, {2, 3}, bad)));
  });
  has(e, "edge_index[1][2]: node id 9 out of range [0, 4)");
  e = error_after([&](const fs::path& dir) {
    fs::resize_file(dir / "node_feat.npy", fs::file_size(dir / "node_feat.npy") - 3);
  });
  has(e, "node_feat.npy"), has(e, "truncated");
  e = error_after([&](const fs::path& dir) {
    std::vector<float> f = feat;
    f[2] = std::numeric_limits<float>::infinity();
    write_file(dir / "node_feat.npy", encode_npy(ref("", array_dtype::f32, {4, 2}, f)));
  });
  has(e, "node_feat.npy"), has(e, "row 1, column 0: not finite");
  e = error_after([&](const fs::path& dir) {
    write_file(dir / "node_label.npy", encode_npy(ref("", array_dtype::i32, {3}, labels)));
  });
  has(e, "node_label.npy"), has(e, "expected one label per node");
  e = error_after([&](const fs::path& dir) {
    const std::vector<double> y{0, std::nan(""), 1, 0};
    write_file(dir / "node_label.npy", encode_npy(ref("", array_dtype::f64, {4}, y)));
  });
  has(e, "train.npy"), has(e, "node 1 has no label (NaN in");
  e = error_after([&](const fs::path& dir) {
    const std::vector<double> y{0, 1.5, 1, 0};
    write_file(dir / "node_label.npy", encode_npy(ref("", array_dtype::f64, {4}, y)));
  });
  has(e, "node_label.npy"), has(e, "node 1: label 1.5");
  e = error_after([&](const fs::path& dir) {
    const std::vector<std::int32_t> tr{1, 0, 1};
    write_file(dir / "split" / "train.npy", encode_npy(ref("", array_dtype::i32, {3}, tr)));
  });
  has(e, "train.npy"), has(e, "node 1 listed twice");
  e = error_after([&](const fs::path& dir) {
    const std::vector<std::int32_t> te{2};
    write_file(dir / "split" / "test.npy", encode_npy(ref("", array_dtype::i32, {1}, te)));
  });
  has(e, "test.npy"), has(e, "node 2 is in more than one split");
  e = error_after([&](const fs::path& dir) { fs::remove(dir / "split" / "valid.npy"); });
  has(e, "split"), has(e, "no valid.npy or valid.csv.gz");
  e = error_after([&](const fs::path& dir) {
    write_file(dir / "node_feat.npy", "\x93NUMPY\x01\x00\x10\x00{'descr': '<f2'}");
  });
  has(e, "node_feat.npy");

  // OGB's binary layout: an absent entry lists what is there; a damaged deflated byte is caught.
  const fs::path ogb = t.path / "ogb";
  fs::create_directories(ogb / "split");
  write_file(ogb / "data.npz",
             deflated_npz({ref("edge_index", array_dtype::i64, {2, 3}, good_edges)}));
  e = load_error(ogb);
  has(e, "data.npz"), has(e, "has no array 'node_feat' (it holds: edge_index)");
  // Values that barely compress, so the middle of the archive is node_feat's data.
  std::vector<float> many(40000);
  for (std::size_t i = 0; i < many.size(); ++i)
    many[i] = static_cast<float>(i * 2654435761u % 1000003) / 7.0f;
  const std::vector<std::int32_t> tiny_labels(10000, 1);
  write_file(ogb / "node-label.npz",
             deflated_npz({ref("node_label", array_dtype::i32, {10000}, tiny_labels)}));
  const std::vector<std::int64_t> one{10000};
  std::string npz = deflated_npz({ref("edge_index", array_dtype::i64, {2, 3}, good_edges),
                                  ref("node_feat", array_dtype::f32, {10000, 4}, many),
                                  ref("num_nodes_list", array_dtype::i64, {1}, one)});
  npz[npz.size() / 2] ^= 0x5a;
  write_file(ogb / "data.npz", npz);
  e = load_error(ogb);
  has(e, "data.npz (node_feat.npy)");
}

TEST(ArrayStream, ReadsADeflatedEntryAcrossPiecesInAnyStepsAndChecksItsCrc) {
  degnn::testing::temp_dir t("degnn_arrays_");
  std::vector<std::int64_t> v(3'000'001);  // 24 MB: several 4 MiB pieces
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<std::int64_t>(i * 2654435761u % 1000003);
  write_file(t.path / "a.npz", deflated_npz({ref("x", array_dtype::i64, {3'000'001}, v)}));
  auto file = std::make_shared<const mapped_file>(t.path / "a.npz");
  EXPECT_EQ(array_stream::npz_names(*file), std::vector<std::string>{"x"});
  array_stream s = array_stream::of_npz(file, "x");
  EXPECT_EQ(s.elements(), 3'000'001);
  std::vector<std::int64_t> got(v.size());
  std::size_t at = 0;
  for (std::size_t step = 1; at < got.size(); step = step * 3 + 1) {
    const std::size_t n = std::min(step, got.size() - at);
    s.read(got.data() + at, n);
    at += n;
  }
  s.finish();
  EXPECT_EQ(got, v);
  EXPECT_THROW(s.read(got.data(), 1), data_error);

  // The same data as floats (converted), and as a .npy file.
  write_file(t.path / "a.npy", encode_npy(ref("", array_dtype::i64, {3'000'001}, v)));
  array_stream f = array_stream::of_npy(std::make_shared<const mapped_file>(t.path / "a.npy"));
  std::vector<float> floats(v.size());
  f.read(floats.data(), floats.size());
  f.finish();
  for (std::size_t i = 0; i < v.size(); i += 99991)
    EXPECT_EQ(floats[i], static_cast<float>(v[i]));
}

TEST(SyntheticArrays, TheStreamedFilesLoadAsGenerateSyntheticsGraph) {
  degnn::testing::temp_dir t("degnn_arrays_");
  synthetic_options o;
  o.num_nodes = 40'000;
  o.num_edges = 2'500'000;  // three edge chunks
  o.num_features = 12;
  o.num_classes = 5;
  o.seed = 7;
  int calls = 0;
  const auto summary = write_synthetic_arrays(
      o, t.path / "s", [&](const char*, std::int64_t done, std::int64_t total) {
        EXPECT_LE(done, total);
        ++calls;
      });
  EXPECT_GE(calls, 2);
  const dataset want = generate_synthetic(o);
  const dataset got = load_dataset(t.path / "s", no_cache());
  expect_same(got, want);
  EXPECT_EQ(got.raw_edges, summary.edges);
  EXPECT_EQ(got.name, "synthetic-40000");
  for (const auto& e : fs::recursive_directory_iterator(t.path / "s"))
    EXPECT_EQ(e.path().string().find(".partial"), std::string::npos) << e.path();
}

TEST(ArrayLayouts, MappedFeaturesCutTheSamePartsAsLoadedOnes) {
  degnn::testing::temp_dir t("degnn_arrays_");
  const dataset csv = load_ogb_csv(bundled("cora"));
  write_numpy_layout(csv, t.path / "cora");
  const dataset mapped = load_dataset(t.path / "cora", no_cache(true));
  ASSERT_NE(mapped.mapped_features, nullptr);
  EXPECT_EQ(mapped.features.rows(), 0);
  EXPECT_EQ(mapped.num_features(), csv.num_features());
  const partition_book book(partition_graph(csv.graph, csv.train, 3, partition_method::random, 5),
                            3);
  for (int k = 0; k < 3; ++k) {
    const graph_partition a = extract_partition(mapped, book, k);
    const graph_partition b = extract_partition(csv, book, k);
    EXPECT_TRUE(a.features == b.features) << "part " << k;
    EXPECT_EQ(a.src_global, b.src_global);
    EXPECT_EQ(a.labels, b.labels);
  }
  // A non-finite value is still refused when the features stay in their file.
  Matrix f = csv.features;
  f(7, 3) = std::nanf("");
  write_file(t.path / "cora" / "node_feat.npy",
             encode_npy({"", array_dtype::f32, {f.rows(), f.cols()}, f.data()}));
  try {
    load_dataset(t.path / "cora", no_cache(true));
    ADD_FAILURE() << "a NaN feature was accepted";
  } catch (const data_error& e) {
    EXPECT_NE(std::string(e.what()).find("node_feat.npy: row 7, column 3: not finite"),
              std::string::npos)
        << e.what();
  }
}

// What the ranks of degnn partition --method ptscotch use: a dataset written by
// write_numpy_dataset loads back as itself; its outline (everything but the edges) and the in-arcs
// of a part assemble the part file extract_partition's part makes, byte for byte.
TEST(ArrayLayouts, AnOutlineAndAPartsInArcsWriteTheSamePartFileAsExtract) {
  degnn::testing::temp_dir t("degnn_arrays_");
  const dataset csv = load_ogb_csv(bundled("citeseer"));
  write_numpy_dataset(csv, t.path / "npy");
  expect_same(load_dataset(t.path / "npy", no_cache()), csv);

  const dataset outline = load_array_outline(t.path / "npy", {1, 3});
  EXPECT_EQ(outline.num_nodes(), csv.num_nodes());
  EXPECT_EQ(outline.graph.num_edges(), 0);
  EXPECT_EQ(outline.labels, csv.labels);
  EXPECT_EQ(outline.train, csv.train);
  EXPECT_EQ(outline.test, csv.test);
  ASSERT_NE(outline.mapped_features, nullptr);

  const int parts = 3;
  const std::vector<std::int32_t> owner =
      partition_graph(csv.graph, csv.train, parts, partition_method::metis, 2);
  const partition_book book(owner, parts);
  std::vector<std::int32_t> degree(static_cast<std::size_t>(csv.num_nodes()));
  for (node_id v = 0; v < csv.num_nodes(); ++v)
    degree[static_cast<std::size_t>(v)] = static_cast<std::int32_t>(csv.graph.in_degree(v));
  for (int k = 0; k < parts; ++k) {
    std::vector<std::uint64_t> arcs;
    for (node_id v : book.owned(k))
      for (node_id u : csv.graph.in_neighbors(v))
        arcs.push_back(static_cast<std::uint64_t>(v) << 32 | static_cast<std::uint32_t>(u));
    const graph_partition p = assemble_partition(outline, book, k, arcs, degree);
    write_partition_file(t.path / "assembled.bin", p, 42, outline.mapped_features.get());
    write_partition_file(t.path / "extracted.bin", extract_partition(csv, book, k), 42);
    EXPECT_TRUE(read_bytes(t.path / "assembled.bin") == read_bytes(t.path / "extracted.bin"))
        << "part " << k;
    if (k == 0) {
      std::swap(arcs[0], arcs[1]);
      EXPECT_THROW(assemble_partition(outline, book, k, arcs, degree), std::invalid_argument);
      std::vector<std::uint64_t> stray{static_cast<std::uint64_t>(book.owned(1)[0]) << 32};
      EXPECT_THROW(assemble_partition(outline, book, k, stray, degree), std::invalid_argument);
    }
  }

  // A rank's slice of the edge array: skip, then read.
  array_stream all = open_edge_index(t.path / "npy"), slice = open_edge_index(t.path / "npy");
  const std::int64_t m = all.shape()[1];
  std::vector<std::int64_t> whole(static_cast<std::size_t>(2 * m)), part(10);
  all.read(whole.data(), whole.size());
  slice.skip(m + 17);
  slice.read(part.data(), part.size());
  EXPECT_TRUE(std::equal(part.begin(), part.end(), whole.begin() + m + 17));
  EXPECT_THROW(slice.skip(m), data_error);
}
