// The CUDA elementwise dense ops, embedding and optimizer (kernels/cuda/{embedding, rmsnorm, rope,
// elementwise, optim}.cu) against the CPU references. Skips when there is no GPU.
//
// Inputs are fresh Philox normals each run (the seed is printed on failure; DT_TEST_SEED=<n>
// replays it), rounded to bf16 where the GPU takes bf16, so the GPU and the reference see the same
// numbers. The truth is the reference run in double on those inputs. Every GPU output is poisoned
// with NaN before each run (accumulated outputs start from random nonzero values instead).
//
// Tolerances, from the reference's own error in the output dtype:
//   - a bf16 output is an fp32 result rounded once; bf16 keeps 8 significant bits, so rounding
//     moves x by at most 2^-8 |x|. We allow twice that, |got - want| <= 2^-7 |want|, plus a floor
//     of 1e-5 x RMS(want) for the fp32 error (~1e-7 of the terms) of outputs that cancel to ~0.
//   - fp32 outputs: rstd 1e-5 relative (a few fp32 roundings); dw sums 1e-5 x sum of |terms|
//     (fp32 summation over <= ~40 sequential adds per element is < 3e-6 of it);
//     sum_squares 1e-6 relative (each fp32 term is a sum of 4 squares, < 3 x 2^-24, then double);
//     AdamW 1e-6 relative (it is computed in double in the CPU's order and should match bitwise).
//   - copies (embedding forward, head concat / split without a sum, cast, scale) must be exact.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/philox.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/swiglu.h"
#include "kernels/cuda/dense_elem.h"
#include "kernels/fill.h"
#include "kernels/ops.h"
#include "tests/gpu/gpu_tensor.h"

namespace dt {
namespace {

#define SKIP_WITHOUT_GPU()                                                   \
  do {                                                                       \
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device present";  \
  } while (0)

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kBf16Rel = 1.0 / 128;  // 2 x bf16's rounding bound 2^-8
constexpr double kFloorRel = 1e-5;      // x RMS of the output

uint64_t run_seed() {
  static const uint64_t seed = [] {
    if (const char* e = std::getenv("DT_TEST_SEED")) return static_cast<uint64_t>(std::strtoull(e, nullptr, 10));
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }();
  return seed;
}

#define SEED_TRACE() SCOPED_TRACE("Philox seed " + std::to_string(run_seed()) + " (replay: DT_TEST_SEED=<seed>)")

// n normals * scale from the Philox stream named `name` (+ a case index), rounded to bf16 if asked.
std::vector<float> randn(int64_t n, const std::string& name, double scale = 1.0, bool bf16 = true) {
  const uint64_t stream = philox_stream_of(name.c_str());
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) {
    const float f = static_cast<float>(scale * philox_normal(run_seed(), stream, static_cast<uint64_t>(i)));
    x[i] = bf16 ? round_bf16(f) : f;
  }
  return x;
}



Context gpu_context() {
  Context ctx;
  ctx.device = Device::kCUDA;  // stream = nullptr: the legacy default stream
  return ctx;
}

double rms(const std::vector<double>& x) {
  double s = 0;
  for (double v : x) s += v * v;
  return x.empty() ? 0.0 : std::sqrt(s / static_cast<double>(x.size()));
}

// Every element: |got - want| <= rel |want| + floor[i] (floor_all when `floors` is empty).
void expect_close(const std::string& what, const std::vector<float>& got, const std::vector<double>& want, double rel,
                  double floor_all, const std::vector<double>& floors = {}) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t bad = 0, nonfinite = 0, worst = -1;
  double worst_excess = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) {
      ++nonfinite;
      continue;
    }
    const double err = std::fabs(got[i] - want[i]);
    const double tol = rel * std::fabs(want[i]) + (floors.empty() ? floor_all : floors[i]);
    if (err > tol) {
      ++bad;
      if (worst < 0 || err / tol > worst_excess) worst_excess = err / tol, worst = static_cast<int64_t>(i);
    }
  }
  EXPECT_EQ(nonfinite, 0) << what << ": " << nonfinite << " of " << got.size()
                          << " elements are NaN/inf (unwritten: outputs were poisoned with NaN)";
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements beyond tolerance (" << rel
                    << " relative + floor); worst at flat index " << worst << ": got "
                    << (worst >= 0 ? got[worst] : 0.f) << ", want " << (worst >= 0 ? want[worst] : 0.0) << " ("
                    << worst_excess << " x the tolerance)";
}

void expect_close_bf16(const std::string& what, const std::vector<float>& got, const std::vector<double>& want) {
  expect_close(what, got, want, kBf16Rel, kFloorRel * rms(want));
}

void expect_bits_equal(const std::string& what, const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_TRUE(a == b) << what << " differs between two runs on the same inputs (not deterministic)";
}

void expect_exact(const std::string& what, const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], 4) != 0 && !(std::isnan(got[i]) && std::isnan(want[i]))) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements differ from the exact result; first at "
                    << first << ": got " << (first >= 0 ? got[first] : 0.f) << ", want "
                    << (first >= 0 ? want[first] : 0.f);
}

// ============================================================================
// SwiGLU, sigmoid gate, residual add
// ============================================================================

// n elements; offset 0: 16-byte aligned (vector path, tail when n % 8 != 0); offset 1: scalar path.
struct ElemCase {
  int64_t n;
  int64_t offset;
};
const ElemCase kElemCases[] = {{1, 0}, {7, 0}, {4099, 0}, {(1 << 20) + 3, 0}, {4099, 1}};

