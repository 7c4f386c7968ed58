// Cora split in two at random, part 0 extracted: what the single-actor tests serve (each test
// names its seed, so its nodes and their owners stay what its assertions were written for).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>

#include "model/dataset.hpp"
#include "model/partitioner.hpp"

namespace degnn::test {

struct cora_half {
  std::shared_ptr<const partition_book> book;
  std::shared_ptr<const graph_partition> part;  ///< part 0 of 2
  std::int32_t in_dim = 0;
  std::int32_t num_classes = 0;
};

inline cora_half load_cora_half(std::uint64_t seed) {
  const dataset d = load_dataset(std::filesystem::path(DEGNN_SOURCE_DIR) / "data" / "cora");
  auto owner = partition_graph(d.graph, d.train, 2, partition_method::random, seed);
  cora_half c;
  c.book = std::make_shared<partition_book>(std::move(owner), 2);
  c.part = std::make_shared<graph_partition>(extract_partition(d, *c.book, 0));
  c.in_dim = d.num_features();
  c.num_classes = d.num_classes;
  return c;
}

}  // namespace degnn::test
