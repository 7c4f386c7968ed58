// Tests of model/adam.hpp: one step against a hand computation, bias correction, weight decay and
// state restore.
#include "model/adam.hpp"

#include <gtest/gtest.h>

#include <cmath>

using namespace degnn;

TEST(Adam, OneStepMatchesAHandComputation) {
  // Step 1: m = (1-b1) g', v = (1-b2) g'^2, m_hat = g', v_hat = g'^2, so
  // p -= lr g' / (|g'| + eps) with g' = g + wd p.
  Matrix p(1, 3), g(1, 3);
  p << 1.0f, -2.0f, 0.5f;
  g << 0.5f, 0.1f, -0.02f;
  adam opt({.lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f});
  std::vector<Matrix*> ps{&p}, gs{&g};
  opt.step(ps, gs);
  const double g0 = 0.5 + 0.01 * 1.0, g1 = 0.1 + 0.01 * -2.0, g2 = -0.02 + 0.01 * 0.5;
  EXPECT_NEAR(p(0, 0), 1.0 - 0.1 * g0 / (std::abs(g0) + 1e-8), 1e-6);
  EXPECT_NEAR(p(0, 1), -2.0 - 0.1 * g1 / (std::abs(g1) + 1e-8), 1e-6);
  EXPECT_NEAR(p(0, 2), 0.5 - 0.1 * g2 / (std::abs(g2) + 1e-8), 1e-6);
  EXPECT_EQ(opt.state().step, 1);
  EXPECT_NEAR(opt.state().m[0](0, 0), 0.1 * g0, 1e-7);
  EXPECT_NEAR(opt.state().v[0](0, 0), 0.001 * g0 * g0, 1e-8);  // 1-b2 is rounded in float
}

TEST(Adam, SecondStepAppliesBiasCorrection) {
  Matrix p(1, 1), g(1, 1);
  p << 0.0f;
  adam opt({.lr = 0.01f});
  std::vector<Matrix*> ps{&p}, gs{&g};
  g << 1.0f;
  opt.step(ps, gs);
  g << -3.0f;
  opt.step(ps, gs);
  // Hand: m1 = 0.1, v1 = 0.001; m2 = 0.09 - 0.3 = -0.21, v2 = 0.000999 + 0.009 = 0.009999.
  const double m_hat = -0.21 / (1 - 0.81), v_hat = 0.009999 / (1 - 0.998001);
  const double expected = -0.01 - 0.01 * m_hat / (std::sqrt(v_hat) + 1e-8);
  EXPECT_NEAR(p(0, 0), expected, 1e-6);
}

TEST(Adam, RestoredStateContinuesIdentically) {
  Matrix p = Matrix::Random(4, 5), g = Matrix::Random(4, 5);
  std::vector<Matrix*> ps{&p}, gs{&g};
  adam a({.lr = 0.05f, .weight_decay = 1e-3f});
  for (int i = 0; i < 3; ++i)
    a.step(ps, gs);
  adam b(a.options());
  b.set_state(a.state());
  Matrix q = p;
  std::vector<Matrix*> qs{&q};
  a.step(ps, gs);
  b.step(qs, gs);
  EXPECT_TRUE(p == q);
}

TEST(Adam, MinimisesAQuadratic) {
  Matrix p = Matrix::Constant(1, 4, 5.0f), g(1, 4);
  std::vector<Matrix*> ps{&p}, gs{&g};
  adam opt({.lr = 0.1f});
  for (int i = 0; i < 500; ++i) {
    g = 2.0f * p;  // d/dp of |p|^2
    opt.step(ps, gs);
  }
  EXPECT_LT(p.cwiseAbs().maxCoeff(), 0.05f);
}

TEST(Adam, RejectsMismatchedShapes) {
  Matrix p(2, 2), g(2, 3);
  std::vector<Matrix*> ps{&p}, gs{&g};
  adam opt;
  EXPECT_THROW(opt.step(ps, gs), std::invalid_argument);
}