TEST(DenseElemCuda, SwigluForwardBackward) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  for (const ElemCase& c : kElemCases) {
    SCOPED_TRACE("n=" + std::to_string(c.n) + " offset=" + std::to_string(c.offset));
    const std::string tag = std::to_string(c.n) + "/" + std::to_string(c.offset);
    const Shape s{c.n};
    const auto g = randn(c.n, "swiglu.g" + tag, 2.0), u = randn(c.n, "swiglu.u" + tag), dh = randn(c.n, "swiglu.dh" + tag);
    Dev gd(DType::kBF16, s, c.offset), ud(DType::kBF16, s, c.offset), dhd(DType::kBF16, s, c.offset);
    Dev hd(DType::kBF16, s, c.offset), dgd(DType::kBF16, s, c.offset), dud(DType::kBF16, s, c.offset);
    gd.upload(g), ud.upload(u), dhd.upload(dh);
    hd.poison(ctx), dgd.poison(ctx), dud.poison(ctx);
    swiglu_forward(ctx, hd, gd, ud);
    swiglu_backward(ctx, dgd, dud, dhd, gd, ud);
    const auto gg = to_double(g), uu = to_double(u), dd = to_double(dh);
    std::vector<double> h(c.n), dg(c.n), du(c.n);
    swiglu_forward_ref<double>(h.data(), gg.data(), uu.data(), c.n);
    swiglu_backward_ref<double>(dg.data(), du.data(), dd.data(), gg.data(), uu.data(), c.n);
    expect_close_bf16("swiglu h", hd.download(), h);
    expect_close_bf16("swiglu dgate", dgd.download(), dg);
    expect_close_bf16("swiglu dup", dud.download(), du);
  }
}

TEST(DenseElemCuda, SigmoidGateForwardBackward) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  for (const ElemCase& c : kElemCases) {
    SCOPED_TRACE("n=" + std::to_string(c.n) + " offset=" + std::to_string(c.offset));
    const std::string tag = std::to_string(c.n) + "/" + std::to_string(c.offset);
    const Shape s{c.n};
    const auto x = randn(c.n, "gate.x" + tag), g = randn(c.n, "gate.g" + tag, 3.0), dy = randn(c.n, "gate.dy" + tag);
    Dev xd(DType::kBF16, s, c.offset), gd(DType::kBF16, s, c.offset), dyd(DType::kBF16, s, c.offset);
    Dev yd(DType::kBF16, s, c.offset), dxd(DType::kBF16, s, c.offset), dgd(DType::kBF16, s, c.offset);
    xd.upload(x), gd.upload(g), dyd.upload(dy);
    yd.poison(ctx), dxd.poison(ctx), dgd.poison(ctx);
    sigmoid_gate_forward(ctx, yd, xd, gd);
    sigmoid_gate_backward(ctx, dxd, dgd, dyd, xd, gd);
    const auto xx = to_double(x), gg = to_double(g), dd = to_double(dy);
    std::vector<double> y(c.n), dx(c.n), dg(c.n);
    sigmoid_gate_forward_ref<double>(y.data(), xx.data(), gg.data(), c.n);
    sigmoid_gate_backward_ref<double>(dx.data(), dg.data(), dd.data(), xx.data(), gg.data(), c.n);
    expect_close_bf16("gate y", yd.download(), y);
    expect_close_bf16("gate dx", dxd.download(), dx);
    expect_close_bf16("gate dg", dgd.download(), dg);
  }
}

TEST(DenseElemCuda, ResidualAddIncludingInPlace) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  for (const ElemCase& c : kElemCases) {
    SCOPED_TRACE("n=" + std::to_string(c.n) + " offset=" + std::to_string(c.offset));
    const std::string tag = std::to_string(c.n) + "/" + std::to_string(c.offset);
    const Shape s{c.n};
    const auto a = randn(c.n, "res.a" + tag), b = randn(c.n, "res.b" + tag, 0.3);
    std::vector<double> want(c.n);
    const auto aa = to_double(a), bb = to_double(b);
    residual_add_ref<double>(want.data(), aa.data(), bb.data(), c.n);
    Dev ad(DType::kBF16, s, c.offset), bd(DType::kBF16, s, c.offset), yd(DType::kBF16, s, c.offset);
    ad.upload(a), bd.upload(b), yd.poison(ctx);
    residual_add(ctx, yd, ad, bd);
    expect_close_bf16("y = a + b", yd.download(), want);
    residual_add(ctx, ad, ad, bd);  // y aliases a
    expect_close_bf16("a += b (in place)", ad.download(), want);
    ad.upload(a);
    residual_add(ctx, bd, ad, bd);  // y aliases b
    expect_close_bf16("b = a + b (in place)", bd.download(), want);
  }
}

// ============================================================================
// cast
// ============================================================================

TEST(DenseElemCuda, CastRoundsToNearestEvenBothWays) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  for (const ElemCase& c : kElemCases) {
    SCOPED_TRACE("n=" + std::to_string(c.n) + " offset=" + std::to_string(c.offset));
    std::vector<float> x = randn(c.n, "cast.x" + std::to_string(c.n), 10.0, /*bf16=*/false);
    const float specials[] = {0.f, -0.f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                              std::numeric_limits<float>::quiet_NaN(), 3.4e38f, 1e-40f, 1.00390625f, 1.01171875f};
    for (size_t i = 0; i < std::size(specials) && i < x.size(); ++i) x[i] = specials[i];  // ties, overflow, denormal
    const Shape s{c.n};
    Dev xf(DType::kF32, s, c.offset), yb(DType::kBF16, s, c.offset), yf(DType::kF32, s, c.offset);
    Dev yb2(DType::kBF16, s, c.offset);
    xf.upload(x), yb.poison(ctx), yf.poison(ctx), yb2.poison(ctx);
    cast(ctx, yb, xf);
    std::vector<float> want(c.n);
    for (int64_t i = 0; i < c.n; ++i) want[i] = round_bf16(x[i]);
    expect_exact("f32 -> bf16", yb.download(), want);
    cast(ctx, yf, yb);
    expect_exact("bf16 -> f32", yf.download(), want);
    cast(ctx, yb2, yb);
    expect_exact("bf16 -> bf16 (copy)", yb2.download(), want);
  }
}

