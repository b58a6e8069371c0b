// The GDN ops around the delta rule: causal conv + SiLU, l2norm, gates, gated RMSNorm.
// Forward against formulas written out here, backward against finite differences in double.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "core/error.h"
#include "kernels/ops.h"
#include "tests/layers/gdn_gradcheck.h"

namespace dt {
namespace {

using namespace gdn_test;  // the GDN tests' buffers, fills and gradient checks

double silu(double x) { return x / (1 + std::exp(-x)); }
double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

// ---- causal depthwise conv + SiLU ----

TEST(GdnConv, ForwardMatchesTheConvolutionFormula) {
  std::mt19937_64 rng(1);
  const int B = 2, T = 9, C = 5, K = 4;
  Buf<double> x({B, T, C}), w({C, 1, K}), y({B, T, C});
  fill_normal(x, rng), fill_normal(w, rng);
  poison(y);
  Context ctx;
  gdn_conv_forward(ctx, y, x, w);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int c = 0; c < C; ++c) {
        // torch: conv1d(padding=K-1)[..., :T]: the weight's last tap meets the current token.
        double u = 0;
        for (int lag = 0; lag < K; ++lag)
          if (t - lag >= 0) u += w[c * K + (K - 1 - lag)] * x[(b * T + t - lag) * C + c];
        EXPECT_NEAR(y[(b * T + t) * C + c], silu(u), 1e-14) << b << " " << t << " " << c;
      }
}

TEST(GdnConv, BackwardMatchesFiniteDifferences) {
  std::mt19937_64 rng(2);
  for (int T : {1, 3, 11}) {  // shorter than, and longer than, the kernel
    const int B = 2, C = 3, K = 4;
    Buf<double> x({B, T, C}), w({C, 1, K}), y({B, T, C}), dy({B, T, C}), dx({B, T, C}), dw({C, 1, K});
    fill_normal(x, rng), fill_normal(w, rng), fill_normal(dy, rng);
    Context ctx;
    poison(dx);
    std::fill(dw.v.begin(), dw.v.end(), 0.0);
    gdn_conv_backward(ctx, dx, dw, dy, x, w);
    auto loss = [&] {
      gdn_conv_forward(ctx, y, x, w);
      return dot(y, dy);
    };
    expect_grad_matches("conv dx T=" + std::to_string(T), x, dx, loss, rng);
    expect_grad_matches("conv dw T=" + std::to_string(T), w, dw, loss, rng);
  }
}

TEST(GdnConv, WeightGradientAccumulates) {
  std::mt19937_64 rng(3);
  Buf<double> x({1, 5, 2}), w({2, 1, 3}), dy({1, 5, 2}), dx({1, 5, 2}), dw({2, 1, 3}), dw2({2, 1, 3});
  fill_normal(x, rng), fill_normal(w, rng), fill_normal(dy, rng);
  Context ctx;
  gdn_conv_backward(ctx, dx, dw, dy, x, w);
  std::fill(dw2.v.begin(), dw2.v.end(), 1.0);
  gdn_conv_backward(ctx, dx, dw2, dy, x, w);
  for (int i = 0; i < dw.size(); ++i) EXPECT_NEAR(dw2[i], dw[i] + 1.0, 1e-14);
}

TEST(GdnConv, RejectsMismatchedWeight) {
  Buf<double> x({1, 4, 3}), w({2, 1, 4}), y({1, 4, 3});
  Context ctx;
  EXPECT_THROW(gdn_conv_forward(ctx, y, x, w), Error);
  Buf<float> wf({3, 1, 4});
  EXPECT_THROW(gdn_conv_forward(ctx, y, x, wf), Error);
}

// ---- l2norm ----

// rnorm: r = 1 / sqrt(sum x^2 + 1e-6) per row and head, beside y (the delta rule's GdnQkL2Norm keeps
// it for the backward; tests/kernels/test_gdn_qk_l2norm.cpp); y the same with or without it.
TEST(GdnL2Norm, ForwardWritesTheReciprocalNorm) {
  std::mt19937_64 rng(3);
  const int B = 2, T = 3, H = 2, d = 5;
  Buf<double> x({B, T, H, d}), y({B, T, H, d}), y_plain({B, T, H, d}), r({B, T, H});
  fill_normal(x, rng);
  poison(y), poison(r);
  Context ctx;
  gdn_l2norm_forward(ctx, y, x, 0.5, r);
  gdn_l2norm_forward(ctx, y_plain, x, 0.5);
  EXPECT_EQ(rel_diff(y, y_plain), 0.0);
  for (int i = 0; i < B * T * H; ++i) {
    double ss = 0;
    for (int j = 0; j < d; ++j) ss += x[i * d + j] * x[i * d + j];
    EXPECT_NEAR(r[i], 1 / std::sqrt(ss + 1e-6), 1e-15 / std::sqrt(ss));
  }
  Buf<double> wrong({B, T, H + 1});
  EXPECT_THROW(gdn_l2norm_forward(ctx, y, x, 0.5, wrong), Error);
}

TEST(GdnL2Norm, ForwardMatchesFormulaOnStridedColumns) {
  std::mt19937_64 rng(4);
  const int B = 2, T = 3, H = 2, d = 5, C = 4 + H * d + 3;  // the heads sit in columns [4, 4 + H*d)
  Buf<double> buf({B, T, C}), y({B, T, H, d});
  fill_normal(buf, rng);
  poison(y);
  Context ctx;
  const double scale = 1 / std::sqrt(double(d));
  gdn_l2norm_forward(ctx, y, gdn_head_view(buf, 4, H, d), scale);
  for (int r = 0; r < B * T; ++r)
    for (int h = 0; h < H; ++h) {
      const double* x = &buf[r * C + 4 + h * d];
      double ss = 0;
      for (int i = 0; i < d; ++i) ss += x[i] * x[i];
      for (int i = 0; i < d; ++i)
        EXPECT_NEAR(y[(r * H + h) * d + i], scale * x[i] / std::sqrt(ss + 1e-6), 1e-15);
    }
}

TEST(GdnL2Norm, BackwardMatchesFiniteDifferencesAndLeavesOtherColumns) {
  std::mt19937_64 rng(5);
  const int B = 2, T = 3, H = 3, d = 4, C = 2 * H * d;
  for (double scale : {1.0, 0.5}) {
    Buf<double> x({B, T, H, d}), y({B, T, H, d}), dy({B, T, H, d}), dbuf({B, T, C});
    fill_normal(x, rng), fill_normal(dy, rng);
    x[0] = 2e-2, x[1] = -3e-2;  // a small head: steep gradients
    for (int i = 2; i < d; ++i) x[i] = 0;
    Context ctx;
    // Write the gradient into the second half of a wider buffer; the first half must stay.
    std::fill(dbuf.v.begin(), dbuf.v.end(), 7.0);
    Tensor dx_view = gdn_head_view(dbuf, H * d, H, d);
    gdn_l2norm_backward(ctx, dx_view, dy, x, scale);
    Buf<double> dx({B, T, H, d});
    for (int r = 0; r < B * T; ++r)
      for (int j = 0; j < C; ++j) {
        if (j < H * d) {
          EXPECT_EQ(dbuf[r * C + j], 7.0);
        } else {
          dx[r * H * d + j - H * d] = dbuf[r * C + j];
        }
      }
    auto loss = [&] {
      gdn_l2norm_forward(ctx, y, x, scale);
      return dot(y, dy);
    };
    expect_grad_matches("l2norm dx", x, dx, loss, rng, 1e-6, 6);
  }
}

// ---- gates ----

TEST(GdnGates, ForwardMatchesFormula) {
  std::mt19937_64 rng(6);
  const int B = 2, T = 4, H = 3;
  Buf<double> a({B, T, H}), b({B, T, H}), A_log({H}), dt_bias({H}), g({B, T, H}), beta({B, T, H});
  fill_normal(a, rng, 3.0), fill_normal(b, rng, 3.0), fill_uniform(A_log, rng, 0, 2.7), fill_normal(dt_bias, rng);
  a[0] = 40, a[1] = -40;  // softplus far out on both sides
  poison(g), poison(beta);
  Context ctx;
  gdn_gates_forward(ctx, g, beta, a, b, A_log, dt_bias);
  for (int i = 0; i < B * T * H; ++i) {
    double x = a[i] + dt_bias[i % H];
    double sp = x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
    EXPECT_NEAR(g[i], -std::exp(A_log[i % H]) * sp, 1e-13 * (1 + std::fabs(g[i])));
    EXPECT_NEAR(beta[i], sigmoid(b[i]), 1e-15);
    EXPECT_LE(g[i], 0.0);
  }
}

TEST(GdnGates, BackwardMatchesFiniteDifferences) {
  std::mt19937_64 rng(7);
  const int B = 2, T = 5, H = 3;
  Buf<double> a({B, T, H}), b({B, T, H}), A_log({H}), dt_bias({H}), g({B, T, H}), beta({B, T, H});
  Buf<double> dg({B, T, H}), dbeta({B, T, H}), da({B, T, H}), db({B, T, H}), dA_log({H}), ddt({H});
  fill_normal(a, rng, 2.0), fill_normal(b, rng, 2.0), fill_uniform(A_log, rng, 0, 2.7), fill_normal(dt_bias, rng);
  fill_normal(dg, rng), fill_normal(dbeta, rng);
  poison(da), poison(db);
  Context ctx;
  gdn_gates_backward(ctx, da, db, dA_log, ddt, dg, dbeta, a, b, A_log, dt_bias);
  auto loss = [&] {
    gdn_gates_forward(ctx, g, beta, a, b, A_log, dt_bias);
    return dot(g, dg) + dot(beta, dbeta);
  };
  expect_grad_matches("gates da", a, da, loss, rng);
  expect_grad_matches("gates db", b, db, loss, rng);
  expect_grad_matches("gates dA_log", A_log, dA_log, loss, rng);
  expect_grad_matches("gates ddt_bias", dt_bias, ddt, loss, rng);
}

TEST(GdnGates, EdgeValuesStayFinite) {
  const double inf = std::numeric_limits<double>::infinity();
  Buf<double> a({1, 4, 1}), b({1, 4, 1}), A_log({1}), dt_bias({1}), g({1, 4, 1}), beta({1, 4, 1});
  Buf<double> dg({1, 4, 1}), dbeta({1, 4, 1}), da({1, 4, 1}), db({1, 4, 1}), dA_log({1}), ddt({1});
  b[0] = inf, b[1] = -inf, b[2] = 800, b[3] = -800;
  a[0] = 0, a[1] = 30, a[2] = -30, a[3] = 1;
  A_log[0] = -60;  // g ~ -1e-26: no decay at all
  dt_bias[0] = 0;
  std::fill(dg.v.begin(), dg.v.end(), 1.0);
  std::fill(dbeta.v.begin(), dbeta.v.end(), 1.0);
  Context ctx;
  gdn_gates_forward(ctx, g, beta, a, b, A_log, dt_bias);
  EXPECT_EQ(beta[0], 1.0);
  EXPECT_EQ(beta[1], 0.0);
  EXPECT_EQ(beta[2], 1.0);
  EXPECT_EQ(beta[3], 0.0);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(g[i] <= 0 && g[i] > -1e-20) << g[i];
  gdn_gates_backward(ctx, da, db, dA_log, ddt, dg, dbeta, a, b, A_log, dt_bias);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(db[i], 0.0);  // sigmoid saturated: no gradient, and no NaN from inf * 0
    EXPECT_TRUE(std::isfinite(da[i]));
  }
  EXPECT_TRUE(std::isfinite(dA_log[0]) && std::isfinite(ddt[0]));
}

