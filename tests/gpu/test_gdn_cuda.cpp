// The CUDA chunked gated delta rule against the CPU reference (gdn_chunk_*_ref) run in double on
// the same bf16-rounded inputs: through kernels/ops.h (the tensor-core kernels,
// kernels/cuda/gdn_tc_*.cu) and, for some cases, the plain fp32 kernels (kernels/cuda/gdn_chunk.cu,
// GdnCudaImpl::kSimt) through kernels/gdn_cuda.h. Every GPU output is poisoned with NaN before
// each run; two runs must give identical bits. Skips when there is no GPU.
//
// Head dims: dk = dv in {64, 128} (the tensor-core kernels) and small or unequal ones (16, 32, 48;
// dk 32 with dv 64, ...), which run the SIMT kernels.
// Tolerances (relative RMS error, sqrt(sum (x - ref)^2 / sum ref^2)): o and S_out 5e-3;
// dq, dk, dv, dS0 1e-2; dbeta, dg 2e-2.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "kernels/fill.h"
#include "kernels/cuda/gdn_plan.h"
#include "kernels/gdn_cuda.h"
#include "kernels/ops.h"

namespace dt {
namespace {

#define SKIP_WITHOUT_GPU()                                                   \
  do {                                                                       \
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device present";  \
  } while (0)

// One device allocation, freed on scope exit.
struct DevBuf {
  void* p = nullptr;
  size_t bytes = 0;
  explicit DevBuf(size_t n) : bytes(n) { p = device_alloc(n > 0 ? n : 1, Device::kCUDA); }
  ~DevBuf() { device_free(p, Device::kCUDA); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

struct Case {
  int64_t B = 1, T = 64, Hk = 1, Hv = 1, D = 64;  // D: the key head dim dk
  int64_t Dv = 0;                                  // the value head dim dv; 0: = D
  bool with_S0 = true, with_dS_out = true;
  enum class Gates { kNormal, kNearZero, kVeryNegative, kBetaEdges } gates = Gates::kNormal;
  bool strided = false;  // q, k, v as column slices of one [B, T, C] buffer
  int64_t out_offset = 0;  // o, dq, dk, dv start this many elements past a 256-byte boundary
  uint64_t seed = 1;

  int64_t dv() const { return Dv ? Dv : D; }

  std::string name() const {
    static const char* gate_names[] = {"normal", "g~0", "g<<0", "beta{0,1}"};
    return "B=" + std::to_string(B) + " T=" + std::to_string(T) + " Hk=" + std::to_string(Hk) +
           " Hv=" + std::to_string(Hv) + " D=" + std::to_string(D) + (Dv ? " Dv=" + std::to_string(Dv) : "") +
           " gates=" + gate_names[static_cast<int>(gates)] +
           (with_S0 ? " S0" : "") + (with_dS_out ? " dS_out" : "") + (strided ? " strided" : "") +
           (out_offset ? " outputs+" + std::to_string(out_offset) : "");
  }
};

// Host inputs: q, k, v, d_o hold bf16-representable values (already rounded), stored as float.
struct Inputs {
  std::vector<float> q, k, v, g, beta, S0, d_o, dS_out;
};

Inputs make_inputs(const Case& c) {
  std::mt19937_64 rng(c.seed);
  std::normal_distribution<double> nd;
  const int64_t rows = c.B * c.T, D = c.D;
  Inputs in;
  auto unit_rows = [&](std::vector<float>& x, double scale) {
    x.resize(rows * c.Hk * D);
    for (int64_t r = 0; r < rows * c.Hk; ++r) {
      double ss = 0;
      std::vector<double> t(D);
      for (auto& e : t) e = nd(rng), ss += e * e;
      for (int64_t i = 0; i < D; ++i) x[r * D + i] = round_bf16(static_cast<float>(scale * t[i] / std::sqrt(ss + 1e-6)));
    }
  };
  unit_rows(in.q, 1.0 / std::sqrt(static_cast<double>(D)));
  unit_rows(in.k, 1.0);
  in.v.resize(rows * c.Hv * c.dv());
  for (auto& e : in.v) e = round_bf16(static_cast<float>(nd(rng)));
  in.d_o.resize(rows * c.Hv * c.dv());
  for (auto& e : in.d_o) e = round_bf16(static_cast<float>(nd(rng)));
  in.g.resize(rows * c.Hv), in.beta.resize(rows * c.Hv);
  for (int64_t i = 0; i < rows * c.Hv; ++i) {
    const double a = nd(rng), b = nd(rng);
    double g = -std::log1p(std::exp(-a));  // logsigmoid(a), in (-inf, 0)
    double beta = 1 / (1 + std::exp(-b));
    switch (c.gates) {
      case Case::Gates::kNormal: break;
      case Case::Gates::kNearZero: g = -1e-7 * std::fabs(a); break;
      case Case::Gates::kVeryNegative: g = (i % 3 == 0) ? -80.0 - 20 * std::fabs(a) : g; break;
      case Case::Gates::kBetaEdges: beta = (i % 2 == 0) ? 0.0 : 1.0; break;
    }
    in.g[i] = static_cast<float>(g), in.beta[i] = static_cast<float>(beta);
  }
  const int64_t ns = c.B * c.Hv * D * c.dv();
  if (c.with_S0) {
    in.S0.resize(ns);
    for (auto& e : in.S0) e = static_cast<float>(0.3 * nd(rng));
  }
  if (c.with_dS_out) {
    in.dS_out.resize(ns);
    for (auto& e : in.dS_out) e = static_cast<float>(0.3 * nd(rng));
  }
  return in;
}

std::vector<double> to_double(const std::vector<float>& x) { return {x.begin(), x.end()}; }

Tensor host_f64(std::vector<double>& x, Shape s) {
  return x.empty() ? Tensor() : Tensor(x.data(), DType::kF64, Device::kCPU, s);
}

// The double reference: outputs o, S_out, and the gradients.
struct Reference {
  std::vector<double> o, S_out, dq, dk, dv, dg, dbeta, dS0;
};

Reference run_reference(const Case& c, const Inputs& in) {
  const int64_t B = c.B, T = c.T, Hk = c.Hk, Hv = c.Hv, D = c.D, Dv = c.dv();
  std::vector<double> q = to_double(in.q), k = to_double(in.k), v = to_double(in.v), g = to_double(in.g),
                      beta = to_double(in.beta), S0 = to_double(in.S0), d_o = to_double(in.d_o),
                      dS_out = to_double(in.dS_out);
  Reference r;
  r.o.resize(B * T * Hv * Dv), r.S_out.resize(B * Hv * D * Dv);
  r.dq.resize(B * T * Hk * D), r.dk.resize(B * T * Hk * D), r.dv.resize(B * T * Hv * Dv);
  r.dg.resize(B * T * Hv), r.dbeta.resize(B * T * Hv), r.dS0.resize(B * Hv * D * Dv);
  const Shape qs{B, T, Hk, D}, vs{B, T, Hv, Dv}, gs{B, T, Hv}, ss{B, Hv, D, Dv};
  Context cpu;
  gdn_chunk_forward(cpu, host_f64(r.o, vs), host_f64(r.S_out, ss), host_f64(q, qs), host_f64(k, qs),
                    host_f64(v, vs), host_f64(g, gs), host_f64(beta, gs), host_f64(S0, ss), 64);
  gdn_chunk_backward(cpu, host_f64(r.dq, qs), host_f64(r.dk, qs), host_f64(r.dv, vs), host_f64(r.dg, gs),
                     host_f64(r.dbeta, gs), host_f64(r.dS0, ss), host_f64(d_o, vs), host_f64(dS_out, ss),
                     host_f64(q, qs), host_f64(k, qs), host_f64(v, vs), host_f64(g, gs), host_f64(beta, gs),
                     host_f64(S0, ss), 64);
  return r;
}

// Device copies of the inputs and the output buffers, and one run of the CUDA op.
struct GpuRun {
  std::vector<float> o, S_out, dq, dk, dv, dg, dbeta, dS0;  // results, back on the host
  std::vector<uint16_t> o_bits, dq_bits, dk_bits, dv_bits;   // for the bitwise determinism check
  std::vector<float> dg_raw, dbeta_raw, S_out_raw, dS0_raw;
};

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

template <class T>
void upload(DevBuf& d, const std::vector<T>& h) {
  device_copy(d.p, Device::kCUDA, h.data(), Device::kCPU, h.size() * sizeof(T));
}
template <class T>
std::vector<T> download(const DevBuf& d, size_t n, size_t off = 0) {
  std::vector<T> h(n);
  device_copy(h.data(), Device::kCPU, static_cast<const T*>(d.p) + off, Device::kCUDA, n * sizeof(T));
  return h;
}

// The kernels' options (the impl and the plan's forced choices, GdnPlanForcing in
// kernels/cuda/gdn_plan.h); the defaults are the ops': kAuto, every choice by plan_gdn.
struct Kernels {
  GdnCudaImpl impl = GdnCudaImpl::kAuto;
  int state_cols = 0, state_stages = 0, overlap = -1, colwarp = -1, dvl_fused = -1;
  int chase_prep = -1, qk_persist = -1;
  bool defaults() const {
    return impl == GdnCudaImpl::kAuto && state_cols == 0 && state_stages == 0 && overlap == -1 && colwarp == -1 &&
           dvl_fused == -1 && chase_prep == -1 && qk_persist == -1;
  }
  std::string name() const {
    auto opt = [](const char* key, int v, int unset) {
      return v == unset ? "" : " " + std::string(key) + "=" + std::to_string(v);
    };
    return (impl == GdnCudaImpl::kSimt ? " (simt kernels)" : "") + opt("state_cols", state_cols, 0) +
           opt("state_stages", state_stages, 0) + opt("overlap", overlap, -1) + opt("colwarp", colwarp, -1) +
           opt("dvl_fused", dvl_fused, -1) +
           opt("chase_prep", chase_prep, -1) + opt("qk_persist", qk_persist, -1);
  }
};

// The launchers of kernels/gdn_cuda.h with explicit options (the ops take the defaults). use_saved
// (not in a graph): the forward leaves its factors and states in a NaN-poisoned saved buffer and the
// backward reads them.
void run_launchers(const Kernels& kn, const Tensor& o, const Tensor& S_out, const Tensor& q, const Tensor& k,
                   const Tensor& v, const Tensor& g, const Tensor& beta, const Tensor& S0, const Tensor& dq,
                   const Tensor& dk, const Tensor& dv, const Tensor& dg, const Tensor& dbeta, const Tensor& dS0,
                   const Tensor& d_o, const Tensor& dS_out, cudaStream_t stream = nullptr, bool use_saved = false) {
  auto bits = [](const Tensor& t) { return static_cast<uint16_t*>(t.data); };
  auto f32 = [](const Tensor& t) { return static_cast<float*>(t.data); };
  auto ld = [](const Tensor& t) { return t.size(1) > 1 ? t.stride[1] : t.stride[0]; };
  GdnCudaDims d;
  d.B = q.size(0), d.T = q.size(1), d.Hk = q.size(2), d.Hv = v.size(2), d.dk = q.size(3), d.dv = v.size(3);
  d.chunk = 64, d.impl = kn.impl;
  GdnPlanForcing force;
  force.state_cols = kn.state_cols, force.state_stages = kn.state_stages;
  force.overlap = kn.overlap, force.colwarp = kn.colwarp;
  force.dvl_fused = kn.dvl_fused, force.chase_prep = kn.chase_prep, force.qk_persist = kn.qk_persist;
  const GdnPlan plan = plan_gdn_for_testing(d, gdn_current_device(), force);
  GdnCudaForwardParams f;
  f.dims = d, f.q = bits(q), f.k = bits(k), f.v = bits(v), f.ld_q = ld(q), f.ld_k = ld(k), f.ld_v = ld(v);
  f.g = f32(g), f.beta = f32(beta), f.S0 = f32(S0), f.o = bits(o), f.ld_o = ld(o), f.S_out = f32(S_out);
  const int64_t n_saved = use_saved ? gdn_chunk_saved_bytes(d) : 0;
  std::unique_ptr<DevBuf> saved_buf;  // (no allocation while a graph is captured)
  if (n_saved > 0) {
    saved_buf = std::make_unique<DevBuf>(n_saved);
    upload(*saved_buf, std::vector<uint8_t>(n_saved, 0xFF));  // NaN as bf16 and as fp32
    f.saved = saved_buf->p;
  }
  gdn_chunk_forward_cuda(f, plan, stream);
  GdnCudaBackwardParams b;
  b.dims = d, b.q = f.q, b.k = f.k, b.v = f.v, b.ld_q = f.ld_q, b.ld_k = f.ld_k, b.ld_v = f.ld_v;
  b.g = f.g, b.beta = f.beta, b.S0 = f.S0, b.d_o = bits(d_o), b.ld_do = ld(d_o), b.dS_out = f32(dS_out);
  b.dq = bits(dq), b.dk = bits(dk), b.dv = bits(dv), b.ld_dq = ld(dq), b.ld_dk = ld(dk), b.ld_dv = ld(dv);
  b.dg = f32(dg), b.dbeta = f32(dbeta), b.dS0 = f32(dS0);
  b.saved = f.saved;
  gdn_chunk_backward_cuda(b, plan, stream);
  if (n_saved > 0) {  // saved_buf is freed at the end of this scope
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
}

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

// The launchers' forward and backward captured on a stream into a CUDA graph, which is then
// replayed once.
void run_launchers_in_graph(const Kernels& kn, const Tensor& o, const Tensor& S_out, const Tensor& q, const Tensor& k,
                            const Tensor& v, const Tensor& g, const Tensor& beta, const Tensor& S0, const Tensor& dq,
                            const Tensor& dk, const Tensor& dv, const Tensor& dg, const Tensor& dbeta,
                            const Tensor& dS0, const Tensor& d_o, const Tensor& dS_out) {
  CUDA_OK(cudaDeviceSynchronize());  // the poisoning on the default stream is done
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  run_launchers(kn, o, S_out, q, k, v, g, beta, S0, dq, dk, dv, dg, dbeta, dS0, d_o, dS_out, s);
  CUDA_OK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_OK(cudaGraphLaunch(exec, s));
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  CUDA_OK(cudaStreamDestroy(s));
}

// use_saved: the forward leaves its WY factors and states in a (poisoned) saved buffer and the
// backward reads them instead of recomputing (layers/gdn.cpp does this in training).
// graph: the launchers run captured in a CUDA graph (run_launchers_in_graph).
GpuRun run_gpu(const Case& c, const Inputs& in, const Kernels& kn = {}, bool use_saved = false, bool graph = false) {
  const int64_t B = c.B, T = c.T, Hk = c.Hk, Hv = c.Hv, D = c.D, Dv = c.dv(), rows = B * T;
  const Shape qs{B, T, Hk, D}, vs{B, T, Hv, Dv}, gs{B, T, Hv}, ss{B, Hv, D, Dv};
  const size_t nq = rows * Hk * D, nv = rows * Hv * Dv, ng = rows * Hv, ns = B * Hv * D * Dv;
  Context ctx;
  ctx.device = Device::kCUDA;
  // q, k, v: either three contiguous buffers, or column slices of one [B, T, 2*Hk*D + Hv*Dv] buffer
  // (with two spare columns, so that the row stride is not the row width).
  const int64_t width = 2 * Hk * D + Hv * Dv + 2;
  DevBuf qkv(rows * width * 2), qd(nq * 2), kd(nq * 2), vd(nv * 2);
  Tensor q, k, v;
  if (c.strided) {
    std::vector<uint16_t> h(rows * width, f32_to_bf16(std::numeric_limits<float>::quiet_NaN()));
    auto qb = to_bf16(in.q), kb = to_bf16(in.k), vb = to_bf16(in.v);
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(&h[r * width], &qb[r * Hk * D], Hk * D * 2);
      std::memcpy(&h[r * width + Hk * D], &kb[r * Hk * D], Hk * D * 2);
      std::memcpy(&h[r * width + 2 * Hk * D], &vb[r * Hv * Dv], Hv * Dv * 2);
    }
    upload(qkv, h);
    Tensor buf(qkv.p, DType::kBF16, Device::kCUDA, Shape{B, T, width});
    q = gdn_head_view(buf, 0, Hk, D), k = gdn_head_view(buf, Hk * D, Hk, D);
    v = gdn_head_view(buf, 2 * Hk * D, Hv, Dv);
  } else {
    upload(qd, to_bf16(in.q)), upload(kd, to_bf16(in.k)), upload(vd, to_bf16(in.v));
    q = Tensor(qd.p, DType::kBF16, Device::kCUDA, qs), k = Tensor(kd.p, DType::kBF16, Device::kCUDA, qs);
    v = Tensor(vd.p, DType::kBF16, Device::kCUDA, vs);
  }
  DevBuf gd(ng * 4), bd(ng * 4), S0d(ns * 4), dod(nv * 2), dSd(ns * 4);
  upload(gd, in.g), upload(bd, in.beta), upload(dod, to_bf16(in.d_o));
  if (c.with_S0) upload(S0d, in.S0);
  if (c.with_dS_out) upload(dSd, in.dS_out);
  Tensor g(gd.p, DType::kF32, Device::kCUDA, gs), beta(bd.p, DType::kF32, Device::kCUDA, gs);
  Tensor S0 = c.with_S0 ? Tensor(S0d.p, DType::kF32, Device::kCUDA, ss) : Tensor();
  Tensor d_o(dod.p, DType::kBF16, Device::kCUDA, vs);
  Tensor dS_out = c.with_dS_out ? Tensor(dSd.p, DType::kF32, Device::kCUDA, ss) : Tensor();

  const int64_t off = c.out_offset;
  DevBuf od((nv + off) * 2), Soutd(ns * 4), dqd((nq + off) * 2), dkd((nq + off) * 2), dvd((nv + off) * 2);
  DevBuf dgd(ng * 4), dbd(ng * 4), dS0d(ns * 4);
  auto at = [&](const DevBuf& d) { return static_cast<uint16_t*>(d.p) + off; };
  Tensor o(at(od), DType::kBF16, Device::kCUDA, vs), S_out(Soutd.p, DType::kF32, Device::kCUDA, ss);
  Tensor dq(at(dqd), DType::kBF16, Device::kCUDA, qs), dk(at(dkd), DType::kBF16, Device::kCUDA, qs);
  Tensor dv(at(dvd), DType::kBF16, Device::kCUDA, vs);
  Tensor dg(dgd.p, DType::kF32, Device::kCUDA, gs), dbeta(dbd.p, DType::kF32, Device::kCUDA, gs);
  Tensor dS0(dS0d.p, DType::kF32, Device::kCUDA, ss);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const Tensor* t : {&o, &S_out, &dq, &dk, &dv, &dg, &dbeta, &dS0}) fill_cuda(*t, nan, ctx.stream);

  if (graph) {
    run_launchers_in_graph(kn, o, S_out, q, k, v, g, beta, S0, dq, dk, dv, dg, dbeta, dS0, d_o, dS_out);
  } else if (kn.defaults()) {
    const int64_t n_saved = use_saved ? gdn_chunk_saved_elems(Device::kCUDA, B, T, Hk, Hv, D, Dv, 64) : 0;
    DevBuf saved_buf(std::max<int64_t>(n_saved, 1) * 2);
    Tensor saved;
    if (n_saved > 0) {
      upload(saved_buf, std::vector<uint16_t>(n_saved, 0xFFFF));  // NaN as bf16 and as fp32
      saved = Tensor(saved_buf.p, DType::kU16, Device::kCUDA, Shape{n_saved});
    }
    gdn_chunk_forward(ctx, o, S_out, q, k, v, g, beta, S0, 64, saved);
    gdn_chunk_backward(ctx, dq, dk, dv, dg, dbeta, dS0, d_o, dS_out, q, k, v, g, beta, S0, 64, saved);
    device_synchronize();  // saved_buf is freed at the end of this scope
  } else {
    run_launchers(kn, o, S_out, q, k, v, g, beta, S0, dq, dk, dv, dg, dbeta, dS0, d_o, dS_out, nullptr, use_saved);
  }

  GpuRun r;  // device_copy is a blocking cudaMemcpy: it waits for the kernels on the default stream
  r.o_bits = download<uint16_t>(od, nv, off), r.dq_bits = download<uint16_t>(dqd, nq, off);
  r.dk_bits = download<uint16_t>(dkd, nq, off), r.dv_bits = download<uint16_t>(dvd, nv, off);
  r.o = from_bf16(r.o_bits), r.dq = from_bf16(r.dq_bits), r.dk = from_bf16(r.dk_bits), r.dv = from_bf16(r.dv_bits);
  r.S_out = download<float>(Soutd, ns), r.dS0 = download<float>(dS0d, ns);
  r.dg = download<float>(dgd, ng), r.dbeta = download<float>(dbd, ng);
  return r;
}

// Relative RMS error, and where the largest absolute error is (for the message).
struct Err {
  double rel_rms = 0;
  int64_t nan_count = 0, worst = -1;
  double worst_got = 0, worst_want = 0;
};

Err compare(const std::vector<float>& got, const std::vector<double>& want) {
  Err e;
  double num = 0, den = 0, worst_abs = -1;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) {
      ++e.nan_count;
      continue;
    }
    const double d = got[i] - want[i];
    num += d * d, den += want[i] * want[i];
    if (std::fabs(d) > worst_abs) worst_abs = std::fabs(d), e.worst = static_cast<int64_t>(i), e.worst_got = got[i],
                                  e.worst_want = want[i];
  }
  e.rel_rms = std::sqrt(num / std::max(den, 1e-300));
  return e;
}

void expect_close(const char* tensor, const Case& c, const std::vector<float>& got, const std::vector<double>& want,
                  double tol) {
  ASSERT_EQ(got.size(), want.size()) << tensor;
  const Err e = compare(got, want);
  std::printf("[ metric   ] %-6s %-40s relative RMS %.3e (tol %.0e)\n", tensor, c.name().c_str(), e.rel_rms, tol);
  EXPECT_EQ(e.nan_count, 0) << tensor << " [" << c.name() << "]: " << e.nan_count << " of " << got.size()
                            << " elements are NaN/inf (unwritten, poisoned, or overflowed)";
  EXPECT_LE(e.rel_rms, tol) << tensor << " [" << c.name() << "]: relative RMS error " << e.rel_rms << " > " << tol
                            << "; largest error at flat index " << e.worst << ": got " << e.worst_got << ", want "
                            << e.worst_want;
}

void check_case(const Case& c, const Kernels& kn = {}) {
  SCOPED_TRACE(c.name() + kn.name());
  const Inputs in = make_inputs(c);
  const Reference ref = run_reference(c, in);
  const GpuRun a = run_gpu(c, in, kn);
  expect_close("o", c, a.o, ref.o, 5e-3);
  expect_close("S_out", c, a.S_out, ref.S_out, 5e-3);
  expect_close("dq", c, a.dq, ref.dq, 1e-2);
  expect_close("dk", c, a.dk, ref.dk, 1e-2);
  expect_close("dv", c, a.dv, ref.dv, 1e-2);
  expect_close("dg", c, a.dg, ref.dg, 2e-2);
  expect_close("dbeta", c, a.dbeta, ref.dbeta, 2e-2);
  if (c.with_S0) expect_close("dS0", c, a.dS0, ref.dS0, 1e-2);
  else expect_close("dS0 (zero S0)", c, a.dS0, ref.dS0, 1e-2);
  // Determinism: a second run gives the same bits.
  const GpuRun b = run_gpu(c, in, kn);
  EXPECT_EQ(a.o_bits, b.o_bits) << "o differs between two runs [" << c.name() << "]";
  EXPECT_EQ(a.dq_bits, b.dq_bits) << "dq differs between two runs [" << c.name() << "]";
  EXPECT_EQ(a.dk_bits, b.dk_bits) << "dk differs between two runs [" << c.name() << "]";
  EXPECT_EQ(a.dv_bits, b.dv_bits) << "dv differs between two runs [" << c.name() << "]";
  EXPECT_EQ(0, std::memcmp(a.dg.data(), b.dg.data(), a.dg.size() * 4)) << "dg differs between two runs";
  EXPECT_EQ(0, std::memcmp(a.dbeta.data(), b.dbeta.data(), a.dbeta.size() * 4)) << "dbeta differs between two runs";
  EXPECT_EQ(0, std::memcmp(a.S_out.data(), b.S_out.data(), a.S_out.size() * 4)) << "S_out differs between two runs";
  EXPECT_EQ(0, std::memcmp(a.dS0.data(), b.dS0.data(), a.dS0.size() * 4)) << "dS0 differs between two runs";
}

class GdnCudaLengths : public ::testing::TestWithParam<int64_t> {};

TEST_P(GdnCudaLengths, ChunkForwardBackwardMatchReferenceD64) {
  SKIP_WITHOUT_GPU();
  Case c;
  c.T = GetParam(), c.B = 2, c.Hk = 1, c.Hv = 2, c.D = 64, c.seed = 100 + c.T;
  check_case(c);
}

INSTANTIATE_TEST_SUITE_P(AllT, GdnCudaLengths, ::testing::Values(1, 15, 63, 64, 65, 300, 1024, 4096));

TEST(GdnCuda, HeadDim128) {
  SKIP_WITHOUT_GPU();
  for (int64_t T : {1, 65, 300}) {
    Case c;
    c.T = T, c.B = 1, c.Hk = 2, c.Hv = 2, c.D = 128, c.seed = 7 + T;
    check_case(c);
  }
}

// Many heads: the D = 128 state passes take 32-column tiles once batch x heads fills the GPU
// (16-column tiles below that); value heads 12 per key head (GQA).
TEST(GdnCuda, HeadDim128WideTilesManyValueHeads) {
  SKIP_WITHOUT_GPU();
  Case c;
  c.T = 70, c.B = 3, c.Hk = 1, c.Hv = 12, c.D = 128, c.seed = 17;
  check_case(c);
}

// Few heads at head dim 128: the sizes take the narrowest state tiles that leave half of the SMs to
// the chasing kernels: 16 columns at 8 heads, 32 at 16, 64 at 32 (there the column-warp
// forward pass), both chasers on; against the reference, bitwise repeatable.
TEST(GdnCuda, HeadDim128FewHeadsLeaveSMsToTheChasers) {
  SKIP_WITHOUT_GPU();
  for (auto [B, Hk, Hv] : {std::tuple<int64_t, int64_t, int64_t>{1, 8, 8}, {1, 4, 16}, {2, 8, 16}}) {
    Case c;
    c.T = 300, c.B = B, c.Hk = Hk, c.Hv = Hv, c.D = 128, c.seed = 70 + B * Hv;
    check_case(c);
  }
}

// Every column-tile width of the tensor-core state passes (the sizes pick one per head dim).
TEST(GdnCuda, EveryStateTileWidth) {
  SKIP_WITHOUT_GPU();
  // (head dim, columns, chunks in flight); T = 300: 5 chunks, so three stages wrap around the ring.
  for (auto [D, cols, stages] : {std::tuple<int64_t, int, int>{64, 32, 2}, {64, 64, 2}, {128, 16, 2}, {128, 32, 2},
                                 {128, 64, 2}, {128, 16, 3}, {128, 32, 3}, {128, 64, 3}}) {
    Case c;
    c.T = stages == 3 ? 300 : 150, c.B = 1, c.Hk = 1, c.Hv = 2, c.D = D, c.seed = 60 + cols + D + stages;
    check_case(c, {.impl = GdnCudaImpl::kTensorCore, .state_cols = cols, .state_stages = stages});
  }
}

// The plain fp32 kernels (GdnCudaImpl::kSimt) stay a second GPU reference.
TEST(GdnCuda, SimtKernelsMatchReference) {
  SKIP_WITHOUT_GPU();
  for (int64_t D : {64, 128}) {
    Case c;
    c.T = 130, c.B = 1, c.Hk = 1, c.Hv = 2, c.D = D, c.seed = 50 + D;
    check_case(c, {.impl = GdnCudaImpl::kSimt});
  }
}

// Small and unequal head dims (HF: linear_key_head_dim != linear_value_head_dim is allowed) through
// the ops (kAuto): the tensor-core kernels take only dk = dv in {64, 128}, so these run the SIMT
// kernels. 16 with 2 key and 4 value heads is the golden Qwen3.5 GDN layer; 32 the quickstart model.
TEST(GdnCuda, SmallAndUnequalHeadDims) {
  SKIP_WITHOUT_GPU();
  for (int64_t T : {1, 65, 130}) {
    for (auto [D, Dv, Hk, Hv] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{16, 0, 1, 2}, {32, 0, 1, 2},
                                 {48, 0, 1, 2}, {16, 0, 2, 4}, {32, 64, 1, 2}, {64, 32, 2, 2}}) {
      Case c;
      c.T = T, c.B = 2, c.Hk = Hk, c.Hv = Hv, c.D = D, c.Dv = Dv, c.seed = 500 + T + D + Dv;
      check_case(c);
    }
  }
  Case s;  // strided q, k, v slices of one conv buffer, dk != dv, a dv with 16-column state tiles
  s.T = 70, s.B = 2, s.Hk = 1, s.Hv = 2, s.D = 32, s.Dv = 48, s.strided = true, s.seed = 12;
  check_case(s);
}

TEST(GdnCuda, NoInitialStateNoFinalStateGradient) {
  SKIP_WITHOUT_GPU();
  Case c;
  c.T = 130, c.B = 1, c.Hk = 2, c.Hv = 4, c.with_S0 = false, c.with_dS_out = false, c.seed = 3;
  check_case(c);
}

TEST(GdnCuda, StridedRowsFromOneConvBuffer) {
  SKIP_WITHOUT_GPU();
  Case c;
  c.T = 65, c.B = 2, c.Hk = 1, c.Hv = 2, c.strided = true, c.seed = 11;
  check_case(c);
}

TEST(GdnCuda, EdgeGates) {
  SKIP_WITHOUT_GPU();
  for (auto gates : {Case::Gates::kNearZero, Case::Gates::kVeryNegative, Case::Gates::kBetaEdges}) {
    Case c;
    c.T = 150, c.B = 1, c.Hk = 1, c.Hv = 2, c.gates = gates, c.seed = 21 + static_cast<int>(gates);
    check_case(c);
  }
}

// Every output of two runs, bit for bit.
void expect_same_bits(const GpuRun& a, const GpuRun& b) {
  EXPECT_EQ(a.o_bits, b.o_bits);
  EXPECT_EQ(a.dq_bits, b.dq_bits);
  EXPECT_EQ(a.dk_bits, b.dk_bits);
  EXPECT_EQ(a.dv_bits, b.dv_bits);
  EXPECT_EQ(0, std::memcmp(a.dg.data(), b.dg.data(), a.dg.size() * 4));
  EXPECT_EQ(0, std::memcmp(a.dbeta.data(), b.dbeta.data(), a.dbeta.size() * 4));
  EXPECT_EQ(0, std::memcmp(a.S_out.data(), b.S_out.data(), a.S_out.size() * 4));
  EXPECT_EQ(0, std::memcmp(a.dS0.data(), b.dS0.data(), a.dS0.size() * 4));
}

// The forward's saved buffer (WY factors, states per chunk) handed to the backward gives exactly the
// bits of the backward that recomputes them; the tensor-core shapes (the SIMT kernels keep nothing).
TEST(GdnCuda, SavedForwardStateGivesTheSameBitsAsRecomputing) {
  SKIP_WITHOUT_GPU();
  Case cases[3];
  cases[0].T = 300, cases[0].B = 2, cases[0].Hk = 1, cases[0].Hv = 2, cases[0].D = 64, cases[0].seed = 71;
  cases[1].T = 65, cases[1].B = 1, cases[1].Hk = 2, cases[1].Hv = 2, cases[1].D = 128, cases[1].seed = 72;
  cases[2].T = 1, cases[2].B = 3, cases[2].Hk = 1, cases[2].Hv = 1, cases[2].D = 64, cases[2].seed = 73;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name());
    ASSERT_GT(gdn_chunk_saved_elems(Device::kCUDA, c.B, c.T, c.Hk, c.Hv, c.D, c.dv(), 64), 0);
    const Inputs in = make_inputs(c);
    const GpuRun a = run_gpu(c, in), b = run_gpu(c, in, {}, /*use_saved=*/true);
    expect_same_bits(a, b);
  }
}

