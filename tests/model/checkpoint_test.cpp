// Tests of model/checkpoint.hpp: exact round trip of config, parameters and Adam state; corrupt,
// truncated and foreign files raise data_error naming the file.
#include "model/checkpoint.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "model/crc32.hpp"
#include "model/data_error.hpp"
#include "tests/model/temp_dir.hpp"

using namespace degnn;
namespace fs = std::filesystem;

namespace {

struct temp_dir : degnn::testing::temp_dir {
  temp_dir() : degnn::testing::temp_dir("degnn_ckpt_") {}
};

// A model and optimiser with non-trivial state (two steps taken).
std::pair<gnn_model, adam> trained() {
  gnn_model model({.kind = model_kind::gcn,
                   .in_dim = 5,
                   .hidden = 7,
                   .num_classes = 3,
                   .num_layers = 3,
                   .dropout = 0.2f},
                  11);
  adam opt({.lr = 0.02f, .beta1 = 0.8f, .beta2 = 0.99f, .eps = 1e-7f, .weight_decay = 5e-4f});
  for (int i = 0; i < 2; ++i) {
    for (Matrix* g : model.gradients())
      g->setRandom();
    opt.step(model.parameters(), model.gradients());
  }
  return {std::move(model), std::move(opt)};
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_all(const fs::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(s.data(), static_cast<std::streamsize>(s.size()));
}

void expect_data_error_naming(const fs::path& p, const std::string& what) {
  try {
    (void)load_checkpoint(p);
    ADD_FAILURE() << "no exception for " << what;
  } catch (const data_error& e) {
    EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << e.what();
    std::printf("%s -> %s\n", what.c_str(), e.what());
  }
}

}  // namespace

TEST(Checkpoint, RoundTripRestoresConfigParametersAndAdamStateExactly) {
  temp_dir dir;
  auto [model, opt] = trained();
  const fs::path file = dir.path / "run.ckpt";
  save_checkpoint(file, model, opt);
  EXPECT_FALSE(fs::exists(dir.path / "run.ckpt.tmp"));
  checkpoint c = load_checkpoint(file);
  EXPECT_EQ(c.model.config(), model.config());
  EXPECT_EQ(flatten(c.model.parameters()), flatten(model.parameters()));
  EXPECT_EQ(c.optimizer.options(), opt.options());
  EXPECT_EQ(c.optimizer.state().step, 2);
  ASSERT_EQ(c.optimizer.state().m.size(), opt.state().m.size());
  for (std::size_t i = 0; i < opt.state().m.size(); ++i) {
    EXPECT_TRUE(c.optimizer.state().m[i] == opt.state().m[i]);
    EXPECT_TRUE(c.optimizer.state().v[i] == opt.state().v[i]);
  }
  // A fresh optimiser (no moments yet) round-trips too.
  save_checkpoint(file, model, adam{});
  EXPECT_TRUE(load_checkpoint(file).optimizer.state().m.empty());
}

TEST(Checkpoint, AGatModelRoundTripsWithItsHeadsAndDropouts) {
  temp_dir dir;
  model_config c{.kind = model_kind::gat,
                 .in_dim = 5,
                 .hidden = 6,
                 .num_classes = 3,
                 .num_layers = 2,
                 .dropout = 0.1f};
  c.heads = 3;
  c.output_heads = 2;
  c.attention_dropout = 0.4f;
  c.input_dropout = 0.2f;
  gnn_model model(c, 5);
  const fs::path file = dir.path / "gat.ckpt";
  save_checkpoint(file, model, adam{});
  checkpoint back = load_checkpoint(file);
  EXPECT_EQ(back.model.config(), c);
  EXPECT_EQ(flatten(back.model.parameters()), flatten(model.parameters()));
  // A forged output head count is refused before the model is built (the weights would not fit).
  std::string bytes = read_all(file);
  constexpr std::size_t kHeader = 24;              // magic, version, CRC, payload size
  constexpr std::size_t kOutputHeads = 6 * 4 + 4;  // six config fields, then heads, output heads
  const std::int32_t huge = 1 << 30;
  std::memcpy(bytes.data() + kHeader + kOutputHeads, &huge, sizeof huge);
  // With the checksum made right again, so the config check is what refuses it.
  const std::uint32_t crc = crc32_update(0, bytes.data() + kHeader, bytes.size() - kHeader);
  std::memcpy(bytes.data() + 12, &crc, sizeof crc);
  write_all(file, bytes);
  try {
    (void)load_checkpoint(file);
    ADD_FAILURE() << "no exception for 2^30 output heads";
  } catch (const data_error& e) {
    EXPECT_NE(std::string(e.what()).find("needs more weights than its"), std::string::npos)
        << e.what();
  }
}

TEST(Checkpoint, ACorruptedByteThrowsDataErrorNamingTheFile) {
  temp_dir dir;
  auto [model, opt] = trained();
  const fs::path file = dir.path / "bad.ckpt";
  save_checkpoint(file, model, opt);
  const std::string good = read_all(file);
  for (std::size_t at : {std::size_t{30}, good.size() / 2, good.size() - 1}) {
    std::string bad = good;
    bad[at] ^= 0x10;
    write_all(file, bad);
    expect_data_error_naming(file, "flipped byte " + std::to_string(at));
  }
}

TEST(Checkpoint, ATruncatedFileThrowsDataErrorNamingTheFile) {
  temp_dir dir;
  auto [model, opt] = trained();
  const fs::path file = dir.path / "short.ckpt";
  save_checkpoint(file, model, opt);
  const std::string good = read_all(file);
  for (std::size_t keep : {std::size_t{0}, std::size_t{10}, good.size() - 4}) {
    write_all(file, good.substr(0, keep));
    expect_data_error_naming(file, "truncated to " + std::to_string(keep));
  }
}

TEST(Checkpoint, AForeignOrMissingFileThrowsDataErrorNamingTheFile) {
  temp_dir dir;
  const fs::path file = dir.path / "foreign.ckpt";
  write_all(file, std::string(64, 'x'));
  expect_data_error_naming(file, "bad magic");
  expect_data_error_naming(dir.path / "missing.ckpt", "missing file");
}

// Found by tests/fuzz/files_fuzz.cpp: a config naming huge layers, under a CRC that matches
// (anyone can compute one), made the loader allocate the model it named (37 GB) before it
// looked at the parameters. It must be refused from the payload's size alone.
TEST(Checkpoint, AConfigNamingLayersLargerThanThePayloadIsRefusedBeforeAnyAllocation) {
  temp_dir dir;
  auto [model, opt] = trained();
  std::string bytes = encode_checkpoint(model, opt);
  constexpr std::size_t kHeader = 24;  // magic, version, CRC, payload size
  for (const auto& [field, value] : {std::pair{4, 1 << 20}, {8, 1 << 20}, {16, 1 << 30}}) {
    std::string forged = bytes;
    std::memcpy(forged.data() + kHeader + field, &value, sizeof value);  // in_dim, hidden, layers
    const std::uint32_t crc = crc32_update(0, forged.data() + kHeader, forged.size() - kHeader);
    std::memcpy(forged.data() + 12, &crc, sizeof crc);
    const fs::path file = dir.path / "forged.ckpt";
    write_all(file, forged);
    try {
      (void)load_checkpoint(file);
      ADD_FAILURE() << "no exception for field " << field;
    } catch (const data_error& e) {
      EXPECT_NE(std::string(e.what()).find("needs more weights than its"), std::string::npos)
          << e.what();
    }
  }
}
