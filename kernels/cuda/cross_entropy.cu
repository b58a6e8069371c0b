// Cross-entropy over bf16 logits on the GPU (reference: kernels/cpu/cross_entropy.h):
//   lse_n  = log sum_v exp(x[n, v]),   loss_n = lse_n - x[n, t_n]
//   dx[n, v] = grad_scale (exp(x[n, v] - lse_n) - [v == t_n])
// torch: F.cross_entropy(x.float(), t, reduction="none"), and its gradient times grad_scale.
//
// Bounds at [16384, 50304] on an H200: the logits are 1.65 GB, read once and (backward, fused) written
// once: 0.8 ms at ~4 TB/s. Two exponentials per element (the sum, the gradient) on the MUFU unit
// (16 per clock per SM) take ~0.4 ms, so each is one FFMA + one ex2.approx, with the rounding of the
// shift folded into a per-row (per-warp) factor:
//   exp(x - m) = 2^(fl(x log2e - mh)) 2^(-ml),   mh = fl(m log2e),  ml = fma(m, log2e, -mh) exactly,
// and the gradient from g.c_hi = fl(lse log2e), g.sc = grad_scale 2^-(lse log2e - c_hi):
//   dx = fl(sc 2^(fl(x log2e - c_hi))), the target's fma(sc, e, -grad_scale)  (explicit _rn intrinsics:
// the same bits in every kernel). Sums are fp32 in a fixed order (warp butterflies, then every warp
// combines the per-warp (max, sum) pairs the same way), so results are bitwise the same run to run.
//
// One row per CTA at a time; per warp: its max m_w, the lanes' sums of 2^(x log2e - mh_w), a butterfly
// sum; then one __syncthreads and the pairs combined: lse = M + log sum_w S_w exp(m_w - M).
// Three variants of forward and fused; the backward has no reduction and is one kernel for all (the
// stream kernel's second pass, one CTA per row), and the fused dlogits equal its bits given the lse:
//   stream  512 threads; an online pass (per chunk of 4 x 16-byte loads a lane: warp max, rescale,
//           sum), then the fused re-reads the row for dlogits (from L2: two rows per SM in flight,
//           ~26 MB, well under the 50 MB L2). Any vocab. Persistent in fused (2 CTAs per SM).
//   regs    1024 threads; the row is held in registers (7 x 16 B a thread: vocab <= 57344), loaded
//           once with all loads in flight, written once.
//   tma     as regs, persistent (one CTA per SM): the next two rows are fetched by cp.async.bulk
//           into a two-stage shared-memory ring while the current one is reduced and written.
//           Same per-row code as regs, so the same bits. Needs sm_90; regs elsewhere.
// Rows longer than 57344 use stream in every variant; forward and fused always pick the same
// reduction for a vocab, so their lse / losses agree bitwise within a variant (not across variants).
// The variant is a plan choice (cross_entropy_plan): tma where it applies; tests and benchmarks may ask a
// context for another (kernels/cuda/dense_mm_launch.h).
// Rows whose target is outside [0, vocab) lower *bad_row to their index; the host reads it back and
// throws (cross_entropy_ops.cpp).
//
// 16-byte vectors: a row's elements before its first 16-byte boundary (head, < 8) and after its last
// (< 8) are single loads; with vocab 50257 every row is offset differently.
//
// Registers (ptxas, sm_90a; no spills): stream 47 / 62 / 55 (forward / backward / fused), regs 56 / 56,
// tma 56 / 60 (forward / fused).
//
// A shared-memory row cache (98 KiB: two 512-thread CTAs per SM with one 16-byte load in flight a
// thread, 16 KB per SM) reaches about 2 TB/s by Little's law; these variants keep more loads in
// flight. Measured on an H200 at [16384, 50304] (bench_dense_ops, ms and GB/s of logits moved):
// forward stream 0.438 (3.77 TB/s), regs 0.497, tma 0.456; fused stream 1.207, regs 0.927, tma 0.900
// (3.66 TB/s); backward 0.813 (4.05 TB/s). In the hybrid 124M step (bench_train) tma over stream: 39.74 against 40.25 ms (with
// regs). Default: tma.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "core/error.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/dense_mm_launch.h"
#include "kernels/cuda/tma.cuh"