// o, dq, dk and dv 4 bytes past a 16-byte boundary: the kernels store them with 4-byte stores from
// their accumulators instead of whole rows through shared memory (TcArgs::vec16_*), and must give
// the same bits. Head dims 64 and 128, a partial chunk, GQA (dq, dk summed over value heads after),
// the dvl producer (32 columns, 3 stages), grad_qk chasing and not.
TEST(GdnCuda, OutputsOffA16ByteBoundaryGiveTheSameBits) {
  SKIP_WITHOUT_GPU();
  struct Run { int64_t T, B, Hk, Hv, D; Kernels kn; };
  const Run runs[] = {{300, 2, 1, 1, 64, {.impl = GdnCudaImpl::kTensorCore}},
                      {130, 1, 2, 2, 128, {.impl = GdnCudaImpl::kTensorCore, .overlap = 0}},
                      {65, 1, 1, 2, 128, {.impl = GdnCudaImpl::kTensorCore}},
                      {200, 1, 2, 2, 128, {.impl = GdnCudaImpl::kTensorCore, .state_cols = 32, .state_stages = 3,
                                           .overlap = 1, .dvl_fused = 1}}};
  uint64_t seed = 190;
  for (const Run& r : runs) {
    Case c;
    c.T = r.T, c.B = r.B, c.Hk = r.Hk, c.Hv = r.Hv, c.D = r.D, c.seed = seed++;
    const Inputs in = make_inputs(c);
    const GpuRun aligned = run_gpu(c, in, r.kn);
    c.out_offset = 2;
    SCOPED_TRACE(c.name() + r.kn.name());
    expect_same_bits(aligned, run_gpu(c, in, r.kn));
  }
}

