// What a partition holds, apart from its files: its values cut out of a dataset
// (extract_partition), and its feature rows' layout, transform and message size once loaded.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "model/feature_transform.hpp"
#include "model/mapped_file.hpp"
#include "model/partition_store.hpp"
#include "model/sparse_input.hpp"

namespace degnn {

graph_partition extract_partition(const dataset& d, const partition_book& book, int part) {
  const node_id n = d.num_nodes();
  if (book.num_nodes() != n) {
    throw std::invalid_argument("extract_partition: the book has " +
                                std::to_string(book.num_nodes()) + " nodes, the dataset " +
                                std::to_string(n));
  }
  if (part < 0 || part >= book.num_parts()) {
    throw std::invalid_argument("extract_partition: part " + std::to_string(part) +
                                " outside [0, " + std::to_string(book.num_parts()) + ")");
  }
  const Eigen::Index feature_rows = d.sparse_features   ? d.sparse_features->rows()
                                    : d.mapped_features ? d.mapped_features->rows
                                                        : d.features.rows();
  if (feature_rows != n || d.labels.size() != static_cast<size_t>(n)) {
    throw std::invalid_argument(
        "extract_partition: dataset features/labels do not have one row per node");
  }
  const csr_graph& g = d.graph;
  graph_partition p;
  p.part = part;
  p.num_parts = book.num_parts();
  p.num_global_nodes = n;
  p.num_classes = d.num_classes;
  const auto owned = book.owned(part);
  p.owned.assign(owned.begin(), owned.end());
  const auto rows = owned.size();

  p.indptr.assign(rows + 1, 0);
  for (size_t l = 0; l < rows; ++l)
    p.indptr[l + 1] = p.indptr[l] + g.in_degree(owned[l]);
  const auto edges = static_cast<size_t>(p.indptr.back());
  p.src_global.resize(edges);
  p.src_local.resize(edges);
  std::vector<node_id> remote;
  for (size_t l = 0; l < rows; ++l) {
    const auto row = g.in_neighbors(owned[l]);
    const auto at = static_cast<size_t>(p.indptr[l]);
    std::copy(row.begin(), row.end(), p.src_global.begin() + static_cast<std::ptrdiff_t>(at));
    for (size_t i = 0; i < row.size(); ++i) {
      const node_id u = row[i];
      if (book.owner(u) == part) {
        p.src_local[at + i] = book.local_id(u);
      } else {
        p.src_local[at + i] = -1;
        remote.push_back(u);
      }
    }
  }
  std::sort(remote.begin(), remote.end());
  remote.erase(std::unique(remote.begin(), remote.end()), remote.end());
  p.halo = std::move(remote);
  p.halo_owner.resize(p.halo.size());
  p.halo_degree.resize(p.halo.size());
  for (size_t i = 0; i < p.halo.size(); ++i) {
    p.halo_owner[i] = book.owner(p.halo[i]);
    p.halo_degree[i] = static_cast<std::int32_t>(g.in_degree(p.halo[i]));
  }

  p.labels.resize(rows);
  for (size_t l = 0; l < rows; ++l)
    p.labels[l] = d.labels[static_cast<size_t>(owned[l])];
  if (d.sparse_features) {
    p.features.resize(0, d.features.cols());
    p.sparse_features = std::make_shared<const sparse_rows>(gather_rows(*d.sparse_features, owned));
  } else if (d.mapped_features) {
    // Rows read where they lie in the file; its pages are handed back after the part, so cutting
    // every part holds one part's rows at a time.
    const mapped_rows& m = *d.mapped_features;
    p.features.resize(static_cast<Eigen::Index>(rows), m.cols);
    for (size_t l = 0; l < rows; ++l)
      std::copy_n(m.row(owned[l]), m.cols, p.features.row(static_cast<Eigen::Index>(l)).data());
    m.release();
  } else {
    p.features.resize(static_cast<Eigen::Index>(rows), d.features.cols());
    for (size_t l = 0; l < rows; ++l)
      p.features.row(static_cast<Eigen::Index>(l)) = d.features.row(owned[l]);
  }
  // Global splits are sorted and local ids follow global order, so the local splits come out
  // sorted.
  auto local_split = [&](const std::vector<node_id>& global, std::vector<node_id>& local) {
    for (node_id v : global) {
      if (book.owner(v) == part) local.push_back(book.local_id(v));
    }
  };
  local_split(d.train, p.train);
  local_split(d.valid, p.valid);
  local_split(d.test, p.test);
  return p;
}

// -- on disk --

void set_feature_layout(graph_partition& p, bool sparse) {
  if (sparse && !p.sparse_features) {
    p.sparse_features = std::make_shared<const sparse_rows>(to_sparse(p.features));
    p.features = Matrix(0, p.features.cols());
  } else if (!sparse && p.sparse_features) {
    p.features = to_dense(*p.sparse_features);
    p.sparse_features.reset();
  }
}

std::size_t feature_row_bytes(const graph_partition& p) {
  return static_cast<std::size_t>(p.features.cols()) * sizeof(float);
}

void apply_feature_transform(const std::string& name, graph_partition& p) {
  if (!p.sparse_features) {
    apply_feature_transform(name, p.features);
    return;
  }
  if (name == "none") return;
  apply_feature_transform(name, p.features);  // names an unknown transform; no rows to change
  auto rows = std::make_shared<sparse_rows>(*p.sparse_features);
  normalize_rows(*rows);
  p.sparse_features = std::move(rows);
}

void apply_feature_settings(graph_partition& p, bool sparse, const std::string& transform) {
  set_feature_layout(p, sparse);
  apply_feature_transform(transform, p);
}

}  // namespace degnn
