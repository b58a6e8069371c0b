// Finite-difference gradient checks for layers, in double (docs/architecture.md, "Tests").
//
//   expect_gradient(what, loss, p, g, n, seed): g = d loss / d p is checked by central differences
//     (step h) along a random unit direction u, sum(g * u) vs (loss(p + h u) - loss(p - h u)) / 2h,
//     and on a few single entries (the largest |g| and random ones).
//   check_layer_gradients(make, B, T, d_in, d_out, seed): builds the layer in double with random
//     parameters, takes loss = sum(layer(x) * R) for random x, R, and checks d loss / d x and
//     d loss / d (every parameter). It also checks the Layer contract: backward WRITES dx
//     (dx is NaN-poisoned first) and ACCUMULATES parameter gradients (they start non-zero),
//     and forward writes its outputs (every activation buffer is NaN-poisoned first).
//   expect_float_matches_double(make, ...): the same layer, same parameters and input, in f32
//     and f64: forward outputs agree to a relative 1e-5.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "layers/layer.h"

namespace dt::testing {

struct GradCheckOptions {
  double h = 1e-5;               // central-difference step along a unit direction
  double rtol_projection = 1e-6;  // relative error of sum(g * u)
  double rtol_entry = 1e-5;       // relative error of single entries (floor: 1e-3 max|g|)
  int entries = 4;
};

inline void fill_normal(double* p, int64_t n, std::mt19937_64& rng, double mean = 0.0, double std = 1.0) {
  std::normal_distribution<double> nd(mean, std);
  for (int64_t i = 0; i < n; ++i) p[i] = nd(rng);
}

inline double dot(const double* a, const double* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

inline void expect_gradient(const std::string& what, const std::function<double()>& loss, double* p,
                            const double* g, int64_t n, uint64_t seed, const GradCheckOptions& opt = {}) {
  ASSERT_GT(n, 0) << what;
  std::mt19937_64 rng(seed);
  const std::vector<double> p0(p, p + n);
  auto restore = [&] { std::copy(p0.begin(), p0.end(), p); };
  double gmax = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(std::isfinite(g[i])) << what << ": gradient entry " << i << " is " << g[i];
    gmax = std::max(gmax, std::fabs(g[i]));
  }
  EXPECT_GT(gmax, 1e-9) << what << ": the gradient is zero; it never reaches this tensor";

  // Random projection.
  std::vector<double> u(n);
  fill_normal(u.data(), n, rng);
  double norm = std::sqrt(dot(u.data(), u.data(), n));
  for (double& x : u) x /= norm;
  for (int64_t i = 0; i < n; ++i) p[i] = p0[i] + opt.h * u[i];
  double lp = loss();
  for (int64_t i = 0; i < n; ++i) p[i] = p0[i] - opt.h * u[i];
  double lm = loss();
  restore();
  double numeric = (lp - lm) / (2 * opt.h), analytic = dot(g, u.data(), n);
  double err = std::fabs(numeric - analytic) / std::max({std::fabs(numeric), std::fabs(analytic), 1e-12});
  EXPECT_LE(err, opt.rtol_projection) << what << ": projected gradient " << analytic << ", finite differences "
                                      << numeric << " (" << n << " values)";

  // Single entries: the largest one, then random ones.
  std::vector<int64_t> idx{static_cast<int64_t>(std::max_element(g, g + n, [](double a, double b) {
                             return std::fabs(a) < std::fabs(b);
                           }) - g)};
  std::uniform_int_distribution<int64_t> pick(0, n - 1);
  for (int k = 1; k < opt.entries; ++k) idx.push_back(pick(rng));
  for (int64_t i : idx) {
    p[i] = p0[i] + opt.h;
    double a = loss();
    p[i] = p0[i] - opt.h;
    double b = loss();
    restore();
    double num = (a - b) / (2 * opt.h);
    double e = std::fabs(num - g[i]) / std::max({std::fabs(num), std::fabs(g[i]), 1e-3 * gmax});
    EXPECT_LE(e, opt.rtol_entry) << what << "[" << i << "]: gradient " << g[i] << ", finite differences " << num;
  }
}

// Random parameters where every term matters: matrices N(0, 1/fan_in), embeddings N(0, 1),
// zero-centred norm weights N(0, 0.3^2), plain norm weights 1 + N(0, 0.3^2). Rounded to float, so
// that an f32 and an f64 store can hold the same values.
inline std::vector<double> random_param_values(const ParamInfo& info, std::mt19937_64& rng) {
  std::vector<double> v(info.shape.numel());
  if (info.shape.ndim == 2) {
    bool embedding = info.name.find("embed_tokens") != std::string::npos;
    fill_normal(v.data(), v.size(), rng, 0.0, embedding ? 1.0 : 1.0 / std::sqrt(double(info.shape[1])));
  } else {
    fill_normal(v.data(), v.size(), rng, info.init == Init::kOnes ? 1.0 : 0.0, 0.3);
  }
  for (double& x : v) x = static_cast<float>(x);
  return v;
}

// Copies host doubles into a tensor of f32 or f64.
inline void store(const Tensor& t, const std::vector<double>& v) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(v.size()));
  if (t.dtype == DType::kF64) {
    std::copy(v.begin(), v.end(), t.ptr<double>());
  } else {
    std::transform(v.begin(), v.end(), t.ptr<float>(), [](double x) { return static_cast<float>(x); });
  }
}