// The forward and backward captured into a CUDA graph (as a training step may be) give the bits of
// the same launches run directly: the workspace's stream-ordered allocations become the graph's
// memory nodes (the pool's release threshold is not touched while capturing). Both kernel sets.
TEST(GdnCuda, CapturedInACudaGraphGivesTheSameBits) {
  SKIP_WITHOUT_GPU();
  Case c;
  c.T = 130, c.B = 2, c.Hk = 1, c.Hv = 2, c.D = 128, c.seed = 81;
  c.with_S0 = true, c.with_dS_out = true;
  const Inputs in = make_inputs(c);
  for (GdnCudaImpl impl : {GdnCudaImpl::kTensorCore, GdnCudaImpl::kSimt}) {
    SCOPED_TRACE(impl == GdnCudaImpl::kSimt ? "simt kernels" : "tensor-core kernels");
    const GpuRun a = run_gpu(c, in, {.impl = impl}), b = run_gpu(c, in, {.impl = impl}, false, /*graph=*/true);
    expect_same_bits(a, b);
  }
}

// The forward's output kernel and the backward's grad_qk chasing the state passes
// (GdnPlan::chase_output, chase_grad_qk) give the bits of the kernels run one after the other: head
// dims 64 and 128, the mma.sync state passes at 16, 32 and 64 columns and the column-warp forward
// one, many chunks and heads (more CTAs than fit beside the state passes'), a partial last chunk,
// one chunk; also captured in a CUDA graph. Out of range is refused.
TEST(GdnCuda, ChasingTheStatePassesGivesTheSameBits) {
  SKIP_WITHOUT_GPU();
  struct Run { Case c; int cols, colwarp; };
  Run runs[6];
  runs[0].c.T = 4000, runs[0].c.B = 2, runs[0].c.Hk = 2, runs[0].c.Hv = 4, runs[0].c.D = 128, runs[0].cols = 16,
  runs[0].colwarp = 0;
  runs[1].c = runs[0].c, runs[1].cols = 0, runs[1].colwarp = 1;
  runs[2].c.T = 1500, runs[2].c.B = 16, runs[2].c.Hk = 6, runs[2].c.Hv = 6, runs[2].c.D = 64, runs[2].cols = 64,
  runs[2].colwarp = 0;
  runs[3].c = runs[0].c, runs[3].cols = 64, runs[3].colwarp = 0;
  runs[4].c.T = 40, runs[4].c.B = 3, runs[4].c.Hk = 1, runs[4].c.Hv = 2, runs[4].c.D = 128, runs[4].cols = 32,
  runs[4].colwarp = 1;
  runs[5].c = runs[0].c, runs[5].cols = 32, runs[5].colwarp = 0;  // few heads' default at head dim 128
  uint64_t seed = 87;
  for (Run& r : runs) {
    r.c.seed = seed++;
    SCOPED_TRACE(r.c.name() + " state_cols " + std::to_string(r.cols) + " colwarp " + std::to_string(r.colwarp));
    const Inputs in = make_inputs(r.c);
    const Kernels on{.impl = GdnCudaImpl::kTensorCore, .state_cols = r.cols, .overlap = 1, .colwarp = r.colwarp};
    Kernels off = on;
    off.overlap = 0;
    expect_same_bits(run_gpu(r.c, in, off), run_gpu(r.c, in, on));
  }
  {  // the default at head dim 64 (chasing) in a CUDA graph against plain launches without it
    Case c = runs[2].c;
    const Inputs in = make_inputs(c);
    expect_same_bits(run_gpu(c, in, {.impl = GdnCudaImpl::kTensorCore, .overlap = 0}),
                     run_gpu(c, in, {.impl = GdnCudaImpl::kTensorCore}, false, /*graph=*/true));
  }
  Case c;
  const Inputs in = make_inputs(c);
  try {
    run_gpu(c, in, {.impl = GdnCudaImpl::kTensorCore, .overlap = 2});
    FAIL() << "overlap 2 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("overlap must be -1"), std::string::npos) << e.what();
  }
}