// ============================================================================
// RMSNorm
// ============================================================================

struct NormCase {
  int64_t rows, D;
  bool zero_centered;
};

// The double reference on the bf16 inputs; dw starts from dw0.
struct NormRef {
  std::vector<double> y, rstd, dx, dw, dw_abs;  // dw_abs: |dw0| + sum_rows |dy xhat| per column
};

NormRef norm_reference(const NormCase& c, const std::vector<float>& x, const std::vector<float>& w,
                       const std::vector<float>& dy, const std::vector<float>& dw0) {
  NormRef r;
  const auto xx = to_double(x), ww = to_double(w), dd = to_double(dy);
  r.y.resize(c.rows * c.D), r.rstd.resize(c.rows), r.dx.resize(c.rows * c.D);
  r.dw = to_double(dw0);
  rmsnorm_forward_ref<double>(r.y.data(), r.rstd.data(), xx.data(), ww.data(), c.rows, c.D, 1e-6, c.zero_centered);
  rmsnorm_backward_ref<double>(r.dx.data(), r.dw.data(), dd.data(), xx.data(), ww.data(), r.rstd.data(), c.rows, c.D,
                               c.zero_centered);
  r.dw_abs.resize(c.D);
  for (int64_t d = 0; d < c.D; ++d) {
    double s = std::fabs(dw0[d]);
    for (int64_t i = 0; i < c.rows; ++i) s += std::fabs(dd[i * c.D + d] * xx[i * c.D + d] * r.rstd[i]);
    r.dw_abs[d] = 1e-5 * s;
  }
  return r;
}

TEST(DenseElemCuda, RmsNormForwardBackward) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  const NormCase cases[] = {{333, 48, false}, {257, 64, true}, {129, 80, false}, {67, 2048, true},
                            {1000, 64, false}, {50, 37, true}, {1, 2048, false},
                            // more than 32 dw chunks of 128 rows (the finishing pass's lanes wrap)
                            {5000, 40, false}, {4133, 768, true}};
  for (const NormCase& c : cases) {
    const std::string tag = std::to_string(c.rows) + "x" + std::to_string(c.D) + (c.zero_centered ? "zc" : "");
    SCOPED_TRACE("rows=" + std::to_string(c.rows) + " D=" + std::to_string(c.D) +
                 (c.zero_centered ? " zero-centred" : " plain"));
    const auto x = randn(c.rows * c.D, "norm.x" + tag, 1.7), dy = randn(c.rows * c.D, "norm.dy" + tag);
    auto w = randn(c.D, "norm.w" + tag, 0.2, false);
    if (!c.zero_centered)
      for (float& v : w) v += 1.f;
    const auto dw0 = randn(c.D, "norm.dw0" + tag, 1.0, false);
    const NormRef ref = norm_reference(c, x, w, dy, dw0);

    const Shape xs{c.rows, c.D}, ws{c.D}, rs{c.rows};
    Dev xd(DType::kBF16, xs), wd(DType::kF32, ws), yd(DType::kBF16, xs), rstdd(DType::kF32, rs);
    Dev dyd(DType::kBF16, xs), dxd(DType::kBF16, xs), dwd(DType::kF32, ws), rstd_in(DType::kF32, rs);
    xd.upload(x), wd.upload(w), dyd.upload(dy);
    yd.poison(ctx), rstdd.poison(ctx);
    rmsnorm_forward(ctx, yd, rstdd, xd, wd, 1e-6, c.zero_centered);
    expect_close_bf16("rmsnorm y", yd.download(), ref.y);
    expect_close("rmsnorm rstd", rstdd.download(), ref.rstd, 1e-5, 0.0);

    // The backward reads the reference's rstd (rounded to fp32), so it is tested on its own.
    std::vector<float> rstd_f(ref.rstd.begin(), ref.rstd.end());
    rstd_in.upload(rstd_f);
    std::vector<uint8_t> dx_bits[2], dw_bits[2];
    for (int run = 0; run < 2; ++run) {
      dxd.poison(ctx), dwd.upload(dw0);
      rmsnorm_backward(ctx, dxd, dwd, dyd, xd, wd, rstd_in, c.zero_centered);
      dx_bits[run] = dxd.raw(), dw_bits[run] = dwd.raw();
    }
    expect_close_bf16("rmsnorm dx", dxd.download(), ref.dx);
    expect_close("rmsnorm dw (accumulated onto dw0)", dwd.download(), ref.dw, 1e-6, 0.0, ref.dw_abs);
    expect_bits_equal("rmsnorm dx", dx_bits[0], dx_bits[1]);
    expect_bits_equal("rmsnorm dw", dw_bits[0], dw_bits[1]);

    // With a residual gradient: dx = residual + the norm's dx, one bf16 rounding of the fp32 sum.
    const auto res = randn(c.rows * c.D, "norm.res" + tag, 1.3);
    std::vector<double> want_res(ref.dx);
    for (size_t i = 0; i < want_res.size(); ++i) want_res[i] += res[i];
    Dev resd(DType::kBF16, xs), res_odd(DType::kBF16, xs, 1);  // offset 1: the scalar path
    resd.upload(res), res_odd.upload(res);
    dxd.poison(ctx), dwd.upload(dw0);
    rmsnorm_backward(ctx, dxd, dwd, dyd, xd, wd, rstd_in, c.zero_centered, resd);
    expect_close_bf16("rmsnorm dx + residual", dxd.download(), want_res);
    expect_close("rmsnorm dw (with a residual)", dwd.download(), ref.dw, 1e-6, 0.0, ref.dw_abs);
    const std::vector<uint8_t> fused_bits = dxd.raw();
    dxd.poison(ctx);
    rmsnorm_backward(ctx, dxd, Tensor(), dyd, xd, wd, rstd_in, c.zero_centered, res_odd);
    expect_close_bf16("rmsnorm dx + residual (unaligned residual)", dxd.download(), want_res);
    // dx aliases the residual (a block's g1 = g1 + ...).
    rmsnorm_backward(ctx, resd, Tensor(), dyd, xd, wd, rstd_in, c.zero_centered, resd);
    expect_close_bf16("rmsnorm dx + residual (in place over the residual)", resd.download(), want_res);
    expect_bits_equal("rmsnorm dx + residual, in place vs not", resd.raw(), fused_bits);

    // dw undefined (frozen weight): dx only.
    dxd.poison(ctx);
    rmsnorm_backward(ctx, dxd, Tensor(), dyd, xd, wd, rstd_in, c.zero_centered);
    expect_close_bf16("rmsnorm dx (no dw)", dxd.download(), ref.dx);

    // dx aliases dy: dw is reduced before dx overwrites dy.
    dwd.upload(dw0);
    rmsnorm_backward(ctx, dyd, dwd, dyd, xd, wd, rstd_in, c.zero_centered);
    expect_close_bf16("rmsnorm dx (in place over dy)", dyd.download(), ref.dx);
    expect_close("rmsnorm dw (dx over dy)", dwd.download(), ref.dw, 1e-6, 0.0, ref.dw_abs);
  }
}

