// degnn partition --method ptscotch under mpirun (issue 30 item 2): R ranks, each reading 1/R of
// the edges, write a partition set whose part files are byte for byte what the single-process
// writer cuts for the same book, balanced as METIS's, with an edge cut near METIS's, and that
// trains to METIS's accuracy band.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "model/array_file.hpp"
#include "model/dataset.hpp"
#include "model/partition_store.hpp"
#include "model/partitioner.hpp"
#include "runtime/partition/ptscotch_partition.hpp"
#include "runtime/train/cluster_trainer.hpp"
#include "runtime/train/training_report.hpp"
#include "tests/integration/node_processes.hpp"

namespace degnn::test {
namespace {

namespace fs = std::filesystem;

fs::path bundled(const std::string& name) {
  return fs::path(DEGNN_SOURCE_DIR) / "data" / name;
}

// mpirun's full path (child_process spawns without a PATH search); empty when there is none.
std::string mpirun_path() {
  std::string path;
  if (FILE* p = ::popen("command -v mpirun 2>/dev/null", "r")) {
    char line[512];
    if (std::fgets(line, sizeof line, p)) path = line;
    ::pclose(p);
  }
  while (!path.empty() && (path.back() == '\n' || path.back() == ' '))
    path.pop_back();
  return path;
}

bool have_mpirun() {
  return !mpirun_path().empty();
}

// mpirun with R ranks of degnn on this machine: as root (CI), more ranks than cores, shared
// memory between the ranks and no network interfaces needed.
std::vector<std::string> mpirun(int ranks, const std::vector<std::string>& args) {
  std::vector<std::string> cmd{mpirun_path(),
                               "--allow-run-as-root",
                               "--oversubscribe",
                               "--mca",
                               "btl",
                               "self,vader",
                               "--mca",
                               "btl_vader_single_copy_mechanism",
                               "none",
                               "-n",
                               std::to_string(ranks),
                               DEGNN_BINARY};
  cmd.insert(cmd.end(), args.begin(), args.end());
  return cmd;
}

std::vector<std::int32_t> owners_of(const fs::path& set) {
  const partition_book book = load_partition_book(set);
  std::vector<std::int32_t> owner(static_cast<std::size_t>(book.num_nodes()));
  for (node_id v = 0; v < book.num_nodes(); ++v)
    owner[static_cast<std::size_t>(v)] = book.owner(v);
  return owner;
}

class PtScotchPartition : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!ptscotch_available() || !have_mpirun())
      GTEST_SKIP() << "this build has no PT-Scotch or no mpirun (scripts/setup.sh installs them)";
  }
  temp_dir dir_{"ptscotch"};

  // The bundled dataset in the NumPy layout (degnn convert), and the dataset as loaded.
  dataset numpy_copy(const std::string& name, const fs::path& out) {
    const command_outcome c = run_command(
        dir_, {DEGNN_BINARY, "convert", "--data", bundled(name).string(), "--out", out.string()},
        "convert-" + name);
    EXPECT_EQ(c.rc, 0) << c.out;
    return load_dataset(bundled(name), {.use_cache = false});
  }

  fs::path ptscotch(const fs::path& data, int ranks, int parts, const std::string& tag) {
    const fs::path out = dir_.path / ("set-" + tag);
    const command_outcome c = run_command(
        dir_,
        mpirun(ranks, {"partition", "--data", data.string(), "--parts", std::to_string(parts),
                       "--method", "ptscotch", "--seed", "1", "--out", out.string()}),
        "ptscotch-" + tag, std::chrono::seconds(240));
    EXPECT_EQ(c.rc, 0) << c.out;
    EXPECT_TRUE(contains(c.out, "with ptscotch on " + std::to_string(ranks) + " ranks")) << c.out;
    EXPECT_TRUE(contains(c.out, "peak RSS  rank 0 ")) << c.out;
    return out;
  }
};