// ---- gated RMSNorm ----

TEST(GdnNorm, ForwardMatchesFormula) {
  std::mt19937_64 rng(8);
  const int B = 2, T = 3, H = 2, dv = 5;
  const double eps = 1e-6;
  Buf<double> o({B, T, H, dv}), z({B, T, H, dv}), w({dv}), y({B, T, H, dv});
  fill_normal(o, rng), fill_normal(z, rng), fill_normal(w, rng, 0.5, 1.0);
  poison(y);
  Context ctx;
  gdn_norm_forward(ctx, y, o, z, w, eps);
  for (int r = 0; r < B * T * H; ++r) {
    double ms = 0;
    for (int i = 0; i < dv; ++i) ms += o[r * dv + i] * o[r * dv + i] / dv;
    for (int i = 0; i < dv; ++i)
      EXPECT_NEAR(y[r * dv + i], o[r * dv + i] / std::sqrt(ms + eps) * w[i] * silu(z[r * dv + i]), 1e-14);
  }
}

TEST(GdnNorm, BackwardMatchesFiniteDifferences) {
  std::mt19937_64 rng(9);
  const int B = 2, T = 3, H = 3, dv = 7;
  const double eps = 1e-5;
  Buf<double> o({B, T, H, dv}), z({B, T, H, dv}), w({dv}), y({B, T, H, dv}), dy({B, T, H, dv});
  Buf<double> d_o({B, T, H, dv}), dz({B, T, H, dv}), dw({dv});
  fill_normal(o, rng), fill_normal(z, rng, 2.0), fill_normal(w, rng, 0.5, 1.0), fill_normal(dy, rng);
  poison(d_o), poison(dz);
  std::fill(dw.v.begin(), dw.v.end(), 0.0);
  Context ctx;
  gdn_norm_backward(ctx, d_o, dz, dw, dy, o, z, w, eps);
  auto loss = [&] {
    gdn_norm_forward(ctx, y, o, z, w, eps);
    return dot(y, dy);
  };
  expect_grad_matches("norm d_o", o, d_o, loss, rng);
  expect_grad_matches("norm dz", z, dz, loss, rng);
  expect_grad_matches("norm dw", w, dw, loss, rng);
}

TEST(GdnNorm, FloatAgreesWithDouble) {
  std::mt19937_64 rng(10);
  const int B = 2, T = 4, H = 2, dv = 6;
  Buf<double> o({B, T, H, dv}), z({B, T, H, dv}), w({dv}), y({B, T, H, dv});
  fill_normal(o, rng), fill_normal(z, rng), fill_normal(w, rng, 0.5, 1.0);
  Buf<float> of = gdn_test::to_float(o), zf = gdn_test::to_float(z), wf = gdn_test::to_float(w), yf({B, T, H, dv});
  poison(yf);
  Context ctx;
  gdn_norm_forward(ctx, y, o, z, w, 1e-6);
  gdn_norm_forward(ctx, yf, of, zf, wf, 1e-6);
  EXPECT_LT(rel_diff(yf, y), 1e-6);
}

}  // namespace
}  // namespace dt
