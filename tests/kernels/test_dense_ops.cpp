// Dense ops (kernels/ops.h) against second, independent computations: naive loops in long
// double for what the op does with BLAS or clever indexing, in f32 and f64, odd sizes, outputs
// NaN-poisoned before each call, inputs fresh each run (the seed is printed on failure).
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <limits>
#include <random>
#include <vector>

#include "kernels/ops.h"

namespace dt {
namespace {

using LD = long double;

uint64_t fresh_seed() {
  static std::random_device rd;
  return (uint64_t{rd()} << 32) | rd();
}

template <class T>
std::vector<T> randn(int64_t n, std::mt19937_64& rng, double std = 1.0) {
  std::normal_distribution<double> d(0.0, std);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(d(rng));
  return v;
}

template <class T>
std::vector<T> nans(int64_t n) {
  return std::vector<T>(n, std::numeric_limits<T>::quiet_NaN());
}

template <class T>
Tensor view(std::vector<T>& v, Shape s) {
  EXPECT_EQ(s.numel(), static_cast<int64_t>(v.size()));
  return Tensor(v.data(), dtype_of<T>(), Device::kCPU, s);
}
inline Tensor view(std::vector<int32_t>& v, Shape s) { return Tensor(v.data(), DType::kI32, Device::kCPU, s); }

// max |got - want| / max |want|, and every value finite.
template <class T>
double rel_err(const std::vector<T>& got, const std::vector<LD>& want) {
  EXPECT_EQ(got.size(), want.size());
  LD num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(static_cast<double>(got[i]))) return std::numeric_limits<double>::infinity();
    num = std::max(num, std::fabs(static_cast<LD>(got[i]) - want[i]));
    den = std::max(den, std::fabs(want[i]));
  }
  return static_cast<double>(den > 0 ? num / den : num);
}

template <class T>
constexpr double tol() {
  return std::is_same_v<T, float> ? 2e-6 : 1e-13;
}

template <class T>
class DenseOps : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = fresh_seed();
    rng_.seed(seed_);
  }
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
  Context ctx_;
};

using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(DenseOps, FloatTypes);

#define DT_SEED_TRACE() SCOPED_TRACE(::testing::Message() << "seed " << this->seed_)

TYPED_TEST(DenseOps, EmbeddingGathersRowsAndScattersGradients) {
  using T = TypeParam;
  DT_SEED_TRACE();
  const int64_t V = 11, D = 5, N = 9;
  std::vector<T> w = randn<T>(V * D, this->rng_), y = nans<T>(N * D);
  std::vector<int32_t> ids{3, 0, 10, 3, 7, 3, 1, 10, 2};
  embedding_forward(this->ctx_, view(y, {3, 3, D}), view(ids, {3, 3}), view(w, {V, D}));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < D; ++d) EXPECT_EQ(y[n * D + d], w[ids[n] * D + d]);
  // Backward accumulates, and repeated ids add up.
  std::vector<T> dy = randn<T>(N * D, this->rng_), dw(V * D, T(1));
  embedding_backward(this->ctx_, view(dw, {V, D}), view(dy, {3, 3, D}), view(ids, {3, 3}));
  for (int64_t v = 0; v < V; ++v)
    for (int64_t d = 0; d < D; ++d) {
      LD want = 1;
      for (int64_t n = 0; n < N; ++n)
        if (ids[n] == v) want += dy[n * D + d];
      EXPECT_NEAR(dw[v * D + d], static_cast<double>(want), tol<T>() * 10);
    }
  std::vector<int32_t> bad{0, 11};
  std::vector<T> y2(2 * D), dy2(2 * D);
  EXPECT_THROW(embedding_forward(this->ctx_, view(y2, {2, D}), view(bad, {2}), view(w, {V, D})), Error);
  bad[1] = -1;
  EXPECT_THROW(embedding_backward(this->ctx_, view(dw, {V, D}), view(dy2, {2, D}), view(bad, {2})), Error);
}

