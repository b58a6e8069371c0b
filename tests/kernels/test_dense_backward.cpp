// Every dense op's backward against central finite differences in double (docs/architecture.md,
// "Tests"):
// loss = sum(R * op(inputs)) for a random R; each input's gradient is checked along a random
// unit direction and on a few single entries. Outputs are NaN-poisoned before each call, and
// accumulated gradients (dw) start non-zero.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/ops.h"

namespace dt {
namespace {

using Vec = std::vector<double>;

Vec randn(int64_t n, std::mt19937_64& rng, double std = 1.0) {
  std::normal_distribution<double> d(0.0, std);
  Vec v(n);
  for (auto& x : v) x = d(rng);
  return v;
}
Vec nans(int64_t n) { return Vec(n, std::numeric_limits<double>::quiet_NaN()); }
Tensor view(Vec& v, Shape s) {
  EXPECT_EQ(s.numel(), static_cast<int64_t>(v.size()));
  return Tensor(v.data(), DType::kF64, Device::kCPU, s);
}
Tensor view(std::vector<int32_t>& v, Shape s) { return Tensor(v.data(), DType::kI32, Device::kCPU, s); }
double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Checks g = d loss / d p by central differences (step 1e-5 along a unit direction).
void expect_gradient(const std::string& what, const std::function<double()>& loss, Vec& p, const Vec& g,
                     uint64_t seed) {
  const double h = 1e-5;
  std::mt19937_64 rng(seed);
  const Vec p0 = p;
  double gmax = 0;
  for (double x : g) {
    ASSERT_TRUE(std::isfinite(x)) << what;
    gmax = std::max(gmax, std::fabs(x));
  }
  ASSERT_GT(gmax, 0) << what << ": zero gradient";
  Vec u = randn(p.size(), rng);
  double n = std::sqrt(dot(u, u));
  for (size_t i = 0; i < p.size(); ++i) p[i] = p0[i] + h * u[i] / n;
  double lp = loss();
  for (size_t i = 0; i < p.size(); ++i) p[i] = p0[i] - h * u[i] / n;
  double lm = loss();
  p = p0;
  double num = (lp - lm) / (2 * h), ana = dot(g, u) / n;
  EXPECT_LE(std::fabs(num - ana), 1e-7 * std::max(std::fabs(num), 1e-6 * gmax))
      << what << ": projected gradient " << ana << " vs finite differences " << num;
  std::uniform_int_distribution<size_t> pick(0, p.size() - 1);
  for (int k = 0; k < 3; ++k) {
    size_t i = pick(rng);
    p[i] = p0[i] + h;
    double a = loss();
    p[i] = p0[i] - h;
    double b = loss();
    p = p0;
    double fd = (a - b) / (2 * h);
    EXPECT_LE(std::fabs(fd - g[i]), 1e-6 * std::max({std::fabs(fd), 1e-3 * gmax}))
        << what << "[" << i << "]: " << g[i] << " vs " << fd;
  }
}

class DenseBackward : public ::testing::Test {
 protected:
  std::mt19937_64 rng_{20260101};
  Context ctx_;
};

TEST_F(DenseBackward, Linear) {
  const int64_t N = 7, I = 5, O = 9;
  Vec x = randn(N * I, rng_), w = randn(O * I, rng_), r = randn(N * O, rng_), y(N * O);
  auto loss = [&] {
    y = nans(y.size());
    linear_forward(ctx_, view(y, {N, O}), view(x, {N, I}), view(w, {O, I}));
    return dot(y, r);
  };
  loss();
  Vec dx = nans(x.size()), dw(w.size(), 0.5);
  linear_backward(ctx_, view(dx, {N, I}), view(dw, {O, I}), view(r, {N, O}), view(x, {N, I}), view(w, {O, I}));
  for (double& g : dw) g -= 0.5;
  expect_gradient("linear dx", loss, x, dx, 1);
  expect_gradient("linear dw", loss, w, dw, 2);
}

TEST_F(DenseBackward, Embedding) {
  const int64_t V = 6, D = 5;
  std::vector<int32_t> ids{2, 0, 5, 2, 2, 3, 1};
  const int64_t N = ids.size();
  Vec w = randn(V * D, rng_), r = randn(N * D, rng_), y(N * D);
  auto loss = [&] {
    y = nans(y.size());
    embedding_forward(ctx_, view(y, {N, D}), view(ids, {N}), view(w, {V, D}));
    return dot(y, r);
  };
  loss();
  Vec dw(w.size(), -1.0);
  embedding_backward(ctx_, view(dw, {V, D}), view(r, {N, D}), view(ids, {N}));
  for (double& g : dw) g += 1.0;
  // Row 4 is never used: its gradient must stay zero.
  for (int64_t d = 0; d < D; ++d) EXPECT_EQ(dw[4 * D + d], 0.0);
  expect_gradient("embedding dw", loss, w, dw, 3);
}

TEST_F(DenseBackward, RmsNorm) {
  const int64_t R = 5, D = 11;
  for (bool zc : {false, true}) {
    Vec x = randn(R * D, rng_, 1.5), w = randn(D, rng_, 0.5), r = randn(R * D, rng_), y(R * D), rstd(R);
    auto loss = [&] {
      y = nans(y.size());
      rmsnorm_forward(ctx_, view(y, {R, D}), view(rstd, {R}), view(x, {R, D}), view(w, {D}), 1e-6, zc);
      return dot(y, r);
    };
    loss();
    Vec dx = nans(x.size()), dw(D, 0.5);
    rmsnorm_backward(ctx_, view(dx, {R, D}), view(dw, {D}), view(r, {R, D}), view(x, {R, D}), view(w, {D}),
                     view(rstd, {R}), zc);
    for (double& g : dw) g -= 0.5;
    expect_gradient(zc ? "rmsnorm(1+w) dx" : "rmsnorm dx", loss, x, dx, 4);
    expect_gradient(zc ? "rmsnorm(1+w) dw" : "rmsnorm dw", loss, w, dw, 5);
  }
}

// The residual form, as a pre-norm block uses it: loss = sum(R * rmsnorm(x)) + sum(Q * x) has
// d loss / dx = Q + (R through the norm), which rmsnorm_backward writes given residual = Q,
// also in place over Q.
TEST_F(DenseBackward, RmsNormWithResidual) {
  const int64_t R = 7, D = 9;
  for (bool zc : {false, true}) {
    Vec x = randn(R * D, rng_, 1.5), w = randn(D, rng_, 0.5), r = randn(R * D, rng_), q = randn(R * D, rng_, 2.0),
        y(R * D), rstd(R);
    auto loss = [&] {
      y = nans(y.size());
      rmsnorm_forward(ctx_, view(y, {R, D}), view(rstd, {R}), view(x, {R, D}), view(w, {D}), 1e-6, zc);
      return dot(y, r) + dot(x, q);
    };
    loss();
    Vec dx = nans(x.size());
    rmsnorm_backward(ctx_, view(dx, {R, D}), Tensor(), view(r, {R, D}), view(x, {R, D}), view(w, {D}),
                     view(rstd, {R}), zc, view(q, {R, D}));
    Vec inplace = q;  // before expect_gradient, which leaves rstd at a perturbed x
    rmsnorm_backward(ctx_, view(inplace, {R, D}), Tensor(), view(r, {R, D}), view(x, {R, D}), view(w, {D}),
                     view(rstd, {R}), zc, view(inplace, {R, D}));
    EXPECT_EQ(inplace, dx) << "dx aliasing the residual";
    expect_gradient(zc ? "rmsnorm(1+w) dx + residual" : "rmsnorm dx + residual", loss, x, dx, 6);
  }
}

TEST_F(DenseBackward, SwigluAndSigmoidGate) {
  const int64_t n = 23;
  Vec a = randn(n, rng_, 2.0), b = randn(n, rng_, 2.0), r = randn(n, rng_), y(n);
  for (int op = 0; op < 2; ++op) {
    auto loss = [&] {
      y = nans(n);
      if (op == 0) swiglu_forward(ctx_, view(y, {n}), view(a, {n}), view(b, {n}));
      else sigmoid_gate_forward(ctx_, view(y, {n}), view(a, {n}), view(b, {n}));
      return dot(y, r);
    };
    Vec da = nans(n), db = nans(n);
    if (op == 0) swiglu_backward(ctx_, view(da, {n}), view(db, {n}), view(r, {n}), view(a, {n}), view(b, {n}));
    else sigmoid_gate_backward(ctx_, view(da, {n}), view(db, {n}), view(r, {n}), view(a, {n}), view(b, {n}));
    expect_gradient(op ? "sigmoid_gate dx" : "swiglu dgate", loss, a, da, 6);
    expect_gradient(op ? "sigmoid_gate dg" : "swiglu dup", loss, b, db, 7);
  }
}

TEST_F(DenseBackward, Rope) {
  const int64_t B = 2, S = 5, H = 3, D = 10;
  for (bool inter : {false, true}) {
    const int64_t rot = inter ? 6 : 8;
    Vec x = randn(B * S * H * D, rng_), r = randn(x.size(), rng_), y(x.size());
    auto loss = [&] {
      y = nans(y.size());
      rope_forward(ctx_, view(y, {B, S, H, D}), view(x, {B, S, H, D}), rot, 50.0, inter);
      return dot(y, r);
    };
    Vec dx = nans(x.size());
    rope_backward(ctx_, view(dx, {B, S, H, D}), view(r, {B, S, H, D}), rot, 50.0, inter);
    expect_gradient(inter ? "rope interleaved dx" : "rope dx", loss, x, dx, 8);
  }
}

TEST_F(DenseBackward, AttentionGqa) {
  const int64_t B = 2, S = 7, H = 4, Hkv = 2, Dqk = 5, Dv = 3;
  const double scale = 0.45;
  Vec q = randn(B * S * H * Dqk, rng_), k = randn(B * S * Hkv * Dqk, rng_), v = randn(B * S * Hkv * Dv, rng_);
  Vec r = randn(B * S * H * Dv, rng_), o(r.size()), lse(B * H * S);
  auto loss = [&] {
    o = nans(o.size());
    lse = nans(lse.size());
    attention_forward(ctx_, view(o, {B, S, H, Dv}), view(lse, {B, H, S}), view(q, {B, S, H, Dqk}),
                      view(k, {B, S, Hkv, Dqk}), view(v, {B, S, Hkv, Dv}), scale);
    return dot(o, r);
  };
  loss();
  Vec dq = nans(q.size()), dk = nans(k.size()), dv = nans(v.size());
  attention_backward(ctx_, view(dq, {B, S, H, Dqk}), view(dk, {B, S, Hkv, Dqk}), view(dv, {B, S, Hkv, Dv}),
                     view(r, {B, S, H, Dv}), view(q, {B, S, H, Dqk}), view(k, {B, S, Hkv, Dqk}),
                     view(v, {B, S, Hkv, Dv}), view(o, {B, S, H, Dv}), view(lse, {B, H, S}), scale);
  expect_gradient("attention dq", loss, q, dq, 9);
  expect_gradient("attention dk", loss, k, dk, 10);
  expect_gradient("attention dv", loss, v, dv, 11);
  // Causality: the last token's key and value reach nothing but the last query.
  Vec k2 = k;
  for (int64_t d = 0; d < Dqk; ++d) k2[((0 * S + S - 1) * Hkv + 1) * Dqk + d] += 1.0;
  Vec o_ref = o;
  std::swap(k, k2);
  loss();
  std::swap(k, k2);
  for (int64_t i = 0; i + 1 < S; ++i)
    for (int64_t j = 0; j < H * Dv; ++j) EXPECT_EQ(o[i * H * Dv + j], o_ref[i * H * Dv + j]);
}

TEST_F(DenseBackward, HeadConcatShared) {
  const int64_t R = 4, H = 3, Da = 2, Db = 3;
  Vec a = randn(R * H * Da, rng_), b = randn(R * Db, rng_), r = randn(R * H * (Da + Db), rng_), x(r.size());
  auto loss = [&] {
    x = nans(x.size());
    head_concat_forward(ctx_, view(x, {R, H, Da + Db}), view(a, {R, H, Da}), view(b, {R, 1, Db}));
    return dot(x, r);
  };
  Vec da = nans(a.size()), db = nans(b.size());
  head_concat_backward(ctx_, view(da, {R, H, Da}), view(db, {R, 1, Db}), view(r, {R, H, Da + Db}));
  expect_gradient("head_concat da", loss, a, da, 12);
  expect_gradient("head_concat db (shared)", loss, b, db, 13);
}

TEST_F(DenseBackward, CrossEntropy) {
  const int64_t N = 6, V = 13;
  Vec logits = randn(N * V, rng_, 3.0), losses(N), lse(N);
  std::vector<int32_t> tg{0, 12, 5, 5, 7, 1};
  const double scale = 1.0 / N;
  auto loss = [&] {
    losses = nans(N);
    cross_entropy_forward(ctx_, view(losses, {N}), view(lse, {N}), view(logits, {N, V}), view(tg, {N}));
    double s = 0;
    for (double l : losses) s += l;
    return s * scale;
  };
  loss();
  Vec dl = nans(logits.size());
  cross_entropy_backward(ctx_, view(dl, {N, V}), view(logits, {N, V}), view(lse, {N}), view(tg, {N}), scale);
  expect_gradient("cross_entropy dlogits", loss, logits, dl, 14);
}

}  // namespace
}  // namespace dt
