// Test helpers for the Gated DeltaNet tests: owned CPU buffers, random fills, NaN poisoning
// and central finite differences in double (docs/architecture.md, "Tests").
//
//   Buf<double> x({B, T, C});  fill_normal(x, rng);
//   auto loss = [&] { run_forward(); return dot(y, dy); };
//   expect_grad_matches("x", x, dx, loss, rng);   // a random direction + a few entries
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace dt::gdn_test {

// A CPU buffer that owns its elements, with a contiguous Tensor view of them.
template <class T>
struct Buf {
  std::vector<T> v;
  Tensor t;
  Buf() = default;
  explicit Buf(Shape s) : v(static_cast<size_t>(s.numel())), t(nullptr, dtype_of<T>(), Device::kCPU, s) {
    t.data = v.data();
  }
  Buf(const Buf& o) : v(o.v), t(o.t) { t.data = v.data(); }
  Buf& operator=(const Buf& o) {
    v = o.v, t = o.t;
    t.data = v.data();
    return *this;
  }
  int64_t size() const { return static_cast<int64_t>(v.size()); }
  T* data() { return v.data(); }
  const T* data() const { return v.data(); }
  T& operator[](int64_t i) { return v[i]; }
  const T& operator[](int64_t i) const { return v[i]; }
  operator const Tensor&() const { return t; }  // NOLINT: pass a Buf where an op takes a Tensor
};

template <class T>
void fill_normal(Buf<T>& b, std::mt19937_64& rng, double std = 1.0, double mean = 0.0) {
  std::normal_distribution<double> n(mean, std);
  for (T& x : b.v) x = static_cast<T>(n(rng));
}

template <class T>
void fill_uniform(Buf<T>& b, std::mt19937_64& rng, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  for (T& x : b.v) x = static_cast<T>(u(rng));
}

// Every element NaN, so that an element an op forgets to write fails the test.
template <class T>
void poison(Buf<T>& b) {
  std::fill(b.v.begin(), b.v.end(), std::numeric_limits<T>::quiet_NaN());
}

template <class T>
Buf<double> to_double(const Buf<T>& b) {
  Buf<double> d(b.t.shape);
  std::copy(b.v.begin(), b.v.end(), d.v.begin());
  return d;
}

template <class T>
Buf<float> to_float(const Buf<T>& b) {
  Buf<float> f(b.t.shape);
  std::copy(b.v.begin(), b.v.end(), f.v.begin());
  return f;
}

inline double dot(const double* a, const double* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}
inline double dot(const Buf<double>& a, const Buf<double>& b) { return dot(a.data(), b.data(), a.size()); }

template <class T>
bool all_finite(const Buf<T>& b) {
  return std::all_of(b.v.begin(), b.v.end(), [](T x) { return std::isfinite(x); });
}

// max |a - b| / max |b| (b is the reference); 0 when both are zero; NaN anywhere gives inf.
template <class A, class B>
double rel_diff(const A* a, const B* b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    double d = std::fabs(double(a[i]) - double(b[i]));
    if (!std::isfinite(d)) return std::numeric_limits<double>::infinity();
    num = std::max(num, d);
    den = std::max(den, std::fabs(double(b[i])));
  }
  return num == 0 ? 0 : num / std::max(den, 1e-300);
}
template <class A, class B>
double rel_diff(const Buf<A>& a, const Buf<B>& b) {
  EXPECT_EQ(a.size(), b.size());
  return rel_diff(a.data(), b.data(), std::min(a.size(), b.size()));
}

// Derivative of loss() along u applied to x[0, n), by central differences
// c(h) = (L(x + h u) - L(x - h u)) / 2h with one Richardson step, (4 c(h/2) - c(h)) / 3,
// whose error is O(h^4) (the plain O(h^2) one misleads where the loss curves sharply).
// x is restored afterwards.
template <class F>
double fd_directional(double* x, const std::vector<double>& u, double h, F&& loss) {
  const int64_t n = static_cast<int64_t>(u.size());
  std::vector<double> x0(x, x + n);
  auto central = [&](double step) {
    for (int64_t i = 0; i < n; ++i) x[i] = x0[i] + step * u[i];
    double lp = loss();
    for (int64_t i = 0; i < n; ++i) x[i] = x0[i] - step * u[i];
    double lm = loss();
    return (lp - lm) / (2 * step);
  };
  double coarse = central(h), fine = central(h / 2);
  std::copy(x0.begin(), x0.end(), x);
  return (4 * fine - coarse) / 3;
}

// Checks an analytic gradient `grad` of loss() with respect to x[0, n) against central
// differences: along one random unit direction, and at `entries` single elements (the one with
// the largest gradient among them). Passes when |fd - an| <= rtol * max(|fd|, |an|) + atol with
// atol = rtol * 1e-3 * ||grad||: the floor only forgives elements whose gradient is ~0.
template <class F>
void expect_grad_matches(const std::string& name, double* x, const double* grad, int64_t n, F&& loss,
                         std::mt19937_64& rng, double rtol = 1e-6, int entries = 4, double h = 1e-4) {
  ASSERT_GT(n, 0) << name;
  double gnorm = std::sqrt(dot(grad, grad, n));
  ASSERT_TRUE(std::isfinite(gnorm)) << name << ": analytic gradient is not finite";
  const double atol = rtol * 1e-3 * gnorm + 1e-12;
  auto check = [&](const std::vector<double>& u, const std::string& where) {
    double fd = fd_directional(x, u, h, loss);
    double an = 0;
    for (int64_t i = 0; i < n; ++i) an += grad[i] * u[i];
    EXPECT_LE(std::fabs(fd - an), rtol * std::max(std::fabs(fd), std::fabs(an)) + atol)
        << name << " " << where << ": finite difference " << fd << ", analytic " << an;
  };
  std::normal_distribution<double> nd;
  std::vector<double> u(n);
  double un = 0;
  for (double& e : u) e = nd(rng), un += e * e;
  for (double& e : u) e /= std::sqrt(un);
  check(u, "along a random direction");
  std::vector<int64_t> picks;
  int64_t largest = 0;
  for (int64_t i = 1; i < n; ++i)
    if (std::fabs(grad[i]) > std::fabs(grad[largest])) largest = i;
  picks.push_back(largest);
  std::uniform_int_distribution<int64_t> ui(0, n - 1);
  for (int e = 1; e < entries && e < n; ++e) picks.push_back(ui(rng));
  for (int64_t i : picks) {
    std::fill(u.begin(), u.end(), 0.0);
    u[i] = 1;
    check(u, "element " + std::to_string(i));
  }
}

template <class F>
void expect_grad_matches(const std::string& name, Buf<double>& x, const Buf<double>& grad, F&& loss,
                         std::mt19937_64& rng, double rtol = 1e-6, int entries = 4) {
  ASSERT_EQ(x.size(), grad.size()) << name;
  expect_grad_matches(name, x.data(), grad.data(), x.size(), loss, rng, rtol, entries);
}

}  // namespace dt::gdn_test
