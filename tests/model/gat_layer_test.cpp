// Tests of model/gat_layer.hpp: the forward against a plain GAT written here (double, loops over
// each destination's own row and sampled neighbours), every gradient against finite differences
// with and without attention dropout, concatenated and averaged heads, and reading a table.
#include "model/gat_layer.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "model/gnn_model.hpp"
#include "tests/model/grad_check.hpp"

using namespace degnn;
using namespace degnn::testing;

namespace {

/// GAT as the paper writes it: z = x W; for dst v and head h over N(v) + v:
/// e_u = LeakyReLU(a_l . z_u + a_r . z_v), alpha = softmax(e), out_h = sum alpha_u z_u; heads
/// concatenated or averaged, then the bias.
Eigen::MatrixXd plain_gat(const gat_layer& l, const block& b, const Matrix& x) {
  const int H = l.heads(), F = l.head_width();
  const Eigen::MatrixXd z = x.cast<double>() * l.weight.cast<double>();
  Eigen::MatrixXd out = Eigen::MatrixXd::Zero(b.num_dst(), l.out_dim());
  for (int v = 0; v < b.num_dst(); ++v) {
    std::vector<int> nbrs{v};
    for (int e = b.indptr[v]; e < b.indptr[v + 1]; ++e)
      nbrs.push_back(b.indices[e]);
    for (int h = 0; h < H; ++h) {
      const double er = z.row(v).segment(h * F, F).dot(l.attn_r.row(h).cast<double>());
      std::vector<double> s;
      double total = 0;
      for (int u : nbrs) {
        double t = z.row(u).segment(h * F, F).dot(l.attn_l.row(h).cast<double>()) + er;
        t = t > 0 ? t : 0.2 * t;
        s.push_back(std::exp(t));
        total += s.back();
      }
      Eigen::RowVectorXd head = Eigen::RowVectorXd::Zero(F);
      for (std::size_t k = 0; k < nbrs.size(); ++k)
        head += s[k] / total * z.row(nbrs[k]).segment(h * F, F);
      if (l.concat())
        out.row(v).segment(h * F, F) = head;
      else
        out.row(v) += head / H;
    }
  }
  return out.rowwise() + l.bias.row(0).cast<double>();
}

gat_layer make_layer(int in, int out, int heads, bool concat, float p) {
  gat_layer l(in, out, heads, concat, /*attention_dropout=*/p, /*input_dropout=*/p);
  l.init(3);
  l.bias = random_matrix(1, out, 21);
  // Larger attention vectors than Glorot's, so the softmax is far from uniform.
  l.attn_l = random_matrix(l.attn_l.rows(), l.attn_l.cols(), 22, 1.5f);
  l.attn_r = random_matrix(l.attn_r.rows(), l.attn_r.cols(), 23, 1.5f);
  return l;
}

}  // namespace

TEST(GatLayer, ForwardEqualsThePlainGatWithConcatenatedAndAveragedHeads) {
  const block b = random_block(12, 30, 5, 20);
  const Matrix x = random_matrix(30, 7, 22);
  for (bool concat : {true, false}) {
    gat_layer l = make_layer(7, concat ? 6 : 4, 3, concat, 0.0f);
    Matrix out;
    l.apply(b, x, out, nullptr);
    const double diff = (out.cast<double>() - plain_gat(l, b, x)).cwiseAbs().maxCoeff();
    EXPECT_LT(diff, 1e-5) << (concat ? "concat" : "mean");
  }
}

// With p > 0 both the attention and the input dropout are on (their masks replayed from the seed).
TEST(GatLayer, GradientsOfEveryParameterAndTheInputMatchFiniteDifferences) {
  const block b = random_block(12, 30, 5, 20);
  for (bool concat : {true, false})
    for (float p : {0.0f, 0.4f}) {
      gat_layer l = make_layer(7, concat ? 6 : 4, 3, concat, p);
      Matrix h = random_matrix(30, 7, 24);
      const Matrix r = random_matrix(12, l.out_dim(), 25);  // loss = sum(out .* r)
      l.set_attention_seed(99);
      Matrix out, grad_src;
      l.forward(b, h, out, true);
      l.backward(b, r, &grad_src);
      // The loss replays the same dropout mask: a cache keyed by the same seed. A small step:
      // at 1e-2 some scores cross the LeakyReLU's kink and the differences err by 1e-2.
      const auto loss = [&] {
        layer_cache c;
        c.attention_seed = 99;
        Matrix o;
        l.apply(b, h, o, &c);
        return dot(o, r);
      };
      const char* names[] = {"W", "attn_l", "attn_r", "bias"};
      for (int k = 0; k < 4; ++k) {
        const double err = max_grad_error(*l.parameters()[k], *l.gradients()[k], loss, 1e-3f);
        std::printf("gat %s p=%.1f %s max rel diff %.3g\n", concat ? "concat" : "mean", p, names[k],
                    err);
        EXPECT_LT(err, 5e-3) << names[k] << (concat ? " concat" : " mean") << " p " << p;
      }
      const double err = max_grad_error(h, grad_src, loss, 1e-3f);
      EXPECT_LT(err, 5e-3) << "input" << (concat ? " concat" : " mean") << " p " << p;
    }
}

TEST(GatLayer, AttentionDropoutFollowsItsSeedAndInferenceDropsNothing) {
  const block b = random_block(20, 40, 6, 30);
  gat_layer l = make_layer(5, 8, 2, true, 0.5f);
  const Matrix x = random_matrix(40, 5, 31);
  Matrix a, c, inference;
  layer_cache ca, cc, cd;
  ca.attention_seed = cc.attention_seed = 7;
  cd.attention_seed = 8;
  l.apply(b, x, a, &ca);
  l.apply(b, x, c, &cc);
  EXPECT_EQ(a, c);  // same seed, same mask
  Matrix d;
  l.apply(b, x, d, &cd);
  EXPECT_NE(a, d);
  l.apply(b, x, inference, nullptr);  // no cache: inference, nothing dropped
  EXPECT_LT((inference.cast<double>() - plain_gat(l, b, x)).cwiseAbs().maxCoeff(), 1e-5);
}

TEST(GatLayer, ReadingATableEqualsReadingGatheredRowsBitForBit) {
  const block b = random_block(10, 25, 5, 40);
  gat_layer l = make_layer(6, 8, 4, true, 0.0f);
  const Matrix table = random_matrix(100, 6, 41);
  std::vector<node_id> row_of(25);
  Matrix gathered(25, 6);
  for (int u = 0; u < 25; ++u) {
    row_of[u] = (u * 37) % 100;
    gathered.row(u) = table.row(row_of[u]);
  }
  block bt = b;
  bt.src_nodes = row_of;
  Matrix from_rows, from_table;
  l.apply(bt, gathered, from_rows, nullptr);
  l.apply_from_table(bt, table, from_table, nullptr);
  EXPECT_EQ(from_rows, from_table);
}

TEST(GatLayer, HeadsThatDoNotDivideTheWidthAreRefused) {
  EXPECT_THROW(gat_layer(4, 10, 3, true, 0.0f), std::invalid_argument);
  EXPECT_THROW(gat_layer(4, 10, 0, false, 0.0f), std::invalid_argument);
  EXPECT_THROW(gat_layer(4, 10, 2, true, 1.0f), std::invalid_argument);
  model_config c{.kind = model_kind::gat, .in_dim = 4, .hidden = 10, .num_classes = 3};
  c.heads = 4;
  EXPECT_THROW(gnn_model m(c), std::invalid_argument);
}
