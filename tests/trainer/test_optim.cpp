// AdamW (against a hand-computed step and a plainly written reference), gradient clipping (also
// as a factor folded into the update: the bits of scaling first), and the learning-rate schedule.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <vector>

#include "core/philox.h"
#include "kernels/ops.h"
#include "trainer/adamw.h"
#include "trainer/schedule.h"

namespace dt {
namespace {

template <class T>
T* data(const Tensor& t) {
  return t.ptr<T>();
}

TEST(AdamW, OneStepByHand) {
  ParamStore ps(DType::kF64, Device::kCPU);
  ps.declare({"w", Shape{2}, Init::kZeros, 0, TpSplit::kReplicated, /*decay=*/true});
  ps.declare({"norm", Shape{1}, Init::kZeros, 0, TpSplit::kReplicated, /*decay=*/false});
  ps.allocate();
  double* w = data<double>(ps.param(0));
  double* n = data<double>(ps.param(1));
  w[0] = 1.0, w[1] = 1.0, n[0] = 1.0;
  double* gw = data<double>(ps.grad(0));
  gw[0] = 0.5, gw[1] = -2.0, data<double>(ps.grad(1))[0] = 0.5;
  AdamW opt(ps, {.beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.1});
  opt.step(0.1);
  // t = 1: m = 0.1 g, v = 0.001 g^2, so m_hat = g, v_hat = g^2, the step is lr * g / (|g| + eps),
  // after the decay p *= 1 - lr * wd = 0.99.
  EXPECT_NEAR(w[0], 0.99 - 0.1 * 0.5 / (0.5 + 1e-8), 1e-15);   // 0.890000002
  EXPECT_NEAR(w[1], 0.99 + 0.1 * 2.0 / (2.0 + 1e-8), 1e-15);   // 1.0899999995
  EXPECT_NEAR(n[0], 1.0 - 0.1 * 0.5 / (0.5 + 1e-8), 1e-15);    // no decay: 0.900000002
  EXPECT_NEAR(data<double>(opt.m(0))[1], -0.2, 1e-16);
  EXPECT_NEAR(data<double>(opt.v(0))[1], 0.004, 1e-16);
  EXPECT_EQ(opt.steps_done(), 1);
  EXPECT_EQ(opt.state().entries().size(), 4u);
  EXPECT_EQ(opt.state().entries()[0].name, "m/w");
}

// The paper's form, written out: p *= 1 - lr wd; m, v; m_hat = m / (1 - b1^t); v_hat = v / (1 - b2^t);
// p -= lr m_hat / (sqrt(v_hat) + eps).
struct RefAdamW {
  std::vector<double> p, m, v;
  std::vector<bool> decay;
  void step(const std::vector<double>& g, int t, double lr, double b1, double b2, double eps, double wd) {
    for (size_t i = 0; i < p.size(); ++i) {
      if (decay[i]) p[i] *= 1 - lr * wd;
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      double m_hat = m[i] / (1 - std::pow(b1, t)), v_hat = v[i] / (1 - std::pow(b2, t));
      p[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
    }
  }
};

template <class T>
void check_against_reference(DType dtype, double tol) {
  // Odd sizes, one tensor without decay.
  ParamStore ps(dtype, Device::kCPU);
  ps.declare({"a", Shape{3, 5}, Init::kNormal, 1.0, TpSplit::kReplicated, true});
  ps.declare({"b", Shape{7}, Init::kNormal, 1.0, TpSplit::kReplicated, false});
  ps.declare({"c", Shape{1}, Init::kNormal, 1.0, TpSplit::kReplicated, true});
  ps.allocate();
  ps.init(11);
  RefAdamW ref;
  for (int s = 0; s < ps.size(); ++s) {
    Tensor p = ps.param(s);
    for (int64_t i = 0; i < p.numel(); ++i) {
      ref.p.push_back(static_cast<double>(data<T>(p)[i]));
      ref.decay.push_back(ps.infos()[s].decay);
    }
  }
  ref.m.assign(ref.p.size(), 0.0);
  ref.v.assign(ref.p.size(), 0.0);
  const double b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
  AdamW opt(ps, {b1, b2, eps, wd});
  for (int t = 1; t <= 6; ++t) {
    double lr = 1e-2 * t;  // the lr changes every step, as under a schedule
    std::vector<double> g;
    for (int s = 0; s < ps.size(); ++s) {
      Tensor gt = ps.grad(s);
      for (int64_t i = 0; i < gt.numel(); ++i) {
        // Mixed magnitudes, including exact zeros.
        double x = (i % 4 == 3) ? 0.0 : philox_normal(t, s, i) * std::pow(10.0, (i % 3) - 1);
        data<T>(gt)[i] = static_cast<T>(x);
        g.push_back(static_cast<double>(static_cast<T>(x)));
      }
    }
    opt.step(lr);
    ref.step(g, t, lr, b1, b2, eps, wd);
    size_t k = 0;
    for (int s = 0; s < ps.size(); ++s) {
      Tensor p = ps.param(s);
      for (int64_t i = 0; i < p.numel(); ++i, ++k)
        ASSERT_NEAR(data<T>(p)[i], ref.p[k], tol * (1 + std::abs(ref.p[k]))) << "step " << t << " param " << s << "[" << i << "]";
    }
  }
}

TEST(AdamW, MatchesAPlainReferenceInDouble) { check_against_reference<double>(DType::kF64, 1e-13); }
TEST(AdamW, MatchesAPlainReferenceInFloat) { check_against_reference<float>(DType::kF32, 2e-6); }

TEST(GradClip, GlobalNormAcrossTensors) {
  ParamStore ps(DType::kF32, Device::kCPU);
  ps.declare({"a", Shape{1}, Init::kZeros, 0, TpSplit::kReplicated, true});
  ps.declare({"b", Shape{3}, Init::kZeros, 0, TpSplit::kReplicated, true});
  ps.allocate();
  auto set = [&] {
    data<float>(ps.grad(0))[0] = 3.0f;
    float* b = data<float>(ps.grad(1));
    b[0] = 0.0f, b[1] = -4.0f, b[2] = 0.0f;  // norm sqrt(9 + 16) = 5
  };
  set();
  EXPECT_DOUBLE_EQ(grad_global_norm(ps), 5.0);
  EXPECT_DOUBLE_EQ(clip_grad_norm(ps, 10.0), 5.0);  // below the limit: untouched
  EXPECT_EQ(data<float>(ps.grad(0))[0], 3.0f);
  EXPECT_DOUBLE_EQ(clip_grad_norm(ps, 0.0), 5.0);  // 0 disables
  EXPECT_EQ(data<float>(ps.grad(1))[1], -4.0f);
  EXPECT_DOUBLE_EQ(clip_grad_norm(ps, 1.0), 5.0);  // returns the norm before clipping
  double f = 1.0 / (5.0 + 1e-6);                   // torch.nn.utils.clip_grad_norm_'s factor
  EXPECT_FLOAT_EQ(data<float>(ps.grad(0))[0], static_cast<float>(3.0 * f));
  EXPECT_FLOAT_EQ(data<float>(ps.grad(1))[1], static_cast<float>(-4.0 * f));
  EXPECT_NEAR(grad_global_norm(ps), 1.0, 1e-6);
}

TEST(GradClip, NonFiniteNormIsReported) {
  ParamStore ps(DType::kF32, Device::kCPU);
  ps.declare({"a", Shape{2}, Init::kZeros, 0, TpSplit::kReplicated, true});
  ps.allocate();
  data<float>(ps.grad(0))[1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(clip_grad_norm(ps, 1.0)));
}

TEST(GradClip, FactorLeavesTheGradientsAlone) {
  ParamStore ps(DType::kF32, Device::kCPU);
  ps.declare({"a", Shape{1}, Init::kZeros, 0, TpSplit::kReplicated, true});
  ps.declare({"b", Shape{3}, Init::kZeros, 0, TpSplit::kReplicated, true});
  ps.allocate();
  data<float>(ps.grad(0))[0] = 3.0f;
  data<float>(ps.grad(1))[1] = -4.0f;  // norm 5
  Context ctx;
  GradClip c = grad_clip_factor(ctx, ps, 1.0);
  EXPECT_DOUBLE_EQ(c.norm, 5.0);
  EXPECT_EQ(c.scale, 1.0 / (5.0 + 1e-6));  // torch.nn.utils.clip_grad_norm_'s factor, exactly
  EXPECT_EQ(data<float>(ps.grad(0))[0], 3.0f);
  EXPECT_EQ(data<float>(ps.grad(1))[1], -4.0f);
  EXPECT_EQ(grad_clip_factor(ctx, ps, 10.0).scale, 1.0);  // below the limit
  EXPECT_EQ(grad_clip_factor(ctx, ps, 0.0).scale, 1.0);   // 0 disables
  EXPECT_EQ(grad_clip_factor(ctx, ps, -1.0).scale, 1.0);
  EXPECT_EQ(grad_clip_of_norm(5.0, 5.0).scale, 5.0 / (5.0 + 1e-6));  // just below 1 still clips
  EXPECT_EQ(grad_clip_of_norm(0.0, 1.0).scale, 1.0);
  const GradClip nan = grad_clip_of_norm(std::numeric_limits<double>::quiet_NaN(), 1.0);
  EXPECT_TRUE(std::isnan(nan.norm));
  EXPECT_EQ(nan.scale, 1.0);  // a NaN norm is left to the caller (the trainer skips the update)
  data<float>(ps.grad(1))[2] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(grad_clip_factor(ctx, ps, 1.0).scale, 0.0);  // what scale_tensors would multiply by
}

// Two copies of a ParamStore of odd sizes (one tensor without decay); gradients of mixed
// magnitudes, exact zeros included, a new set each step.
struct TwinParams {
  ParamStore a, b;
  explicit TwinParams(DType dtype) : a(dtype, Device::kCPU), b(dtype, Device::kCPU) {
    for (ParamStore* ps : {&a, &b}) {
      ps->declare({"w", Shape{3, 5}, Init::kNormal, 1.0, TpSplit::kReplicated, true});
      ps->declare({"norm", Shape{7}, Init::kNormal, 1.0, TpSplit::kReplicated, false});
      ps->declare({"c", Shape{1}, Init::kNormal, 1.0, TpSplit::kReplicated, true});
      ps->declare({"big", Shape{1001}, Init::kNormal, 0.02, TpSplit::kReplicated, true});
      ps->allocate();
      ps->init(5);
    }
  }
  template <class T>
  void set_grads(int step, double magnitude) {
    for (ParamStore* ps : {&a, &b})
      for (int s = 0; s < ps->size(); ++s) {
        Tensor g = ps->grad(s);
        for (int64_t i = 0; i < g.numel(); ++i)
          data<T>(g)[i] = (i % 5 == 4) ? T(0) : static_cast<T>(magnitude * philox_normal(100 + step, s, i) *
                                                                 std::pow(10.0, (i % 3) - 1));
      }
  }
  static std::vector<Tensor> grads(const ParamStore& ps) {
    std::vector<Tensor> gs;
    for (int s = 0; s < ps.size(); ++s) gs.push_back(ps.grad(s));
    return gs;
  }
};

bool same_bits(const Tensor& x, const Tensor& y) {
  return x.bytes() == y.bytes() && std::memcmp(x.data, y.data, x.bytes()) == 0;
}

// AdamW::step(lr, s) against scale_tensors(grads, s) then step(lr): the same bits, step after step,
// and the gradients step reads are left as they were.
template <class T>
void check_scaled_step(DType dtype) {
  for (double s : {0.3712345678901234, 1.0 / (123.456 + 1e-6), 1e-3, 1.0, 1.75}) {
    SCOPED_TRACE("grad_scale " + std::to_string(s));
    TwinParams tw(dtype);
    AdamW opt_a(tw.a, {0.9, 0.95, 1e-8, 0.1}), opt_b(tw.b, {0.9, 0.95, 1e-8, 0.1});
    Context ctx;
    for (int t = 1; t <= 4; ++t) {
      tw.set_grads<T>(t, 1.0 + t);
      std::vector<std::vector<char>> before;
      for (const Tensor& g : TwinParams::grads(tw.b))
        before.emplace_back(static_cast<char*>(g.data), static_cast<char*>(g.data) + g.bytes());
      scale_tensors(ctx, TwinParams::grads(tw.a), s);
      opt_a.step(1e-2 * t);
      opt_b.step(1e-2 * t, s);
      for (int k = 0; k < tw.a.size(); ++k) {
        const std::string what = "step " + std::to_string(t) + " " + tw.a.infos()[k].name;
        EXPECT_TRUE(same_bits(tw.a.master(k), tw.b.master(k))) << what << ": p";
        EXPECT_TRUE(same_bits(opt_a.m(k), opt_b.m(k))) << what << ": m";
        EXPECT_TRUE(same_bits(opt_a.v(k), opt_b.v(k))) << what << ": v";
        const Tensor g = tw.b.grad(k);
        EXPECT_EQ(std::memcmp(g.data, before[k].data(), g.bytes()), 0) << what << ": the gradient was written";
      }
    }
    // Not vacuous: a factor that is not 1 moves the weights elsewhere than no factor.
    if (s != 1.0) {
      TwinParams plain(dtype);
      AdamW opt(plain.a, {0.9, 0.95, 1e-8, 0.1});
      for (int t = 1; t <= 4; ++t) {
        plain.set_grads<T>(t, 1.0 + t);
        opt.step(1e-2 * t);
      }
      EXPECT_FALSE(same_bits(plain.a.master(0), tw.b.master(0)));
    }
  }
}

TEST(AdamW, GradScaleIsScalingFirstInFloat) { check_scaled_step<float>(DType::kF32); }
TEST(AdamW, GradScaleIsScalingFirstInDouble) { check_scaled_step<double>(DType::kF64); }

// The trainer's order: clip_grad_norm then step(lr), or grad_clip_factor then step(lr, scale); the
// same bits, over steps where the clipping acts (large gradients) and where it does not.
TEST(AdamW, ClipFactorInTheStepIsClipThenStep) {
  TwinParams tw(DType::kF32);
  AdamW opt_a(tw.a, {0.9, 0.95, 1e-8, 0.1}), opt_b(tw.b, {0.9, 0.95, 1e-8, 0.1});
  Context ctx;
  int clipped = 0;
  for (int t = 1; t <= 6; ++t) {
    tw.set_grads<float>(t, t % 2 ? 3.0 : 1e-3);
    const double norm_a = clip_grad_norm(ctx, tw.a, 1.0);
    const GradClip c = grad_clip_factor(ctx, tw.b, 1.0);
    EXPECT_EQ(norm_a, c.norm) << "step " << t;
    clipped += c.scale < 1.0;
    opt_a.step(ctx, 1e-2);
    opt_b.step(ctx, 1e-2, c.scale);
    for (int k = 0; k < tw.a.size(); ++k)
      EXPECT_TRUE(same_bits(tw.a.master(k), tw.b.master(k))) << "step " << t << " " << tw.a.infos()[k].name;
  }
  EXPECT_EQ(clipped, 3);
}

TEST(AdamW, RejectsANonFiniteGradScale) {
  ParamStore ps(DType::kF32, Device::kCPU);
  ps.declare({"w", Shape{3}, Init::kZeros, 0, TpSplit::kReplicated, true});
  ps.allocate();
  AdamW opt(ps, {});
  EXPECT_THROW(opt.step(1e-3, std::numeric_limits<double>::quiet_NaN()), Error);
  EXPECT_THROW(opt.step(1e-3, std::numeric_limits<double>::infinity()), Error);
}

TEST(Schedule, WarmupThenCosineToMinLr) {
  const double lr = 6e-4, min_lr = 6e-5;
  const int N = 300, W = 20;
  EXPECT_DOUBLE_EQ(lr_at_step(1, N, W, lr, min_lr), lr / W);  // never 0 at the first step
  EXPECT_DOUBLE_EQ(lr_at_step(10, N, W, lr, min_lr), lr / 2);
  EXPECT_DOUBLE_EQ(lr_at_step(W, N, W, lr, min_lr), lr);
  EXPECT_DOUBLE_EQ(lr_at_step(W + (N - W) / 2, N, W, lr, min_lr), (lr + min_lr) / 2);
  EXPECT_DOUBLE_EQ(lr_at_step(N, N, W, lr, min_lr), min_lr);  // exactly at the last step
  for (int s = W + 1; s <= N; ++s) {
    double x = lr_at_step(s, N, W, lr, min_lr);
    EXPECT_LE(x, lr_at_step(s - 1, N, W, lr, min_lr)) << s;
    // llm.c's cosine, one step later: decay_ratio = (s - W) / (N - W).
    double ratio = static_cast<double>(s - W) / (N - W);
    EXPECT_NEAR(x, min_lr + 0.5 * (1 + std::cos(std::numbers::pi * ratio)) * (lr - min_lr), 1e-18) << s;
  }
  EXPECT_LT(lr_at_step(1, N, 0, lr, min_lr), lr);  // no warmup: the cosine starts at once
  EXPECT_DOUBLE_EQ(lr_at_step(N, N, N, lr, min_lr), lr);  // all warmup
  EXPECT_DOUBLE_EQ(lr_at_step(1, 1, 0, lr, min_lr), min_lr);
  EXPECT_THROW(lr_at_step(0, N, W, lr, min_lr), Error);
  EXPECT_THROW(lr_at_step(N + 1, N, W, lr, min_lr), Error);
}

}  // namespace
}  // namespace dt
