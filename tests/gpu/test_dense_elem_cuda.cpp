// The CUDA elementwise dense ops (kernels/cuda/{rmsnorm, rope, elementwise}.cu: SwiGLU, sigmoid
// gate, residual add, cast, RMSNorm, RoPE, head concat / split) against the CPU references, and the
// input checks of the dense CUDA ops. Skips when there is no GPU. Inputs and tolerances:
// tests/gpu/dense_elem_test_util.h.
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
#include "tests/gpu/dense_elem_test_util.h"
#include "tests/gpu/gpu_tensor.h"

namespace dt {
namespace {

using namespace dense_elem_test;

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
