// Using a trained model: `degnn infer` writes predictions whose accuracy is the one training
// reported, `degnn export` and `train --save-model` write files that plain PyTorch rebuilds to the
// same logits (scripts/pytorch_model.py, skipped without python3-torch), and `train --init` starts
// from them. Bad inputs give one error and leave no output file.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <regex>

#include "model/array_file.hpp"
#include "model/dataset.hpp"
#include "model/inference.hpp"
#include "tests/integration/node_processes.hpp"

using namespace degnn::test;
using namespace std::chrono_literals;

namespace {

command_outcome run(const temp_dir& dir, const std::vector<std::string>& args,
                    const std::string& log = "run") {
  return run_command(dir, args, log, std::chrono::seconds(240));
}

command_outcome run_degnn(const temp_dir& dir, std::vector<std::string> args) {
  args.insert(args.begin(), DEGNN_BINARY);
  return run(dir, std::move(args));
}

std::string data(const char* name) {
  return (fs::path(DEGNN_SOURCE_DIR) / "data" / name).string();
}

degnn::stored_array npy(const fs::path& file) {
  return degnn::decode_npy(read_file(file), file.string());
}

template <class T>
std::vector<T> values(const degnn::stored_array& a) {
  std::vector<T> v(static_cast<std::size_t>(a.elements()));
  std::memcpy(v.data(), a.bytes.data(), a.bytes.size());
  return v;
}

double reported_test_accuracy(const std::string& out) {
  static const std::regex line(R"(test accuracy ([0-9.]+) at best validation epoch)");
  std::smatch m;
  return std::regex_search(out, m, line) ? std::stod(m[1]) : -1;
}

// A python3 that imports torch and numpy (Debian's is /usr/bin/python3), or "".
std::string python_with_torch(const temp_dir& dir) {
  for (std::string py : {"/usr/bin/python3", "python3"})
    if (run(dir, {py, "-c", "import numpy, torch"}, "probe").rc == 0) return py;
  return "";
}

std::vector<std::string> cora_run(const std::string& model, int layers) {
  std::vector<std::string> a = {DEGNN_BINARY,   "train", "--data",   data("cora"),
                                "--model",      model,   "--layers", std::to_string(layers),
                                "--hidden",     "32",    "--epochs", "8",
                                "--batch-size", "32",    "--seed",   "3",
                                "--no-progress"};
  a.push_back("--fanouts");
  a.push_back(layers == 2 ? "10,10" : "5,5,5");
  return a;
}

}  // namespace

// GAT from its config on Cora: the accuracy band the model reaches (81.7 to 83.6 over seeds 1..5
// at these settings; docs/results.md section 2), and its best-validation checkpoint, inferred,
// predicts the test accuracy training reported.
TEST(GatModel, TrainsCoraIntoItsBandAndItsCheckpointPredictsWhatTrainingReported) {
  temp_dir dir("gat-cora");
  const fs::path ck = dir.path / "best.ckpt", out = dir.path / "out";
  const auto trained =
      run_degnn(dir, {"train", "--config-file",
                      (fs::path(DEGNN_SOURCE_DIR) / "configs" / "cora_gat.conf").string(), "--data",
                      data("cora"), "--checkpoint", ck.string(), "--no-progress"});
  ASSERT_EQ(trained.rc, 0) << trained.out;
  const double reported = reported_test_accuracy(trained.out);
  EXPECT_GE(reported, 0.79) << trained.out;
  const auto inferred = run_degnn(
      dir, {"infer", "--data", data("cora"), "--checkpoint", ck.string(), "--out", out.string()});
  ASSERT_EQ(inferred.rc, 0) << inferred.out;
  EXPECT_NE(inferred.out.find("gat, 2 layers"), std::string::npos) << inferred.out;
  const degnn::dataset d = degnn::load_dataset(data("cora"));
  const auto predicted = values<std::int32_t>(npy(out / "predictions.npy"));
  int correct = 0;
  for (auto v : d.test)
    correct += predicted[v] == d.labels[v];
  EXPECT_NEAR(static_cast<double>(correct) / static_cast<double>(d.test.size()), reported, 5e-5);
}