TYPED_TEST(DenseOps, RmsNormBothForms) {
  using T = TypeParam;
  DT_SEED_TRACE();
  const int64_t rows = 7, D = 13;
  const double eps = 1e-6;
  std::vector<T> x = randn<T>(rows * D, this->rng_, 2.0), w = randn<T>(D, this->rng_, 0.5);
  for (bool zc : {false, true}) {
    std::vector<T> y = nans<T>(rows * D), rstd = nans<T>(rows);
    rmsnorm_forward(this->ctx_, view(y, {rows, D}), view(rstd, {rows}), view(x, {rows, D}), view(w, {D}), eps, zc);
    std::vector<LD> want(rows * D), want_rstd(rows);
    for (int64_t r = 0; r < rows; ++r) {
      LD ms = 0;
      for (int64_t d = 0; d < D; ++d) ms += LD(x[r * D + d]) * x[r * D + d];
      want_rstd[r] = 1 / std::sqrt(ms / D + eps);
      for (int64_t d = 0; d < D; ++d) want[r * D + d] = x[r * D + d] * want_rstd[r] * ((zc ? 1 : 0) + LD(w[d]));
    }
    EXPECT_LE(rel_err(y, want), tol<T>()) << "zero_centered " << zc;
    EXPECT_LE(rel_err(rstd, want_rstd), tol<T>()) << "zero_centered " << zc;
  }
}

// rmsnorm_backward with a residual gradient: dx = residual + the norm's dx, against a long-double
// loop, and bit for bit the plain backward followed by residual_add (one T rounding each way),
// also when dx aliases the residual or dy. dw is accumulated as without a residual.
TYPED_TEST(DenseOps, RmsNormBackwardAddsResidual) {
  using T = TypeParam;
  DT_SEED_TRACE();
  const int64_t rows = 9, D = 13;
  const Shape s{rows, D};
  std::vector<T> x = randn<T>(rows * D, this->rng_, 2.0), w = randn<T>(D, this->rng_, 0.5),
                 dy = randn<T>(rows * D, this->rng_), res = randn<T>(rows * D, this->rng_, 3.0);
  for (bool zc : {false, true}) {
    SCOPED_TRACE(zc ? "zero-centred" : "plain");
    std::vector<T> y = nans<T>(rows * D), rstd = nans<T>(rows);
    rmsnorm_forward(this->ctx_, view(y, s), view(rstd, {rows}), view(x, s), view(w, {D}), 1e-6, zc);
    std::vector<LD> want(rows * D), want_dw(D);
    for (int64_t d = 0; d < D; ++d) want_dw[d] = LD(0.25);
    for (int64_t r = 0; r < rows; ++r) {
      const LD rs = rstd[r];
      LD dot = 0;
      for (int64_t d = 0; d < D; ++d) {
        dot += LD(dy[r * D + d]) * ((zc ? 1 : 0) + LD(w[d])) * x[r * D + d] * rs;
        want_dw[d] += LD(dy[r * D + d]) * x[r * D + d] * rs;
      }
      for (int64_t d = 0; d < D; ++d) {
        const int64_t i = r * D + d;
        want[i] = res[i] + rs * (dy[i] * ((zc ? 1 : 0) + LD(w[d])) - x[i] * rs * dot / D);
      }
    }
    // The unfused pair: plain backward, then residual_add.
    std::vector<T> sep = nans<T>(rows * D), dw_sep(D, T(0.25));
    rmsnorm_backward(this->ctx_, view(sep, s), view(dw_sep, {D}), view(dy, s), view(x, s), view(w, {D}),
                     view(rstd, {rows}), zc);
    residual_add(this->ctx_, view(sep, s), view(sep, s), view(res, s));

    std::vector<T> dx = nans<T>(rows * D), dw(D, T(0.25));
    rmsnorm_backward(this->ctx_, view(dx, s), view(dw, {D}), view(dy, s), view(x, s), view(w, {D}),
                     view(rstd, {rows}), zc, view(res, s));
    EXPECT_LE(rel_err(dx, want), 4 * tol<T>());
    EXPECT_LE(rel_err(dw, want_dw), 4 * tol<T>());
    EXPECT_EQ(dx, sep) << "fused residual: not the bits of backward + residual_add";
    EXPECT_EQ(dw, dw_sep);

    // dx aliases the residual (Block: g1 = g1 + ...); dw undefined.
    std::vector<T> inout = res;
    rmsnorm_backward(this->ctx_, view(inout, s), Tensor(), view(dy, s), view(x, s), view(w, {D}),
                     view(rstd, {rows}), zc, view(inout, s));
    EXPECT_EQ(inout, sep) << "dx aliasing the residual";

    // dx aliases dy.
    std::vector<T> dyx = dy;
    rmsnorm_backward(this->ctx_, view(dyx, s), Tensor(), view(dyx, s), view(x, s), view(w, {D}),
                     view(rstd, {rows}), zc, view(res, s));
    EXPECT_EQ(dyx, sep) << "dx aliasing dy";
  }
  std::vector<T> short_res(rows * D - 1), dx(rows * D), rstd(rows, T(1));
  EXPECT_THROW(rmsnorm_backward(this->ctx_, view(dx, s), Tensor(), view(dy, s), view(x, s), view(w, {D}),
                                view(rstd, {rows}), false, view(short_res, {rows * D - 1})),
               Error);
}