TEST_F(PtScotchPartition, PartFilesAreTheSingleProcessCutOfTheSameBookBalancedWithACutNearMetis) {
  struct run {
    const char* dataset;
    int ranks, parts;
  };
  // Two parts on two ranks, four parts on two ranks (each rank writes two), four on four.
  for (const run r : {run{"cora", 2, 2}, run{"pubmed", 2, 4}, run{"pubmed", 4, 4}}) {
    SCOPED_TRACE(std::string(r.dataset) + " ranks " + std::to_string(r.ranks) + " parts " +
                 std::to_string(r.parts));
    const std::string tag =
        std::string(r.dataset) + "-" + std::to_string(r.ranks) + "x" + std::to_string(r.parts);
    const fs::path npy = dir_.path / ("npy-" + tag);
    const dataset d = numpy_copy(r.dataset, npy);
    const fs::path set = ptscotch(npy, r.ranks, r.parts, tag);
    ASSERT_TRUE(fs::exists(set / "partitions.meta"));
    if (r.ranks == 2 && r.parts == 2) {
      // The same graph, seed and ranks give the same book (Scotch's deterministic option).
      const fs::path again = ptscotch(npy, r.ranks, r.parts, tag + "-again");
      EXPECT_TRUE(read_file(again / "owner.bin") == read_file(set / "owner.bin"));
    }
    const partition_meta meta = load_partition_meta(set);
    EXPECT_EQ(meta.method, "ptscotch");
    EXPECT_EQ(meta.num_nodes, d.num_nodes());
    EXPECT_EQ(meta.num_edges, d.graph.num_edges());

    // The same book cut by the single-process writer from the CSV-loaded dataset: every part
    // file and the book are the same bytes.
    const std::vector<std::int32_t> owner = owners_of(set);
    const fs::path ref = dir_.path / ("ref-" + tag);
    write_partitions(d, owner, ref, "ptscotch", 1, r.parts);
    EXPECT_EQ(read_file(set / "owner.bin"), read_file(ref / "owner.bin"));
    for (int p = 0; p < r.parts; ++p) {
      const std::string got = read_file(partition_file(set, p));
      EXPECT_FALSE(got.empty());
      EXPECT_TRUE(got == read_file(partition_file(ref, p))) << "part " << p << " differs";
      EXPECT_NO_THROW(load_partition(set, p));
    }

    // Balanced as METIS's parts are; an edge cut near METIS's on the same graph.
    const partition_quality q = evaluate_partition(d.graph, d.train, owner, r.parts);
    const partition_quality metis = evaluate_partition(
        d.graph, d.train, partition_graph(d.graph, d.train, r.parts, partition_method::metis, 1),
        r.parts);
    const std::int64_t node_limit = partition_balance_limit(d.num_nodes(), r.parts);
    const std::int64_t train_limit =
        partition_balance_limit(static_cast<std::int64_t>(d.train.size()), r.parts);
    for (int p = 0; p < r.parts; ++p) {
      EXPECT_LE(q.nodes[static_cast<std::size_t>(p)], node_limit) << "part " << p;
      EXPECT_LE(q.train_nodes[static_cast<std::size_t>(p)], train_limit) << "part " << p;
      EXPECT_GT(q.nodes[static_cast<std::size_t>(p)], 0) << "part " << p;
    }
    std::printf("%s: ptscotch cut %.2f%% (%lld), metis %.2f%% (%lld), ratio %.3f\n", tag.c_str(),
                100 * q.cut_fraction, static_cast<long long>(q.cut_edges), 100 * metis.cut_fraction,
                static_cast<long long>(metis.cut_edges),
                static_cast<double>(q.cut_edges) / static_cast<double>(metis.cut_edges));
    // Measured: Cora 0.90x, Pubmed 1.40x (2 ranks) and 1.28x (4 ranks) of METIS's cut; the
    // issue's 1.25x is for synthetic-1M (docs/results.md section 7). A guard, not the target.
    EXPECT_LE(static_cast<double>(q.cut_edges), 1.5 * static_cast<double>(metis.cut_edges));
  }
}

// The ranks build each part's in-edges from the raw edge array: a directed graph keeps only
// dst <- src, an undirected one both; self loops stay once, repeats go, as load_dataset's CSR.
TEST_F(PtScotchPartition, DirectedGraphsSelfLoopsAndRepeatedEdgesAreCutAsTheLoaderBuildsThem) {
  const std::int64_t n = 40;
  std::vector<std::int64_t> src, dst;
  for (std::int64_t v = 0; v < n; ++v) {
    src.push_back(v), dst.push_back((v + 1) % n);                   // a ring
    if (v % 5 == 0) src.push_back(v), dst.push_back(v);             // self loops
    if (v % 7 == 0) src.push_back(v), dst.push_back((v + 1) % n);   // repeats
    if (v % 3 == 0) src.push_back((v * 11) % n), dst.push_back(v);  // chords
  }
  std::vector<std::int64_t> edges = src;
  edges.insert(edges.end(), dst.begin(), dst.end());
  std::vector<float> feat(static_cast<std::size_t>(n) * 3);
  for (std::size_t i = 0; i < feat.size(); ++i)
    feat[i] = static_cast<float>(i % 13) * 0.25f;
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n)), train, valid, test;
  for (std::int32_t v = 0; v < n; ++v) {
    labels[static_cast<std::size_t>(v)] = v % 2;
    (v < 20 ? train : v < 30 ? valid : test).push_back(v);
  }
  auto write = [](const fs::path& file, const array_ref& a) {
    std::ofstream(file, std::ios::binary) << encode_npy(a);
  };
  for (const bool directed : {true, false}) {
    SCOPED_TRACE(directed ? "directed" : "undirected");
    const std::string tag = directed ? "directed" : "undirected";
    const fs::path npy = dir_.path / ("npy-" + tag);
    fs::create_directories(npy / "split");
    write(npy / "edge_index.npy",
          {"", array_dtype::i64, {2, static_cast<std::int64_t>(src.size())}, edges.data()});
    write(npy / "node_feat.npy", {"", array_dtype::f32, {n, 3}, feat.data()});
    write(npy / "node_label.npy", {"", array_dtype::i32, {n}, labels.data()});
    for (const auto& [name, ids] : {std::pair{"train", &train}, {"valid", &valid}, {"test", &test}})
      write(npy / "split" / (std::string(name) + ".npy"),
            {"", array_dtype::i32, {static_cast<std::int64_t>(ids->size())}, ids->data()});
    std::ofstream(npy / "dataset.ini")
        << "name = tiny\ndirected = " << (directed ? "true" : "false") << "\n";
    const dataset d = load_dataset(npy, {.use_cache = false});
    ASSERT_EQ(d.directed, directed);
    const fs::path set = ptscotch(npy, 2, 2, tag);
    const std::vector<std::int32_t> owner = owners_of(set);
    const fs::path ref = dir_.path / ("ref-" + tag);
    write_partitions(d, owner, ref, "ptscotch", 1, 2);
    EXPECT_EQ(load_partition_meta(set).num_edges, d.graph.num_edges());
    for (int p = 0; p < 2; ++p)
      EXPECT_TRUE(read_file(partition_file(set, p)) == read_file(partition_file(ref, p)))
          << "part " << p << " differs";
  }
}

