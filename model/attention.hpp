// Softmax attention aggregation as mergeable partials (GAT, docs/design.md section 2): each
// holder of some of a target's edges returns, per head, the largest score it saw, the sum of
// exponentials relative to it and the weighted sum of its values; partials merge exactly by the
// log-sum-exp rule, and the backward needs only the merged maximum and sum and the output.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/tensor.hpp"

namespace degnn {

/// The edges of one attention aggregation: target i's edges are [indptr[i], indptr[i+1]); edge k
/// reads value row src[k]. score (num_edges, H) holds the edges' scores after the LeakyReLU; keep
/// (num_edges, H), when non-empty, the attention dropout factor of each edge and head (0 or
/// 1/(1-p)): it scales the edge's weight in the value sum, not in the normaliser.
struct attention_edges {
  std::span<const std::int64_t> indptr;  ///< num_targets + 1
  std::span<const std::int32_t> src;     ///< num_edges
  const Matrix* score = nullptr;         ///< (num_edges, H)
  const Matrix* keep = nullptr;          ///< (num_edges, H) or null: no dropout
};

/// The edges (indptr, src) with their scores and keep factors (empty keep: no dropout).
attention_edges edges_of(const std::vector<std::int64_t>& indptr,
                         const std::vector<std::int32_t>& src, const Matrix& score,
                         const Matrix& keep);

/// Per target and head: max = the largest score (-inf when the holder has no edge of the
/// target), sum = sum_k exp(score_k - max), value = sum_k exp(score_k - max) keep_k v[src_k]
/// (head h's columns are h*F .. h*F+F).
struct attention_partial {
  Matrix max;    ///< (num_targets, H)
  Matrix sum;    ///< (num_targets, H)
  Matrix value;  ///< (num_targets, H*F)
};

/// The partial of these edges over values (num_src, H*F).
attention_partial attend_partial(const attention_edges& e, const Matrix& values);

/// into = the partial of both edge sets (log-sum-exp merge, per target and head). Both must have
/// the same shape; a target with no edge on one side takes the other's unchanged.
void merge_partials(attention_partial& into, const attention_partial& other);

/// The attention output (num_targets, H*F) = value / sum; a target with no edge at all gets zeros.
Matrix finish_attention(const attention_partial& merged);

/// Backward of finish_attention(merge of every holder's partial) for one holder's edges.
/// merged: the merge of all partials (its max and sum); out: finish_attention(merged); grad_out
/// (num_targets, H*F) = d loss / d out. Sets grad_score (num_edges, H) = d loss / d score of these
/// edges, and adds d loss / d values to grad_values (num_src, H*F, shaped by the caller), gathered
/// per value row (transpose: value row u's edges are tedge[tindptr[u] .. tindptr[u+1]), ascending)
/// so no two threads write one row and the result does not depend on the thread count.
void attention_backward(const attention_edges& e, const Matrix& values,
                        const attention_partial& merged, const Matrix& out, const Matrix& grad_out,
                        std::span<const std::int64_t> tindptr, std::span<const std::int64_t> tedge,
                        Matrix& grad_score, Matrix& grad_values);

/// The value rows' transpose of e: edges grouped by src (counting sort, ascending edge ids).
void transpose_attention_edges(const attention_edges& e, std::int32_t num_src,
                               std::vector<std::int64_t>& tindptr,
                               std::vector<std::int64_t>& tedge);

}  // namespace degnn