class InferOn : public ::testing::TestWithParam<const char*> {};

// The predictions of the best-validation checkpoint give, counted here from the written arrays,
// the test accuracy training reported; probabilities are the logits' softmax; the manifest says
// what was written.
TEST_P(InferOn, PredictionsGiveTheAccuracyTrainingReported) {
  temp_dir dir(std::string("infer-") + GetParam());
  const fs::path ck = dir.path / "best.ckpt", out = dir.path / "out";
  auto args = std::vector<std::string>{
      "train",
      "--config-file",
      (fs::path(DEGNN_SOURCE_DIR) / "configs" / (std::string(GetParam()) + "_sage.conf")).string(),
      "--data",
      data(GetParam()),
      "--epochs",
      "6",
      "--checkpoint",
      ck.string(),
      "--no-progress"};
  const auto trained = run_degnn(dir, args);
  ASSERT_EQ(trained.rc, 0) << trained.out;
  const double reported = reported_test_accuracy(trained.out);
  ASSERT_GT(reported, 0) << trained.out;
  const auto inferred = run_degnn(dir, {"infer", "--data", data(GetParam()), "--checkpoint",
                                        ck.string(), "--out", out.string(), "--embeddings", "1"});
  ASSERT_EQ(inferred.rc, 0) << inferred.out;

  const degnn::dataset d = degnn::load_dataset(data(GetParam()));
  const auto ids = values<std::int64_t>(npy(out / "node_ids.npy"));
  const auto predicted = values<std::int32_t>(npy(out / "predictions.npy"));
  const auto probs = npy(out / "probabilities.npy");
  const auto logits = npy(out / "logits.npy");
  const auto emb = npy(out / "embeddings.npy");
  const auto n = static_cast<std::int64_t>(d.num_nodes());
  ASSERT_EQ(ids.size(), static_cast<std::size_t>(n));
  for (std::int64_t v = 0; v < n; ++v)
    ASSERT_EQ(ids[v], v);
  EXPECT_EQ(probs.shape, (std::vector<std::int64_t>{n, d.num_classes}));
  EXPECT_EQ(emb.shape, (std::vector<std::int64_t>{n, 256}));
  int correct = 0;
  for (auto v : d.test)
    correct += predicted[v] == d.labels[v];
  const double counted = static_cast<double>(correct) / static_cast<double>(d.test.size());
  EXPECT_NEAR(counted, reported, 5e-5) << "the printed figure has 4 decimals";
  const auto p = values<float>(probs);
  const auto z = values<float>(logits);
  const int c = d.num_classes;
  for (std::int64_t v = 0; v < n; ++v) {
    double sum = 0, top = -1e30, denom = 0;
    int best = 0;
    for (int k = 0; k < c; ++k) {
      sum += p[v * c + k];
      if (z[v * c + k] > top) top = z[v * c + k], best = k;
    }
    for (int k = 0; k < c; ++k)
      denom += std::exp(static_cast<double>(z[v * c + k]) - top);
    ASSERT_NEAR(sum, 1.0, 1e-5) << "node " << v;
    ASSERT_NEAR(p[v * c + best], 1.0 / denom, 1e-5) << "node " << v;
    ASSERT_EQ(predicted[v], best) << "node " << v;
  }
  const auto manifest = nlohmann::json::parse(read_file(out / "manifest.json"));
  EXPECT_EQ(manifest["nodes"], n);
  EXPECT_EQ(manifest["embeddings_layer"], 1);
  EXPECT_EQ(manifest["arrays"]["probabilities"]["dtype"], "float32");
  EXPECT_NE(manifest["step"], "0");
  // Nothing else is left in the folder (no staging files).
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(out))
    ++files;
  EXPECT_EQ(files, 6);
}

INSTANTIATE_TEST_SUITE_P(ModelUse, InferOn, ::testing::Values("cora", "pubmed"));

