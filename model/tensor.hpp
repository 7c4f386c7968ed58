// Plain value types shared by every layer of DEGNN: ids and row-major float matrices.
// Kept tiny on purpose, so that headers which only pass matrices around stay cheap to compile.
#pragma once

#include <Eigen/Core>
#include <cstdint>

namespace degnn {

/// Global node id (a graph has fewer than 2^31 nodes) and edge offset (it may have more edges).
using node_id = std::int32_t;
using edge_offset = std::int64_t;

/// Dense row-major float matrix: one row per node, as every kernel expects.
using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vector = Eigen::Matrix<float, Eigen::Dynamic, 1>;
using RowVector = Eigen::Matrix<float, 1, Eigen::Dynamic>;

}  // namespace degnn
