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

namespace {

// Checks shared by both cutters; the part with its sizes and owned nodes set.
graph_partition start_partition(const dataset& d, const partition_book& book, int part,
                                const char* who) {
  const node_id n = d.num_nodes();
  if (book.num_nodes() != n) {
    throw std::invalid_argument(std::string(who) + ": the book has " +
                                std::to_string(book.num_nodes()) + " nodes, the dataset " +
                                std::to_string(n));
  }
  if (part < 0 || part >= book.num_parts()) {
    throw std::invalid_argument(std::string(who) + ": part " + std::to_string(part) +
                                " outside [0, " + std::to_string(book.num_parts()) + ")");
  }
  const Eigen::Index feature_rows = d.sparse_features   ? d.sparse_features->rows()
                                    : d.mapped_features ? d.mapped_features->rows
                                                        : d.features.rows();
  if (feature_rows != n || d.labels.size() != static_cast<size_t>(n)) {
    throw std::invalid_argument(std::string(who) +
                                ": dataset features/labels do not have one row per node");
  }
  graph_partition p;
  p.part = part;
  p.num_parts = book.num_parts();
  p.num_global_nodes = n;
  p.num_classes = d.num_classes;
  const auto owned = book.owned(part);
  p.owned.assign(owned.begin(), owned.end());
  return p;
}

// Given p's owned nodes and edges (src_global): the local sources, the halo with its owners and
// full in-degrees (`degree_of`), the labels and the local splits.
template <class DegreeOf>
void complete_partition(graph_partition& p, const dataset& d, const partition_book& book,
                        DegreeOf degree_of) {
  const int part = p.part;
  p.src_local.resize(p.src_global.size());
  std::vector<node_id> remote;
  for (size_t i = 0; i < p.src_global.size(); ++i) {
    const node_id u = p.src_global[i];
    if (book.owner(u) == part) {
      p.src_local[i] = book.local_id(u);
    } else {
      p.src_local[i] = -1;
      remote.push_back(u);
    }
  }
  std::sort(remote.begin(), remote.end());
  remote.erase(std::unique(remote.begin(), remote.end()), remote.end());
  p.halo = std::move(remote);
  p.halo_owner.resize(p.halo.size());
  p.halo_degree.resize(p.halo.size());
  for (size_t i = 0; i < p.halo.size(); ++i) {
    p.halo_owner[i] = book.owner(p.halo[i]);
    p.halo_degree[i] = static_cast<std::int32_t>(degree_of(p.halo[i]));
  }
  p.labels.resize(p.owned.size());
  for (size_t l = 0; l < p.owned.size(); ++l)
    p.labels[l] = d.labels[static_cast<size_t>(p.owned[l])];
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
}

}  // namespace

graph_partition extract_partition(const dataset& d, const partition_book& book, int part,
                                  bool copy_mapped_rows) {
  graph_partition p = start_partition(d, book, part, "extract_partition");
  const csr_graph& g = d.graph;
  const auto rows = p.owned.size();
  p.indptr.assign(rows + 1, 0);
  for (size_t l = 0; l < rows; ++l)
    p.indptr[l + 1] = p.indptr[l] + g.in_degree(p.owned[l]);
  p.src_global.resize(static_cast<size_t>(p.indptr.back()));
  for (size_t l = 0; l < rows; ++l) {
    const auto row = g.in_neighbors(p.owned[l]);
    std::copy(row.begin(), row.end(),
              p.src_global.begin() + static_cast<std::ptrdiff_t>(p.indptr[l]));
  }
  complete_partition(p, d, book, [&](node_id v) { return g.in_degree(v); });

  if (d.sparse_features) {
    p.features.resize(0, d.features.cols());
    p.sparse_features =
        std::make_shared<const sparse_rows>(gather_rows(*d.sparse_features, p.owned));
  } else if (d.mapped_features && !copy_mapped_rows) {
    p.features.resize(0, d.mapped_features->cols);  // write_partition_file reads them
  } else if (d.mapped_features) {
    // Rows read where they lie in the file; its pages are handed back after the part, so cutting
    // every part holds one part's rows at a time.
    const mapped_rows& m = *d.mapped_features;
    p.features.resize(static_cast<Eigen::Index>(rows), m.cols);
    for (size_t l = 0; l < rows; ++l)
      std::copy_n(m.row(p.owned[l]), m.cols, p.features.row(static_cast<Eigen::Index>(l)).data());
    m.release();
  } else {
    p.features.resize(static_cast<Eigen::Index>(rows), d.features.cols());
    for (size_t l = 0; l < rows; ++l)
      p.features.row(static_cast<Eigen::Index>(l)) = d.features.row(p.owned[l]);
  }
  return p;
}