namespace dt::cuda {

namespace {

constexpr int kStreamThreads = 512;
constexpr int kStreamWarps = kStreamThreads / 32;
constexpr int kStreamUnroll = 4;  // 16-byte loads in flight per lane per chunk
constexpr int kStreamStep = kStreamUnroll * kStreamThreads;
constexpr int kStreamFusedCtasPerSm = 2;  // rows in flight: 2 x 132 x 100 KB = 26 MB of the 50 MB L2

constexpr int kRowThreads = 1024;
constexpr int kRowWarps = kRowThreads / 32;
constexpr int kRowVecs = 7;  // 16-byte blocks held per thread
constexpr int64_t kMaxRowVocab = int64_t{kRowVecs} * 8 * kRowThreads;  // 57344

enum Mode { kForward, kBackward, kFused };

constexpr float kLog2e = 1.4426950408889634f;
constexpr uint32_t kNegInf2 = 0xff80ff80u;  // two bf16 -inf

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Elementwise max of two bf16 pairs; a NaN loses to a number (as fmaxf).
__device__ __forceinline__ uint32_t max_bf16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("max.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
__device__ __forceinline__ uint32_t max_bf16x2(uint32_t acc, const uint4& u) {
  return max_bf16x2(acc, max_bf16x2(max_bf16x2(u.x, u.y), max_bf16x2(u.z, u.w)));
}
__device__ __forceinline__ float max_halves(uint32_t w) {
  return fmaxf(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
}

// Loads: the stream variant's first pass keeps the line in L2 for the second (no L1 allocation);
// everything read once is evict-first (ld.global.cs). No .nc: the fused kernel writes the logits.
__device__ __forceinline__ uint4 load_keep(const uint4* p) {
  uint4 u;
  asm volatile("ld.global.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w)
               : "l"(p));
  return u;
}
__device__ __forceinline__ uint4 load_once(const uint4* p) { return __ldcs(p); }

// The shift for a max m: terms 2^(x log2e - mh). An all -inf max shifts by 0 (its terms are 0, or NaN).
__device__ __forceinline__ float shift_of(float m) { return m == -INFINITY ? 0.f : __fmul_rn(m, kLog2e); }

// s += 2^(x log2e - mh) over 8 values (neg_mh = -mh).
__device__ __forceinline__ float sum8(float s, const uint4& u, float neg_mh) {
  float v[8];
  unpack_bf16x8(u, v);
  for (int i = 0; i < 8; ++i) s = __fadd_rn(s, ex2(__fmaf_rn(v[i], kLog2e, neg_mh)));
  return s;
}

// A warp's (max m, sum_v exp(x_v - m)) from its lanes' sums of 2^(x log2e - mh): times 2^-ml.
__device__ __forceinline__ float2 warp_pair(float m, float mh, float s_lane) {
  const float s = warp_sum_rn(s_lane);
  float ml = __fmaf_rn(m, kLog2e, -mh);  // m log2e - mh, exactly
  if (!isfinite(ml)) ml = 0.f;           // m = +-inf or NaN: the sum is already 0 or NaN
  return make_float2(m, __fmul_rn(s, exp2f(-ml)));
}

// lse from the CTA's per-warp pairs; every warp computes it, with the same bits.
__device__ __forceinline__ float combine_pairs(const float2* pairs, int nwarps, int lane) {
  const float2 q = lane < nwarps ? pairs[lane] : make_float2(-INFINITY, 0.f);
  const float M = warp_max(q.x);
  const float f = q.x == -INFINITY ? 0.f : expf(__fsub_rn(q.x, M));  // 0 * NaN stays NaN
  const float S = warp_sum_rn(__fmul_rn(q.y, f));
  return __fadd_rn(M, logf(S));
}

// Per-row constants of the gradient (see the header).
struct GradRow {
  float c_hi, sc, scale;
  int64_t t;  // -1 for a bad target: no one-hot
};

__device__ __forceinline__ GradRow grad_row(float lse, float scale, int64_t t) {
  const float c_hi = __fmul_rn(lse, kLog2e);
  float c_lo = __fmaf_rn(lse, kLog2e, -c_hi);
  if (!isfinite(c_lo)) c_lo = 0.f;  // lse = +-inf or NaN: c_hi carries it
  return {c_hi, __fmul_rn(scale, exp2f(-c_lo)), scale, t};
}

__device__ __forceinline__ float grad1(float x, const GradRow& g, bool is_target) {
  const float e = ex2(__fmaf_rn(x, kLog2e, -g.c_hi));
  return is_target ? __fmaf_rn(g.sc, e, -g.scale) : __fmul_rn(g.sc, e);
}

// Gradients of the 8 elements i0 .. i0 + 7.
__device__ __forceinline__ uint4 grad8(const uint4& u, int64_t i0, const GradRow& g) {
  float v[8], d[8];
  unpack_bf16x8(u, v);
  const uint64_t k = static_cast<uint64_t>(g.t - i0);
  if (k < 8) {
    for (int i = 0; i < 8; ++i) d[i] = grad1(v[i], g, i == static_cast<int>(k));
  } else {
    for (int i = 0; i < 8; ++i) d[i] = grad1(v[i], g, false);
  }
  return pack_bf16x8(d);
}

// A row as [0, head) scalars, nvec 16-byte blocks, [tail, vocab) scalars (head, vocab - tail < 8).
struct RowSplit {
  int64_t head, nvec, tail;
};

__device__ __forceinline__ RowSplit split_row(const uint16_t* row, int64_t vocab) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(row);
  int64_t head = static_cast<int64_t>(((16 - a % 16) % 16) / 2);
  if (head > vocab) head = vocab;
  const int64_t nvec = (vocab - head) / 8;
  return {head, nvec, head + nvec * 8};
}
__device__ __forceinline__ int64_t scalar_count(const RowSplit& sp, int64_t vocab) {
  return sp.head + (vocab - sp.tail);
}
__device__ __forceinline__ int64_t scalar_index(const RowSplit& sp, int64_t k) {
  return k < sp.head ? k : sp.tail + (k - sp.head);
}

__device__ __forceinline__ void write_row_stats(const CrossEntropyParams& p, int64_t r, float lse, bool t_ok,
                                                float x_t) {
  p.lse[r] = lse;
  p.losses[r] = t_ok ? __fsub_rn(lse, x_t) : __int_as_float(0x7fc00000);  // NaN for a bad target
}

// ============================================================================
// stream: online pass, then (fused) a second pass over the row from L2
// ============================================================================

template <int kMode>
__global__ void __launch_bounds__(kStreamThreads, 2) cross_entropy_stream_kernel(CrossEntropyParams p) {
  __shared__ float2 pairs[2][kStreamWarps];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int64_t V = p.vocab;
  int it = 0;
  for (int64_t r = blockIdx.x; r < p.n; r += gridDim.x, ++it) {
    const uint16_t* x = p.logits + r * V;
    const RowSplit sp = split_row(x, V);
    const int64_t nscal = scalar_count(sp, V);
    const uint4* xv = reinterpret_cast<const uint4*>(x + sp.head);
    const int32_t t = p.targets[r];
    const bool t_ok = t >= 0 && t < V;

    float lse;
    if constexpr (kMode == kBackward) {
      lse = p.lse[r];
    } else {
      // Read before the reduction: after it, the fused kernel overwrites the row.
      const float x_t = tid == 0 && t_ok ? bf16_bits_to_f32(x[t]) : 0.f;
      float m = -INFINITY, mh = 0.f, s = 0.f;  // m, mh warp-uniform
      if (warp == 0 && nscal > 0) {  // the < 16 scalars, one a lane of warp 0
        const float xs = lane < nscal ? bf16_bits_to_f32(x[scalar_index(sp, lane)]) : -INFINITY;
        m = warp_max(xs);
        mh = shift_of(m);
        if (lane < nscal) s = ex2(__fmaf_rn(xs, kLog2e, -mh));
      }
      // Chunks of kStreamUnroll blocks a lane; the loop bound is warp-uniform (shuffles inside).
      for (int64_t base = int64_t{warp} * 32; base < sp.nvec; base += kStreamStep) {
        uint4 u[kStreamUnroll];
        for (int k = 0; k < kStreamUnroll; ++k) {
          const int64_t j = base + lane + int64_t{k} * kStreamThreads;
          u[k] = j < sp.nvec ? load_keep(xv + j) : make_uint4(kNegInf2, kNegInf2, kNegInf2, kNegInf2);
        }
        uint32_t pm = kNegInf2;
        for (int k = 0; k < kStreamUnroll; ++k) pm = max_bf16x2(pm, u[k]);
        const float cm = warp_max(max_halves(pm));
        if (cm > m) {
          const float mh_new = shift_of(cm);
          if (m != -INFINITY) s = __fmul_rn(s, exp2f(__fsub_rn(mh, mh_new)));
          m = cm, mh = mh_new;
        }
        for (int k = 0; k < kStreamUnroll; ++k)
          if (base + lane + int64_t{k} * kStreamThreads < sp.nvec) s = sum8(s, u[k], -mh);
      }
      const float2 pr = warp_pair(m, mh, s);
      if (lane == 0) pairs[it & 1][warp] = pr;
      // Also orders every read of the row (x_t included) before any write of dlogits.
      __syncthreads();
      lse = combine_pairs(pairs[it & 1], kStreamWarps, lane);
      if (tid == 0) write_row_stats(p, r, lse, t_ok, x_t);
    }
    if (tid == 0 && !t_ok) atomicMin(p.bad_row, static_cast<int>(r));
    if constexpr (kMode != kForward) {
      uint16_t* dx = p.dlogits + r * V;
      const GradRow g = grad_row(lse, p.grad_scale, t_ok ? t : -1);
      if ((reinterpret_cast<uintptr_t>(dx) - reinterpret_cast<uintptr_t>(x)) % 16 == 0) {
        uint4* dxv = reinterpret_cast<uint4*>(dx + sp.head);
        for (int64_t j0 = tid; j0 < sp.nvec; j0 += kStreamStep) {
          uint4 u[kStreamUnroll];
          for (int k = 0; k < kStreamUnroll; ++k) {
            const int64_t j = j0 + int64_t{k} * kStreamThreads;
            if (j < sp.nvec) u[k] = load_once(xv + j);
          }
          for (int k = 0; k < kStreamUnroll; ++k) {
            const int64_t j = j0 + int64_t{k} * kStreamThreads;
            if (j < sp.nvec) __stcs(dxv + j, grad8(u[k], sp.head + 8 * j, g));
          }
        }
        for (int64_t k = tid; k < nscal; k += kStreamThreads) {
          const int64_t i = scalar_index(sp, k);
          dx[i] = f32_to_bf16_bits(grad1(bf16_bits_to_f32(x[i]), g, i == g.t));
        }
      } else {  // dlogits offset differently from the logits (backward only): all scalar
        for (int64_t i = tid; i < V; i += kStreamThreads)
          dx[i] = f32_to_bf16_bits(grad1(bf16_bits_to_f32(x[i]), g, i == g.t));
      }
    }
  }
}

// ============================================================================
// regs / tma: the row in registers, kRowVecs blocks and one scalar a thread
// ============================================================================

struct RowInfo {
  const uint16_t* x;
  RowSplit sp;
  int nscal;
  int32_t t;
  bool t_ok;
};

__device__ __forceinline__ RowInfo row_info(const CrossEntropyParams& p, int64_t r, int32_t t) {
  RowInfo ri;
  ri.x = p.logits + r * p.vocab;
  ri.sp = split_row(ri.x, p.vocab);
  ri.nscal = static_cast<int>(scalar_count(ri.sp, p.vocab));
  ri.t = t;
  ri.t_ok = t >= 0 && t < p.vocab;
  return ri;
}

__device__ __forceinline__ float load_scalar(const RowInfo& ri, int tid) {
  return tid < ri.nscal ? bf16_bits_to_f32(ri.x[scalar_index(ri.sp, tid)]) : -INFINITY;
}

// Reduces the row held as v (block j = tid + k kRowThreads, -inf padded) and xs, writes lse / loss and
// (fused) dlogits. after_sync runs between the CTA barrier and the combine: every thread has finished
// reading its inputs by then (the tma variant refills the shared-memory stage there).
template <int kMode, class AfterSync>
__device__ __forceinline__ void reduce_row_in_registers(const CrossEntropyParams& p, int64_t r, const RowInfo& ri,
                                                        const uint4 (&v)[kRowVecs], float xs, float x_t,
                                                        float2* pairs, AfterSync after_sync) {
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int nvec = static_cast<int>(ri.sp.nvec);
  uint32_t pm = kNegInf2;
  for (int k = 0; k < kRowVecs; ++k) pm = max_bf16x2(pm, v[k]);
  const float m = warp_max(fmaxf(max_halves(pm), xs));
  const float mh = shift_of(m);
  float s = 0.f;
  for (int k = 0; k < kRowVecs; ++k)
    if (tid + k * kRowThreads < nvec) s = sum8(s, v[k], -mh);
  if (tid < ri.nscal) s = __fadd_rn(s, ex2(__fmaf_rn(xs, kLog2e, -mh)));
  const float2 pr = warp_pair(m, mh, s);
  if (lane == 0) pairs[warp] = pr;
  __syncthreads();
  after_sync();
  const float lse = combine_pairs(pairs, kRowWarps, lane);
  if (tid == 0) {
    write_row_stats(p, r, lse, ri.t_ok, x_t);
    if (!ri.t_ok) atomicMin(p.bad_row, static_cast<int>(r));
  }
  if constexpr (kMode == kFused) {
    uint16_t* dx = p.dlogits + r * p.vocab;  // offset like the logits (the launcher checks)
    uint4* dxv = reinterpret_cast<uint4*>(dx + ri.sp.head);
    const GradRow g = grad_row(lse, p.grad_scale, ri.t_ok ? ri.t : -1);
    for (int k = 0; k < kRowVecs; ++k) {
      const int j = tid + k * kRowThreads;
      if (j < nvec) __stcs(dxv + j, grad8(v[k], ri.sp.head + 8 * int64_t{j}, g));
    }
    if (tid < ri.nscal) {
      const int64_t i = scalar_index(ri.sp, tid);
      dx[i] = f32_to_bf16_bits(grad1(xs, g, i == g.t));
    }
  }
}

template <int kMode>
__global__ void __launch_bounds__(kRowThreads, 1) cross_entropy_regs_kernel(CrossEntropyParams p) {
  __shared__ float2 pairs[kRowWarps];
  const int tid = threadIdx.x;
  const int64_t r = blockIdx.x;
  const RowInfo ri = row_info(p, r, p.targets[r]);
  const uint4* xv = reinterpret_cast<const uint4*>(ri.x + ri.sp.head);
  uint4 v[kRowVecs];
  for (int k = 0; k < kRowVecs; ++k) {
    const int j = tid + k * kRowThreads;
    v[k] = j < ri.sp.nvec ? load_once(xv + j) : make_uint4(kNegInf2, kNegInf2, kNegInf2, kNegInf2);
  }
  const float xs = load_scalar(ri, tid);
  const float x_t = tid == 0 && ri.t_ok ? bf16_bits_to_f32(ri.x[ri.t]) : 0.f;
  reduce_row_in_registers<kMode>(p, r, ri, v, xs, x_t, pairs, [] {});
}

// ---- tma: the row by cp.async.bulk (kernels/cuda/tma.cuh) ----

#ifdef DT_HAVE_TMA
// Fetches row r's 16-byte blocks into dst; completes bar's current phase when they have landed.
__device__ __forceinline__ void fetch_row(const CrossEntropyParams& p, int64_t r, uint4* dst, uint64_t* bar) {
  const uint16_t* x = p.logits + r * p.vocab;
  const RowSplit sp = split_row(x, p.vocab);
  const uint32_t bytes = static_cast<uint32_t>(sp.nvec) * 16;
  mbar_expect_bytes(bar, bytes);
  if (bytes > 0) bulk_copy(dst, x + sp.head, bytes, bar);
}
#endif

// Persistent: CTA b takes rows b, b + grid, ...; stage it % 2 holds row it while rows it + 1 (and, once
// the row is in registers, it + 2) are in flight.
template <int kMode>
__global__ void __launch_bounds__(kRowThreads, 1) cross_entropy_tma_kernel(CrossEntropyParams p, int stage_vecs) {
#ifdef DT_HAVE_TMA
  extern __shared__ uint4 stages[];  // [2][stage_vecs]
  __shared__ __align__(8) uint64_t bars[2];
  __shared__ float2 pairs[2][kRowWarps];
  const int tid = threadIdx.x;
  const int64_t G = gridDim.x;
  int64_t r = blockIdx.x;
  if (tid == 0) {
    mbar_init(&bars[0], 1), mbar_init(&bars[1], 1);
    mbar_init_fence();
    for (int s = 0; s < 2; ++s)
      if (r + s * G < p.n) fetch_row(p, r + s * G, stages + s * stage_vecs, &bars[s]);
  }
  __syncthreads();
  // The target and the scalars come one row ahead, so their latency hides behind a row's work.
  int32_t t = p.targets[r];
  float xs = load_scalar(row_info(p, r, t), tid);
  for (int it = 0; r < p.n; ++it, r += G) {
    const int st = it & 1;
    const RowInfo ri = row_info(p, r, t);
    const float x_t = tid == 0 && ri.t_ok ? bf16_bits_to_f32(ri.x[ri.t]) : 0.f;
    const int64_t rn = r + G;
    int32_t t_next = 0;
    float xs_next = -INFINITY;
    if (rn < p.n) {
      t_next = p.targets[rn];
      xs_next = load_scalar(row_info(p, rn, t_next), tid);
    }
    mbar_wait(&bars[st], static_cast<uint32_t>((it >> 1) & 1));
    const uint4* stage = stages + st * stage_vecs;
    uint4 v[kRowVecs];
    for (int k = 0; k < kRowVecs; ++k) {
      const int j = tid + k * kRowThreads;
      v[k] = j < ri.sp.nvec ? stage[j] : make_uint4(kNegInf2, kNegInf2, kNegInf2, kNegInf2);
    }
    reduce_row_in_registers<kMode>(p, r, ri, v, xs, x_t, pairs[st], [&] {
      if (tid == 0 && r + 2 * G < p.n) fetch_row(p, r + 2 * G, stages + st * stage_vecs, &bars[st]);
    });
    t = t_next, xs = xs_next;
  }
#else
  __trap();  // the launcher only picks this kernel for sm_90 code
#endif
}

// ============================================================================
// launchers
// ============================================================================

int device_attribute(cudaDeviceAttr attr, const char* op) {
  int dev = 0, value = 0;
  DT_CUDA_OK(cudaGetDevice(&dev), op);
  DT_CUDA_OK(cudaDeviceGetAttribute(&value, attr, dev), op);
  return value;
}

// Whether the tma kernel was built for this device (sm_90 code, not an older PTX run by the JIT).
// Asked once per device.
bool tma_available(const char* op) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> known[kMaxDevices];  // 0 unknown, 1 no, 2 yes
  int dev = 0;
  DT_CUDA_OK(cudaGetDevice(&dev), op);
  if (dev >= 0 && dev < kMaxDevices && known[dev].load() != 0) return known[dev].load() == 2;
  bool ok = device_attribute(cudaDevAttrComputeCapabilityMajor, op) >= 9;
  if (ok) {
    cudaFuncAttributes fa{};
    DT_CUDA_OK(cudaFuncGetAttributes(&fa, cross_entropy_tma_kernel<kForward>), op);
    ok = fa.ptxVersion >= 90;
  }
  if (dev >= 0 && dev < kMaxDevices) known[dev].store(ok ? 2 : 1);
  return ok;
}

// The tma kernel's ring: two stages of the longest row's blocks (a 128-byte multiple).
int tma_stage_vecs(int64_t vocab) { return static_cast<int>((vocab / 8 + 7) / 8 * 8); }
size_t tma_smem_bytes(int64_t vocab) { return 2 * static_cast<size_t>(tma_stage_vecs(vocab)) * sizeof(uint4); }

CrossEntropyVariant plan(const CrossEntropyParams& p, int mode, CrossEntropyVariant variant, const char* op) {
  // The register variants hold rows up to kMaxRowVocab and write dlogits offset like the logits (the fused
  // op writes in place); anything else, and every backward, runs the stream kernel.
  const bool offset_like_logits =
      mode != kFused || (reinterpret_cast<uintptr_t>(p.dlogits) - reinterpret_cast<uintptr_t>(p.logits)) % 16 == 0;
  if (mode == kBackward || p.vocab > kMaxRowVocab || !offset_like_logits) variant = CrossEntropyVariant::kStream;
  if (variant == CrossEntropyVariant::kTma &&
      (!tma_available(op) ||
       tma_smem_bytes(p.vocab) + 1024 >
           static_cast<size_t>(device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, op))))
    variant = CrossEntropyVariant::kRegs;  // the same per-row code: the same bits
  return variant;
}

template <int kMode>
void launch(const CrossEntropyParams& p, CrossEntropyVariant preferred, void* stream_ptr, const char* op) {
  DT_CHECK(p.logits && p.targets && p.lse && p.bad_row, "{}: null tensor pointer", op);
  DT_CHECK(kMode == kBackward || p.losses, "{}: null losses", op);
  DT_CHECK(kMode == kForward || p.dlogits, "{}: null dlogits", op);
  DT_CHECK(p.n >= 0 && p.n < kNoBadRow && p.vocab > 0, "{}: {} rows of vocab {} out of range", op, p.n, p.vocab);
  if (p.n == 0) return;
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  const CrossEntropyVariant variant = plan(p, kMode, preferred, op);
  const int stage_vecs = tma_stage_vecs(p.vocab);
  const size_t tma_smem = tma_smem_bytes(p.vocab);

  if (variant == CrossEntropyVariant::kStream) {
    unsigned grid = static_cast<unsigned>(p.n);
    if (kMode == kFused) {  // persistent, so that few rows wait in L2 between the two passes
      const int64_t ctas = int64_t{kStreamFusedCtasPerSm} * device_attribute(cudaDevAttrMultiProcessorCount, op);
      grid = static_cast<unsigned>(p.n < ctas ? p.n : ctas);
    }
    cross_entropy_stream_kernel<kMode><<<grid, kStreamThreads, 0, stream>>>(p);
  } else if (variant == CrossEntropyVariant::kRegs) {
    if constexpr (kMode != kBackward)
      cross_entropy_regs_kernel<kMode><<<static_cast<unsigned>(p.n), kRowThreads, 0, stream>>>(p);
  } else {
    if constexpr (kMode != kBackward) {
      if (tma_smem > 48 * 1024)
        DT_CUDA_OK(cudaFuncSetAttribute(cross_entropy_tma_kernel<kMode>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(tma_smem)),
                   op);
      const int64_t sms = device_attribute(cudaDevAttrMultiProcessorCount, op);
      const auto grid = static_cast<unsigned>(p.n < sms ? p.n : sms);
      cross_entropy_tma_kernel<kMode><<<grid, kRowThreads, tma_smem, stream>>>(p, stage_vecs);
    }
  }
  DT_CUDA_OK(cudaGetLastError(), op);
}

}  // namespace

