// Model files: DGL's names and shapes, every parameter back bit for bit from either format, the
// settings carried, and a file that does not fit the model refused with the tensor named.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <tuple>

#include "model/data_error.hpp"
#include "model/model_file.hpp"

namespace degnn {
namespace {

namespace fs = std::filesystem;

struct temp_dir {
  fs::path path = fs::temp_directory_path() / ("degnn-model-file-" + std::to_string(getpid()));
  temp_dir() { fs::create_directories(path); }
  ~temp_dir() { fs::remove_all(path); }
};

model_config config(model_kind kind, int layers) {
  model_config c{.kind = kind,
                 .in_dim = 5,
                 .hidden = 4,
                 .num_classes = 3,
                 .num_layers = layers,
                 .dropout = 0.25f};
  if (kind != model_kind::gat) return c;
  c.heads = 2;  // two heads of 2, two averaged output heads
  c.output_heads = 2;
  c.attention_dropout = 0.3f;
  c.input_dropout = 0.1f;
  return c;
}

std::string error_of(const fs::path& file) {
  try {
    load_model_file(file);
  } catch (const data_error& e) {
    return e.what();
  }
  return "";
}

TEST(ModelFile, SageTensorsCarryDglNamesAndShapes) {
  const gnn_model m(config(model_kind::sage, 2), 7);
  const auto t = export_tensors(m);
  ASSERT_EQ(t.size(), 6u);
  EXPECT_EQ(t[0].name, "layers.0.fc_self.weight");
  EXPECT_EQ(t[0].shape, (std::vector<std::int64_t>{4, 5}));  // (out, in), as nn.Linear
  EXPECT_EQ(t[1].name, "layers.0.fc_neigh.weight");
  EXPECT_EQ(t[2].name, "layers.0.bias");
  EXPECT_EQ(t[2].shape, (std::vector<std::int64_t>{4}));
  EXPECT_EQ(t[3].shape, (std::vector<std::int64_t>{3, 4}));
  // fc_self.weight[o][i] is the layer's w_self(i, o).
  const Matrix& w_self = *m.parameters()[0];
  for (int o = 0; o < 4; ++o)
    for (int i = 0; i < 5; ++i)
      EXPECT_EQ(t[0].values[o * 5 + i], w_self(i, o));
}

TEST(ModelFile, GcnTensorsAreGraphConvsWeightAndBias) {
  const gnn_model m(config(model_kind::gcn, 3), 7);
  const auto t = export_tensors(m);
  ASSERT_EQ(t.size(), 6u);
  EXPECT_EQ(t[0].name, "layers.0.weight");
  EXPECT_EQ(t[0].shape, (std::vector<std::int64_t>{5, 4}));  // (in, out), as GraphConv
  EXPECT_EQ(t[5].name, "layers.2.bias");
  EXPECT_EQ(t[5].shape, (std::vector<std::int64_t>{3}));
}

TEST(ModelFile, GatTensorsAreGatConvsFcAttentionAndPerHeadBias) {
  gnn_model m(config(model_kind::gat, 2), 7);
  for (Matrix* p : m.parameters())
    p->setRandom();
  const auto t = export_tensors(m);
  ASSERT_EQ(t.size(), 8u);
  EXPECT_EQ(t[0].name, "layers.0.fc.weight");
  EXPECT_EQ(t[0].shape, (std::vector<std::int64_t>{4, 5}));  // (H*F, in), as nn.Linear
  EXPECT_EQ(t[1].name, "layers.0.attn_l");
  EXPECT_EQ(t[1].shape, (std::vector<std::int64_t>{1, 2, 2}));  // (1, H, F), as GATConv
  EXPECT_EQ(t[2].name, "layers.0.attn_r");
  EXPECT_EQ(t[3].shape, (std::vector<std::int64_t>{4}));
  EXPECT_EQ(t[4].shape, (std::vector<std::int64_t>{2 * 3, 4}));  // two output heads of 3
  // The averaged layer's bias, kept per head as GATConv does: each head's copy is ours.
  EXPECT_EQ(t[7].shape, (std::vector<std::int64_t>{2 * 3}));
  const Matrix& bias = *m.parameters()[7];
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < 3; ++k)
      EXPECT_EQ(t[7].values[h * 3 + k], bias(0, k));
  const Matrix& attn_l = *m.parameters()[1];
  EXPECT_EQ(t[1].values[1 * 2 + 0], attn_l(1, 0));
}

TEST(ModelFile, EitherFormatGivesEveryParameterBackBitForBit) {
  temp_dir dir;
  // GAT twice: 2 and 3 averaged output heads (a mean of 3 equal floats need not be exact).
  for (int variant = 0; variant < 4; ++variant)
    for (int layers : {2, 3})
      for (const char* name : {"m.safetensors", "m.npz"}) {
        const model_kind kind = variant == 0   ? model_kind::sage
                                : variant == 1 ? model_kind::gcn
                                               : model_kind::gat;
        model_config c = config(kind, layers);
        if (variant == 3) c.output_heads = 3;
        gnn_model m(c, 11);
        for (Matrix* p : m.parameters())
          p->setRandom();  // biases too, not only Glorot weights
        const fs::path file = dir.path / name;
        save_model_file(file, m, {.config = m.config(), .normalize_features = "row", .step = 42},
                        format_for(file));
        const loaded_model back = load_model_file(file);
        EXPECT_TRUE(back.model.config() == m.config()) << name;
        EXPECT_EQ(back.settings.normalize_features, "row");
        EXPECT_EQ(back.settings.step, 42u);
        const auto a = m.parameters();
        const auto b = back.model.parameters();
        ASSERT_EQ(a.size(), b.size());
        for (std::size_t i = 0; i < a.size(); ++i)
          EXPECT_TRUE(*a[i] == *b[i]) << name << " parameter " << i;
      }
}

TEST(ModelFile, InitRefusesAnotherModelAndCopiesTheSameOne) {
  temp_dir dir;
  gnn_model trained(config(model_kind::sage, 2), 3);
  const fs::path file = dir.path / "m.safetensors";
  save_model_file(file, trained, {.config = trained.config()}, model_format::safetensors);
  gnn_model fresh(config(model_kind::sage, 2), 99);
  init_from_model_file(fresh, file, "none");
  EXPECT_TRUE(*fresh.parameters()[1] == *trained.parameters()[1]);
  gnn_model wider(model_config{
      .kind = model_kind::sage, .in_dim = 5, .hidden = 8, .num_classes = 3, .num_layers = 2});
  try {
    init_from_model_file(wider, file, "none");
    FAIL() << "a model of another width was taken";
  } catch (const data_error& e) {
    EXPECT_NE(std::string(e.what()).find("sage, 2 layers, 5 -> 4 -> 3; this run's is sage, 2 "
                                         "layers, 5 -> 8 -> 3"),
              std::string::npos)
        << e.what();
  }
}

TEST(ModelFile, AMissingTensorAWrongShapeANanAndADamagedFileAreNamed) {
  temp_dir dir;
  gnn_model m(config(model_kind::gcn, 2), 3);
  const auto t = export_tensors(m);
  const std::map<std::string, std::string> settings = {
      {"model", "gcn"}, {"layers", "2"}, {"in_dim", "5"}, {"hidden", "4"}, {"num_classes", "3"}};
  auto write = [&](const fs::path& file, std::vector<array_ref> refs) {
    std::ofstream(file, std::ios::binary) << encode_safetensors(refs, settings);
  };
  std::vector<array_ref> all;
  for (const auto& x : t)
    all.push_back({x.name, array_dtype::f32, x.shape, x.values.data()});
  write(dir.path / "ok.safetensors", all);
  EXPECT_EQ(error_of(dir.path / "ok.safetensors"), "");

  write(dir.path / "missing.safetensors", {all.begin(), all.end() - 1});
  EXPECT_NE(error_of(dir.path / "missing.safetensors").find("has no tensor layers.1.bias"),
            std::string::npos);

  auto wrong = all;
  wrong[0].shape = {4, 5};  // GraphConv's weight is (in, out): a transposed copy is refused
  write(dir.path / "shape.safetensors", wrong);
  EXPECT_NE(error_of(dir.path / "shape.safetensors")
                .find("layers.0.weight has shape (4, 5), the settings ask (5, 4)"),
            std::string::npos);

  std::vector<float> nan = t[1].values;
  nan[2] = std::nanf("");
  auto with_nan = all;
  with_nan[1].data = nan.data();
  write(dir.path / "nan.safetensors", with_nan);
  EXPECT_NE(error_of(dir.path / "nan.safetensors").find("layers.0.bias holds a NaN"),
            std::string::npos);

  for (const auto& [key, value, says] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"dropout", "abc", "its dropout 'abc' is not a number in [0, 1)"},
           {"dropout", "1.5", "its dropout '1.5' is not a number in [0, 1)"},
           {"aggregator", "pool", "its aggregator 'pool' is not what a gcn layer computes"},
           {"hidden", "4x", "its setting hidden = '4x' is not a count"}}) {
    auto bad = settings;
    bad[key] = value;
    std::ofstream(dir.path / "bad.safetensors", std::ios::binary) << encode_safetensors(all, bad);
    EXPECT_NE(error_of(dir.path / "bad.safetensors").find(says), std::string::npos) << says;
  }
  auto doubled = all;
  doubled.push_back(all[0]);
  std::ofstream(dir.path / "twice.npz", std::ios::binary) << [&] {
    const std::string json =
        R"({"model":"gcn","layers":"2","in_dim":"5","hidden":"4","num_classes":"3"})";
    auto refs = doubled;
    refs.push_back(
        {"degnn_settings", array_dtype::u8, {static_cast<std::int64_t>(json.size())}, json.data()});
    return encode_npz(refs);
  }();
  EXPECT_NE(error_of(dir.path / "twice.npz").find("holds tensor layers.0.weight twice"),
            std::string::npos);

  const std::string good = encode_model_file(m, {.config = m.config()}, model_format::npz);
  std::ofstream(dir.path / "cut.npz", std::ios::binary) << good.substr(0, good.size() - 30);
  EXPECT_NE(error_of(dir.path / "cut.npz").find("cut.npz"), std::string::npos);
  EXPECT_NE(error_of(dir.path / "nothing.npz").find("nothing.npz: cannot be read"),
            std::string::npos);
}

// Files numpy 1.24 wrote (numpy.savez with its zip64 local headers, and savez_compressed), kept
// as fuzz seeds: a GCN of ones and zeros, 3 -> 2 -> 2.
TEST(ModelFile, ReadsWhatNumpySavezAndSavezCompressedWrite) {
  for (const char* seed : {"model-npz", "model-npz-deflated", "model-safetensors"}) {
    const fs::path file = fs::path(DEGNN_SOURCE_DIR) / "tests/fuzz/corpus/arrays" / seed;
    std::ifstream in(file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_GT(bytes.size(), 1u) << file;
    const loaded_model m = decode_model_file(std::string_view(bytes).substr(1), seed);  // selector
    EXPECT_EQ(m.model.config().kind, model_kind::gcn) << seed;
    EXPECT_EQ(m.model.config().hidden, 2) << seed;
    const auto p = m.model.parameters();
    ASSERT_EQ(p.size(), 4u);
    EXPECT_TRUE(p[0]->isOnes()) << seed;
    EXPECT_TRUE(p[1]->isZero()) << seed;
    EXPECT_EQ(p[2]->rows(), 2) << seed;
  }
}

}  // namespace
}  // namespace degnn
