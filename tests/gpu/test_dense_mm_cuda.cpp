// The dense GPU matmul-class ops (cuBLASLt linear, cuDNN SDPA attention, fused cross-entropy) against
// the CPU references run in double on the same bf16-rounded inputs. Inputs are fresh Philox draws each run
// (the seed is printed; DT_TEST_SEED=<n> repeats one), every output is NaN-poisoned before each run, and
// a second run must give the same bits. Skips when there is no GPU.
//
// Tolerances, from the bf16 rounding of the outputs (u = 2^-8, bf16's unit roundoff) plus a floor:
//   linear (per element): bf16 y, dx: |err| <= 2u |ref| + 2^-12 S;  fp32 y: 2^-20 |ref| + 2^-12 S;
//     fp32 dw = dw0 + alpha dy^T x: 2^-20 |ref| + 2^-12 S, with S = sum_k |a_k b_k| (times |alpha|) the
//     scale of the fp32 accumulation error (k 2^-24 S at worst for k <= 4096).
//   attention (relative RMS over a tensor): o <= 4 r + 1e-3, dq, dk, dv <= 8 r + 2e-3, r = the relative RMS
//     of rounding the double reference to bf16 (about 1.6e-3); lse: max |err| <= 1e-3 (natural log).
//     T = 1: forward only; the backward must refuse it (cuDNN has none for s_q = s_kv = 1).
//   cross-entropy: loss, lse |err| <= 2e-5 (1 + |ref|); dlogits |err| <= 2u |ref| + |grad_scale| (1e-7 +
//   4 eps32 (1 + |lse|)) (lse's own fp32 rounding). Every kernel variant (stream, regs, tma); within
//   one, fused lse / losses / dlogits must equal forward + separate backward bit for bit.
// Every check prints its measured error next to its bound ("[ metric ]" lines).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/philox.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/linear.h"
#include "kernels/cuda_ops.h"
#include "kernels/cuda_context.h"
#include "kernels/fill.h"
#include "kernels/ops.h"
#include "tests/gpu/gpu_testing.h"