// ============================================================================
// RoPE
// ============================================================================

struct RopeCase {
  int64_t B, T, H, D, rot;
  bool interleaved;
  double theta = 10000.0;
};

std::string rope_name(const RopeCase& c) {
  return "B=" + std::to_string(c.B) + " T=" + std::to_string(c.T) + " H=" + std::to_string(c.H) +
         " D=" + std::to_string(c.D) + " rot=" + std::to_string(c.rot) + (c.interleaved ? " interleaved" : " half") +
         " theta=" + std::to_string(c.theta);
}

TEST(DenseElemCuda, RopeForwardBackwardIncludingInPlace) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  const RopeCase cases[] = {
      {2, 37, 3, 64, 64, false},          {2, 37, 3, 64, 64, true},           {1, 50, 2, 80, 32, false},
      {1, 50, 2, 80, 32, true},           {2, 19, 4, 192, 64, true},          {1, 3000, 1, 128, 128, false, 1e6},
      {1, 21, 2, 50, 18, false},          {1, 21, 2, 50, 18, true},           {1, 9, 2, 48, 16, true},
      {1, 5, 3, 40, 0, false},            {3, 7, 1, 512, 512, true},
  };
  for (const RopeCase& c : cases) {
    const std::string name = rope_name(c);
    SCOPED_TRACE(name);
    const int64_t n = c.B * c.T * c.H * c.D;
    const auto x = randn(n, "rope.x" + name), dy = randn(n, "rope.dy" + name);
    const auto xx = to_double(x), dd = to_double(dy);
    std::vector<double> y(n), dx(n);
    rope_forward_ref<double>(y.data(), xx.data(), c.B, c.T, c.H, c.D, c.rot, c.theta, c.interleaved);
    rope_backward_ref<double>(dx.data(), dd.data(), c.B, c.T, c.H, c.D, c.rot, c.theta, c.interleaved);

    const Shape s{c.B, c.T, c.H, c.D};
    Dev xd(DType::kBF16, s), yd(DType::kBF16, s), dyd(DType::kBF16, s), dxd(DType::kBF16, s);
    xd.upload(x), dyd.upload(dy), yd.poison(ctx), dxd.poison(ctx);
    rope_forward(ctx, yd, xd, c.rot, c.theta, c.interleaved);
    rope_backward(ctx, dxd, dyd, c.rot, c.theta, c.interleaved);
    expect_close_bf16("rope y", yd.download(), y);
    expect_close_bf16("rope dx", dxd.download(), dx);
    rope_forward(ctx, xd, xd, c.rot, c.theta, c.interleaved);  // y aliases x
    rope_backward(ctx, dyd, dyd, c.rot, c.theta, c.interleaved);
    expect_close_bf16("rope y (in place)", xd.download(), y);
    expect_close_bf16("rope dx (in place)", dyd.download(), dx);
  }
}

// ============================================================================
// head concat / split
// ============================================================================

struct ConcatCase {
  int64_t rows, H, da, db;
  bool shared;
};