// The same model's predictions from one process, 4 in-process shards and 3 node processes (each
// shard writing its partition's part-K): the same class for every node, probabilities within
// 1e-5. Node processes also train with --save-model (node 0 writes it).
TEST(ModelUse, OneProcessFourShardsAndThreeNodeProcessesWriteTheSamePredictions) {
  temp_dir dir("infer-everywhere");
  const fs::path model = dir.path / "m.safetensors";
  auto args = cora_run("sage", 2);
  args.insert(args.end(), {"--save-model", model.string()});
  ASSERT_EQ(run(dir, args).rc, 0);
  for (const char* parts : {"3", "4"})
    ASSERT_EQ(run_degnn(dir, {"partition", "--data", data("cora"), "--parts", parts, "--out",
                              (dir.path / (std::string("cora-") + parts)).string()})
                  .rc,
              0);
  const auto one = run_degnn(dir, {"infer", "--data", data("cora"), "--model", model.string(),
                                   "--out", (dir.path / "one").string(), "--embeddings", "1"});
  ASSERT_EQ(one.rc, 0) << one.out;
  const auto shards = run_degnn(
      dir, {"infer", "--partitions", (dir.path / "cora-4").string(), "--model", model.string(),
            "--out", (dir.path / "shards").string(), "--embeddings", "1"});
  ASSERT_EQ(shards.rc, 0) << shards.out;
  const auto nodes = run_degnn(
      dir, {"launch", "--local", "3", "--partitions", (dir.path / "cora-3").string(), "--init",
            model.string(), "--infer", "--predictions", (dir.path / "nodes").string(),
            "--embeddings", "1", "--layers", "2", "--hidden", "32", "--fanouts", "10,10"});
  ASSERT_EQ(nodes.rc, 0) << nodes.out;
  const auto reference = values<float>(npy(dir.path / "one" / "probabilities.npy"));
  const auto reference_emb = values<float>(npy(dir.path / "one" / "embeddings.npy"));
  const auto classes = values<std::int32_t>(npy(dir.path / "one" / "predictions.npy"));
  for (const auto& [folder, parts] : {std::pair{"shards", 4}, std::pair{"nodes", 3}}) {
    std::vector<bool> seen(classes.size(), false);
    for (int k = 0; k < parts; ++k) {
      const fs::path part = dir.path / folder / ("part-" + std::to_string(k));
      const auto ids = values<std::int64_t>(npy(part / "node_ids.npy"));
      const auto p = values<float>(npy(part / "probabilities.npy"));
      const auto e = values<float>(npy(part / "embeddings.npy"));
      const auto c = values<std::int32_t>(npy(part / "predictions.npy"));
      ASSERT_EQ(p.size(), ids.size() * 7) << part;
      ASSERT_EQ(e.size(), ids.size() * 32) << part;
      for (std::size_t i = 0; i < ids.size(); ++i) {
        const auto v = static_cast<std::size_t>(ids[i]);
        ASSERT_FALSE(seen[v]) << "node " << v << " written twice";
        seen[v] = true;
        ASSERT_EQ(c[i], classes[v]) << folder << " node " << v;
        for (int k2 = 0; k2 < 7; ++k2)
          ASSERT_NEAR(p[i * 7 + k2], reference[v * 7 + k2], 1e-5) << folder << " node " << v;
        for (int k2 = 0; k2 < 32; ++k2)
          ASSERT_NEAR(e[i * 32 + k2], reference_emb[v * 32 + k2], 1e-4) << folder << " node " << v;
      }
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), true), 2708) << folder;
  }
  // Node processes train and node 0 writes the final model.
  const fs::path trained = dir.path / "nodes.safetensors";
  const auto train =
      run_degnn(dir, {"launch", "--local", "3", "--partitions", (dir.path / "cora-3").string(),
                      "--epochs", "2", "--layers", "2", "--hidden", "32", "--fanouts", "10,10",
                      "--save-model", trained.string()});
  ASSERT_EQ(train.rc, 0) << train.out;
  EXPECT_TRUE(contains(train.out, "saved the final model to")) << train.out;
  EXPECT_EQ(run_degnn(dir, {"infer", "--data", data("cora"), "--model", trained.string(), "--out",
                            (dir.path / "after").string()})
                .rc,
            0);
}