inline std::vector<double> load(const Tensor& t) {
  if (t.dtype == DType::kF64) return {t.ptr<double>(), t.ptr<double>() + t.numel()};
  return {t.ptr<float>(), t.ptr<float>() + t.numel()};
}

inline void randomize_params(ParamStore& params, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int s = 0; s < params.size(); ++s) store(params.param(s), random_param_values(params.infos()[s], rng));
}

// NaN in every float buffer of an arena (0xff bytes are a NaN in f32 and f64).
inline void poison(Arena& arena) {
  if (arena.bytes()) std::memset(arena.base(), 0xff, arena.bytes());
}

using LayerFactory = std::function<std::unique_ptr<Layer>()>;

// A layer in its own parameter store and activation arena, on the CPU.
struct LayerRig {
  ParamStore params;
  Arena acts{"activations", Device::kCPU};
  std::unique_ptr<Layer> layer;
  Context ctx;

  LayerRig(const LayerFactory& make, DType dtype, int B, int T) : params(dtype, Device::kCPU), layer(make()) {
    layer->declare(params, acts, B, T);
    params.allocate();
    acts.allocate();
  }
};

inline void check_layer_gradients(const LayerFactory& make, int B, int T, int64_t d_in, int64_t d_out,
                                  uint64_t seed, const GradCheckOptions& opt = {}) {
  LayerRig rig(make, DType::kF64, B, T);
  randomize_params(rig.params, seed);
  std::mt19937_64 rng(seed + 1);
  std::vector<double> x(B * T * d_in), y(B * T * d_out), r(B * T * d_out), dx(B * T * d_in);
  fill_normal(x.data(), x.size(), rng);
  fill_normal(r.data(), r.size(), rng);
  Tensor X(x.data(), DType::kF64, Device::kCPU, {B, T, d_in}), Y(y.data(), DType::kF64, Device::kCPU, {B, T, d_out});
  Tensor R(r.data(), DType::kF64, Device::kCPU, {B, T, d_out}), DX(dx.data(), DType::kF64, Device::kCPU, {B, T, d_in});

  auto loss = [&] {
    poison(rig.acts);
    std::fill(y.begin(), y.end(), std::nan(""));
    rig.layer->forward(rig.ctx, X, Y);
    return dot(y.data(), r.data(), y.size());
  };
  double l0 = loss();
  ASSERT_TRUE(std::isfinite(l0)) << "forward left NaN in its output";

  // Backward: dx poisoned (must be written), parameter grads start at 0.25 (must be accumulated).
  const double g0 = 0.25;
  for (int s = 0; s < rig.params.size(); ++s) store(rig.params.grad(s), std::vector<double>(rig.params.grad(s).numel(), g0));
  std::fill(dx.begin(), dx.end(), std::nan(""));
  rig.layer->backward(rig.ctx, R, DX);
  std::vector<std::vector<double>> grads;
  for (int s = 0; s < rig.params.size(); ++s) {
    grads.push_back(load(rig.params.grad(s)));
    for (double& g : grads.back()) g -= g0;
  }

  expect_gradient("dx", loss, x.data(), dx.data(), dx.size(), seed + 2, opt);
  for (int s = 0; s < rig.params.size(); ++s)
    expect_gradient(rig.params.infos()[s].name, loss, rig.params.param(s).ptr<double>(), grads[s].data(),
                    grads[s].size(), seed + 3 + s, opt);
}

inline void expect_float_matches_double(const LayerFactory& make, int B, int T, int64_t d_in, int64_t d_out,
                                        uint64_t seed, double rtol = 1e-5) {
  std::mt19937_64 rng(seed);
  std::vector<double> x(B * T * d_in);
  fill_normal(x.data(), x.size(), rng);
  for (double& v : x) v = static_cast<float>(v);
  std::vector<double> out[2];
  for (DType dt : {DType::kF32, DType::kF64}) {
    LayerRig rig(make, dt, B, T);
    randomize_params(rig.params, seed + 1);
    poison(rig.acts);
    std::vector<double> xs(x), ys(B * T * d_out);
    std::vector<float> xf(x.begin(), x.end()), yf(ys.size(), NAN);
    Tensor X = dt == DType::kF64 ? Tensor(xs.data(), dt, Device::kCPU, {B, T, d_in})
                                 : Tensor(xf.data(), dt, Device::kCPU, {B, T, d_in});
    Tensor Y = dt == DType::kF64 ? Tensor(ys.data(), dt, Device::kCPU, {B, T, d_out})
                                 : Tensor(yf.data(), dt, Device::kCPU, {B, T, d_out});
    rig.layer->forward(rig.ctx, X, Y);
    out[dt == DType::kF64] = load(Y);
  }
  double num = 0, den = 0;
  for (size_t i = 0; i < out[0].size(); ++i) {
    ASSERT_TRUE(std::isfinite(out[0][i])) << "f32 output " << i;
    num = std::max(num, std::fabs(out[0][i] - out[1][i]));
    den = std::max(den, std::fabs(out[1][i]));
  }
  EXPECT_GT(den, 0.0);
  EXPECT_LE(num / den, rtol) << "max |f32 - f64| = " << num << ", max |f64| = " << den;
}

}  // namespace dt::testing