TEST(DenseElemCuda, HeadConcatAndSplitIncludingSharedB) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  const ConcatCase cases[] = {{37, 4, 128, 64, true}, {37, 4, 128, 64, false}, {11, 3, 5, 3, true},
                              {11, 3, 5, 3, false},   {9, 16, 48, 16, true},   {13, 2, 6, 2, false}};
  for (const ConcatCase& c : cases) {
    const std::string name = "rows=" + std::to_string(c.rows) + " H=" + std::to_string(c.H) +
                             " da=" + std::to_string(c.da) + " db=" + std::to_string(c.db) +
                             (c.shared ? " shared b" : "");
    SCOPED_TRACE(name);
    const int64_t Hb = c.shared ? 1 : c.H, W = c.da + c.db;
    const auto a = randn(c.rows * c.H * c.da, "cat.a" + name), b = randn(c.rows * Hb * c.db, "cat.b" + name);
    const auto dx = randn(c.rows * c.H * W, "cat.dx" + name);
    std::vector<float> x(c.rows * c.H * W), da(a.size()), db_f(b.size());
    head_concat_ref<float>(x.data(), a.data(), b.data(), c.rows, c.H, c.da, c.db, c.shared);
    head_split_ref<float>(da.data(), db_f.data(), dx.data(), c.rows, c.H, c.da, c.db, c.shared);
    std::vector<double> db(b.size());
    const auto dxx = to_double(dx);
    std::vector<double> da_d(a.size());
    head_split_ref<double>(da_d.data(), db.data(), dxx.data(), c.rows, c.H, c.da, c.db, c.shared);

    Dev ad(DType::kBF16, Shape{c.rows, c.H, c.da}), bd(DType::kBF16, Shape{c.rows, Hb, c.db});
    Dev xd(DType::kBF16, Shape{c.rows, c.H, W}), dxd(DType::kBF16, Shape{c.rows, c.H, W});
    Dev dad(DType::kBF16, Shape{c.rows, c.H, c.da}), dbd(DType::kBF16, Shape{c.rows, Hb, c.db});
    ad.upload(a), bd.upload(b), dxd.upload(dx);
    xd.poison(ctx);
    head_concat_forward(ctx, xd, ad, bd);
    expect_exact("head_concat x", xd.download(), x);
    std::vector<uint8_t> db_bits[2];
    for (int run = 0; run < 2; ++run) {
      dad.poison(ctx), dbd.poison(ctx);
      head_concat_backward(ctx, dad, dbd, dxd);
      db_bits[run] = dbd.raw();
    }
    expect_exact("head_concat da", dad.download(), da);
    if (c.shared) {
      expect_close_bf16("head_concat db (summed over heads)", dbd.download(), db);
      expect_bits_equal("head_concat db", db_bits[0], db_bits[1]);
    } else {
      expect_exact("head_concat db", dbd.download(), db_f);
    }
  }
}

// ============================================================================
// embedding
// ============================================================================

std::vector<int32_t> random_ids(int64_t n, int64_t vocab, const std::string& name) {
  const uint64_t stream = philox_stream_of(name.c_str());
  std::vector<int32_t> ids(n);
  for (int64_t i = 0; i < n; ++i)
    ids[i] = static_cast<int32_t>(philox4x32(run_seed(), stream, static_cast<uint64_t>(i)).v[0] % vocab);
  return ids;
}

TEST(DenseElemCuda, EmbeddingForwardCopiesRowsAndPoisonsBadIds) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  for (int64_t dim : {64, 48, 37}) {
    SCOPED_TRACE("dim=" + std::to_string(dim));
    const int64_t vocab = 1000, n = 517;
    const auto w = randn(vocab * dim, "emb.w" + std::to_string(dim));
    auto ids = random_ids(n, vocab, "emb.ids" + std::to_string(dim));
    std::vector<float> want(n * dim);
    embedding_forward_ref<float>(want.data(), ids.data(), w.data(), n, vocab, dim);
    Dev wd(DType::kBF16, Shape{vocab, dim}), idd(DType::kI32, Shape{n}), yd(DType::kBF16, Shape{n, dim});
    wd.upload(w), idd.upload_i32(ids), yd.poison(ctx);
    embedding_forward(ctx, yd, idd, wd);
    expect_exact("embedding y", yd.download(), want);

    // Ids outside [0, vocab) cannot throw on the GPU: their rows come out NaN.
    ids[3] = static_cast<int32_t>(vocab), ids[10] = -1;
    idd.upload_i32(ids);
    embedding_forward(ctx, yd, idd, wd);
    const auto y = yd.download();
    for (int64_t i : {int64_t{3}, int64_t{10}})
      for (int64_t d = 0; d < dim; ++d) EXPECT_TRUE(std::isnan(y[i * dim + d])) << "row " << i << " col " << d;
    for (int64_t d = 0; d < dim; ++d) EXPECT_EQ(y[4 * dim + d], want[4 * dim + d]);
  }
}