// export, then infer from the file: the same logits, byte for byte, as from the checkpoint; a
// node list selects rows.
TEST(ModelUse, AnExportedModelInfersAsItsCheckpoint) {
  temp_dir dir("export");
  const fs::path ck = dir.path / "m.ckpt", file = dir.path / "m.npz";
  auto args = cora_run("gcn", 2);
  args.insert(args.end(), {"--checkpoint", ck.string()});
  ASSERT_EQ(run(dir, args).rc, 0);
  const auto ex = run_degnn(dir, {"export", "--checkpoint", ck.string(), "--out", file.string()});
  ASSERT_EQ(ex.rc, 0) << ex.out;
  EXPECT_TRUE(contains(ex.out, "(npz, gcn, 2 layers, 1433 -> 32 -> 7")) << ex.out;
  std::ofstream(dir.path / "nodes.txt") << "# three nodes\n5\n0\n\n2707\n";
  ASSERT_EQ(run_degnn(dir, {"infer", "--data", data("cora"), "--checkpoint", ck.string(), "--out",
                            (dir.path / "a").string()})
                .rc,
            0);
  const auto b =
      run_degnn(dir, {"infer", "--data", data("cora"), "--model", file.string(), "--out",
                      (dir.path / "b").string(), "--nodes", (dir.path / "nodes.txt").string()});
  ASSERT_EQ(b.rc, 0) << b.out;
  const auto all = values<float>(npy(dir.path / "a" / "logits.npy"));
  const auto some = values<float>(npy(dir.path / "b" / "logits.npy"));
  EXPECT_EQ(values<std::int64_t>(npy(dir.path / "b" / "node_ids.npy")),
            (std::vector<std::int64_t>{5, 0, 2707}));
  ASSERT_EQ(some.size(), 21u);
  const std::int64_t rows[] = {5, 0, 2707};
  for (int i = 0; i < 3; ++i)
    for (int k = 0; k < 7; ++k)
      EXPECT_EQ(some[i * 7 + k], all[rows[i] * 7 + k]);
}

// A damaged checkpoint, a model of another dataset, an output folder that cannot be made and a
// bad node list: one error line naming the cause, exit code 1, and no output file.
TEST(ModelUse, BadInputsGiveOneErrorAndNoOutput) {
  temp_dir dir("infer-bad");
  const fs::path ck = dir.path / "m.ckpt", out = dir.path / "out";
  auto args = cora_run("sage", 2);
  args.insert(args.end(), {"--checkpoint", ck.string()});
  ASSERT_EQ(run(dir, args).rc, 0);
  fs::copy_file(ck, dir.path / "damaged.ckpt");
  flip_a_byte(dir.path / "damaged.ckpt");
  std::ofstream(dir.path / "a-file") << "x";
  std::ofstream(dir.path / "nodes.txt") << "1\n99999\n";
  struct bad_case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<bad_case> cases = {
      {{"--data", data("cora"), "--checkpoint", (dir.path / "damaged.ckpt").string(), "--out",
        out.string()},
       "damaged.ckpt"},
      {{"--data", data("citeseer"), "--checkpoint", ck.string(), "--out", out.string()},
       "does not fit"},
      {{"--data", data("cora"), "--checkpoint", ck.string(), "--out",
        (dir.path / "a-file" / "out").string()},
       "cannot create the output folder"},
      {{"--data", data("cora"), "--checkpoint", ck.string(), "--out", out.string(), "--nodes",
        (dir.path / "nodes.txt").string()},
       "nodes.txt:2: node 99999 is not in [0, 2708)"},
      {{"--data", data("cora"), "--checkpoint", ck.string(), "--model", ck.string(), "--out",
        out.string()},
       "give one of --model FILE and --checkpoint FILE"},
      {{"--data", data("cora"), "--checkpoint", ck.string(), "--out", out.string(), "--embeddings",
        "2"},
       "--embeddings"},
  };
  for (const auto& c : cases) {
    auto a = c.args;
    a.insert(a.begin(), "infer");
    const auto r = run_degnn(dir, a);
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_TRUE(contains(r.out, c.message)) << "want '" << c.message << "' in: " << r.out;
    EXPECT_FALSE(fs::exists(out) && !fs::is_empty(out)) << "files left by: " << r.out;
  }
  const auto node = run_degnn(dir, {"node", "--partitions", dir.path.string(), "--infer"});
  EXPECT_TRUE(contains(node.out, "--infer needs --init MODEL and --predictions DIR")) << node.out;
  const auto no_model = run_degnn(dir, {"infer", "--partitions", dir.path.string(), "--checkpoint",
                                        ck.string(), "--out", out.string()});
  EXPECT_TRUE(contains(no_model.out, "--partitions needs --model FILE")) << no_model.out;
}

