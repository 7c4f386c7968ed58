// Fusion planning and the gather / scatter between pushes and sub-graphs.
#include "model/push_plan.hpp"

namespace degnn {

push_plan plan_pushes(std::span<const push_view> pushes, fusion_level level,
                      std::vector<std::int32_t>& scratch) {
  push_plan plan;
  plan.neighbor_at.resize(pushes.size());
  plan.row_at.resize(pushes.size());
  // Adds node u to graph g (once) and returns its row there.
  auto place = [&](std::size_t g, node_id u) -> graph_row {
    auto& nodes = plan.graphs[g];
    if (scratch[static_cast<std::size_t>(u)] == -1) {
      scratch[static_cast<std::size_t>(u)] = static_cast<std::int32_t>(nodes.size());
      nodes.push_back(u);
    }
    return {static_cast<std::int32_t>(g), scratch[static_cast<std::size_t>(u)]};
  };
  auto close = [&](std::size_t g) {
    for (node_id u : plan.graphs[g])
      scratch[static_cast<std::size_t>(u)] = -1;
  };
  const bool fuse_all = level == fusion_level::per_step;
  if (fuse_all) plan.graphs.emplace_back();
  for (std::size_t p = 0; p < pushes.size(); ++p) {
    const push_view& push = pushes[p];
    auto& neighbor_at = plan.neighbor_at[p];
    auto& row_at = plan.row_at[p];
    if (level != fusion_level::none) {
      if (!fuse_all) plan.graphs.emplace_back();
      const std::size_t g = plan.graphs.size() - 1;
      for (node_id u : push.rows)
        row_at.push_back(place(g, u));
      for (node_id u : push.neighbors)
        neighbor_at.push_back(place(g, u));
      if (!fuse_all) close(g);
      continue;
    }
    // No fusion: every asked row and every target's neighbours get a graph of their own.
    for (node_id u : push.rows) {
      plan.graphs.emplace_back();
      row_at.push_back(place(plan.graphs.size() - 1, u));
      close(plan.graphs.size() - 1);
    }
    std::size_t j = 0;
    for (std::size_t t = 0; t < push.targets.size(); ++t) {
      if (push.counts[t] == 0) continue;
      plan.graphs.emplace_back();
      for (std::int32_t k = 0; k < push.counts[t]; ++k, ++j)
        neighbor_at.push_back(place(plan.graphs.size() - 1, push.neighbors[j]));
      close(plan.graphs.size() - 1);
    }
  }
  if (fuse_all) close(0);
  return plan;
}

void gather_partial_sums(const push_plan& plan, std::size_t p, const push_view& push,
                         const std::vector<Matrix>& outs, Eigen::Index width, Matrix& sums,
                         Matrix& own_rows) {
  sums = Matrix::Zero(static_cast<Eigen::Index>(push.targets.size()), width);
  const bool scaled = !push.neighbor_scale.empty();
  std::size_t j = 0;
  for (std::size_t t = 0; t < push.targets.size(); ++t) {
    for (std::int32_t k = 0; k < push.counts[t]; ++k, ++j) {
      const auto [g, r] = plan.neighbor_at[p][j];
      if (scaled)
        sums.row(static_cast<Eigen::Index>(t)) +=
            push.neighbor_scale[j] * outs[static_cast<std::size_t>(g)].row(r);
      else
        sums.row(static_cast<Eigen::Index>(t)) += outs[static_cast<std::size_t>(g)].row(r);
    }
  }
  own_rows = gather_own_rows(plan, p, outs, width);
}

Matrix gather_own_rows(const push_plan& plan, std::size_t p, const std::vector<Matrix>& outs,
                       Eigen::Index width) {
  const auto& row_at = plan.row_at[p];
  Matrix own_rows(static_cast<Eigen::Index>(row_at.size()), width);
  for (std::size_t i = 0; i < row_at.size(); ++i) {
    const auto [g, r] = row_at[i];
    own_rows.row(static_cast<Eigen::Index>(i)) = outs[static_cast<std::size_t>(g)].row(r);
  }
  return own_rows;
}

Matrix gather_neighbor_rows(const push_plan& plan, std::size_t p, const push_view& push,
                            const std::vector<Matrix>& outs, Eigen::Index width) {
  Matrix rows(static_cast<Eigen::Index>(push.neighbors.size()), width);
  for (std::size_t j = 0; j < push.neighbors.size(); ++j) {
    const auto [g, r] = plan.neighbor_at[p][j];
    rows.row(static_cast<Eigen::Index>(j)) = outs[static_cast<std::size_t>(g)].row(r);
  }
  return rows;
}

std::vector<Matrix> scatter_gradients(const push_plan& plan, std::span<const push_view> pushes,
                                      std::span<const Matrix* const> grads,
                                      std::span<const Matrix* const> own_grads, Eigen::Index width,
                                      bool per_neighbor) {
  std::vector<Matrix> out(plan.graphs.size());
  for (std::size_t g = 0; g < out.size(); ++g)
    out[g] = Matrix::Zero(static_cast<Eigen::Index>(plan.graphs[g].size()), width);
  for (std::size_t p = 0; p < pushes.size(); ++p) {
    const push_view& push = pushes[p];
    const bool scaled = !push.neighbor_scale.empty();
    std::size_t j = 0;
    for (std::size_t t = 0; t < push.targets.size(); ++t) {
      for (std::int32_t k = 0; k < push.counts[t]; ++k, ++j) {
        const auto [g, r] = plan.neighbor_at[p][j];
        if (per_neighbor)
          out[static_cast<std::size_t>(g)].row(r) += grads[p]->row(static_cast<Eigen::Index>(j));
        else if (scaled)
          out[static_cast<std::size_t>(g)].row(r) +=
              push.neighbor_scale[j] * grads[p]->row(static_cast<Eigen::Index>(t));
        else
          out[static_cast<std::size_t>(g)].row(r) += grads[p]->row(static_cast<Eigen::Index>(t));
      }
    }
    for (std::size_t i = 0; i < plan.row_at[p].size(); ++i) {
      const auto [g, r] = plan.row_at[p][i];
      out[static_cast<std::size_t>(g)].row(r) += own_grads[p]->row(static_cast<Eigen::Index>(i));
    }
  }
  return out;
}

}  // namespace degnn
