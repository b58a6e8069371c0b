// Shared pieces of the GDN CUDA tests (tests/gpu/test_gdn_cuda.cpp, test_gdn_cuda_ops.cpp): device
// buffers, the cases (the shared list tests/gdn_cases.h taken in) and their seeded inputs, the double
// CPU reference, the launchers run with a forced plan (GdnPlanForcing), and the comparisons.
#pragma once

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
#include "tests/gdn_cases.h"
#include "tests/gpu/gpu_testing.h"

namespace dt {
namespace gdn_test {



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

inline Inputs make_inputs(const Case& c) {
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

inline std::vector<double> to_double(const std::vector<float>& x) { return {x.begin(), x.end()}; }

inline Tensor host_f64(std::vector<double>& x, Shape s) {
  return x.empty() ? Tensor() : Tensor(x.data(), DType::kF64, Device::kCPU, s);
}

// The double reference: outputs o, S_out, and the gradients.
struct Reference {
  std::vector<double> o, S_out, dq, dk, dv, dg, dbeta, dS0;
};

inline Reference run_reference(const Case& c, const Inputs& in) {
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

inline std::vector<uint16_t> to_bf16(const std::vector<float>& x) {
  std::vector<uint16_t> b(x.size());
  for (size_t i = 0; i < x.size(); ++i) b[i] = f32_to_bf16(x[i]);
  return b;
}
inline std::vector<float> from_bf16(const std::vector<uint16_t>& b) {
  std::vector<float> x(b.size());
  for (size_t i = 0; i < b.size(); ++i) x[i] = bf16_to_f32(b[i]);
  return x;
}

template <class T>
inline void upload(DevBuf& d, const std::vector<T>& h) {
  device_copy(d.p, Device::kCUDA, h.data(), Device::kCPU, h.size() * sizeof(T));
}
template <class T>
inline std::vector<T> download(const DevBuf& d, size_t n, size_t off = 0) {
  std::vector<T> h(n);
  device_copy(h.data(), Device::kCPU, static_cast<const T*>(d.p) + off, Device::kCUDA, n * sizeof(T));
  return h;
}

// The kernels' options (the impl and the plan's forced choices, GdnPlanForcing in
// kernels/cuda/gdn_plan.h); the defaults are the ops': kAuto, every choice by plan_gdn.
struct Kernels {
  GdnCudaImpl impl = GdnCudaImpl::kAuto;
  int state_cols = 0, overlap = -1, chase_prep = -1, qk_persist = -1;
  bool defaults() const {
    return impl == GdnCudaImpl::kAuto && state_cols == 0 && overlap == -1 && chase_prep == -1 && qk_persist == -1;
  }
  std::string name() const {
    auto opt = [](const char* key, int v, int unset) {
      return v == unset ? "" : " " + std::string(key) + "=" + std::to_string(v);
    };
    return (impl == GdnCudaImpl::kSimt ? " (simt kernels)" : "") + opt("state_cols", state_cols, 0) +
           opt("overlap", overlap, -1) + opt("chase_prep", chase_prep, -1) + opt("qk_persist", qk_persist, -1);
  }
};

// A shared case (tests/gdn_cases.h) as this file's Case and Kernels, and its test name.
inline Case to_case(const gdn_cases::GdnCase& g) {
  Case c;
  c.B = g.B, c.T = g.T, c.Hk = g.Hk, c.Hv = g.Hv, c.D = g.D, c.Dv = g.Dv;
  c.with_S0 = g.S0, c.with_dS_out = g.dS, c.gates = static_cast<Case::Gates>(g.gates);
  c.strided = g.strided, c.seed = g.seed;
  return c;
}
inline Kernels kernels_of(const gdn_cases::GdnCase& g) {
  Kernels kn;
  kn.impl = g.impl, kn.state_cols = g.state_cols, kn.qk_persist = g.qk_persist;
  return kn;
}
inline std::string case_param_name(const ::testing::TestParamInfo<gdn_cases::GdnCase>& info) {
  return gdn_cases::case_name(info.param);
}

// The launchers of kernels/gdn_cuda.h with explicit options (the ops take the defaults). use_saved
// (not in a graph): the forward leaves its factors and states in a NaN-poisoned saved buffer and the
// backward reads them.
inline void run_launchers(const Kernels& kn, const Tensor& o, const Tensor& S_out, const Tensor& q, const Tensor& k,
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
  force.state_cols = kn.state_cols, force.overlap = kn.overlap;
  force.chase_prep = kn.chase_prep, force.qk_persist = kn.qk_persist;
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
inline void run_launchers_in_graph(const Kernels& kn, const Tensor& o, const Tensor& S_out, const Tensor& q, const Tensor& k,
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
inline GpuRun run_gpu(const Case& c, const Inputs& in, const Kernels& kn = {}, bool use_saved = false, bool graph = false) {
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

inline Err compare(const std::vector<float>& got, const std::vector<double>& want) {
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

inline void expect_close(const char* tensor, const Case& c, const std::vector<float>& got, const std::vector<double>& want,
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

inline void check_case(const Case& c, const Kernels& kn = {}) {
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

}  // namespace gdn_test
}  // namespace dt