TEST_F(PtScotchPartition, TrainsToMetisAccuracyBandOnCoraAndPubmed) {
  for (const char* name : {"cora", "pubmed"}) {
    SCOPED_TRACE(name);
    const fs::path npy = dir_.path / (std::string("npy-") + name);
    const dataset d = numpy_copy(name, npy);
    const fs::path scotch = ptscotch(npy, 2, 2, name);
    const fs::path metis = dir_.path / (std::string("metis-") + name);
    write_partitions(d, partition_graph(d.graph, d.train, 2, partition_method::metis, 1), metis,
                     "metis", 1, 2);
    auto accuracy = [&](const fs::path& parts) {
      train_settings s;
      s.data = bundled(name).string();
      s.partitions = parts.string();
      s.pipeline = "centralized";
      s.epochs = 6;
      s.batch_size = 32;
      s.fanouts = {10, 10};
      s.model.hidden = 32;
      s.model.lr = 0.01f;
      s.model.dropout = 0.5f;
      s.seed = s.model.seed = 3;
      s.eval_every = 1;
      s.progress = false;
      s.timeout_s = 60;
      training_report quiet(s.pipeline, "", false);
      train_cluster(s, d, quiet);
      return quiet.test_at_best();
    };
    const double with_scotch = accuracy(scotch), with_metis = accuracy(metis);
    std::printf("%s: test accuracy %.4f on ptscotch parts, %.4f on metis parts\n", name,
                with_scotch, with_metis);
    // The two books give different batches; the band is what seeds move a run by on these graphs.
    EXPECT_NEAR(with_scotch, with_metis, 0.03);
    EXPECT_GT(with_scotch, 0.70);
  }
}

TEST_F(PtScotchPartition, ABadEdgeIdOrALayoutItCannotMapIsAClearErrorAndNoRankIsLeftWaiting) {
  const fs::path npy = dir_.path / "npy-cora";
  numpy_copy("cora", npy);
  // An id out of range in the second rank's share of the edges.
  {
    std::fstream f(npy / "edge_index.npy", std::ios::in | std::ios::out | std::ios::binary);
    const auto size = static_cast<std::streamoff>(fs::file_size(npy / "edge_index.npy"));
    const std::int32_t bad = 99'999'999;
    f.seekp(size - 4);
    f.write(reinterpret_cast<const char*>(&bad), sizeof bad);
  }
  const auto t0 = std::chrono::steady_clock::now();
  command_outcome c =
      run_command(dir_,
                  mpirun(2, {"partition", "--data", npy.string(), "--parts", "2", "--method",
                             "ptscotch", "--out", (dir_.path / "bad").string()}),
                  "bad-id", std::chrono::seconds(120));
  EXPECT_NE(c.rc, 0);
  EXPECT_TRUE(contains(c.out, "edge_index.npy")) << c.out;
  EXPECT_TRUE(contains(c.out, "node id 99999999 out of range")) << c.out;
  EXPECT_LT(seconds_since(t0), 60.0);
  EXPECT_FALSE(fs::exists(dir_.path / "bad" / "partitions.meta"));

  // The CSV layout: said, with what to do.
  c = run_command(dir_,
                  mpirun(1, {"partition", "--data", bundled("cora").string(), "--parts", "2",
                             "--method", "ptscotch", "--out", (dir_.path / "csv").string()}),
                  "csv", std::chrono::seconds(120));
  EXPECT_NE(c.rc, 0);
  EXPECT_TRUE(contains(c.out, "expected the NumPy layout")) << c.out;
}

}  // namespace
}  // namespace degnn::test