// The column-warp forward state pass (GdnPlan::colwarp; head dim 128, 64 columns a CTA) with the
// reverse pass at each width, more chunks than the ring's stages, partial chunks, one row, GQA,
// edge gates, against the reference and bitwise repeatable; the kernels chasing it give the same
// bits as without; asked for at head dim 64 it is refused.
TEST(GdnCuda, ColumnWarpStatePassMatchesReference) {
  SKIP_WITHOUT_GPU();
  struct Run { int64_t T, B, Hk, Hv; int cols, gates; };
  const Run runs[] = {{300, 1, 2, 2, 16, 0}, {4096, 1, 1, 1, 32, 1}, {63, 2, 1, 2, 64, 3}, {1, 3, 1, 1, 32, 0},
                      {200, 1, 1, 1, 0, 2}};
  uint64_t seed = 140;
  for (const Run& r : runs) {
    Case c;
    c.T = r.T, c.B = r.B, c.Hk = r.Hk, c.Hv = r.Hv, c.D = 128, c.gates = static_cast<Case::Gates>(r.gates);
    c.seed = seed++;
    check_case(c, {.impl = GdnCudaImpl::kTensorCore, .state_cols = r.cols, .colwarp = 1});
  }
  {  // chasing: many chunks and heads, a partial last chunk
    Case c;
    c.T = 3000, c.B = 3, c.Hk = 2, c.Hv = 4, c.D = 128, c.seed = seed++;
    SCOPED_TRACE(c.name() + " colwarp 1");
    const Inputs in = make_inputs(c);
    const Kernels on{.impl = GdnCudaImpl::kTensorCore, .overlap = 1, .colwarp = 1};
    Kernels off = on;
    off.overlap = 0;
    expect_same_bits(run_gpu(c, in, off), run_gpu(c, in, on));
  }
  Case c;
  const Inputs in = make_inputs(c);
  try {
    run_gpu(c, in, {.impl = GdnCudaImpl::kTensorCore, .colwarp = 1});
    FAIL() << "colwarp 1 accepted at head dim 64";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("colwarp 1 takes head dim 128"), std::string::npos) << e.what();
  }
}

// An option that must not change the bits, on one case: `on` against `on` with the option 0, and
// from the saved forward; also against the reference (reference) and captured in a CUDA graph (graph).
void expect_option_keeps_bits(const Case& c, const Kernels& on, int Kernels::*option, bool reference, bool graph) {
  Kernels off = on;
  off.*option = 0;
  if (reference) check_case(c, on);
  SCOPED_TRACE(c.name() + on.name());
  const Inputs in = make_inputs(c);
  const GpuRun a = run_gpu(c, in, on);
  expect_same_bits(run_gpu(c, in, off), a);
  expect_same_bits(a, run_gpu(c, in, on, /*use_saved=*/true));
  if (graph) expect_same_bits(a, run_gpu(c, in, on, false, /*graph=*/true));
}

// The cases of the tests above: sizes, gates (Case::Gates), S0 and dS_out or neither.
Case option_case(int64_t T, int64_t B, int64_t Hk, int64_t Hv, int64_t D, int gates, bool S0, uint64_t seed) {
  Case c;
  c.T = T, c.B = B, c.Hk = Hk, c.Hv = Hv, c.D = D, c.gates = static_cast<Case::Gates>(gates);
  c.with_S0 = c.with_dS_out = S0, c.seed = seed;
  return c;
}