TYPED_TEST(DenseOps, ElementwiseGates) {
  using T = TypeParam;
  DT_SEED_TRACE();
  const int64_t n = 29;
  std::vector<T> a = randn<T>(n, this->rng_, 3.0), b = randn<T>(n, this->rng_), y = nans<T>(n);
  auto sig = [](LD v) { return 1 / (1 + std::exp(-v)); };
  std::vector<LD> want(n);
  swiglu_forward(this->ctx_, view(y, {n}), view(a, {n}), view(b, {n}));
  for (int64_t i = 0; i < n; ++i) want[i] = LD(a[i]) * sig(a[i]) * b[i];
  EXPECT_LE(rel_err(y, want), tol<T>());
  y = nans<T>(n);
  sigmoid_gate_forward(this->ctx_, view(y, {n}), view(b, {n}), view(a, {n}));
  for (int64_t i = 0; i < n; ++i) want[i] = LD(b[i]) * sig(a[i]);
  EXPECT_LE(rel_err(y, want), tol<T>());
  // residual_add in place: y = y + b.
  std::vector<T> acc = a;
  residual_add(this->ctx_, view(acc, {n}), view(acc, {n}), view(b, {n}));
  for (int64_t i = 0; i < n; ++i) want[i] = LD(a[i]) + b[i];
  EXPECT_LE(rel_err(acc, want), tol<T>());
}

// Rotate-half RoPE against complex multiplication, with the angle in long double.
TYPED_TEST(DenseOps, RopeRotateHalfPartial) {
  using T = TypeParam;
  DT_SEED_TRACE();
  const int64_t B = 2, S = 9, H = 3, D = 10, rot = 6, half = rot / 2;
  const double theta = 500.0;
  std::vector<T> x = randn<T>(B * S * H * D, this->rng_), y = nans<T>(x.size());
  rope_forward(this->ctx_, view(y, {B, S, H, D}), view(x, {B, S, H, D}), rot, theta, false);
  std::vector<LD> want(x.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < S; ++t)
      for (int64_t h = 0; h < H; ++h) {
        int64_t base = ((b * S + t) * H + h) * D;
        for (int64_t d = rot; d < D; ++d) want[base + d] = x[base + d];
        for (int64_t i = 0; i < half; ++i) {
          LD angle = t * std::pow(LD(theta), -LD(2 * i) / rot);
          std::complex<LD> z(x[base + i], x[base + half + i]);
          z *= std::polar(LD(1), angle);
          want[base + i] = z.real();
          want[base + half + i] = z.imag();
        }
      }
  EXPECT_LE(rel_err(y, want), (std::is_same_v<T, float> ? 2e-6 : 1e-12));
  // In place gives the same.
  std::vector<T> inplace = x;
  rope_forward(this->ctx_, view(inplace, {B, S, H, D}), view(inplace, {B, S, H, D}), rot, theta, false);
  EXPECT_EQ(inplace, y);
}

// Interleaved RoPE is HF's apply_rotary_pos_emb_interleave: de-interleave each head
// (view(d/2, 2).transpose(-1, -2)), then rotate-half.
TYPED_TEST(DenseOps, RopeInterleavedIsDeinterleaveThenRotateHalf) {
  using T = TypeParam;
  DT_SEED_TRACE();
  const int64_t B = 1, S = 6, H = 2, D = 8;
  std::vector<T> x = randn<T>(B * S * H * D, this->rng_), y = nans<T>(x.size()), perm(x.size()), y2 = nans<T>(x.size());
  for (int64_t r = 0; r < B * S * H; ++r)
    for (int64_t i = 0; i < D / 2; ++i) {
      perm[r * D + i] = x[r * D + 2 * i];
      perm[r * D + D / 2 + i] = x[r * D + 2 * i + 1];
    }
  rope_forward(this->ctx_, view(y, {B, S, H, D}), view(x, {B, S, H, D}), D, 10000.0, true);
  rope_forward(this->ctx_, view(y2, {B, S, H, D}), view(perm, {B, S, H, D}), D, 10000.0, false);
  EXPECT_EQ(y, y2);
}