TEST(DenseElemCuda, EmbeddingBackwardDeterministicWithRepeatedIds) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  struct Case {
    int64_t vocab, n, dim;
  };
  // Many repeats (50 ids over 4099 tokens), a larger vocabulary, a dim that is not a vector multiple.
  for (const Case& c : {Case{50, 4099, 64}, Case{1000, 300, 48}, Case{1000, 300, 37}, Case{3, 3000, 2048}}) {
    const std::string name = "vocab=" + std::to_string(c.vocab) + " n=" + std::to_string(c.n) +
                             " dim=" + std::to_string(c.dim);
    SCOPED_TRACE(name);
    const auto ids = random_ids(c.n, c.vocab, "embb.ids" + name);
    const auto dy = randn(c.n * c.dim, "embb.dy" + name);
    const auto dw0 = randn(c.vocab * c.dim, "embb.dw0" + name, 1.0, false);
    // The float reference adds in position order onto dw0, the order the kernel uses: equal bits.
    std::vector<float> want_f = dw0;
    embedding_backward_ref<float>(want_f.data(), dy.data(), ids.data(), c.n, c.vocab, c.dim);
    std::vector<double> want = to_double(dw0), abs_sum(c.vocab * c.dim);
    const auto dd = to_double(dy);
    embedding_backward_ref<double>(want.data(), dd.data(), ids.data(), c.n, c.vocab, c.dim);
    for (int64_t i = 0; i < c.vocab * c.dim; ++i) abs_sum[i] = std::fabs(dw0[i]);
    for (int64_t i = 0; i < c.n; ++i)
      for (int64_t d = 0; d < c.dim; ++d) abs_sum[ids[i] * c.dim + d] += std::fabs(dy[i * c.dim + d]);
    // fp32 sequential sum of up to n terms: error <= n 2^-24 sum|terms|; 2x that.
    std::vector<double> floors(abs_sum.size());
    for (size_t i = 0; i < floors.size(); ++i) floors[i] = 2.0 * c.n * std::ldexp(1.0, -24) * abs_sum[i];

    Dev idd(DType::kI32, Shape{c.n}), dyd(DType::kBF16, Shape{c.n, c.dim}), dwd(DType::kF32, Shape{c.vocab, c.dim});
    idd.upload_i32(ids), dyd.upload(dy);
    std::vector<uint8_t> bits[2];
    for (int run = 0; run < 2; ++run) {
      dwd.upload(dw0);
      embedding_backward(ctx, dwd, dyd, idd);
      bits[run] = dwd.raw();
    }
    const auto got = dwd.download();
    expect_close("embedding dw vs double", got, want, 0.0, 0.0, floors);
    expect_exact("embedding dw vs the float reference (same order of additions)", got, want_f);
    expect_bits_equal("embedding dw", bits[0], bits[1]);

    // The same through a preallocated scratch buffer.
    const int64_t scratch_bytes = cuda::embedding_backward_scratch_bytes(c.n, c.vocab);
    Dev scratch(DType::kU16, Shape{scratch_bytes / 2 + 1});
    dwd.upload(dw0);
    cuda::embedding_backward_launch(static_cast<float*>(dwd.t().data), static_cast<uint16_t*>(dyd.t().data),
                                          static_cast<int32_t*>(idd.t().data), c.n, c.vocab, c.dim,
                                          scratch.t().data, nullptr, nullptr);
    expect_bits_equal("embedding dw (preallocated scratch)", bits[0], dwd.raw());
  }
}

TEST(DenseElemCuda, EmbeddingBackwardSkipsBadIds) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  const int64_t vocab = 17, n = 200, dim = 16;
  auto ids = random_ids(n, vocab, "embbad.ids");
  ids[0] = -5, ids[7] = static_cast<int32_t>(vocab), ids[100] = 1 << 30;
  const auto dy = randn(n * dim, "embbad.dy");
  const auto dw0 = randn(vocab * dim, "embbad.dw0", 1.0, false);
  std::vector<float> want = dw0;
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) continue;
    for (int64_t d = 0; d < dim; ++d) want[ids[i] * dim + d] += dy[i * dim + d];
  }
  Dev idd(DType::kI32, Shape{n}), dyd(DType::kBF16, Shape{n, dim}), dwd(DType::kF32, Shape{vocab, dim});
  idd.upload_i32(ids), dyd.upload(dy), dwd.upload(dw0);
  embedding_backward(ctx, dwd, dyd, idd);
  expect_exact("embedding dw with bad ids skipped", dwd.download(), want);
}

// ============================================================================
// optimizer: AdamW, sum_squares, scale_tensors
// ============================================================================

// Sizes: tiny, around one chunk (16384), several chunks; offset 1 (scalar path) on one of them.
struct OptimSize {
  int64_t n, offset;
};
const OptimSize kOptimSizes[] = {{1, 0}, {3, 0}, {1000, 1}, {16384 + 5, 0}, {70001, 0}, {16384, 1}};

TEST(DenseElemCuda, AdamWMatchesCpuOverThreeSteps) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context(), cpu;
  const double b1 = 0.9, b2 = 0.95, eps = 1e-8, lr = 3e-3, wd = 0.1;
  const size_t nt = std::size(kOptimSizes);
  std::vector<std::vector<float>> p(nt), m(nt), v(nt);
  std::vector<std::unique_ptr<Dev>> pd, gd, md, vd, pcd;
  for (size_t k = 0; k < nt; ++k) {
    const auto [n, off] = kOptimSizes[k];
    p[k] = randn(n, "adamw.p" + std::to_string(k), 0.05, false);
    m[k].assign(n, 0.f), v[k].assign(n, 0.f);
    for (auto* list : {&pd, &gd, &md, &vd}) list->push_back(std::make_unique<Dev>(DType::kF32, Shape{n}, off));
    pcd.push_back(std::make_unique<Dev>(DType::kBF16, Shape{n}, off));
    pd[k]->upload(p[k]), md[k]->upload(m[k]), vd[k]->upload(v[k]);
  }
  for (int step = 1; step <= 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const double bc2_sqrt = std::sqrt(1.0 - std::pow(b2, step)), step_size = lr / (1.0 - std::pow(b1, step));
    std::vector<AdamWTensor> gpu_ts(nt), cpu_ts(nt);
    std::vector<std::vector<float>> g(nt);
    for (size_t k = 0; k < nt; ++k) {
      const int64_t n = kOptimSizes[k].n;
      g[k] = randn(n, "adamw.g" + std::to_string(k) + "." + std::to_string(step), 0.01, false);
      gd[k]->upload(g[k]);
      const double decay = k % 2 == 0 ? 1.0 - lr * wd : 1.0;  // every other tensor without weight decay
      gpu_ts[k] = AdamWTensor{pd[k]->t(), gd[k]->t(), md[k]->t(), vd[k]->t(), k % 3 == 0 ? pcd[k]->t() : Tensor(), decay};
      if (k % 3 == 0) pcd[k]->poison(ctx);
      auto host = [&](std::vector<float>& x) { return Tensor(x.data(), DType::kF32, Device::kCPU, Shape{n}); };
      cpu_ts[k] = AdamWTensor{host(p[k]), host(g[k]), host(m[k]), host(v[k]), Tensor(), decay};
    }
    adamw_update(ctx, gpu_ts, b1, b2, step_size, bc2_sqrt, eps);
    adamw_update(cpu, cpu_ts, b1, b2, step_size, bc2_sqrt, eps);
    for (size_t k = 0; k < nt; ++k) {
      SCOPED_TRACE("tensor " + std::to_string(k) + " of " + std::to_string(kOptimSizes[k].n) + " elements");
      expect_close("adamw p", pd[k]->download(), to_double(p[k]), 1e-6, 1e-30);
      expect_close("adamw m", md[k]->download(), to_double(m[k]), 1e-6, 1e-30);
      expect_close("adamw v", vd[k]->download(), to_double(v[k]), 1e-6, 1e-30);
      if (k % 3 == 0) {
        std::vector<float> want(p[k].size());
        const auto got_p = pd[k]->download();
        for (size_t i = 0; i < want.size(); ++i) want[i] = round_bf16(got_p[i]);
        expect_exact("adamw p_compute = bf16(p)", pcd[k]->download(), want);
      }
    }
  }
}