// The launchers refuse these options with a message containing `want`.
void expect_refused(const Case& c, const Inputs& in, const Kernels& kn, const char* want) {
  try {
    run_gpu(c, in, kn);
    ADD_FAILURE() << "accepted:" << kn.name();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

// dv_local's work in the reverse state pass (GdnPlan::dvl_fused): at 16, 32 and 64 columns,
// more chunks than the ring's stages, partial chunks, one row, GQA, edge gates, no S0 / dS_out, with
// and without grad_qk chasing, from the saved forward and recomputing it (the output kernel then
// makes M alone), in a CUDA graph: against the reference, and bitwise against dv_local (dvl_fused 0).
// Where the kernels it needs are not taken, 1 is refused.
TEST(GdnCuda, DvlFusedIntoTheReversePassGivesDvLocalsBits) {
  SKIP_WITHOUT_GPU();
  struct Run { int64_t T, B, Hk, Hv; int cols, gates, overlap; bool S0; };
  const Run runs[] = {{300, 1, 1, 1, 16, 0, -1, true}, {130, 2, 1, 2, 32, 2, 0, true}, {1, 1, 1, 1, 32, 0, -1, true},
                      {65, 1, 2, 2, 32, 1, 1, true},   {200, 1, 1, 1, 16, 3, -1, false}, {4000, 2, 2, 4, 32, 0, 1, true},
                      {3001, 1, 8, 8, 16, 0, -1, true}, {300, 1, 1, 1, 64, 0, -1, true}, {1000, 2, 1, 2, 64, 2, 0, true},
                      {65, 1, 2, 2, 64, 1, 1, true},   {1, 1, 1, 1, 64, 0, -1, false}};
  uint64_t seed = 160;
  for (const Run& r : runs) {
    const Kernels on{.impl = GdnCudaImpl::kTensorCore, .state_cols = r.cols, .state_stages = 3, .overlap = r.overlap,
                     .dvl_fused = 1};
    // against the reference where dg has more than one row a head (at T = 1 its relative RMS is one
    // number's error, which the bitwise comparisons with dv_local's path cover: 2.6e-2 on the H200)
    expect_option_keeps_bits(option_case(r.T, r.B, r.Hk, r.Hv, 128, r.gates, r.S0, seed++), on, &Kernels::dvl_fused,
                             r.T > 1 && r.T <= 300, r.T == 130);
  }
  Case c;
  c.D = 128;
  const Inputs in = make_inputs(c);
  const Kernels tc{.impl = GdnCudaImpl::kTensorCore, .dvl_fused = 1};
  Kernels two_stages = tc;
  two_stages.state_cols = 32, two_stages.state_stages = 2;
  expect_refused(c, in, two_stages, "dvl_fused 1 takes head dim 128");
}

// prep beside the forward state pass (GdnPlan::prep_beside; launched after the state pass,
// which waits for each chunk) gives the bits of prep run first: head dims 128 (16 and 32 columns, 2
// and 3 stages, with and without the dvl producer's saved M) and 64, partial and single chunks,
// fewer chunks than the pass's ring, GQA, several sequences, edge gates, no S0 or dS_out; from the
// saved forward and recomputing it; in a CUDA graph; against the reference. Where the kernels it
// needs are not the ones taken, 1 is refused.
TEST(GdnCuda, PrepBesideTheStatePassGivesTheSameBits) {
  SKIP_WITHOUT_GPU();
  struct Run { int64_t T, B, Hk, Hv, D; int cols, stages, gates, dvl; bool S0; };
  const Run runs[] = {{300, 1, 1, 1, 128, 32, 3, 0, -1, true}, {130, 2, 1, 2, 128, 16, 3, 2, -1, true},
                      {1, 1, 1, 1, 128, 32, 3, 0, -1, true},   {65, 1, 2, 2, 128, 32, 2, 1, 0, true},
                      {200, 1, 1, 1, 128, 16, 3, 3, 0, false}, {4000, 2, 2, 4, 128, 32, 3, 0, -1, true},
                      {3001, 1, 8, 8, 128, 16, 3, 0, -1, true}, {600, 2, 1, 2, 64, 64, 2, 0, -1, true},
                      {150, 1, 1, 1, 64, 32, 2, 1, -1, true},   {5000, 1, 4, 4, 128, 32, 3, 0, 1, true}};
  uint64_t seed = 190;
  for (const Run& r : runs) {
    const Kernels on{.impl = GdnCudaImpl::kTensorCore, .state_cols = r.cols, .state_stages = r.stages,
                     .dvl_fused = r.dvl, .chase_prep = 1};
    expect_option_keeps_bits(option_case(r.T, r.B, r.Hk, r.Hv, r.D, r.gates, r.S0, seed++), on, &Kernels::chase_prep,
                             r.T > 1 && r.T <= 300, r.T == 130);
  }
  Case c;
  c.D = 128;
  const Inputs in = make_inputs(c);
  for (const Kernels& kn : {Kernels{.impl = GdnCudaImpl::kTensorCore, .colwarp = 1, .chase_prep = 1},
                            Kernels{.impl = GdnCudaImpl::kTensorCore, .overlap = 0, .chase_prep = 1}})
    expect_refused(c, in, kn, "chase_prep 1 takes the mma.sync forward state pass");
  expect_refused(c, in, {.impl = GdnCudaImpl::kTensorCore, .chase_prep = 2}, "chase_prep must be -1");
}

// grad_qk persistent (GdnPlan::qk_persist; chunks by ticket, the next chunk's Q, K, dO copied
// during this one) gives the bits of one CTA a chunk: head dim 128 at 32 and 16 columns, with and
// without the dvl producer, fewer chunks than SMs and many more (several per CTA), partial and single
// chunks, GQA, several sequences, edge gates, no S0 or dS_out; from the saved forward and recomputing
// it; in a CUDA graph (the ticket is zeroed in it); against the reference. Where grad_qk does not chase
// the reverse pass, or at head dim 64, 1 is refused.
TEST(GdnCuda, PersistentGradQkGivesTheSameBits) {
  SKIP_WITHOUT_GPU();
  struct Run { int64_t T, B, Hk, Hv; int cols, gates, dvl; bool S0; };
  const Run runs[] = {{300, 1, 1, 1, 32, 0, -1, true},  {130, 2, 1, 2, 16, 2, -1, true}, {1, 1, 1, 1, 32, 0, -1, true},
                      {65, 1, 2, 2, 32, 1, 0, true},    {200, 1, 1, 1, 16, 3, 0, false}, {4000, 2, 2, 4, 32, 0, -1, true},
                      {9001, 1, 8, 8, 32, 0, -1, true}, {5000, 1, 4, 4, 16, 0, 1, true}};
  uint64_t seed = 210;
  for (const Run& r : runs) {
    const Kernels on{.impl = GdnCudaImpl::kTensorCore, .state_cols = r.cols, .state_stages = 3, .overlap = 1,
                     .dvl_fused = r.dvl, .qk_persist = 1};
    expect_option_keeps_bits(option_case(r.T, r.B, r.Hk, r.Hv, 128, r.gates, r.S0, seed++), on, &Kernels::qk_persist,
                             r.T > 1 && r.T <= 300, r.T == 130 || r.T == 9001);
  }
  Case c;
  c.D = 128;
  const Inputs in = make_inputs(c);
  const char* needs = "qk_persist 1 takes head dim 128";
  expect_refused(c, in, {.impl = GdnCudaImpl::kTensorCore, .overlap = 0, .qk_persist = 1}, needs);
  expect_refused(c, in, {.impl = GdnCudaImpl::kTensorCore, .qk_persist = 2}, "qk_persist must be -1");
  c.D = 64;
  expect_refused(c, make_inputs(c), {.impl = GdnCudaImpl::kTensorCore, .qk_persist = 1}, needs);
}

// The per-CTA timeline (gdn_cuda_timeline; docs/gdn_kernels.md, "Measuring"), in a build configured with
// -DDELTATRON_GDN_TIMELINE=ON: one stamp per CTA (prep, the output kernel and grad_wy run a CTA per
// chunk), each with its kernel's name, an SM the device has, and times and cycles in order; the
// outputs keep their bits. Other builds refuse the stamps with a message naming the option.
TEST(GdnCuda, TimelineStampsEachCtaAndKeepsTheBits) {
  SKIP_WITHOUT_GPU();
  DevBuf count(sizeof(unsigned));
  if (!gdn_cuda_timeline_built()) {
    try {
      gdn_cuda_timeline(static_cast<GdnCudaStamp*>(count.p), static_cast<unsigned*>(count.p), 1);
      ADD_FAILURE() << "stamps accepted by a build without the timeline";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("-DDELTATRON_GDN_TIMELINE=ON"), std::string::npos) << e.what();
    }
    GTEST_SKIP() << "built without -DDELTATRON_GDN_TIMELINE=ON (its refusal checked)";
  }
  for (int64_t D : {64, 128}) {
    const Case c = option_case(300, 2, 2, 2, D, 0, true, 220 + D);
    SCOPED_TRACE(c.name());
    const Inputs in = make_inputs(c);
    // from the saved forward, so that the backward runs no prep or output kernel of its own
    const GpuRun plain = run_gpu(c, in, {}, /*use_saved=*/true);
    constexpr unsigned kCap = 4096;
    DevBuf stamps(kCap * sizeof(GdnCudaStamp));
    ASSERT_EQ(cudaMemset(count.p, 0, sizeof(unsigned)), cudaSuccess);
    gdn_cuda_timeline(static_cast<GdnCudaStamp*>(stamps.p), static_cast<unsigned*>(count.p), kCap);
    GpuRun stamped;
    try {
      stamped = run_gpu(c, in, {}, /*use_saved=*/true);
    } catch (...) {
      gdn_cuda_timeline(nullptr, nullptr, 0);
      throw;
    }
    gdn_cuda_timeline(nullptr, nullptr, 0);
    expect_same_bits(plain, stamped);
    unsigned n = 0;
    ASSERT_EQ(cudaMemcpy(&n, count.p, sizeof(unsigned), cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_GT(n, 0u);
    ASSERT_LE(n, kCap);
    std::vector<GdnCudaStamp> got(n);
    ASSERT_EQ(cudaMemcpy(got.data(), stamps.p, n * sizeof(GdnCudaStamp), cudaMemcpyDeviceToHost), cudaSuccess);
    int sms = 0;
    ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
    std::map<std::string, int> ctas;
    for (const GdnCudaStamp& x : got) {
      ++ctas[gdn_cuda_timeline_kernel(x.kernel)];
      EXPECT_LT(x.sm, static_cast<uint32_t>(sms));
      EXPECT_LE(x.t0, x.t1);
      EXPECT_LE(x.c0, x.c1);
    }
    const int chunks = static_cast<int>(c.B * c.Hv * ((c.T + 63) / 64));
    EXPECT_EQ(ctas["prep"] + ctas["prep_fed"], chunks);
    EXPECT_EQ(ctas["output"], chunks);
    EXPECT_EQ(ctas["grad_wy"], chunks);
    EXPECT_EQ(ctas.count("?"), 0u);
  }
}

TEST(GdnCuda, RejectsWrongDtypeAndDevice) {
  SKIP_WITHOUT_GPU();
  Context ctx;
  ctx.device = Device::kCUDA;
  const Shape qs{1, 8, 1, 64}, gs{1, 8, 1};
  DevBuf a(8 * 64 * 4), b(8 * 64 * 4), gb(8 * 4);
  Tensor q32(a.p, DType::kF32, Device::kCUDA, qs);  // f32 activations: the CUDA path takes bf16
  Tensor q(b.p, DType::kBF16, Device::kCUDA, qs), g(gb.p, DType::kF32, Device::kCUDA, gs);
  try {
    gdn_chunk_forward(ctx, q, Tensor(), q32, q, q, g, g, Tensor(), 64);
    FAIL() << "f32 q accepted on the CUDA path";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q is f32"), std::string::npos) << e.what();
  }
  std::vector<float> host(8);
  Tensor g_cpu(host.data(), DType::kF32, Device::kCPU, gs);
  EXPECT_THROW(gdn_chunk_forward(ctx, q, Tensor(), q, q, q, g_cpu, g, Tensor(), 64), Error);
  EXPECT_THROW(gdn_chunk_forward(ctx, q, Tensor(), q, q, q, g, g, Tensor(), 65), Error);  // chunk > 64
}

TEST(GdnCuda, RejectsHeadDimsTheKernelsDoNotTake) {
  SKIP_WITHOUT_GPU();
  Context ctx;
  ctx.device = Device::kCUDA;
  const Shape qs{1, 8, 1, 20}, gs{1, 8, 1};  // 20: not a multiple of 8
  DevBuf a(8 * 20 * 2), gb(8 * 4);
  Tensor q(a.p, DType::kBF16, Device::kCUDA, qs), g(gb.p, DType::kF32, Device::kCUDA, gs);
  try {
    gdn_chunk_forward(ctx, q, Tensor(), q, q, q, g, g, Tensor(), 64);
    FAIL() << "head dim 20 accepted on the CUDA path";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("multiples of 8"), std::string::npos) << e.what();
  }
  // The tensor-core kernels asked for explicitly with dims they do not take.
  DevBuf qb(8 * 32 * 2), ob(8 * 32 * 2);
  GdnCudaForwardParams f;
  f.dims.B = 1, f.dims.T = 8, f.dims.Hk = 1, f.dims.Hv = 1, f.dims.dk = 32, f.dims.dv = 32;
  f.dims.impl = GdnCudaImpl::kTensorCore;
  f.q = f.k = f.v = static_cast<const uint16_t*>(qb.p), f.ld_q = f.ld_k = f.ld_v = 32;
  f.g = f.beta = static_cast<const float*>(gb.p), f.o = static_cast<uint16_t*>(ob.p), f.ld_o = 32;
  EXPECT_THROW(gdn_chunk_forward_cuda(f, nullptr), Error);
  // State-pass tiles or stages without a kernel: the message names the valid ones.
  f.dims.dk = f.dims.dv = 64;
  for (auto [cols, stages] : {std::pair<int, int>{16, 0}, {0, 3}, {0, 4}}) {
    GdnPlanForcing force;
    force.state_cols = cols, force.state_stages = stages;
    try {
      plan_gdn_for_testing(f.dims, gdn_current_device(), force);
      FAIL() << "state_cols " << cols << ", state_stages " << stages << " accepted at head dim 64";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("is not available for head dim 64"), std::string::npos) << e.what();
    }
  }
}

// ---- pointwise ops: l2norm (bf16) and gates (fp32) ----

TEST(GdnCudaL2Norm, ForwardBackwardMatchReferenceOnStridedRows) {
  SKIP_WITHOUT_GPU();
  for (int64_t d : {16, 32, 48, 64, 128}) {
    const int64_t B = 2, T = 37, H = 3, rows = B * T, width = 2 * H * d + 4;  // x: columns [d, d + H*d)
    const double scale = 1 / std::sqrt(static_cast<double>(d));
    std::mt19937_64 rng(5 + d);
    std::normal_distribution<double> nd;
    std::vector<uint16_t> xb(rows * width), dyb(rows * H * d);
    for (auto& e : xb) e = f32_to_bf16(static_cast<float>(2 * nd(rng)));
    for (auto& e : dyb) e = f32_to_bf16(static_cast<float>(nd(rng)));
    // double reference on the same bf16 values
    std::vector<double> x(rows * H * d), dy(rows * H * d), y_ref(rows * H * d), dx_ref(rows * H * d);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < H * d; ++i) x[r * H * d + i] = bf16_to_f32(xb[r * width + d + i]);
    for (size_t i = 0; i < dy.size(); ++i) dy[i] = bf16_to_f32(dyb[i]);
    Context cpu;
    const Shape s{B, T, H, d};
    gdn_l2norm_forward(cpu, host_f64(y_ref, s), host_f64(x, s), scale);
    gdn_l2norm_backward(cpu, host_f64(dx_ref, s), host_f64(dy, s), host_f64(x, s), scale);

    Context ctx;
    ctx.device = Device::kCUDA;
    DevBuf xd(xb.size() * 2), dyd(dyb.size() * 2), yd(dyb.size() * 2), dxd(dyb.size() * 2);
    upload(xd, xb), upload(dyd, dyb);
    Tensor xt = gdn_head_view(Tensor(xd.p, DType::kBF16, Device::kCUDA, Shape{B, T, width}), d, H, d);
    Tensor yt(yd.p, DType::kBF16, Device::kCUDA, s), dyt(dyd.p, DType::kBF16, Device::kCUDA, s);
    Tensor dxt(dxd.p, DType::kBF16, Device::kCUDA, s);
    fill_cuda(yt, std::numeric_limits<double>::quiet_NaN(), nullptr);
    fill_cuda(dxt, std::numeric_limits<double>::quiet_NaN(), nullptr);
    gdn_l2norm_forward(ctx, yt, xt, scale);
    gdn_l2norm_backward(ctx, dxt, dyt, xt, scale);
    Case c;  // for the messages only
    c.D = d, c.T = T, c.B = B;
    expect_close("l2norm y", c, from_bf16(download<uint16_t>(yd, dyb.size())), y_ref, 5e-3);
    expect_close("l2norm dx", c, from_bf16(download<uint16_t>(dxd, dyb.size())), dx_ref, 1e-2);
  }
}