namespace dt {
namespace {

constexpr double kU = 1.0 / 256;  // bf16 unit roundoff 2^-8
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// One context for the whole test program (cuDNN's handle is slow to create).
CudaContextOwner& gpu() {
  static std::unique_ptr<CudaContextOwner> owner = make_cuda_context(0);
  return *owner;
}

uint64_t base_seed() {
  static const uint64_t seed = [] {
    const char* env = std::getenv("DT_TEST_SEED");
    const uint64_t s = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
    std::printf("[ metric   ] test_dense_mm_cuda seed %llu (DT_TEST_SEED=%llu repeats it)\n",
                static_cast<unsigned long long>(s), static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

// One device allocation, freed on scope exit.
struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(size_t bytes) { p = device_alloc(bytes > 0 ? bytes : 1, Device::kCUDA); }
  ~DevBuf() { device_free(p, Device::kCUDA); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

// n standard-normal values times `scale`, rounded to bf16 (kept as float), from Philox stream `stream`.
std::vector<float> random_bf16(int64_t n, uint64_t stream, double scale) {
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i)
    x[i] = round_bf16(static_cast<float>(scale * philox_normal(base_seed(), stream, static_cast<uint64_t>(i))));
  return x;
}

std::vector<uint16_t> to_bf16(const std::vector<float>& x) {
  std::vector<uint16_t> b(x.size());
  for (size_t i = 0; i < x.size(); ++i) b[i] = f32_to_bf16(x[i]);
  return b;
}
std::vector<float> from_bf16(const std::vector<uint16_t>& b) {
  std::vector<float> x(b.size());
  for (size_t i = 0; i < b.size(); ++i) x[i] = bf16_to_f32(b[i]);
  return x;
}
std::vector<double> to_double(const std::vector<float>& x) { return {x.begin(), x.end()}; }

template <class T>
void upload(void* dst, const std::vector<T>& h) {
  device_copy(dst, Device::kCUDA, h.data(), Device::kCPU, h.size() * sizeof(T));
}
template <class T>
std::vector<T> download(const void* src, size_t n) {
  std::vector<T> h(n);
  device_copy(h.data(), Device::kCPU, src, Device::kCUDA, n * sizeof(T));  // blocking: waits for the stream
  return h;
}

Tensor gpu_tensor(void* p, DType t, Shape s) { return Tensor(p, t, Device::kCUDA, s); }

void metric(const std::string& line) { std::printf("[ metric   ] %s\n", line.c_str()); }

// Elementwise check: |got - want| <= tol[i] everywhere (NaN fails). Reports the worst err/tol.
void expect_elementwise(const std::string& what, const std::vector<float>& got, const std::vector<double>& want,
                        const std::vector<double>& tol) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t bad = 0, worst = -1;
  double worst_ratio = 0, max_abs = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double ratio = err / tol[i];
    if (!(err <= tol[i])) ++bad;
    if (!(ratio <= worst_ratio)) worst_ratio = ratio, worst = static_cast<int64_t>(i);
    if (std::isfinite(err)) max_abs = std::max(max_abs, err);
  }
  metric(what + ": max |err| " + std::to_string(max_abs) + ", max |err|/tol " + std::to_string(worst_ratio));
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << want.size() << " elements out of tolerance; worst at " << worst
                    << ": got " << (worst >= 0 ? got[worst] : 0.f) << ", want " << (worst >= 0 ? want[worst] : 0.0)
                    << ", tol " << (worst >= 0 ? tol[worst] : 0.0);
}

double rel_rms(const std::vector<float>& got, const std::vector<double>& want, int64_t* nonfinite) {
  double num = 0, den = 0;
  *nonfinite = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) {
      ++*nonfinite;
      continue;
    }
    const double d = got[i] - want[i];
    num += d * d, den += want[i] * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// The relative RMS error of storing the double reference in bf16: the output's own rounding.
double bf16_rounding_rms(const std::vector<double>& want) {
  double num = 0, den = 0;
  for (double w : want) {
    const double d = round_bf16(static_cast<float>(w)) - w;
    num += d * d, den += w * w;
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

void expect_rel_rms(const std::string& what, const std::vector<float>& got, const std::vector<double>& want,
                    double multiple, double floor) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t nonfinite = 0;
  const double err = rel_rms(got, want, &nonfinite);
  const double r = bf16_rounding_rms(want);
  const double tol = multiple * r + floor;
  metric(what + ": relative RMS error " + std::to_string(err) + " (bf16 rounding of the reference " +
         std::to_string(r) + ", bound " + std::to_string(tol) + ")");
  EXPECT_EQ(nonfinite, 0) << what << ": " << nonfinite << " elements are NaN/inf (unwritten or overflowed)";
  EXPECT_LE(err, tol) << what;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// |a| elementwise, for the accumulation-scale references.
std::vector<double> abs_of(const std::vector<double>& x) {
  std::vector<double> a(x.size());
  for (size_t i = 0; i < x.size(); ++i) a[i] = std::fabs(x[i]);
  return a;
}

// ============================================================================
// Linear (cuBLASLt)
// ============================================================================

struct LinearResult {
  std::vector<uint16_t> y_bits, dx_bits;
  std::vector<float> y32, dw;
};

LinearResult run_linear_gpu(int64_t rows, int64_t in, int64_t out, DType y_dtype, double alpha,
                            const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& dy,
                            const std::vector<float>& dw0) {
  Context& ctx = gpu().context();
  DevBuf xd(x.size() * 2), wd(w.size() * 2), dyd(dy.size() * 2), yd(rows * out * 4), dxd(x.size() * 2),
      dwd(w.size() * 4);
  upload(xd.p, to_bf16(x)), upload(wd.p, to_bf16(w)), upload(dyd.p, to_bf16(dy)), upload(dwd.p, dw0);
  const Tensor xt = gpu_tensor(xd.p, DType::kBF16, Shape{rows, in}), wt = gpu_tensor(wd.p, DType::kBF16, Shape{out, in});
  const Tensor dyt = gpu_tensor(dyd.p, DType::kBF16, Shape{rows, out});
  const Tensor yt = gpu_tensor(yd.p, y_dtype, Shape{rows, out}), dxt = gpu_tensor(dxd.p, DType::kBF16, Shape{rows, in});
  const Tensor dwt = gpu_tensor(dwd.p, DType::kF32, Shape{out, in});
  fill_cuda(yt, kNaN, ctx.stream);
  fill_cuda(dxt, kNaN, ctx.stream);
  linear_forward(ctx, yt, xt, wt);
  linear_backward(ctx, dxt, dwt, dyt, xt, wt, alpha);
  LinearResult r;
  if (y_dtype == DType::kBF16) r.y_bits = download<uint16_t>(yd.p, rows * out);
  else r.y32 = download<float>(yd.p, rows * out);
  r.dx_bits = download<uint16_t>(dxd.p, rows * in);
  r.dw = download<float>(dwd.p, out * in);
  return r;
}

void check_linear(int64_t rows, int64_t in, int64_t out, DType y_dtype, double alpha) {
  const std::string name = "linear rows=" + std::to_string(rows) + " in=" + std::to_string(in) +
                           " out=" + std::to_string(out) + " y=" + std::string(dtype_name(y_dtype)) +
                           " alpha=" + std::to_string(alpha);
  SCOPED_TRACE(name);
  const uint64_t stream = static_cast<uint64_t>(rows * 1000003 + in * 1009 + out);
  const std::vector<float> x = random_bf16(rows * in, stream, 1.0), w = random_bf16(out * in, stream + 1, 0.05),
                           dy = random_bf16(rows * out, stream + 2, 1.0);
  std::vector<float> dw0(out * in);
  for (int64_t i = 0; i < out * in; ++i)
    dw0[i] = static_cast<float>(0.5 * philox_normal(base_seed(), stream + 3, static_cast<uint64_t>(i)));

  // double references on the same values, and the accumulation scales S = |a| |b|
  const std::vector<double> xd = to_double(x), wd = to_double(w), dyd = to_double(dy);
  const std::vector<double> xa = abs_of(xd), wa = abs_of(wd), dya = abs_of(dyd);
  std::vector<double> y(rows * out), sy(rows * out), dx(rows * in), sdx(rows * in), dw = to_double(dw0),
      sdw(out * in, 0.0);
  linear_forward_ref<double>(y.data(), xd.data(), wd.data(), rows, in, out);
  linear_forward_ref<double>(sy.data(), xa.data(), wa.data(), rows, in, out);
  linear_backward_ref<double>(dx.data(), dw.data(), dyd.data(), xd.data(), wd.data(), rows, in, out, alpha);
  linear_backward_ref<double>(sdx.data(), sdw.data(), dya.data(), xa.data(), wa.data(), rows, in, out, std::fabs(alpha));

  const LinearResult a = run_linear_gpu(rows, in, out, y_dtype, alpha, x, w, dy, dw0);
  std::vector<double> tol_y(y.size()), tol_dx(dx.size()), tol_dw(dw.size());
  const double y_rel = y_dtype == DType::kBF16 ? 2 * kU : 1.0 / (1 << 20);
  for (size_t i = 0; i < y.size(); ++i) tol_y[i] = y_rel * std::fabs(y[i]) + sy[i] / 4096 + 1e-30;
  for (size_t i = 0; i < dx.size(); ++i) tol_dx[i] = 2 * kU * std::fabs(dx[i]) + sdx[i] / 4096 + 1e-30;
  for (size_t i = 0; i < dw.size(); ++i) tol_dw[i] = std::fabs(dw[i]) / (1 << 20) + sdw[i] / 4096 + 1e-30;
  expect_elementwise(name + " y", y_dtype == DType::kBF16 ? from_bf16(a.y_bits) : a.y32, y, tol_y);
  expect_elementwise(name + " dx", from_bf16(a.dx_bits), dx, tol_dx);
  expect_elementwise(name + " dw (accumulated)", a.dw, dw, tol_dw);

  const LinearResult b = run_linear_gpu(rows, in, out, y_dtype, alpha, x, w, dy, dw0);
  EXPECT_TRUE(same_bits(a.y_bits, b.y_bits) && same_bits(a.y32, b.y32)) << "y differs between two runs";
  EXPECT_TRUE(same_bits(a.dx_bits, b.dx_bits)) << "dx differs between two runs";
  EXPECT_TRUE(same_bits(a.dw, b.dw)) << "dw differs between two runs";
}

class DenseMmLinear : public ::testing::TestWithParam<int64_t> {};

TEST_P(DenseMmLinear, ForwardBackwardMatchReferenceBf16Output) {
  SKIP_WITHOUT_GPU();
  for (int64_t in : {48, 200, 768})
    for (int64_t out : {48, 200, 768}) check_linear(GetParam(), in, out, DType::kBF16, 1.0);
}

TEST_P(DenseMmLinear, Fp32OutputAndAlpha) {
  SKIP_WITHOUT_GPU();
  check_linear(GetParam(), 200, 48, DType::kF32, 0.375);
  check_linear(GetParam(), 768, 200, DType::kF32, -2.0);
}

INSTANTIATE_TEST_SUITE_P(Rows, DenseMmLinear, ::testing::Values(1, 37, 1000));

TEST(DenseMmLinearApi, OptionalGradientsAndErrors) {
  SKIP_WITHOUT_GPU();
  Context& ctx = gpu().context();
  const int64_t rows = 5, in = 48, out = 16;
  DevBuf xd(rows * in * 4), wd(out * in * 2), dyd(rows * out * 2), dxd(rows * in * 2), dwd(out * in * 4);
  const std::vector<float> x = random_bf16(rows * in, 77, 1.0), w = random_bf16(out * in, 78, 0.1),
                           dy = random_bf16(rows * out, 79, 1.0);
  upload(xd.p, to_bf16(x)), upload(wd.p, to_bf16(w)), upload(dyd.p, to_bf16(dy));
  const Tensor xt = gpu_tensor(xd.p, DType::kBF16, Shape{rows, in}), wt = gpu_tensor(wd.p, DType::kBF16, Shape{out, in});
  const Tensor dyt = gpu_tensor(dyd.p, DType::kBF16, Shape{rows, out});
  const Tensor dxt = gpu_tensor(dxd.p, DType::kBF16, Shape{rows, in}), dwt = gpu_tensor(dwd.p, DType::kF32, Shape{out, in});
  // dw only: dx stays poisoned; dx only: dw keeps its value.
  fill_cuda(dxt, kNaN, ctx.stream);
  fill_cuda(dwt, 0.0, ctx.stream);
  linear_backward(ctx, Tensor(), dwt, dyt, xt, wt, 1.0);
  for (float v : from_bf16(download<uint16_t>(dxd.p, rows * in))) ASSERT_TRUE(std::isnan(v));
  const std::vector<float> dw1 = download<float>(dwd.p, out * in);
  linear_backward(ctx, dxt, Tensor(), dyt, xt, wt, 1.0);
  EXPECT_TRUE(same_bits(dw1, download<float>(dwd.p, out * in)));
  for (float v : from_bf16(download<uint16_t>(dxd.p, rows * in))) ASSERT_TRUE(std::isfinite(v));
  // accumulate_dx: a second call adds dy w to the dx the first left (the GEMM's beta = 1).
  const std::vector<float> dx1 = from_bf16(download<uint16_t>(dxd.p, rows * in));
  linear_backward(ctx, dxt, Tensor(), dyt, xt, wt, 1.0, /*accumulate_dx=*/true);
  const std::vector<float> dx2 = from_bf16(download<uint16_t>(dxd.p, rows * in));
  std::vector<double> dx_ref(rows * in);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < in; ++i) {
      double acc = 0;
      for (int64_t o = 0; o < out; ++o) acc += double(dy[r * out + o]) * w[o * in + i];
      dx_ref[r * in + i] = acc;
    }
  for (size_t e = 0; e < dx2.size(); ++e) {
    // dx2 = bf16(dx1 + dy w): within one bf16 rounding of the sum plus dx1's own rounding.
    const double want = double(dx1[e]) + dx_ref[e], bound = 1e-2 * (std::fabs(want) + std::fabs(dx_ref[e])) + 1e-6;
    ASSERT_NEAR(dx2[e], want, bound) << "accumulate_dx at " << e;
  }
  // fp32 activations are not taken on the GPU; neither is a Context without CUDA state.
  const Tensor x32 = gpu_tensor(xd.p, DType::kF32, Shape{rows, in});
  try {
    linear_forward(ctx, dyt, x32, wt);
    FAIL() << "f32 x accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x is f32"), std::string::npos) << e.what();
  }
  Context bare;
  bare.device = Device::kCUDA;
  try {
    linear_forward(bare, dyt, xt, wt);
    FAIL() << "a Context without CUDA state accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("make_cuda_context"), std::string::npos) << e.what();
  }
}

// ============================================================================
// Attention (cuDNN SDPA)
// ============================================================================

struct AttnCase {
  int64_t B, T, H, Hkv, Dqk, Dv;
  std::string name() const {
    return "attention B=" + std::to_string(B) + " T=" + std::to_string(T) + " H=" + std::to_string(H) +
           " Hkv=" + std::to_string(Hkv) + " Dqk=" + std::to_string(Dqk) + " Dv=" + std::to_string(Dv);
  }
};

struct AttnResult {
  std::vector<uint16_t> o, dq, dk, dv;
  std::vector<float> lse;
};

// Forward, then (when `backward`) backward; outputs poisoned first.
AttnResult run_attention_gpu(const AttnCase& c, double scale, const std::vector<float>& q, const std::vector<float>& k,
                             const std::vector<float>& v, const std::vector<float>& dout, bool backward) {
  Context& ctx = gpu().context();
  const Shape qs{c.B, c.T, c.H, c.Dqk}, ks{c.B, c.T, c.Hkv, c.Dqk}, vs{c.B, c.T, c.Hkv, c.Dv}, os{c.B, c.T, c.H, c.Dv},
      ls{c.B, c.H, c.T};
  DevBuf qd(q.size() * 2), kd(k.size() * 2), vd(v.size() * 2), dod(dout.size() * 2), od(os.numel() * 2),
      ld(ls.numel() * 4), dqd(q.size() * 2), dkd(k.size() * 2), dvd(v.size() * 2);
  upload(qd.p, to_bf16(q)), upload(kd.p, to_bf16(k)), upload(vd.p, to_bf16(v)), upload(dod.p, to_bf16(dout));
  const Tensor qt = gpu_tensor(qd.p, DType::kBF16, qs), kt = gpu_tensor(kd.p, DType::kBF16, ks),
               vt = gpu_tensor(vd.p, DType::kBF16, vs), dot = gpu_tensor(dod.p, DType::kBF16, os);
  const Tensor ot = gpu_tensor(od.p, DType::kBF16, os), lt = gpu_tensor(ld.p, DType::kF32, ls);
  const Tensor dqt = gpu_tensor(dqd.p, DType::kBF16, qs), dkt = gpu_tensor(dkd.p, DType::kBF16, ks),
               dvt = gpu_tensor(dvd.p, DType::kBF16, vs);
  for (const Tensor* t : {&ot, &lt, &dqt, &dkt, &dvt}) fill_cuda(*t, kNaN, ctx.stream);
  attention_forward(ctx, ot, lt, qt, kt, vt, scale);
  AttnResult r;
  r.o = download<uint16_t>(od.p, os.numel());
  r.lse = download<float>(ld.p, ls.numel());
  if (!backward) {
    // cuDNN has no SDPA backward for T = 1 (kernels/cuda/attention_cudnn.cpp): a clear error, no output.
    try {
      attention_backward(ctx, dqt, dkt, dvt, dot, qt, kt, vt, ot, lt, scale);
      ADD_FAILURE() << "attention_backward accepted T = " << c.T;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("T = 1"), std::string::npos) << e.what();
    }
    return r;
  }
  attention_backward(ctx, dqt, dkt, dvt, dot, qt, kt, vt, ot, lt, scale);
  r.dq = download<uint16_t>(dqd.p, q.size());
  r.dk = download<uint16_t>(dkd.p, k.size());
  r.dv = download<uint16_t>(dvd.p, v.size());
  return r;
}

void check_attention(const AttnCase& c) {
  const std::string name = c.name();
  SCOPED_TRACE(name);
  const double scale = 1 / std::sqrt(static_cast<double>(c.Dqk));
  const uint64_t stream = static_cast<uint64_t>(((c.B * 7 + c.T) * 131 + c.H * 17 + c.Hkv) * 1031 + c.Dqk * 3 + c.Dv)
                          << 8;
  const std::vector<float> q = random_bf16(c.B * c.T * c.H * c.Dqk, stream, 1.0),
                           k = random_bf16(c.B * c.T * c.Hkv * c.Dqk, stream + 1, 1.0),
                           v = random_bf16(c.B * c.T * c.Hkv * c.Dv, stream + 2, 1.0),
                           dout = random_bf16(c.B * c.T * c.H * c.Dv, stream + 3, 1.0);
  const std::vector<double> qd = to_double(q), kd = to_double(k), vd = to_double(v), dod = to_double(dout);
  std::vector<double> o(dout.size()), lse(c.B * c.H * c.T), dq(q.size()), dk(k.size()), dv(v.size());
  attention_forward_ref<double>(o.data(), lse.data(), qd.data(), kd.data(), vd.data(), c.B, c.T, c.H, c.Hkv, c.Dqk,
                                c.Dv, scale);
  attention_backward_ref<double>(dq.data(), dk.data(), dv.data(), dod.data(), qd.data(), kd.data(), vd.data(),
                                 o.data(), lse.data(), c.B, c.T, c.H, c.Hkv, c.Dqk, c.Dv, scale);

  const bool backward = c.T > 1;
  const AttnResult a = run_attention_gpu(c, scale, q, k, v, dout, backward);
  expect_rel_rms(name + " o", from_bf16(a.o), o, 4, 1e-3);
  double lse_err = 0;
  int64_t lse_bad = 0;
  for (size_t i = 0; i < lse.size(); ++i) {
    const double e = std::fabs(a.lse[i] - lse[i]);
    if (!(e <= 1e-3)) ++lse_bad;
    if (std::isfinite(e)) lse_err = std::max(lse_err, e);
  }
  metric(name + " lse: max |err| " + std::to_string(lse_err) + " (bound 1e-3)");
  EXPECT_EQ(lse_bad, 0) << name << " lse: " << lse_bad << " values off by more than 1e-3 (or NaN); max " << lse_err;
  if (backward) {
    expect_rel_rms(name + " dq", from_bf16(a.dq), dq, 8, 2e-3);
    expect_rel_rms(name + " dk", from_bf16(a.dk), dk, 8, 2e-3);
    expect_rel_rms(name + " dv", from_bf16(a.dv), dv, 8, 2e-3);
  }

  const AttnResult b = run_attention_gpu(c, scale, q, k, v, dout, backward);
  EXPECT_TRUE(same_bits(a.o, b.o)) << "o differs between two runs";
  EXPECT_TRUE(same_bits(a.lse, b.lse)) << "lse differs between two runs";
  EXPECT_TRUE(same_bits(a.dq, b.dq)) << "dq differs between two runs (deterministic backward)";
  EXPECT_TRUE(same_bits(a.dk, b.dk)) << "dk differs between two runs";
  EXPECT_TRUE(same_bits(a.dv, b.dv)) << "dv differs between two runs";
}

class DenseMmAttentionLengths : public ::testing::TestWithParam<int64_t> {};

TEST_P(DenseMmAttentionLengths, GqaMatchesReference) {
  SKIP_WITHOUT_GPU();
  check_attention({2, GetParam(), 4, 2, 64, 64});
}

INSTANTIATE_TEST_SUITE_P(T, DenseMmAttentionLengths, ::testing::Values(1, 65, 300, 1024));

TEST(DenseMmAttention, MultiQueryAndHeadDim128) {
  SKIP_WITHOUT_GPU();
  check_attention({1, 300, 4, 1, 64, 64});
  check_attention({1, 129, 2, 1, 128, 128});
}

TEST(DenseMmAttention, MlaHeadDims) {
  SKIP_WITHOUT_GPU();
  check_attention({1, 65, 2, 2, 192, 128});  // DeepSeek-V3: d_nope 128 + d_rope 64, d_v 128
  check_attention({2, 300, 3, 3, 96, 64});   // the small MLA configs: 64 + 32, 64
}

// ============================================================================
// Cross-entropy, for every kernel variant of kernels/cuda/cross_entropy.cu
// ============================================================================

using cuda::CrossEntropyVariant;

// Runs one scope with the GPU context preferring a kernel variant (the test-only override), then
// restores the plan's default.
struct CeVariantScope {
  Context& ctx;
  CeVariantScope(Context& c, CrossEntropyVariant v) : ctx(c) { cuda::set_cross_entropy_variant_for_testing(ctx, v); }
  ~CeVariantScope() { cuda::set_cross_entropy_variant_for_testing(ctx, std::nullopt); }
  CeVariantScope(const CeVariantScope&) = delete;
  CeVariantScope& operator=(const CeVariantScope&) = delete;
};

struct CeRef {
  std::vector<double> losses, lse, dlogits;
};

CeRef ce_reference(const std::vector<float>& logits, const std::vector<int32_t>& targets, int64_t V, double scale) {
  const int64_t n = static_cast<int64_t>(targets.size());
  const std::vector<double> x = to_double(logits);
  CeRef r;
  r.losses.resize(n), r.lse.resize(n), r.dlogits.resize(x.size());
  cross_entropy_forward_ref<double>(r.losses.data(), r.lse.data(), x.data(), targets.data(), n, V);
  cross_entropy_backward_ref<double>(r.dlogits.data(), x.data(), r.lse.data(), targets.data(), n, V, scale);
  return r;
}

// One problem: bf16 logits [n, V] (as bits), targets, the double reference.
struct CeCase {
  std::vector<uint16_t> logits;
  std::vector<int32_t> targets;
  double scale = 0;
  CeRef ref;
};

CeCase make_ce_case(int64_t n, int64_t V) {
  const uint64_t stream = static_cast<uint64_t>(n * 100003 + V) << 4;
  std::vector<float> logits = random_bf16(n * V, stream, 2.0);
  CeCase c;
  c.targets.resize(n);
  for (int64_t i = 0; i < n; ++i)
    c.targets[i] = static_cast<int32_t>(philox4x32(base_seed(), stream + 1, static_cast<uint64_t>(i)).v[0] % V);
  // Large logits (max subtraction) in row 0, and a row whose target is its largest logit.
  for (int64_t j = 0; j < V; ++j) logits[j] = round_bf16(logits[j] + 60.f);
  if (n > 1) logits[V + c.targets[1]] = 12.f;
  c.scale = 0.5 / static_cast<double>(n);
  c.ref = ce_reference(logits, c.targets, V, c.scale);
  c.logits = to_bf16(logits);
  return c;
}

// The cases of one vocab, kept while the variants' tests of that vocab run (consecutive: the vocab is
// the outer parameter); building them (Philox draws, the double reference) is most of this test's time.
const CeCase& ce_case(int64_t n, int64_t V) {
  static int64_t cached_vocab = -1;
  static std::vector<std::pair<int64_t, std::unique_ptr<CeCase>>> cached;
  if (V != cached_vocab) cached.clear(), cached_vocab = V;
  for (const auto& [rows, c] : cached)
    if (rows == n) return *c;
  cached.emplace_back(n, std::make_unique<CeCase>(make_ce_case(n, V)));
  return *cached.back().second;
}

void expect_ce_close(const std::string& name, const std::vector<float>& losses, const std::vector<float>& lse,
                     const CeRef& ref) {
  std::vector<double> tol(ref.lse.size());
  for (size_t i = 0; i < tol.size(); ++i) tol[i] = 2e-5 * (1 + std::fabs(ref.lse[i]));
  expect_elementwise(name + " lse", lse, ref.lse, tol);
  for (size_t i = 0; i < tol.size(); ++i) tol[i] = 2e-5 * (1 + std::fabs(ref.losses[i]));
  expect_elementwise(name + " losses", losses, ref.losses, tol);
}

void expect_dlogits_close(const std::string& name, const std::vector<uint16_t>& got, const CeRef& ref, double scale) {
  // Beyond the bf16 rounding: lse is stored in fp32, so x - lse carries up to a few fp32 ulps of lse,
  // which the target's (p - 1) scale keeps absolute when p is near 1 (a confident row: the ulp of
  // lse = 12 is 1e-6, while 1 - p can be 6e-5).
  const size_t V = ref.dlogits.size() / ref.lse.size();
  std::vector<double> tol(ref.dlogits.size());
  for (size_t i = 0; i < tol.size(); ++i)
    tol[i] = 2 * kU * std::fabs(ref.dlogits[i]) +
             std::fabs(scale) * (1e-7 + 4 * std::ldexp(1.0, -24) * (1 + std::fabs(ref.lse[i / V])));
  expect_elementwise(name + " dlogits", from_bf16(got), ref.dlogits, tol);
}

void check_cross_entropy(int64_t n, int64_t V, CrossEntropyVariant preferred) {
  const std::string variant = cuda::cross_entropy_variant_name(preferred);
  const std::string name = "cross_entropy " + variant + " N=" + std::to_string(n) + " V=" + std::to_string(V);
  SCOPED_TRACE(name);
  Context& ctx = gpu().context();
  const CeCase& c = ce_case(n, V);
  const CeRef& ref = c.ref;
  const double scale = c.scale;
  const std::vector<uint16_t>& lb = c.logits;
  // dlogits for the separate backward: a buffer one element off the logits' 16-byte alignment when V
  // allows it (the scalar path), else aligned.
  DevBuf xd(lb.size() * 2), td(n * 4), lossd(n * 4), lsed(n * 4), dxd(lb.size() * 2 + 16);
  upload(xd.p, lb), upload(td.p, c.targets);
  const Tensor xt = gpu_tensor(xd.p, DType::kBF16, Shape{n, V}), tt = gpu_tensor(td.p, DType::kI32, Shape{n});
  const Tensor losst = gpu_tensor(lossd.p, DType::kF32, Shape{n}), lset = gpu_tensor(lsed.p, DType::kF32, Shape{n});
  const Tensor dxt = gpu_tensor(static_cast<uint16_t*>(dxd.p) + 1, DType::kBF16, Shape{n, V});

  // forward, then the separate backward (into the misaligned buffer, then in place)
  fill_cuda(losst, kNaN, ctx.stream), fill_cuda(lset, kNaN, ctx.stream), fill_cuda(dxt, kNaN, ctx.stream);
  cross_entropy_forward(ctx, losst, lset, xt, tt);
  const std::vector<float> losses1 = download<float>(lossd.p, n), lse1 = download<float>(lsed.p, n);
  expect_ce_close(name + " forward", losses1, lse1, ref);
  cross_entropy_backward(ctx, dxt, xt, lset, tt, scale);
  expect_dlogits_close(name + " backward (separate, misaligned dlogits)",
                       download<uint16_t>(static_cast<uint16_t*>(dxd.p) + 1, lb.size()), ref, scale);
  cross_entropy_backward(ctx, xt, xt, lset, tt, scale);
  const std::vector<uint16_t> back_inplace = download<uint16_t>(xd.p, lb.size());
  expect_dlogits_close(name + " backward (in place)", back_inplace, ref, scale);

  // fused, in place, twice from the same logits: same bits, and the same as forward + backward
  std::vector<std::vector<uint16_t>> fused(2);
  std::vector<std::vector<float>> fused_losses(2), fused_lse(2);
  for (int run = 0; run < 2; ++run) {
    upload(xd.p, lb);
    fill_cuda(losst, kNaN, ctx.stream), fill_cuda(lset, kNaN, ctx.stream);
    cross_entropy_fused(ctx, losst, lset, xt, tt, scale);
    fused[run] = download<uint16_t>(xd.p, lb.size());
    fused_losses[run] = download<float>(lossd.p, n), fused_lse[run] = download<float>(lsed.p, n);
  }
  expect_ce_close(name + " fused", fused_losses[0], fused_lse[0], ref);
  expect_dlogits_close(name + " fused", fused[0], ref, scale);
  EXPECT_TRUE(same_bits(fused[0], fused[1]) && same_bits(fused_losses[0], fused_losses[1]) &&
              same_bits(fused_lse[0], fused_lse[1]))
      << "fused cross-entropy differs between two runs";
  EXPECT_TRUE(same_bits(fused_lse[0], lse1) && same_bits(fused_losses[0], losses1))
      << "fused and forward-only cross-entropy give different losses";
  EXPECT_TRUE(same_bits(fused[0], back_inplace)) << "fused and separate backward give different dlogits";
}

class DenseMmCrossEntropy : public ::testing::TestWithParam<std::tuple<int64_t, CrossEntropyVariant>> {};

// Vocab 7: scalars only (some rows hold no 16-byte block); 1000 and 50304: aligned rows; 50257: every
// row offset differently; 57344: the register variants' largest rows (every thread's 7 blocks full,
// the tma variant's largest shared-memory ring); 57345: just over, where they fall back to stream.
// 1200 rows: several rows per CTA in the persistent kernels (the tma ring wraps its phases).
TEST_P(DenseMmCrossEntropy, ForwardBackwardFusedMatchReference) {
  SKIP_WITHOUT_GPU();
  const auto [V, variant] = GetParam();
  const CeVariantScope scope(gpu().context(), variant);
  const std::vector<int64_t> rows = V <= 1000 ? std::vector<int64_t>{1, 37, 300, 1200}
                                    : V <= 50304 ? std::vector<int64_t>{1, 37, 300}
                                                 : std::vector<int64_t>{3, 37};
  for (int64_t n : rows) check_cross_entropy(n, V, variant);
}

INSTANTIATE_TEST_SUITE_P(Vocab, DenseMmCrossEntropy,
                         ::testing::Combine(::testing::Values(7, 1000, 50257, 50304, 57344, 57345),
                                            ::testing::ValuesIn(cuda::kCrossEntropyVariants)),
                         [](const auto& info) {
                           return "V" + std::to_string(std::get<0>(info.param)) + "_" +
                                  cuda::cross_entropy_variant_name(std::get<1>(info.param));
                         });

TEST(DenseMmCrossEntropyTargets, OutOfRangeTargetIsAnError) {
  SKIP_WITHOUT_GPU();
  Context& ctx = gpu().context();
  const int64_t n = 9, V = 1000;
  DevBuf xd(n * V * 2), td(n * 4), lossd(n * 4), lsed(n * 4);
  const Tensor xt = gpu_tensor(xd.p, DType::kBF16, Shape{n, V}), tt = gpu_tensor(td.p, DType::kI32, Shape{n});
  const Tensor losst = gpu_tensor(lossd.p, DType::kF32, Shape{n}), lset = gpu_tensor(lsed.p, DType::kF32, Shape{n});
  for (const CrossEntropyVariant variant : cuda::kCrossEntropyVariants) {
    const CeVariantScope scope(ctx, variant);
    SCOPED_TRACE(cuda::cross_entropy_variant_name(variant));
    upload(xd.p, to_bf16(random_bf16(n * V, 5, 1.0)));
    for (int32_t bad : {static_cast<int32_t>(V), -1}) {
      std::vector<int32_t> targets(n, 3);
      targets[5] = bad, targets[7] = bad;
      upload(td.p, targets);
      for (int op = 0; op < 3; ++op) {
        try {
          if (op == 0) cross_entropy_forward(ctx, losst, lset, xt, tt);
          if (op == 1) cross_entropy_backward(ctx, xt, xt, lset, tt, 1.0);
          if (op == 2) cross_entropy_fused(ctx, losst, lset, xt, tt, 1.0);
          FAIL() << "target " << bad << " accepted (op " << op << ")";
        } catch (const Error& e) {
          const std::string want = "target id " + std::to_string(bad) + " at position 5 is outside the vocabulary";
          EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
        }
      }
    }
    // The flag is cleared per call: good targets pass again afterwards.
    upload(td.p, std::vector<int32_t>(n, 3));
    upload(xd.p, to_bf16(random_bf16(n * V, 6, 1.0)));
    EXPECT_NO_THROW(cross_entropy_forward(ctx, losst, lset, xt, tt));
    EXPECT_NO_THROW(cross_entropy_fused(ctx, losst, lset, xt, tt, 1.0));
  }
}

}  // namespace
}  // namespace dt