// Gradient clipping folded into the update: adamw_update(..., grad_scale) on the unscaled gradients
// against scale_tensors(g, grad_scale) then adamw_update at 1, both on the GPU: the same bits (p, m,
// v, the bf16 copies), and the gradients left as they were; and against the CPU path with the same
// grad_scale. Two steps, two factors below 1, every size (the vector and the scalar paths).
TEST(DenseElemCuda, AdamWGradScaleIsScaleThenUpdate) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context(), cpu;
  const double b1 = 0.9, b2 = 0.95, eps = 1e-8, lr = 3e-3, wd = 0.1;
  const size_t nt = std::size(kOptimSizes);
  struct State {
    std::unique_ptr<Dev> p, g, m, v, pc;
  };
  std::vector<State> first(nt), fused(nt);  // scaled first, then updated at 1; scaled in the update
  std::vector<std::vector<float>> p(nt), m(nt), v(nt);  // the CPU's
  for (size_t k = 0; k < nt; ++k) {
    const auto [n, off] = kOptimSizes[k];
    p[k] = randn(n, "adamw_scale.p" + std::to_string(k), 0.05, false);
    m[k].assign(n, 0.f), v[k].assign(n, 0.f);
    for (State* st : {&first[k], &fused[k]}) {
      for (auto* d : {&st->p, &st->g, &st->m, &st->v}) *d = std::make_unique<Dev>(DType::kF32, Shape{n}, off);
      st->pc = std::make_unique<Dev>(DType::kBF16, Shape{n}, off);
      st->p->upload(p[k]), st->m->upload(m[k]), st->v->upload(v[k]);
    }
  }
  for (int step = 1; step <= 2; ++step) {
    const double grad_scale = step == 1 ? 0.3712345678901234 : 1.0 / (7.25 + 1e-6);
    SCOPED_TRACE("step " + std::to_string(step) + ", grad_scale " + std::to_string(grad_scale));
    const double bc2_sqrt = std::sqrt(1.0 - std::pow(b2, step)), step_size = lr / (1.0 - std::pow(b1, step));
    std::vector<AdamWTensor> first_ts(nt), fused_ts(nt), cpu_ts(nt);
    std::vector<Tensor> first_grads;
    std::vector<std::vector<float>> g(nt), g_cpu(nt);
    for (size_t k = 0; k < nt; ++k) {
      const int64_t n = kOptimSizes[k].n;
      g[k] = randn(n, "adamw_scale.g" + std::to_string(k) + "." + std::to_string(step), 0.01, false);
      g_cpu[k] = g[k];
      const double decay = k % 2 == 0 ? 1.0 - lr * wd : 1.0;
      const bool with_pc = k % 3 == 0;
      for (auto [st, ts] : {std::pair{&first[k], &first_ts[k]}, std::pair{&fused[k], &fused_ts[k]}}) {
        st->g->upload(g[k]);
        if (with_pc) st->pc->poison(ctx);
        *ts = AdamWTensor{st->p->t(), st->g->t(), st->m->t(), st->v->t(), with_pc ? st->pc->t() : Tensor(), decay};
      }
      first_grads.push_back(first[k].g->t());
      auto host = [&](std::vector<float>& x) { return Tensor(x.data(), DType::kF32, Device::kCPU, Shape{n}); };
      cpu_ts[k] = AdamWTensor{host(p[k]), host(g_cpu[k]), host(m[k]), host(v[k]), Tensor(), decay};
    }
    scale_tensors(ctx, first_grads, grad_scale);
    adamw_update(ctx, first_ts, b1, b2, step_size, bc2_sqrt, eps);
    adamw_update(ctx, fused_ts, b1, b2, step_size, bc2_sqrt, eps, grad_scale);
    adamw_update(cpu, cpu_ts, b1, b2, step_size, bc2_sqrt, eps, grad_scale);
    for (size_t k = 0; k < nt; ++k) {
      SCOPED_TRACE("tensor " + std::to_string(k) + " of " + std::to_string(kOptimSizes[k].n) + " elements");
      expect_exact("fused p vs scale then update", fused[k].p->download(), first[k].p->download());
      expect_exact("fused m vs scale then update", fused[k].m->download(), first[k].m->download());
      expect_exact("fused v vs scale then update", fused[k].v->download(), first[k].v->download());
      if (k % 3 == 0) expect_exact("fused p_compute vs scale then update", fused[k].pc->download(), first[k].pc->download());
      expect_exact("the gradient after the fused update (read only)", fused[k].g->download(), g[k]);
      expect_close("fused p vs the CPU", fused[k].p->download(), to_double(p[k]), 1e-6, 1e-30);
      expect_close("fused m vs the CPU", fused[k].m->download(), to_double(m[k]), 1e-6, 1e-30);
      expect_close("fused v vs the CPU", fused[k].v->download(), to_double(v[k]), 1e-6, 1e-30);
    }
  }
}