// The l2norms taken inside the chunk's forward and backward (GdnCudaForwardParams::q_hat,
// GdnCudaBackwardParams::q_rnorm): raw q, k (rows of different lengths) -> the chunk's forward,
// which also writes y = s x r and r -> its backward with r given -> dq, dk with respect to the raw
// rows; against the double chain l2norm -> chunk -> l2norm backward. The tensor-core kernels at
// Hv == Hk normalise the tiles they load and take the l2norm's backward as they store dq, dk;
// Hv > Hk and the SIMT kernels run the l2norms before and their backward after (from y and r).
TEST(GdnCudaL2Norm, TakenInTheChunkForwardAndBackward) {
  SKIP_WITHOUT_GPU();
  struct Run {
    Case c;
    GdnCudaImpl impl;
  };
  std::vector<Run> runs;
  for (auto [B, T, Hk, Hv, D, impl] : {std::tuple{2, 300, 2, 2, 128, GdnCudaImpl::kAuto},
                                       std::tuple{1, 65, 3, 3, 64, GdnCudaImpl::kAuto},
                                       std::tuple{1, 130, 1, 2, 64, GdnCudaImpl::kAuto},
                                       std::tuple{1, 100, 2, 2, 64, GdnCudaImpl::kSimt}}) {
    Case c;
    c.B = B, c.T = T, c.Hk = Hk, c.Hv = Hv, c.D = D, c.seed = 40 + T;
    runs.push_back({c, impl});
  }
  for (const Run& run : runs) {
    const Case& c = run.c;
    SCOPED_TRACE(c.name() + (run.impl == GdnCudaImpl::kSimt ? " (simt kernels)" : ""));
    const int64_t B = c.B, T = c.T, Hk = c.Hk, Hv = c.Hv, D = c.D, rows = B * T, nq = rows * Hk * D;
    const double qs = 1 / std::sqrt(static_cast<double>(D));
    Inputs in = make_inputs(c);
    std::mt19937_64 rng(c.seed + 1);
    std::normal_distribution<double> nd;
    std::vector<uint16_t> xqb(nq), xkb(nq);
    for (int64_t i = 0; i < nq; ++i) {
      const double len = 0.3 + (i / D) % 7;  // rows of different lengths
      xqb[i] = f32_to_bf16(static_cast<float>(len * nd(rng))), xkb[i] = f32_to_bf16(static_cast<float>(len * nd(rng)));
    }
    // double chain on the same bf16 values
    const Shape qsh{B, T, Hk, D}, vsh{B, T, Hv, D}, gsh{B, T, Hv}, ssh{B, Hv, D, D};
    std::vector<double> xq(nq), xk(nq), q(nq), k(nq), dqh(nq), dkh(nq), dxq_ref(nq), dxk_ref(nq);
    for (int64_t i = 0; i < nq; ++i) xq[i] = bf16_to_f32(xqb[i]), xk[i] = bf16_to_f32(xkb[i]);
    std::vector<double> v = to_double(in.v), g = to_double(in.g), beta = to_double(in.beta), S0 = to_double(in.S0),
                        d_o = to_double(in.d_o), dS_out = to_double(in.dS_out);
    std::vector<double> o(rows * Hv * D), S_out(B * Hv * D * D), dv(rows * Hv * D), dg(rows * Hv), db(rows * Hv),
        dS0(B * Hv * D * D);
    Context cpu;
    gdn_l2norm_forward(cpu, host_f64(q, qsh), host_f64(xq, qsh), qs);
    gdn_l2norm_forward(cpu, host_f64(k, qsh), host_f64(xk, qsh), 1.0);
    gdn_chunk_forward(cpu, host_f64(o, vsh), host_f64(S_out, ssh), host_f64(q, qsh), host_f64(k, qsh),
                      host_f64(v, vsh), host_f64(g, gsh), host_f64(beta, gsh), host_f64(S0, ssh), 64);
    gdn_chunk_backward(cpu, host_f64(dqh, qsh), host_f64(dkh, qsh), host_f64(dv, vsh), host_f64(dg, gsh),
                       host_f64(db, gsh), host_f64(dS0, ssh), host_f64(d_o, vsh), host_f64(dS_out, ssh),
                       host_f64(q, qsh), host_f64(k, qsh), host_f64(v, vsh), host_f64(g, gsh), host_f64(beta, gsh),
                       host_f64(S0, ssh), 64);
    gdn_l2norm_backward(cpu, host_f64(dxq_ref, qsh), host_f64(dqh, qsh), host_f64(xq, qsh), qs);
    gdn_l2norm_backward(cpu, host_f64(dxk_ref, qsh), host_f64(dkh, qsh), host_f64(xk, qsh), 1.0);
    std::vector<double> rq_ref(rows * Hk);
    for (int64_t r = 0; r < rows * Hk; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < D; ++i) ss += xq[r * D + i] * xq[r * D + i];
      rq_ref[r] = 1 / std::sqrt(ss + 1e-6);
    }

    std::vector<uint16_t> yq, yk, ob;  // y of the l2norms and o, from the last run
    auto gpu = [&](std::vector<uint16_t>& dxq, std::vector<uint16_t>& dxk, std::vector<float>& rq) {
      const size_t nv = rows * Hv * D, ng = rows * Hv, ns = B * Hv * D * D;
      DevBuf xqd(nq * 2), xkd(nq * 2), qd(nq * 2), kd(nq * 2), rqd(rows * Hk * 4), rkd(rows * Hk * 4), vd(nv * 2),
          gd(ng * 4), bd(ng * 4), S0d(ns * 4), dod(nv * 2), dSd(ns * 4), od(nv * 2), Soutd(ns * 4), dqd(nq * 2),
          dkd(nq * 2), dvd(nv * 2), dgd(ng * 4), dbd(ng * 4), dS0d(ns * 4);
      upload(xqd, xqb), upload(xkd, xkb), upload(vd, to_bf16(in.v)), upload(gd, in.g), upload(bd, in.beta);
      upload(S0d, in.S0), upload(dod, to_bf16(in.d_o)), upload(dSd, in.dS_out);
      for (DevBuf* b : {&qd, &kd, &rqd, &rkd, &dqd, &dkd})
        upload(*b, std::vector<uint16_t>(b->bytes / 2, 0xFFFF));  // NaN as bf16 and as fp32
      fill_cuda(Tensor(od.p, DType::kBF16, Device::kCUDA, vsh), std::numeric_limits<double>::quiet_NaN(), nullptr);
      GdnCudaDims d;
      d.B = B, d.T = T, d.Hk = Hk, d.Hv = Hv, d.dk = d.dv = D, d.chunk = 64, d.impl = run.impl;
      GdnCudaForwardParams f;
      f.dims = d, f.q = static_cast<uint16_t*>(xqd.p), f.k = static_cast<uint16_t*>(xkd.p);
      f.q_hat = static_cast<uint16_t*>(qd.p), f.k_hat = static_cast<uint16_t*>(kd.p), f.ld_hat = Hk * D;
      f.q_rnorm = static_cast<float*>(rqd.p), f.k_rnorm = static_cast<float*>(rkd.p);
      f.q_scale = static_cast<float>(qs), f.k_scale = 1.f;
      f.v = static_cast<uint16_t*>(vd.p), f.ld_q = f.ld_k = Hk * D, f.ld_v = Hv * D;
      f.g = static_cast<float*>(gd.p), f.beta = static_cast<float*>(bd.p), f.S0 = static_cast<float*>(S0d.p);
      f.o = static_cast<uint16_t*>(od.p), f.ld_o = Hv * D, f.S_out = static_cast<float*>(Soutd.p);
      gdn_chunk_forward_cuda(f, nullptr);
      GdnCudaBackwardParams b;
      b.dims = d, b.q = f.q_hat, b.k = f.k_hat, b.v = f.v, b.ld_q = b.ld_k = f.ld_hat, b.ld_v = f.ld_v;
      b.g = f.g, b.beta = f.beta, b.S0 = f.S0, b.d_o = static_cast<uint16_t*>(dod.p), b.ld_do = Hv * D;
      b.dS_out = static_cast<float*>(dSd.p);
      b.dq = static_cast<uint16_t*>(dqd.p), b.dk = static_cast<uint16_t*>(dkd.p), b.dv = static_cast<uint16_t*>(dvd.p);
      b.ld_dq = b.ld_dk = Hk * D, b.ld_dv = Hv * D;
      b.dg = static_cast<float*>(dgd.p), b.dbeta = static_cast<float*>(dbd.p), b.dS0 = static_cast<float*>(dS0d.p);
      b.q_rnorm = static_cast<float*>(rqd.p), b.k_rnorm = static_cast<float*>(rkd.p);
      b.q_scale = static_cast<float>(qs), b.k_scale = 1.f;
      gdn_chunk_backward_cuda(b, nullptr);
      dxq = download<uint16_t>(dqd, nq), dxk = download<uint16_t>(dkd, nq), rq = download<float>(rqd, rows * Hk);
      yq = download<uint16_t>(qd, nq), yk = download<uint16_t>(kd, nq), ob = download<uint16_t>(od, nv);
    };
    std::vector<uint16_t> dxq, dxk, dxq2, dxk2;
    std::vector<float> rq, rq2;
    gpu(dxq, dxk, rq);
    expect_close("rnorm", c, rq, rq_ref, 1e-5);
    expect_close("q_hat", c, from_bf16(yq), q, 5e-3);
    expect_close("k_hat", c, from_bf16(yk), k, 5e-3);
    expect_close("o", c, from_bf16(ob), o, 5e-3);
    expect_close("dx_q", c, from_bf16(dxq), dxq_ref, 1e-2);
    expect_close("dx_k", c, from_bf16(dxk), dxk_ref, 1e-2);
    gpu(dxq2, dxk2, rq2);
    EXPECT_EQ(dxq, dxq2) << "dx_q differs between two runs";
    EXPECT_EQ(dxk, dxk2) << "dx_k differs between two runs";
  }
}