const char* cross_entropy_variant_name(CrossEntropyVariant v) {
  switch (v) {
    case CrossEntropyVariant::kStream:
      return "stream";
    case CrossEntropyVariant::kRegs:
      return "regs";
    case CrossEntropyVariant::kTma:
      return "tma";
  }
  return "?";
}

static_assert(static_cast<int>(CrossEntropyPass::kForward) == kForward &&
              static_cast<int>(CrossEntropyPass::kBackward) == kBackward &&
              static_cast<int>(CrossEntropyPass::kFused) == kFused);

CrossEntropyVariant cross_entropy_plan(const CrossEntropyParams& p, CrossEntropyPass pass,
                                       CrossEntropyVariant preferred) {
  return plan(p, static_cast<int>(pass), preferred, "cross_entropy_plan");
}

void cross_entropy_forward_launch(const CrossEntropyParams& p, CrossEntropyVariant preferred, void* stream) {
  launch<kForward>(p, preferred, stream, "cross_entropy_forward");
}
void cross_entropy_backward_launch(const CrossEntropyParams& p, void* stream) {
  launch<kBackward>(p, CrossEntropyVariant::kStream, stream, "cross_entropy_backward");
}
void cross_entropy_fused_launch(const CrossEntropyParams& p, CrossEntropyVariant preferred, void* stream) {
  launch<kFused>(p, preferred, stream, "cross_entropy_fused");
}

}  // namespace dt::cuda