// RoPE encodes relative position: <rope(q)_t, rope(k)_s> depends on t - s only; and its
// backward is the inverse rotation, so backward(forward(x)) = x.
TYPED_TEST(DenseOps, RopeRelativeAndInvertible) {
  using T = TypeParam;
  DT_SEED_TRACE();
  const int64_t S = 8, D = 6;
  for (bool inter : {false, true}) {
    std::vector<T> q1 = randn<T>(D, this->rng_), k1 = randn<T>(D, this->rng_), q(S * D), k(S * D);
    for (int64_t t = 0; t < S; ++t)
      for (int64_t d = 0; d < D; ++d) q[t * D + d] = q1[d], k[t * D + d] = k1[d];
    rope_forward(this->ctx_, view(q, {1, S, 1, D}), view(q, {1, S, 1, D}), D, 100.0, inter);
    rope_forward(this->ctx_, view(k, {1, S, 1, D}), view(k, {1, S, 1, D}), D, 100.0, inter);
    auto score = [&](int64_t t, int64_t s) {
      LD acc = 0;
      for (int64_t d = 0; d < D; ++d) acc += LD(q[t * D + d]) * k[s * D + d];
      return static_cast<double>(acc);
    };
    for (int64_t delta = 0; delta < 3; ++delta)
      for (int64_t s = 0; s + delta < S; ++s) EXPECT_NEAR(score(s + delta, s), score(delta, 0), 50 * tol<T>());
    std::vector<T> x = randn<T>(2 * S * 3 * D, this->rng_), y = nans<T>(x.size()), back = nans<T>(x.size());
    rope_forward(this->ctx_, view(y, {2, S, 3, D}), view(x, {2, S, 3, D}), 4, 100.0, inter);
    rope_backward(this->ctx_, view(back, {2, S, 3, D}), view(y, {2, S, 3, D}), 4, 100.0, inter);
    std::vector<LD> want(x.begin(), x.end());
    EXPECT_LE(rel_err(back, want), 10 * tol<T>()) << "interleaved " << inter;
  }
}

// Causal GQA attention against a naive softmax in long double; Dv != Dqk as in MLA.
TYPED_TEST(DenseOps, AttentionMatchesNaiveSoftmax) {
  using T = TypeParam;
  DT_SEED_TRACE();
  const int64_t B = 2, S = 7, H = 6, Hkv = 2, Dqk = 5, Dv = 3;
  const double scale = 0.37;
  std::vector<T> q = randn<T>(B * S * H * Dqk, this->rng_), k = randn<T>(B * S * Hkv * Dqk, this->rng_),
                 v = randn<T>(B * S * Hkv * Dv, this->rng_), o = nans<T>(B * S * H * Dv), lse = nans<T>(B * H * S);
  attention_forward(this->ctx_, view(o, {B, S, H, Dv}), view(lse, {B, H, S}), view(q, {B, S, H, Dqk}),
                    view(k, {B, S, Hkv, Dqk}), view(v, {B, S, Hkv, Dv}), scale);
  std::vector<LD> want_o(o.size()), want_lse(lse.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      int64_t g = h / (H / Hkv);
      for (int64_t i = 0; i < S; ++i) {
        std::vector<LD> s(i + 1);
        LD mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          LD acc = 0;
          for (int64_t d = 0; d < Dqk; ++d) acc += LD(q[((b * S + i) * H + h) * Dqk + d]) * k[((b * S + j) * Hkv + g) * Dqk + d];
          s[j] = acc * scale;
          mx = std::max(mx, s[j]);
        }
        for (int64_t j = 0; j <= i; ++j) sum += std::exp(s[j] - mx);
        want_lse[(b * H + h) * S + i] = mx + std::log(sum);
        for (int64_t d = 0; d < Dv; ++d) {
          LD acc = 0;
          for (int64_t j = 0; j <= i; ++j) acc += std::exp(s[j] - mx) / sum * v[((b * S + j) * Hkv + g) * Dv + d];
          want_o[((b * S + i) * H + h) * Dv + d] = acc;
        }
      }
    }
  EXPECT_LE(rel_err(o, want_o), 5 * tol<T>());
  EXPECT_LE(rel_err(lse, want_lse), 5 * tol<T>());
  // Shape errors are caught before any work.
  EXPECT_THROW(attention_forward(this->ctx_, view(o, {B, S, H, Dv}), view(lse, {B, H, S}), view(q, {B, S, H, Dqk}),
                                 view(q, {B, S, H, Dqk}).narrow0(0, 1), view(v, {B, S, Hkv, Dv}), scale),
               Error);
}