// The second size takes the backward's CTAs past one element a thread (more than 2048 x 21 rows).
TEST(GdnCudaGates, ForwardBackwardMatchReference) {
  SKIP_WITHOUT_GPU();
  for (const auto& [B, T, H] : {std::array<int64_t, 3>{3, 101, 4}, std::array<int64_t, 3>{4, 12289, 12}}) {
    const int64_t n = B * T * H;
    std::mt19937_64 rng(9 + H);
    std::normal_distribution<double> nd;
    std::vector<float> a(n), b(n), dg(n), dbeta(n), A_log(H), dt_bias(H), dA_log0(H, 0.5f), ddt0(H, -0.25f);
    for (int64_t i = 0; i < n; ++i) a[i] = static_cast<float>(3 * nd(rng)), b[i] = static_cast<float>(3 * nd(rng)),
                                    dg[i] = static_cast<float>(nd(rng)), dbeta[i] = static_cast<float>(nd(rng));
    a[0] = 40.f, a[1] = -40.f, b[2] = 60.f, b[3] = -60.f;  // saturated softplus and sigmoid
    for (int64_t h = 0; h < H; ++h) A_log[h] = static_cast<float>(0.5 * nd(rng)), dt_bias[h] = static_cast<float>(nd(rng));
    std::vector<double> ad = to_double(a), bd = to_double(b), dgd = to_double(dg), dbd = to_double(dbeta),
                        Ad = to_double(A_log), dtd = to_double(dt_bias), g_ref(n), beta_ref(n), da_ref(n), db_ref(n),
                        dA_ref = to_double(dA_log0), ddt_ref = to_double(ddt0);
    const Shape s{B, T, H}, hs{H};
    Context cpu;
    gdn_gates_forward(cpu, host_f64(g_ref, s), host_f64(beta_ref, s), host_f64(ad, s), host_f64(bd, s),
                      host_f64(Ad, hs), host_f64(dtd, hs));
    gdn_gates_backward(cpu, host_f64(da_ref, s), host_f64(db_ref, s), host_f64(dA_ref, hs), host_f64(ddt_ref, hs),
                       host_f64(dgd, s), host_f64(dbd, s), host_f64(ad, s), host_f64(bd, s), host_f64(Ad, hs),
                       host_f64(dtd, hs));

    Context ctx;
    ctx.device = Device::kCUDA;
    auto dev = [&](const std::vector<float>& h) {
      auto p = std::make_unique<DevBuf>(h.size() * 4);
      upload(*p, h);
      return p;
    };
    auto A = dev(a), Bb = dev(b), DG = dev(dg), DB = dev(dbeta), AL = dev(A_log), DT = dev(dt_bias), DAL = dev(dA_log0),
         DDT = dev(ddt0);
    DevBuf G(n * 4), BE(n * 4), DA(n * 4), DBo(n * 4);
    auto t = [&](void* p, const Shape& sh) { return Tensor(p, DType::kF32, Device::kCUDA, sh); };
    for (void* p : {G.p, BE.p, DA.p, DBo.p}) fill_cuda(t(p, s), std::numeric_limits<double>::quiet_NaN(), nullptr);
    gdn_gates_forward(ctx, t(G.p, s), t(BE.p, s), t(A->p, s), t(Bb->p, s), t(AL->p, hs), t(DT->p, hs));
    gdn_gates_backward(ctx, t(DA.p, s), t(DBo.p, s), t(DAL->p, hs), t(DDT->p, hs), t(DG->p, s), t(DB->p, s), t(A->p, s),
                       t(Bb->p, s), t(AL->p, hs), t(DT->p, hs));
    Case c;  // for the messages only
    c.B = B, c.T = T, c.Hv = H;
    expect_close("gates g", c, download<float>(G, n), g_ref, 1e-5);
    expect_close("gates beta", c, download<float>(BE, n), beta_ref, 1e-5);
    expect_close("gates da", c, download<float>(DA, n), da_ref, 1e-5);
    expect_close("gates db", c, download<float>(DBo, n), db_ref, 1e-5);
    expect_close("gates dA_log (accumulated onto 0.5)", c, download<float>(*DAL, H), dA_ref, 1e-4);
    expect_close("gates ddt_bias (accumulated onto -0.25)", c, download<float>(*DDT, H), ddt_ref, 1e-4);
  }
}

// ---- gated RMSNorm of the output (bf16 o, z, y; fp32 w, dw) ----

TEST(GdnCudaNorm, ForwardBackwardMatchReferenceAndDwIsDeterministic) {
  SKIP_WITHOUT_GPU();
  for (int64_t d : {16, 48, 64, 128}) {
    const int64_t B = 2, T = 37, H = 3, n = B * T * H * d;
    const double eps = 1e-6;
    std::mt19937_64 rng(40 + d);
    std::normal_distribution<double> nd;
    std::vector<uint16_t> ob(n), zb(n), dyb(n);
    for (auto& e : ob) e = f32_to_bf16(static_cast<float>(0.3 * nd(rng)));
    for (auto& e : zb) e = f32_to_bf16(static_cast<float>(2 * nd(rng)));
    for (auto& e : dyb) e = f32_to_bf16(static_cast<float>(nd(rng)));
    std::vector<float> w(d), dw0(d, 0.3f);
    for (auto& e : w) e = static_cast<float>(1 + 0.2 * nd(rng));
    std::vector<double> o = to_double(from_bf16(ob)), z = to_double(from_bf16(zb)), dy = to_double(from_bf16(dyb)),
                        wd = to_double(w), y_ref(n), do_ref(n), dz_ref(n), dw_ref = to_double(dw0);
    const Shape s{B, T, H, d}, ws{d};
    Context cpu;
    gdn_norm_forward(cpu, host_f64(y_ref, s), host_f64(o, s), host_f64(z, s), host_f64(wd, ws), eps);
    gdn_norm_backward(cpu, host_f64(do_ref, s), host_f64(dz_ref, s), host_f64(dw_ref, ws), host_f64(dy, s),
                      host_f64(o, s), host_f64(z, s), host_f64(wd, ws), eps);

    Context ctx;
    ctx.device = Device::kCUDA;
    DevBuf od(n * 2), zd(n * 2), dyd(n * 2), yd(n * 2), dod(n * 2), dzd(n * 2), wdv(d * 4), dw1(d * 4), dw2(d * 4);
    upload(od, ob), upload(zd, zb), upload(dyd, dyb), upload(wdv, w), upload(dw1, dw0), upload(dw2, dw0);
    auto bf = [&](DevBuf& b) { return Tensor(b.p, DType::kBF16, Device::kCUDA, s); };
    auto f32 = [&](DevBuf& b) { return Tensor(b.p, DType::kF32, Device::kCUDA, ws); };
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (DevBuf* b : {&yd, &dod, &dzd}) fill_cuda(bf(*b), nan, nullptr);
    gdn_norm_forward(ctx, bf(yd), bf(od), bf(zd), f32(wdv), eps);
    gdn_norm_backward(ctx, bf(dod), bf(dzd), f32(dw1), bf(dyd), bf(od), bf(zd), f32(wdv), eps);
    Case c;  // for the messages only
    c.B = B, c.T = T, c.Hv = H, c.D = d;
    expect_close("norm y", c, from_bf16(download<uint16_t>(yd, n)), y_ref, 5e-3);
    expect_close("norm d_o", c, from_bf16(download<uint16_t>(dod, n)), do_ref, 1e-2);
    expect_close("norm dz", c, from_bf16(download<uint16_t>(dzd, n)), dz_ref, 1e-2);
    const std::vector<float> dw_a = download<float>(dw1, d);
    expect_close("norm dw (accumulated onto 0.3)", c, dw_a, dw_ref, 1e-3);
    gdn_norm_backward(ctx, bf(dod), bf(dzd), f32(dw2), bf(dyd), bf(od), bf(zd), f32(wdv), eps);
    EXPECT_EQ(0, std::memcmp(dw_a.data(), download<float>(dw2, d).data(), d * 4)) << "norm dw differs between runs";
  }
}