TEST(DenseElemCuda, SumSquaresMatchesDoubleAndIsDeterministic) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  std::vector<std::unique_ptr<Dev>> ds;
  std::vector<Tensor> ts;
  double want = 0;
  for (size_t k = 0; k < std::size(kOptimSizes); ++k) {
    const auto [n, off] = kOptimSizes[k];
    const auto x = randn(n, "sumsq.x" + std::to_string(k), 1.0 + k, false);
    for (float f : x) want += static_cast<double>(f) * f;
    ds.push_back(std::make_unique<Dev>(DType::kF32, Shape{n}, off));
    ds.back()->upload(x);
    ts.push_back(ds.back()->t());
  }
  Dev empty(DType::kF32, Shape{0});
  ts.push_back(empty.t());
  const double got = sum_squares(ctx, ts), again = sum_squares(ctx, ts);
  EXPECT_NEAR(got, want, 1e-6 * want) << "sum_squares vs the double sum";
  EXPECT_EQ(std::memcmp(&got, &again, sizeof got), 0) << "sum_squares differs between two calls: " << got << " vs "
                                                       << again;
  EXPECT_EQ(sum_squares(ctx, std::span<const Tensor>()), 0.0);
}

TEST(DenseElemCuda, ScaleTensorsIsTheRoundedDoubleProduct) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  const double factor = 0.3712345678901234;
  std::vector<std::unique_ptr<Dev>> ds;
  std::vector<Tensor> ts;
  std::vector<std::vector<float>> want;
  for (size_t k = 0; k < std::size(kOptimSizes); ++k) {
    const auto [n, off] = kOptimSizes[k];
    auto x = randn(n, "scale.x" + std::to_string(k), 1.0, false);
    ds.push_back(std::make_unique<Dev>(DType::kF32, Shape{n}, off));
    ds.back()->upload(x);
    ts.push_back(ds.back()->t());
    for (float& f : x) f = static_cast<float>(f * factor);  // the CPU path's arithmetic
    want.push_back(x);
  }
  scale_tensors(ctx, ts, factor);
  for (size_t k = 0; k < ds.size(); ++k) expect_exact("scale_tensors tensor " + std::to_string(k), ds[k]->download(), want[k]);
}

// ============================================================================
// input checks
// ============================================================================

TEST(DenseElemCuda, RejectsWrongDtypeDeviceAndShape) {
  SKIP_WITHOUT_GPU();
  Context ctx = gpu_context();
  Dev x32(DType::kF32, Shape{4, 64}), x(DType::kBF16, Shape{4, 64}), y(DType::kBF16, Shape{4, 64});
  Dev w(DType::kF32, Shape{64}), rstd(DType::kF32, Shape{4}), w_short(DType::kF32, Shape{32});
  try {
    rmsnorm_forward(ctx, y, rstd, x32, w, 1e-6, false);
    FAIL() << "f32 x accepted by the CUDA rmsnorm";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x is f32"), std::string::npos) << e.what();
  }
  EXPECT_THROW(rmsnorm_forward(ctx, y, rstd, x, w_short, 1e-6, false), Error);
  Dev res_short(DType::kBF16, Shape{4, 63});
  EXPECT_THROW(rmsnorm_backward(ctx, y, Tensor(), x, x, w, rstd, false, x32), Error);        // f32 residual
  EXPECT_THROW(rmsnorm_backward(ctx, y, Tensor(), x, x, w, rstd, false, res_short), Error);  // wrong size
  std::vector<uint16_t> host(4 * 64);
  Tensor x_cpu(host.data(), DType::kBF16, Device::kCPU, Shape{4, 64});
  try {
    swiglu_forward(ctx, y, x_cpu, x);
    FAIL() << "a CPU tensor accepted by the CUDA swiglu";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is on the CPU"), std::string::npos) << e.what();
  }
  Dev ids_f(DType::kF32, Shape{4}), emb(DType::kBF16, Shape{10, 64});
  EXPECT_THROW(embedding_forward(ctx, y, ids_f, emb), Error);
  Dev r4(DType::kBF16, Shape{1, 2, 2, 64}), r4o(DType::kBF16, Shape{1, 2, 2, 64});
  EXPECT_THROW(rope_forward(ctx, r4o, r4, 63, 10000.0, false), Error);  // odd rotary_dim
  EXPECT_THROW(rope_forward(ctx, r4o, r4, 66, 10000.0, false), Error);  // wider than the head
  std::vector<AdamWTensor> bad{AdamWTensor{x.t(), x.t(), x.t(), x.t(), Tensor(), 1.0}};  // bf16 master weights
  EXPECT_THROW(adamw_update(ctx, bad, 0.9, 0.95, 1e-3, 1.0, 1e-8), Error);
  std::vector<AdamWTensor> good{AdamWTensor{w.t(), w.t(), w.t(), w.t(), Tensor(), 1.0}};
  EXPECT_THROW(adamw_update(ctx, good, 0.9, 0.95, 1e-3, 1.0, 1e-8, std::nan("")), Error);  // a NaN clipping factor
}

}  // namespace
}  // namespace dt