graph_partition assemble_partition(const dataset& outline, const partition_book& book, int part,
                                   std::span<const std::uint64_t> arcs,
                                   std::span<const std::int32_t> in_degree) {
  graph_partition p = start_partition(outline, book, part, "assemble_partition");
  if (in_degree.size() != static_cast<size_t>(outline.num_nodes()))
    throw std::invalid_argument("assemble_partition: one in-degree per node expected");
  const auto rows = p.owned.size();
  p.indptr.assign(rows + 1, 0);
  p.src_global.resize(arcs.size());
  size_t l = 0;
  for (size_t i = 0; i < arcs.size(); ++i) {
    const auto dst = static_cast<node_id>(arcs[i] >> 32);
    if (i > 0 && arcs[i] <= arcs[i - 1])
      throw std::invalid_argument("assemble_partition: arcs not sorted and unique");
    while (l < rows && p.owned[l] < dst)
      p.indptr[++l] = static_cast<edge_offset>(i);
    if (l == rows || p.owned[l] != dst)
      throw std::invalid_argument("assemble_partition: an arc into node " + std::to_string(dst) +
                                  ", which part " + std::to_string(part) + " does not own");
    p.src_global[i] = static_cast<node_id>(arcs[i] & 0xffffffffu);
  }
  while (l < rows)
    p.indptr[++l] = static_cast<edge_offset>(arcs.size());
  complete_partition(p, outline, book,
                     [&](node_id v) { return in_degree[static_cast<size_t>(v)]; });
  p.features.resize(0, outline.features.cols());
  return p;
}

// -- on disk --

Eigen::Map<const Matrix> graph_partition::dense_features() const {
  if (mapped_features) return {mapped_features->data, mapped_features->rows, mapped_features->cols};
  return {features.data(), features.rows(), features.cols()};
}

part_loading part_loading_for(bool in_memory, bool sparse, const std::string& transform) {
  return in_memory || sparse || transform != "none" ? part_loading::read_features
                                                    : part_loading::map_features;
}

void copy_mapped_features(graph_partition& p) {
  if (!p.mapped_features) return;
  p.features = p.dense_features();
  p.mapped_features.reset();
}

void set_feature_layout(graph_partition& p, bool sparse) {
  if (sparse) copy_mapped_features(p);  // compressed from a whole dense matrix, then let go
  if (sparse && !p.sparse_features) {
    p.sparse_features = std::make_shared<const sparse_rows>(to_sparse(p.features));
    p.features = Matrix(0, p.features.cols());
  } else if (!sparse && p.sparse_features) {
    p.features = to_dense(*p.sparse_features);
    p.sparse_features.reset();
  }
}

std::int64_t halo_position(const graph_partition& p, node_id g) {
  const auto it = std::lower_bound(p.halo.begin(), p.halo.end(), g);
  return it == p.halo.end() || *it != g ? -1 : it - p.halo.begin();
}

std::size_t feature_row_bytes(const graph_partition& p) {
  return static_cast<std::size_t>(p.features.cols()) * sizeof(float);
}

void apply_feature_transform(const std::string& name, graph_partition& p) {
  if (!p.sparse_features) {
    if (name != "none") copy_mapped_features(p);  // the transform rewrites the rows
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