// The backward (kernels/cuda/gdn_norm.cu) through the launcher: odd item counts, the 1-feature path
// (off = 1: every bf16 tensor 2 bytes past a 16-byte boundary), and sizes at which the pipelined
// kernel's one-wave grid gives each CTA several warp steps and the last CTA a partial one (T 4501 x
// 3 heads of 64; T 2731 x 3 heads of 128). Outputs poisoned before each run; dw accumulated onto
// 0.3; a second run gives the same dw bits.
TEST(GdnCudaNorm, BackwardMatchesReferenceOnEveryPath) {
  SKIP_WITHOUT_GPU();
  struct NormCase {
    int64_t B, T, H, d;
    int off;
  };
  const NormCase cases[] = {{2, 37, 3, 16, 0}, {2, 37, 3, 48, 0}, {2, 37, 3, 64, 0},   {2, 37, 3, 128, 0},
                            {1, 45, 3, 256, 0}, {2, 37, 3, 64, 1}, {1, 45, 3, 48, 1}, {1, 4501, 3, 64, 0},
                            {1, 2731, 3, 128, 0}};
  for (const NormCase& nc : cases) {
    const int64_t B = nc.B, T = nc.T, H = nc.H, d = nc.d, n = B * T * H * d, off = nc.off;
    const double eps = 1e-6;
    std::mt19937_64 rng(60 + d + T + off);
    std::normal_distribution<double> nd;
    std::vector<uint16_t> ob(n + off), zb(n + off), dyb(n + off);
    for (auto& e : ob) e = f32_to_bf16(static_cast<float>(0.3 * nd(rng)));
    for (auto& e : zb) e = f32_to_bf16(static_cast<float>(2 * nd(rng)));
    for (auto& e : dyb) e = f32_to_bf16(static_cast<float>(nd(rng)));
    std::vector<float> w(d), dw0(d, 0.3f);
    for (auto& e : w) e = static_cast<float>(1 + 0.2 * nd(rng));
    auto tail = [&](const std::vector<uint16_t>& b) {  // the n values past the offset, as doubles
      const std::vector<float> f = from_bf16(b);
      return std::vector<double>(f.begin() + off, f.end());
    };
    std::vector<double> o = tail(ob), z = tail(zb), dy = tail(dyb), wd = to_double(w), y_ref(n), do_ref(n), dz_ref(n),
                        dw_ref = to_double(dw0);
    const Shape s{B, T, H, d}, ws{d};
    Context cpu;
    gdn_norm_forward(cpu, host_f64(y_ref, s), host_f64(o, s), host_f64(z, s), host_f64(wd, ws), eps);
    gdn_norm_backward(cpu, host_f64(do_ref, s), host_f64(dz_ref, s), host_f64(dw_ref, ws), host_f64(dy, s),
                      host_f64(o, s), host_f64(z, s), host_f64(wd, ws), eps);

    DevBuf od((n + off) * 2), zd((n + off) * 2), dyd((n + off) * 2), yd((n + off) * 2), dod((n + off) * 2),
        dzd((n + off) * 2), wdv(d * 4), dw1(d * 4), dw2(d * 4);
    upload(od, ob), upload(zd, zb), upload(dyd, dyb), upload(wdv, w);
    auto bits = [&](DevBuf& b) { return static_cast<uint16_t*>(b.p) + off; };
    auto poison = [&](DevBuf& b) {
      fill_cuda(Tensor(b.p, DType::kBF16, Device::kCUDA, Shape{n + off}), std::numeric_limits<double>::quiet_NaN(),
                nullptr);
    };
    auto got = [&](DevBuf& b) {  // the n outputs past the offset
      std::vector<uint16_t> h = download<uint16_t>(b, n + off);
      h.erase(h.begin(), h.begin() + off);
      return from_bf16(h);
    };
    GdnCudaNormParams p;
    p.rows = B * T, p.H = H, p.d = d, p.eps = static_cast<float>(eps);
    p.o = bits(od), p.z = bits(zd), p.w = static_cast<const float*>(wdv.p), p.y = bits(yd);
    p.dy = bits(dyd), p.d_o = bits(dod), p.dz = bits(dzd);
    Case c;  // for the messages only
    c.B = B, c.T = T, c.Hv = H, c.D = d;
    poison(yd);
    gdn_norm_forward_cuda(p, nullptr);
    SCOPED_TRACE("off=" + std::to_string(off));
    expect_close("norm y", c, got(yd), y_ref, 5e-3);
    poison(dod), poison(dzd), upload(dw1, dw0), upload(dw2, dw0);
    p.dw = static_cast<float*>(dw1.p);
    gdn_norm_backward_cuda(p, nullptr);
    expect_close("norm d_o", c, got(dod), do_ref, 1e-2);
    expect_close("norm dz", c, got(dzd), dz_ref, 1e-2);
    const std::vector<float> dw_a = download<float>(dw1, d);
    expect_close("norm dw (accumulated onto 0.3)", c, dw_a, dw_ref, 1e-3);
    p.dw = static_cast<float*>(dw2.p);
    gdn_norm_backward_cuda(p, nullptr);
    EXPECT_EQ(0, std::memcmp(dw_a.data(), download<float>(dw2, d).data(), d * 4)) << "norm dw differs between runs";
  }
}

// ---- the recurrent form (decode step) ----

TEST(GdnCudaRecurrent, MatchesReferenceAndDecodesInPlace) {
  SKIP_WITHOUT_GPU();
  // (D, Dv): the tensor-core sizes, and small and unequal head dims (8-, 16- and 32-column tiles).
  for (auto [D, Dv] : {std::pair<int64_t, int64_t>{64, 64}, {128, 128}, {16, 16}, {32, 32}, {48, 48}, {32, 64},
                       {64, 40}})
    for (int64_t T : {1, 7, 130}) {
      Case c;
      c.B = 2, c.T = T, c.Hk = 1, c.Hv = 2, c.D = D, c.Dv = Dv, c.seed = 300 + T + D + Dv;
      SCOPED_TRACE(c.name());
      const Inputs in = make_inputs(c);
      const int64_t B = c.B, Hk = c.Hk, Hv = c.Hv, rows = B * T;
      const Shape qs{B, T, Hk, D}, vs{B, T, Hv, Dv}, gs{B, T, Hv}, ss{B, Hv, D, Dv};
      std::vector<double> q = to_double(in.q), k = to_double(in.k), v = to_double(in.v), g = to_double(in.g),
                          beta = to_double(in.beta), S0 = to_double(in.S0), o_ref(rows * Hv * Dv),
                          S_ref(B * Hv * D * Dv);
      Context cpu;
      gdn_recurrent_forward(cpu, host_f64(o_ref, vs), host_f64(S_ref, ss), host_f64(q, qs), host_f64(k, qs),
                            host_f64(v, vs), host_f64(g, gs), host_f64(beta, gs), host_f64(S0, ss));
      Context ctx;
      ctx.device = Device::kCUDA;
      DevBuf qd(q.size() * 2), kd(k.size() * 2), vd(v.size() * 2), gd(g.size() * 4), bd(g.size() * 4),
          Sd(S0.size() * 4), od(o_ref.size() * 2);
      upload(qd, to_bf16(in.q)), upload(kd, to_bf16(in.k)), upload(vd, to_bf16(in.v));
      upload(gd, in.g), upload(bd, in.beta), upload(Sd, in.S0);
      Tensor o(od.p, DType::kBF16, Device::kCUDA, vs), S(Sd.p, DType::kF32, Device::kCUDA, ss);
      fill_cuda(o, std::numeric_limits<double>::quiet_NaN(), nullptr);
      // S0 and S_out are the same buffer: the decode cache updated in place.
      gdn_recurrent_forward(ctx, o, S, Tensor(qd.p, DType::kBF16, Device::kCUDA, qs),
                            Tensor(kd.p, DType::kBF16, Device::kCUDA, qs), Tensor(vd.p, DType::kBF16, Device::kCUDA, vs),
                            Tensor(gd.p, DType::kF32, Device::kCUDA, gs), Tensor(bd.p, DType::kF32, Device::kCUDA, gs), S);
      expect_close("recurrent o", c, from_bf16(download<uint16_t>(od, o_ref.size())), o_ref, 5e-3);
      expect_close("recurrent S_out (in place)", c, download<float>(Sd, S_ref.size()), S_ref, 5e-3);
    }
}

// ---- causal depthwise conv + SiLU ----

// Shapes around the kernels' segment lengths (forward 32 rows, backward 64, 8 segments per CTA):
// T = 1, 63, 65, 130, 600; odd C (the 2-byte path), K = 1..4 and 8, B > 1. dw accumulates onto 0.1
// and a second backward gives the same bits (fixed-order reduction).
TEST(GdnCudaConv, ForwardBackwardMatchReference) {
  SKIP_WITHOUT_GPU();
  struct ConvShape { int64_t B, T, C, K; };
  const ConvShape shapes[] = {{2, 37, 40, 4},  {1, 1, 6, 4},   {2, 63, 37, 4}, {1, 65, 40, 4}, {2, 130, 66, 4},
                              {3, 33, 64, 1},  {1, 70, 34, 2}, {2, 29, 35, 3}, {1, 40, 10, 8}, {2, 600, 130, 4},
                              {2, 1024, 768, 4}};
  for (const ConvShape& sh : shapes) {
    const int64_t B = sh.B, T = sh.T, C = sh.C, K = sh.K, n = B * T * C;
    SCOPED_TRACE("conv B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" + std::to_string(C) +
                 " K=" + std::to_string(K));
    std::mt19937_64 rng(17 + T + C);
    std::normal_distribution<double> nd;
    std::vector<uint16_t> xb(n), dyb(n);
    for (auto& e : xb) e = f32_to_bf16(static_cast<float>(nd(rng)));
    for (auto& e : dyb) e = f32_to_bf16(static_cast<float>(nd(rng)));
    std::vector<float> w(C * K), dw0(C * K, 0.1f);
    for (auto& e : w) e = static_cast<float>(0.5 * nd(rng));
    std::vector<double> x(n), dy(n), y_ref(n), dx_ref(n), wd = to_double(w), dw_ref = to_double(dw0);
    for (int64_t i = 0; i < n; ++i) x[i] = bf16_to_f32(xb[i]), dy[i] = bf16_to_f32(dyb[i]);
    const Shape s{B, T, C}, ws{C, 1, K};
    Context cpu;
    gdn_conv_forward(cpu, host_f64(y_ref, s), host_f64(x, s), host_f64(wd, ws));
    gdn_conv_backward(cpu, host_f64(dx_ref, s), host_f64(dw_ref, ws), host_f64(dy, s), host_f64(x, s),
                      host_f64(wd, ws));

    Context ctx;
    ctx.device = Device::kCUDA;
    DevBuf xd(n * 2), dyd(n * 2), yd(n * 2), dxd(n * 2), wdv(C * K * 4), dwd(C * K * 4);
    upload(xd, xb), upload(dyd, dyb), upload(wdv, w), upload(dwd, dw0);
    Tensor xt(xd.p, DType::kBF16, Device::kCUDA, s), yt(yd.p, DType::kBF16, Device::kCUDA, s);
    Tensor dyt(dyd.p, DType::kBF16, Device::kCUDA, s), dxt(dxd.p, DType::kBF16, Device::kCUDA, s);
    Tensor wt(wdv.p, DType::kF32, Device::kCUDA, ws), dwt(dwd.p, DType::kF32, Device::kCUDA, ws);
    fill_cuda(yt, std::numeric_limits<double>::quiet_NaN(), nullptr);
    fill_cuda(dxt, std::numeric_limits<double>::quiet_NaN(), nullptr);
    gdn_conv_forward(ctx, yt, xt, wt);
    gdn_conv_backward(ctx, dxt, dwt, dyt, xt, wt);
    Case c;  // for the messages only
    c.B = B, c.T = T;
    expect_close("conv y", c, from_bf16(download<uint16_t>(yd, n)), y_ref, 5e-3);
    expect_close("conv dx", c, from_bf16(download<uint16_t>(dxd, n)), dx_ref, 1e-2);
    const std::vector<float> dw1 = download<float>(dwd, C * K);
    expect_close("conv dw (accumulated onto 0.1)", c, dw1, dw_ref, 1e-4);
    // Run to run: the same start and inputs give the same bits (dx and dw).
    const std::vector<uint16_t> dx1 = download<uint16_t>(dxd, n);
    upload(dwd, dw0);
    fill_cuda(dxt, std::numeric_limits<double>::quiet_NaN(), nullptr);
    gdn_conv_backward(ctx, dxt, dwt, dyt, xt, wt);
    const std::vector<float> dw2 = download<float>(dwd, C * K);
    EXPECT_EQ(std::memcmp(dw1.data(), dw2.data(), dw1.size() * sizeof(float)), 0) << "conv dw differs run to run";
    EXPECT_EQ(download<uint16_t>(dxd, n), dx1) << "conv dx differs run to run";
  }
}

}  // namespace
}  // namespace dt