TYPED_TEST(DenseOps, HeadConcatAndSplit) {
  using T = TypeParam;
  DT_SEED_TRACE();
  const int64_t R = 5, H = 3, Da = 4, Db = 2;
  for (bool shared : {false, true}) {
    const int64_t Hb = shared ? 1 : H;
    std::vector<T> a = randn<T>(R * H * Da, this->rng_), b = randn<T>(R * Hb * Db, this->rng_), x = nans<T>(R * H * (Da + Db));
    head_concat_forward(this->ctx_, view(x, {R, H, Da + Db}), view(a, {R, H, Da}), view(b, {R, Hb, Db}));
    for (int64_t r = 0; r < R; ++r)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < Da + Db; ++d) {
          T want = d < Da ? a[(r * H + h) * Da + d] : b[(r * Hb + (shared ? 0 : h)) * Db + d - Da];
          ASSERT_EQ(x[(r * H + h) * (Da + Db) + d], want);
        }
    // The backward: da = dx[..., :Da]; db = dx[..., Da:] (summed over heads when shared).
    std::vector<T> dx = randn<T>(x.size(), this->rng_), da = nans<T>(a.size()), db = nans<T>(b.size());
    head_concat_backward(this->ctx_, view(da, {R, H, Da}), view(db, {R, Hb, Db}), view(dx, {R, H, Da + Db}));
    std::vector<LD> want_db(b.size(), 0);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t d = 0; d < Da; ++d) ASSERT_EQ(da[(r * H + h) * Da + d], dx[(r * H + h) * (Da + Db) + d]);
        for (int64_t d = 0; d < Db; ++d) want_db[(r * Hb + (shared ? 0 : h)) * Db + d] += dx[(r * H + h) * (Da + Db) + Da + d];
      }
    EXPECT_LE(rel_err(db, want_db), tol<T>());
  }
}

TYPED_TEST(DenseOps, CrossEntropyMatchesLogSoftmax) {
  using T = TypeParam;
  DT_SEED_TRACE();
  const int64_t N = 9, V = 31;
  std::vector<T> logits = randn<T>(N * V, this->rng_, 4.0), losses = nans<T>(N), lse = nans<T>(N), dl = nans<T>(N * V);
  std::vector<int32_t> tg(N);
  for (int64_t i = 0; i < N; ++i) tg[i] = static_cast<int32_t>((i * 7 + 3) % V);
  cross_entropy_forward(this->ctx_, view(losses, {N}), view(lse, {N}), view(logits, {3, 3, V}), view(tg, {3, 3}));
  const double scale = 0.3;
  cross_entropy_backward(this->ctx_, view(dl, {N, V}), view(logits, {N, V}), view(lse, {N}), view(tg, {N}), scale);
  std::vector<LD> want_loss(N), want_lse(N), want_dl(N * V);
  for (int64_t i = 0; i < N; ++i) {
    LD sum = 0;
    for (int64_t v = 0; v < V; ++v) sum += std::exp(LD(logits[i * V + v]));
    want_lse[i] = std::log(sum);
    want_loss[i] = want_lse[i] - logits[i * V + tg[i]];
    for (int64_t v = 0; v < V; ++v) want_dl[i * V + v] = scale * (std::exp(LD(logits[i * V + v])) / sum - (v == tg[i]));
  }
  EXPECT_LE(rel_err(losses, want_loss), 5 * tol<T>());
  EXPECT_LE(rel_err(lse, want_lse), 5 * tol<T>());
  EXPECT_LE(rel_err(dl, want_dl), 5 * tol<T>());
  tg[4] = static_cast<int32_t>(V);
  EXPECT_THROW(cross_entropy_forward(this->ctx_, view(losses, {N}), view(lse, {N}), view(logits, {N, V}), view(tg, {N})),
               Error);
}

TEST(DenseOpsErrors, DtypeMismatchAndCudaAreClearErrors) {
  Context ctx;
  std::vector<float> x(12, 1.f), y(12);
  std::vector<double> w(4, 1.0), rstd(3);
  try {
    rmsnorm_forward(ctx, view(y, {3, 4}), view(rstd, {3}), view(x, {3, 4}), view(w, {4}), 1e-6, false);
    ADD_FAILURE() << "mixed dtypes must be rejected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rmsnorm_forward"), std::string::npos) << e.what();
  }
  Context gpu;
  gpu.device = Device::kCUDA;
  EXPECT_THROW(swiglu_forward(gpu, view(y, {12}), view(x, {12}), view(x, {12})), Error);
}

}  // namespace
}  // namespace dt