// scripts/pytorch_model.py rebuilds SAGE and GCN at 2 and 3 layers from the exported file and
// gets degnn infer's logits within 1e-4; the state dict it writes back starts a run with the same
// first loss as the exported file does, and a different one from a fresh start.
TEST(ModelUse, PyTorchRebuildsTheModelAndItsFileStartsARun) {
  temp_dir dir("pytorch");
  const std::string py = python_with_torch(dir);
  if (py.empty()) GTEST_SKIP() << "python3-torch and python3-numpy are not installed";
  const std::string script = (fs::path(DEGNN_SOURCE_DIR) / "scripts/pytorch_model.py").string();
  for (const char* model : {"sage", "gcn", "gat"})
    for (int layers : {2, 3}) {
      const std::string tag = std::string(model) + std::to_string(layers);
      const fs::path file = dir.path / (tag + ".safetensors"), out = dir.path / tag;
      auto args = cora_run(model, layers);
      // GAT: 8 heads of 4, two averaged output heads (their biases kept per head in the file).
      if (std::string(model) == "gat") args.insert(args.end(), {"--output-heads", "2"});
      args.insert(args.end(), {"--save-model", file.string()});
      const auto trained = run(dir, args);
      ASSERT_EQ(trained.rc, 0) << trained.out;
      ASSERT_EQ(run_degnn(dir, {"infer", "--data", data("cora"), "--model", file.string(), "--out",
                                out.string()})
                    .rc,
                0);
      const auto torch_run = run(
          dir,
          {py, script, "--model", file.string(), "--data", data("cora"), "--compare",
           (out / "logits.npy").string(), "--write-npz", (dir.path / (tag + "-back.npz")).string()},
          "torch-" + tag);
      EXPECT_EQ(torch_run.rc, 0) << torch_run.out;
      EXPECT_TRUE(contains(torch_run.out, "max |logit difference| to degnn infer"))
          << torch_run.out;
    }
  auto first_loss = [&](const std::vector<std::string>& extra) {
    auto args = cora_run("sage", 2);
    const fs::path metrics = dir.path / "metrics.json";
    fs::remove(metrics);
    args.insert(args.end(), {"--epochs", "1", "--max-batches", "1", "--eval-every", "0",
                             "--metrics", metrics.string()});
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run(dir, args);
    EXPECT_EQ(r.rc, 0) << r.out;
    return nlohmann::json::parse(read_file(metrics))["loss"].get<double>();
  };
  const double exported = first_loss({"--init", (dir.path / "sage2.safetensors").string()});
  const double written_back = first_loss({"--init", (dir.path / "sage2-back.npz").string()});
  const double fresh = first_loss({});
  EXPECT_EQ(exported, written_back);
  EXPECT_GT(std::abs(exported - fresh), 1e-3) << "the weights of --init were not used";
}
