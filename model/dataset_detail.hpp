// What the dataset loaders of each layout share (model/dataset_loader.cpp: OGB's CSV layout;
// dataset_arrays.cpp: NumPy arrays and OGB's binary layout). Not an interface.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "model/tensor.hpp"

namespace degnn::dataset_detail {

struct dataset_meta {
  bool directed = false;
  std::string name;
};

/// Optional DIR/dataset.ini: `key = value` lines, '#' or ';' comments, [sections] ignored.
dataset_meta read_meta(const std::filesystem::path& dir);
/// A split file of the CSV layout (one node id per line, each below n, none twice), sorted.
std::vector<node_id> read_split(const std::filesystem::path& file, node_id n);

}  // namespace degnn::dataset_detail
