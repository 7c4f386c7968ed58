// Clusters on a partition set whose part files are mapped (the default) or read into memory
// (--partition-in-memory): both pipelines train bit for bit the same run, evaluation and the
// history set-up included, and send the same bytes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "model/partition_store.hpp"
#include "model/partitioner.hpp"
#include "runtime/train/cluster_trainer.hpp"
#include "tests/cluster/in_process_cluster.hpp"

namespace degnn {
namespace {

namespace fs = std::filesystem;

struct temp_set {
  fs::path path =
      fs::temp_directory_path() / ("degnn-mapped-parts-" + std::to_string(::getpid()) + "-" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  temp_set() {
    const dataset& d = testing::cora();
    write_partitions(d, partition_graph(d.graph, d.train, 4, partition_method::metis, 2), path,
                     "metis", 2, 4);
  }
  ~temp_set() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

train_settings settings(const fs::path& set, const std::string& pipeline, int layers) {
  train_settings s;
  s.data = (fs::path(DEGNN_SOURCE_DIR) / "data" / "cora").string();
  s.partitions = set.string();
  s.pipeline = pipeline;
  s.model.num_layers = layers;
  s.model.hidden = 16;
  s.model.dropout = 0.5f;
  s.model.lr = 0.01f;
  s.seed = s.model.seed = 7;
  s.fanouts.assign(static_cast<size_t>(layers), 5);
  s.batch_size = 16;
  s.epochs = 2;
  s.eval_every = 1;
  s.progress = false;
  s.timeout_s = 30;
  s.history_bits = 8;
  return s;
}

testing::traced_run run(const train_settings& s) {
  return testing::run_traced(s, testing::cora());
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class MappedPartition : public ::testing::TestWithParam<std::tuple<const char*, int>> {};

TEST_P(MappedPartition, TrainsBitForBitAsAPartReadIntoMemory) {
  const auto [pipeline, layers] = GetParam();
  temp_set set;
  train_settings s = settings(set.path, pipeline, layers);
  const testing::traced_run mapped = run(s);
  s.partition_in_memory = true;
  const testing::traced_run read = run(s);
  ASSERT_FALSE(mapped.losses.empty());
  ASSERT_EQ(mapped.losses.size(), read.losses.size());
  for (size_t i = 0; i < read.losses.size(); ++i)
    EXPECT_EQ(std::memcmp(&mapped.losses[i], &read.losses[i], sizeof(double)), 0)
        << "step " << i << ": mapped " << mapped.losses[i] << ", read " << read.losses[i];
  EXPECT_TRUE(same_bits(mapped.result.parameters, read.result.parameters));
  EXPECT_EQ(mapped.best_valid, read.best_valid);
  EXPECT_EQ(mapped.result.epoch_bytes, read.result.epoch_bytes);
  EXPECT_EQ(mapped.result.init_bytes, read.result.init_bytes);
}

INSTANTIATE_TEST_SUITE_P(Pipelines, MappedPartition,
                         ::testing::Values(std::make_tuple("centralized", 2),
                                           std::make_tuple("decentralized", 2),
                                           std::make_tuple("decentralized", 3)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "_layers";
                         });

}  // namespace
}  // namespace degnn
