// The fused GPU decode kernels of infer/cuda/decode_cuda.h for a few sequences (N <= kGemvMaxRows):
// the GEMV that replaces cuBLAS's GEMMs at one token a sequence (several weights sharing an input
// in one launch, SwiGLU taken on the input, a residual added to the output) and the whole GDN
// token after the conv (gates, q/k l2norm, the delta rule on the state, the gated norm) in one
// kernel. At one token the step is a chain of small kernels whose count, not their bytes, sets its
// time (docs/inference.md, "Decode speed"). CPU references: infer/cpu/decode_ref.h
// (decode_gemv_ref, gdn_decode_step_ref). bf16 as raw bits, fp32 math.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "infer/cuda/argmax.cuh"
#include "infer/cuda/decode_cuda.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gdn_pointwise.cuh"  // the GDN gates' sigmoid and softplus, as the unfused kernels take them
#include "kernels/cuda/tma.cuh"             // the weights' prefetch into L2

namespace dt::cuda {

namespace {

// ---- GEMV: one warp per output row for all N sequences; the input rows in shared memory (bf16),
// each lane reads 8 weights (16 bytes) at a time. At one token a step the GEMVs are bound by
// latency, not bandwidth, so a warp issues its row's first kGemvPrefetch loads a lane before
// anything else, and the kernel is launched as a programmatic dependent of the kernel before it
// (gemv(); every decode kernel lets its dependent start once all its CTAs are past their own wait):
// its CTAs start, and their weights are on the way, while that kernel runs; they wait for it
// (grid_dependency_wait) before reading the input or writing. ----

constexpr int kGemvWarps = 8;
constexpr int kGemvThreads = kGemvWarps * 32;
// 16-byte loads a lane before the staging: rows of up to 1024 inputs, at 4 CTAs an SM.
constexpr int kGemvPrefetch = 4;
constexpr int kGemvSettledConv = 4;  // conv sizes whose tail and weights a settled segment reads before the wait

// The first row's operands of a settled segment (GemvSegment::settled) that its output needs besides
// the sum, taken before the grid wait into shared memory (registers hold the weights' loads then):
// for sequence n, by lane n, the residual, or the conv's terms of the tail summed (oldest first, as
// the late path sums them) and the tail itself; the conv's weight of the new input. Read after the
// staging's barrier by the same lane.
struct GemvSettled {
  float add[kGemvWarps][kGemvMaxRows];  // the residual, or the conv's sum over the tail
  float cw_last[kGemvWarps];
  uint16_t tail[kGemvWarps][kGemvMaxRows][kGemvSettledConv - 1];

  // Whether segment g's first row takes its operands from here.
  static __device__ __forceinline__ bool applies(const GemvSegment& g) {
    return g.settled && (g.residual || (g.conv_w && g.conv_k <= kGemvSettledConv));
  }
  __device__ __forceinline__ void load(const GemvSegment& g, int64_t row, int64_t rows, int warp, int n, int N) {
    if (n >= N) return;
    if (!g.conv_w) {
      add[warp][n] = bf16_bits_to_f32(g.residual[n * rows + row]);
      return;
    }
    const int64_t K = g.conv_k;
    const float* cw = g.conv_w + row * K;
    float u = 0.f;
    for (int64_t j = 0; j + 1 < K; ++j) {
      const uint16_t t = g.conv_tail[(n * (K - 1) + j) * rows + row];
      tail[warp][n][j] = t;
      u += cw[j] * bf16_bits_to_f32(t);
    }
    add[warp][n] = u;
    if (n == 0) cw_last[warp] = cw[K - 1];
  }
  // Sequence n's output of the row from its sum, as the late path writes it: plus the residual, or
  // through the conv, the tail shifted by one.
  __device__ __forceinline__ void write(const GemvSegment& g, float sum, int64_t row, int64_t rows, int warp,
                                       int n) const {
    const int64_t o = n * rows + row;
    if (!g.conv_w) {
      static_cast<uint16_t*>(g.y)[o] = f32_to_bf16_bits(sum + add[warp][n]);
      return;
    }
    const uint16_t cur = f32_to_bf16_bits(sum);
    float u = add[warp][n];
    u += cw_last[warp] * bf16_bits_to_f32(cur);
    static_cast<uint16_t*>(g.y)[o] = f32_to_bf16_bits(u / (1.f + __expf(-u)));
    const int64_t K = g.conv_k;
    if (K == 1) return;
    uint16_t* tl = g.conv_tail + n * (K - 1) * rows + row;
    for (int64_t j = 0; j + 2 < K; ++j) tl[j * rows] = tail[warp][n][j + 1];
    tl[(K - 2) * rows] = cur;
  }
};

// Row r of the segments' weights stacked (null past the last row).
__device__ __forceinline__ const uint4* gemv_row(const GemvParams& p, int64_t r) {
  int s = 0;
  while (s < p.n_seg && r >= p.seg[s].row_end) ++s;
  if (s >= p.n_seg) return nullptr;
  const int64_t row = r - (s > 0 ? p.seg[s - 1].row_end : 0);
  return reinterpret_cast<const uint4*>(p.seg[s].w + row * p.C);
}

// acc[n] += w . x'[n] over one chunk of 8 inputs (c) for the first N of kN input rows, x' in shared
// memory.
template <int kN>
__device__ __forceinline__ void gemv_fma(float* acc, const uint4& wv, const uint4* xs, int64_t C, int N, int64_t c) {
  const uint16_t* wh = reinterpret_cast<const uint16_t*>(&wv);
  float wf[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) wf[k] = bf16_bits_to_f32(wh[k]);
#pragma unroll
  for (int n = 0; n < kN; ++n) {
    if (n >= N) break;
    const uint4 xv = xs[(n * C) / 8 + c];
    const uint16_t* xh = reinterpret_cast<const uint16_t*>(&xv);
#pragma unroll
    for (int k = 0; k < 8; ++k) acc[n] += wf[k] * bf16_bits_to_f32(xh[k]);
  }
}

// The GEMV's argmax (GemvParams::argmax_out), after its rows: lane 0 of each warp holds the warp's
// first largest (bv, bi) of each sequence. The CTA merges its warps and publishes its pairs, and the
// last CTA to arrive (atomicInc wraps the count back to zero) merges every CTA's pairs and writes the
// ids (and with argmax_embed their embedding rows); it also advances the counter, so the GEMV can
// be a step's last kernel.
template <int kN>
__device__ __forceinline__ void gemv_argmax_finish(const GemvParams& p, const float* bv, const int* bi, int N) {
  __shared__ float sv[kGemvWarps][kN];
  __shared__ int si[kGemvWarps][kN];
  __shared__ bool last;
  __shared__ int chosen[kN];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0)
#pragma unroll
    for (int n = 0; n < kN; ++n) sv[warp][n] = bv[n], si[warp][n] = bi[n];
  __syncthreads();
  int2* pairs = reinterpret_cast<int2*>(p.argmax_ws + 2);  // [gridDim.x, N]; [0] is the count
  if (threadIdx.x < N) {
    float v = 0.f;
    int i = -1;
    for (int w = 0; w < kGemvWarps; ++w) argmax_merge(v, i, sv[w][threadIdx.x], si[w][threadIdx.x]);
    pairs[blockIdx.x * N + threadIdx.x] = make_int2(__float_as_int(v), i);
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0)
    last = atomicInc(reinterpret_cast<unsigned*>(p.argmax_ws), gridDim.x - 1) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int n = 0; n < N; ++n) {
    float v = 0.f;
    int i = -1;
    for (unsigned b = threadIdx.x; b < gridDim.x; b += kGemvThreads) {
      const int2 e = __ldcg(pairs + b * N + n);
      argmax_merge(v, i, __int_as_float(e.x), e.y);
    }
    warp_argmax(v, i);
    if (lane == 0) sv[warp][0] = v, si[warp][0] = i;
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < kGemvWarps; ++w) argmax_merge(v, i, sv[w][0], si[w][0]);
      p.argmax_out[n] = chosen[n] = i < 0 ? 0 : i;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0 && p.argmax_counter) *p.argmax_counter += 1;
  if (!p.argmax_embed) return;
  // Every CTA has read the input (the residual stream the rows come into) before it arrived.
  const int64_t per_row = p.C / 8;
  for (int64_t e = threadIdx.x; e < N * per_row; e += kGemvThreads) {
    const int64_t n = e / per_row, c = e % per_row;
    reinterpret_cast<uint4*>(p.argmax_embed_out)[e] =
        __ldg(reinterpret_cast<const uint4*>(p.argmax_embed + chosen[n] * p.C) + c);
  }
}

// Shared memory: the input [N, C] bf16 (x', for the norm the raw x until the norm pass), then for the norm
// its weight [C] fp32. kN >= N rows of registers for the sums.
template <int kN, bool kArgmax>
__global__ void __launch_bounds__(kGemvThreads, 4)
    gemv_kernel(const __grid_constant__ GemvParams p) {
  extern __shared__ uint4 smem_x[];
  auto* xs = reinterpret_cast<uint16_t*>(smem_x);
  const int N = static_cast<int>(p.N);
  const int64_t NC = p.N * p.C;
  float* nws = reinterpret_cast<float*>(xs + (NC + 7) / 8 * 8);
  __shared__ float red[kGemvWarps][kN];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const bool norm = p.in == GemvInput::kRmsNorm;

  // The warps take rows blockIdx.x * kGemvWarps + warp, then gridDim.x * kGemvWarps further on, ...
  // (gemv() launches at most as many CTAs as run at once, so the input is staged once a CTA). The
  // first row's first loads go out before the staging.
  const int64_t chunks = p.C / 8, stride = static_cast<int64_t>(gridDim.x) * kGemvWarps;
  int64_t r = static_cast<int64_t>(blockIdx.x) * kGemvWarps + warp;
  uint4 wpre[kGemvPrefetch];
  __shared__ GemvSettled settled;
  bool settled_on = false;  // this warp's first row takes its operands from `settled`
  {
    const uint4* w0 = gemv_row(p, r);
#pragma unroll
    for (int k = 0; k < kGemvPrefetch; ++k) {
      const int64_t c = lane + 32 * k;
      if (w0 && c < chunks) wpre[k] = __ldg(w0 + c);
    }
    if (w0) {
      int s = 0;
      while (r >= p.seg[s].row_end) ++s;
      const int64_t begin = s > 0 ? p.seg[s - 1].row_end : 0;
      settled_on = GemvSettled::applies(p.seg[s]);
      if (settled_on) settled.load(p.seg[s], r - begin, p.seg[s].row_end - begin, warp, lane, N);
    }
  }
  // The weights of a GEMV further on in the step go to L2 while this one and the next run: this
  // CTA asks for its share of each region.
  if (threadIdx.x == 0) {
    for (int i = 0; i < p.n_l2; ++i) {
      const int64_t share = (p.l2_bytes[i] / 16 + gridDim.x - 1) / gridDim.x * 16, off = blockIdx.x * share;
      const int64_t bytes = min(share, p.l2_bytes[i] - off);
      if (bytes > 0) bulk_prefetch_l2(static_cast<const char*>(p.l2[i]) + off, static_cast<uint32_t>(bytes));
    }
  }
  // The weights never change; x, x2 and the outputs are the previous kernels' business until they
  // end. Once every CTA is past the wait, the next kernel's CTAs may start beside these.
  grid_dependency_wait();
  grid_launch_dependents();

  // The input in one pass, 8 features (16 bytes) a thread at a time: x' straight from x (and x2),
  // or for the norm the raw x, its weight and each thread's share of sum x^2 per row.
  float ss[kN];
#pragma unroll
  for (int n = 0; n < kN; ++n) ss[n] = 0.f;
  for (int64_t i8 = threadIdx.x; i8 < NC / 8; i8 += kGemvThreads) {
    const int64_t n = i8 * 8 / p.C, c = i8 * 8 % p.C;
    const uint4 xv = *reinterpret_cast<const uint4*>(p.x + n * p.ldx + c);
    const uint16_t* xh = reinterpret_cast<const uint16_t*>(&xv);
    uint4 out = xv;
    auto* oh = reinterpret_cast<uint16_t*>(&out);
    if (p.in == GemvInput::kRmsNorm) {
      float q = 0.f;
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const float f = bf16_bits_to_f32(xh[k]);
        q += f * f;
      }
#pragma unroll
      for (int m = 0; m < kN; ++m)
        if (m == n) ss[m] += q;
      if (n == 0)
#pragma unroll
        for (int k = 0; k < 8; ++k) nws[c + k] = p.norm_w[c + k];
    } else if (p.in != GemvInput::kPlain) {
      const uint4 x2v = *reinterpret_cast<const uint4*>(p.x2 + n * p.ldx + c);
      const uint16_t* x2h = reinterpret_cast<const uint16_t*>(&x2v);
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const float a = bf16_bits_to_f32(xh[k]), b = bf16_bits_to_f32(x2h[k]);
        // SwiGLU: bf16(silu(gate) up), as swiglu_forward rounds it; the gate: bf16(x sigmoid(g)),
        // as sigmoid_gate_forward
        oh[k] = f32_to_bf16_bits(p.in == GemvInput::kSwiGLU ? a * sigmoid_f32(a) * b : a * sigmoid_f32(b));
      }
    }
    smem_x[i8] = out;
  }
  if (norm) {
#pragma unroll
    for (int n = 0; n < kN; ++n) {
      const float v = warp_sum(ss[n]);
      if (lane == 0) red[warp][n] = v;
    }
  }
  __syncthreads();
  // The norm: 1 / rms of each input row (the warps' partial sums in a fixed order), then x' =
  // bf16(x rs w') in place, once a CTA (not once a warp in its sums), while the weights' first loads
  // are still on their way.
  if (norm) {
    float rs[kN];
#pragma unroll
    for (int n = 0; n < kN; ++n) {
      float t = 0.f;
      for (int w2 = 0; w2 < kGemvWarps; ++w2) t += red[w2][n];
      rs[n] = 1.f / sqrtf(t / static_cast<float>(p.C) + p.eps);
    }
    const float one = p.zero_centered ? 1.f : 0.f;
    for (int64_t i8 = threadIdx.x; i8 < NC / 8; i8 += kGemvThreads) {
      const int64_t n = i8 * 8 / p.C, c = i8 * 8 % p.C;
      float rsn = 0.f;
#pragma unroll
      for (int m = 0; m < kN; ++m)
        if (m == n) rsn = rs[m];
      uint4 v = smem_x[i8];
      auto* h = reinterpret_cast<uint16_t*>(&v);
#pragma unroll
      for (int k = 0; k < 8; ++k) h[k] = f32_to_bf16_bits(bf16_bits_to_f32(h[k]) * rsn * (one + nws[c + k]));
      smem_x[i8] = v;
    }
    __syncthreads();
  }
  // kArgmax (p.argmax_out set): lane 0's first largest (value, row) of each sequence over the warp's
  // rows (taken in increasing order, so a tie keeps the first).
  float bv[kArgmax ? kN : 1];
  int bi[kArgmax ? kN : 1];
#pragma unroll
  for (int n = 0; n < (kArgmax ? kN : 1); ++n) bv[n] = 0.f, bi[n] = -1;

  for (bool first = true;; first = false, r += stride) {
    const uint4* w = gemv_row(p, r);
    if (!w) break;
    if (!first) {
#pragma unroll
      for (int k = 0; k < kGemvPrefetch; ++k) {
        const int64_t c = lane + 32 * k;
        if (c < chunks) wpre[k] = __ldg(w + c);
      }
    }
    float acc[kN];
#pragma unroll
    for (int n = 0; n < kN; ++n) acc[n] = 0.f;
#pragma unroll
    for (int k = 0; k < kGemvPrefetch; ++k) {
      const int64_t c = lane + 32 * k;
      if (c < chunks) gemv_fma<kN>(acc, wpre[k], smem_x, p.C, N, c);
    }
#pragma unroll 4
    for (int64_t c = lane + 32 * kGemvPrefetch; c < chunks; c += 32)
      gemv_fma<kN>(acc, __ldg(w + c), smem_x, p.C, N, c);
    int s = 0;
    while (r >= p.seg[s].row_end) ++s;
    const GemvSegment& g = p.seg[s];
    const int64_t row_begin = s > 0 ? p.seg[s - 1].row_end : 0, row = r - row_begin, rows = g.row_end - row_begin;
    // Lane 0 writes every sequence's output; for the first row of a settled segment lane n writes
    // sequence n's instead, from the operands loaded before the wait (every lane holds each sum).
    const bool pre = first && settled_on;
    float mine = 0.f;  // pre: this lane's sequence's sum
#pragma unroll
    for (int n = 0; n < kN; ++n) {
      if (n >= N) break;
      const float v = warp_sum(acc[n]);
      if (pre) {
        if (lane == n) mine = v;
      } else if (lane == 0) {
        const int64_t o = n * rows + row;
        if (g.y_f32) {
          static_cast<float*>(g.y)[o] = v;
          if constexpr (kArgmax)
            if (row < p.argmax_vocab && !isnan(v) && (bi[n] < 0 || v > bv[n])) bv[n] = v, bi[n] = static_cast<int>(row);
        } else if (g.conv_w) {  // conv_step_kernel's arithmetic on this row's channel: oldest input first
          const uint16_t pre_act = f32_to_bf16_bits(v);
          const float* cw = g.conv_w + row * g.conv_k;
          uint16_t* tl = g.conv_tail ? g.conv_tail + n * (g.conv_k - 1) * rows + row : nullptr;
          float u = 0.f;
          for (int64_t j = 0; j + 1 < g.conv_k; ++j) u += cw[j] * bf16_bits_to_f32(tl[j * rows]);
          u += cw[g.conv_k - 1] * bf16_bits_to_f32(pre_act);
          static_cast<uint16_t*>(g.y)[o] = f32_to_bf16_bits(u / (1.f + __expf(-u)));
          if (tl) {
            for (int64_t j = 0; j + 2 < g.conv_k; ++j) tl[j * rows] = tl[(j + 1) * rows];
            tl[(g.conv_k - 2) * rows] = pre_act;
          }
        } else {
          const float res = g.residual ? bf16_bits_to_f32(g.residual[o]) : 0.f;
          static_cast<uint16_t*>(g.y)[o] = f32_to_bf16_bits(v + res);
        }
      }
    }
    if (pre && lane < N) settled.write(g, mine, row, rows, warp, lane);
  }
  if constexpr (kArgmax) gemv_argmax_finish<kN>(p, bv, bi, N);
}

// ---- GDN token: one CTA per (value head, sequence); gdn_step_kernel's thread j owns column j of
// the head's state, gdn_step_split_kernel splits each column over a few threads ----

constexpr int kGdnMaxDim = 128;

// The scalars a GDN token's thread needs besides q, k, v and the state, loaded at the kernel's
// start so that none waits on another: the head's constants (load_constants, before the grid
// wait) and this token's gate inputs, v and z (load_inputs, after it). Column j's v is loaded by
// the threads of a column j < dv, its z and norm weight by the thread that writes it.
struct GdnTokenInputs {
  float A_log = 0.f, dt_bias = 0.f, norm_w = 0.f;  // weights
  float a = 0.f, b = 0.f;                         // the a and b projections of this head and sequence
  uint16_t v = 0, z = 0;                          // v and z of column j, bf16 bits

  __device__ __forceinline__ void load_constants(const GdnStepParams& p, bool col, int64_t j) {
    const int64_t h = blockIdx.x;
    A_log = p.A_log[h], dt_bias = p.dt_bias[h];
    if (col) norm_w = p.norm_w[j];
  }
  __device__ __forceinline__ void load_inputs(const GdnStepParams& p, bool col, bool out, int64_t j) {
    const int64_t h = blockIdx.x, n = blockIdx.y, gi = n * p.Hv + h;
    a = p.a[gi], b = p.b[gi];
    if (col) v = p.qkv[n * p.ld_qkv + 2 * p.Hk * p.dk + h * p.dv + j];
    if (out) z = p.z[n * p.ld_z + h * p.dv + j];
  }
};

// The sum over the CTA of its threads' partials, thread t's being v(i) summed over i = t, t + blockDim,
// ... below n in order: block_sum's result bit for bit (each warp's butterfly, then the warps in
// order; the warps without an i add zeros), taken by every warp from shared memory without a barrier.
template <class V>
__device__ __forceinline__ float cta_sum_each_warp(int64_t n, V v) {
  const int lane = threadIdx.x % 32;
  const int64_t threads = blockDim.x, used = (n < threads ? n : threads);
  float total = 0.f;
  for (int64_t w = 0; 32 * w < used; ++w) {
    float part = 0.f;
    for (int64_t i = 32 * w + lane; i < n; i += threads) part += v(i);
    total += warp_sum(part);
  }
  return total;
}

// The GDN token's start, for CTA (value head blockIdx.x, sequence blockIdx.y): q and k of its key
// head into sq, sk, the scales rq, rk that normalise them (q^ = bf16(sq rq) = bf16(q_scale q / |q|),
// k^ = bf16(sk rk), rounded as gdn_l2norm_forward writes them: gdn_token_hat), and its gates. One
// barrier: every warp sums |q|^2 and |k|^2 itself.
__device__ __forceinline__ void gdn_token_begin(const GdnStepParams& p, const GdnTokenInputs& in, float* sq, float* sk,
                                                float* rq, float* rk, float* decay, float* beta) {
  const int64_t h = blockIdx.x, n = blockIdx.y, kh = h / (p.Hv / p.Hk);
  const uint16_t* row = p.qkv + n * p.ld_qkv;
  for (int64_t i = threadIdx.x; i < p.dk; i += blockDim.x)
    sq[i] = bf16_bits_to_f32(row[kh * p.dk + i]), sk[i] = bf16_bits_to_f32(row[p.Hk * p.dk + kh * p.dk + i]);
  __syncthreads();
  *rq = rsqrtf(cta_sum_each_warp(p.dk, [&](int64_t i) { return sq[i] * sq[i]; }) + 1e-6f) * p.q_scale;
  *rk = rsqrtf(cta_sum_each_warp(p.dk, [&](int64_t i) { return sk[i] * sk[i]; }) + 1e-6f);
  *decay = expf(-expf(in.A_log) * softplus_f32(in.a + in.dt_bias));
  *beta = sigmoid_stable_f32(in.b);
}

// q^ or k^ from the raw value and its scale.
__device__ __forceinline__ float gdn_token_hat(float x, float r) { return bf16_bits_to_f32(f32_to_bf16_bits(x * r)); }

// The token's end: the gated RMSNorm over the head's dv outputs, y = o rsqrt(mean o^2 + eps) w silu(z),
// written by the threads with `out` (one a column j); every thread of the CTA takes part.
__device__ __forceinline__ void gdn_token_end(const GdnStepParams& p, const GdnTokenInputs& in, float o, bool out,
                                              int64_t j, float* red) {
  const int64_t h = blockIdx.x, n = blockIdx.y;
  const float ms = block_sum(out ? o * o : 0.f, red) / static_cast<float>(p.dv);
  if (out) {
    const float rs = rsqrtf(ms + p.eps);
    const float z = bf16_bits_to_f32(in.z);
    p.y[n * p.ld_y + h * p.dv + j] = f32_to_bf16_bits(o * rs * in.norm_w * (z * sigmoid_stable_f32(z)));
  }
}

__global__ void __launch_bounds__(kGdnMaxDim) gdn_step_kernel(const __grid_constant__ GdnStepParams p) {
  __shared__ float sq[kGdnMaxDim], sk[kGdnMaxDim], red[kGdnMaxDim / 32];
  const int64_t h = blockIdx.x, n = blockIdx.y, j = threadIdx.x, gi = n * p.Hv + h;
  GdnTokenInputs in;
  in.load_constants(p, j < p.dv, j);
  grid_dependency_wait();
  grid_launch_dependents();
  in.load_inputs(p, j < p.dv, j < p.dv, j);
  float rq, rk, decay, beta;
  gdn_token_begin(p, in, sq, sk, &rq, &rk, &decay, &beta);
  // the delta rule on column j: S~ = decay S, u = S~^T k, d = beta (v - u), S = S~ + k d^T, o = S^T q
  float o = 0.f;
  if (j < p.dv) {
    float* S = p.state + gi * p.dk * p.dv + j;
    float u = 0.f;
    for (int64_t i = 0; i < p.dk; ++i) u += decay * S[i * p.dv] * gdn_token_hat(sk[i], rk);
    const float d = beta * (bf16_bits_to_f32(in.v) - u);
    for (int64_t i = 0; i < p.dk; ++i) {
      const float s = decay * S[i * p.dv] + gdn_token_hat(sk[i], rk) * d;
      S[i * p.dv] = s;
      o += s * gdn_token_hat(sq[i], rq);
    }
    o = bf16_bits_to_f32(f32_to_bf16_bits(o));  // the recurrent kernel's bf16 output
  }
  gdn_token_end(p, in, o, j < p.dv, j, red);
}

// The same token with the state's column split over R = dk / kPer threads, each holding kPer rows
// of it in registers: R times the loads in flight of gdn_step_kernel, and the state read once.
// Thread t takes column t / R and rows (t % R) kPer ..; u and o are summed over the R threads of a
// column by shuffles (R a power of two up to 32, so a column's threads are lanes of one warp).
template <int kPer>
__global__ void __launch_bounds__(1024) gdn_step_split_kernel(const __grid_constant__ GdnStepParams p) {
  __shared__ float sq[kGdnMaxDim], sk[kGdnMaxDim], red[32];
  const int64_t h = blockIdx.x, n = blockIdx.y, gi = n * p.Hv + h;
  const int R = static_cast<int>(p.dk / kPer), tid = threadIdx.x, j = tid / R, r = tid % R;
  const bool col = j < p.dv;
  float* S = p.state + gi * p.dk * p.dv + static_cast<int64_t>(r) * kPer * p.dv + j;
  GdnTokenInputs in;
  in.load_constants(p, col && r == 0, j);
  // The state is read before the wait: the kernel before (the step's input GEMV) never writes it,
  // and whatever wrote it before that is complete (that kernel waited on it). Then every other load
  // of the token goes out at once: the gate inputs, v, z, then q and k in gdn_token_begin.
  float st[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) st[i] = col ? S[i * p.dv] : 0.f;
  grid_dependency_wait();
  grid_launch_dependents();
  in.load_inputs(p, col, col && r == 0, j);
  float rq, rk, decay, beta;
  gdn_token_begin(p, in, sq, sk, &rq, &rk, &decay, &beta);
  const float* kr = sk + r * kPer;
  const float* qr = sq + r * kPer;
  float u = 0.f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) u += decay * st[i] * gdn_token_hat(kr[i], rk);
  for (int off = R / 2; off > 0; off >>= 1) u += __shfl_xor_sync(0xffffffffu, u, off);
  const float d = beta * ((col ? bf16_bits_to_f32(in.v) : 0.f) - u);
  float o = 0.f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const float sv = decay * st[i] + gdn_token_hat(kr[i], rk) * d;
    if (col) S[i * p.dv] = sv;
    o += sv * gdn_token_hat(qr[i], rq);
  }
  for (int off = R / 2; off > 0; off >>= 1) o += __shfl_xor_sync(0xffffffffu, o, off);
  o = bf16_bits_to_f32(f32_to_bf16_bits(o));  // the recurrent kernel's bf16 output
  gdn_token_end(p, in, o, col && r == 0, j, red);
}

}  // namespace

void gemv(const GemvParams& p, void* stream) {
  const char* op = "decode_gemv (GPU)";
  DT_CHECK(p.x && p.N >= 1 && p.N <= kGemvMaxRows && p.C >= 8 && p.C % 8 == 0 && p.ldx >= p.C && p.ldx % 8 == 0,
           "{}: bad input: N {} (1 to {}), C {} (a multiple of 8), ldx {} (a multiple of 8)", op, p.N, kGemvMaxRows,
           p.C, p.ldx);
  DT_CHECK(reinterpret_cast<uintptr_t>(p.x) % 16 == 0 && reinterpret_cast<uintptr_t>(p.x2) % 16 == 0,
           "{}: the input is not 16-byte aligned", op);
  DT_CHECK(p.n_seg >= 1 && p.n_seg <= kGemvMaxSegments, "{}: {} weights (1 to {})", op, p.n_seg, kGemvMaxSegments);
  DT_CHECK((p.in != GemvInput::kSwiGLU && p.in != GemvInput::kGate) || p.x2, "{}: the input's second operand is null", op);
  DT_CHECK(p.in != GemvInput::kRmsNorm || p.norm_w, "{}: the input norm's weight is null", op);
  int64_t prev = 0;
  for (int s = 0; s < p.n_seg; ++s) {
    const GemvSegment& g = p.seg[s];
    DT_CHECK(g.w && g.y && g.row_end > prev, "{}: weight {}: null pointer or no rows", op, s);
    DT_CHECK(reinterpret_cast<uintptr_t>(g.w) % 16 == 0, "{}: weight {} is not 16-byte aligned", op, s);
    DT_CHECK(!(g.y_f32 && g.residual), "{}: weight {}: a residual needs a bf16 output", op, s);
    DT_CHECK(!g.conv_w || (!g.y_f32 && !g.residual && g.conv_k >= 1 && (g.conv_k == 1 || g.conv_tail)),
             "{}: weight {}: the conv needs a bf16 output without residual, conv_k >= 1 and a tail", op, s);
    prev = g.row_end;
  }
  DT_CHECK(p.n_l2 >= 0 && p.n_l2 <= kGemvMaxSegments, "{}: {} regions to prefetch (0 to {})", op, p.n_l2,
           kGemvMaxSegments);
  for (int i = 0; i < p.n_l2; ++i)
    DT_CHECK(p.l2[i] && reinterpret_cast<uintptr_t>(p.l2[i]) % 16 == 0 && p.l2_bytes[i] > 0 && p.l2_bytes[i] % 16 == 0,
             "{}: region {} to prefetch is not whole 16-byte blocks", op, i);
  const size_t smem = gemv_smem_bytes(p.N, p.C, p.in);
  DT_CHECK(smem <= kGemvMaxInputBytes, "{}: the input ({} bytes) exceeds {} bytes of shared memory", op, smem,
           kGemvMaxInputBytes);
  // At most the CTAs that run at once (4 an SM: the kernel's launch bounds), each staging the input
  // once and taking every grid-th group of rows.
  static thread_local int sms = [] {
    int dev = 0, n = 0;
    DT_CUDA_OK(cudaGetDevice(&dev), "decode_gemv (GPU)");
    DT_CUDA_OK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev), "decode_gemv (GPU)");
    return n;
  }();
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((prev + kGemvWarps - 1) / kGemvWarps, 4 * sms));
  if (p.argmax_out)
    DT_CHECK(p.n_seg == 1 && p.seg[0].y_f32 && p.argmax_ws && reinterpret_cast<uintptr_t>(p.argmax_ws) % 8 == 0 &&
                 p.argmax_vocab >= 1 && p.argmax_vocab <= prev &&
                 prev < (int64_t{1} << 31) && blocks <= kGemvArgmaxMaxBlocks,
             "{}: the argmax takes one fp32 output of fewer than 2^31 rows (vocab {} of {}), an 8-byte aligned workspace "
             "and at most {} CTAs ({})",
             op, p.argmax_vocab, prev, kGemvArgmaxMaxBlocks, blocks);
  if (p.argmax_embed)
    DT_CHECK(p.argmax_out && p.argmax_embed_out && reinterpret_cast<uintptr_t>(p.argmax_embed) % 16 == 0 &&
                 reinterpret_cast<uintptr_t>(p.argmax_embed_out) % 16 == 0,
             "{}: the embedding of the chosen ids needs the argmax and 16-byte aligned rows", op);
  // Register rows for the sums: the fewest of 1, 2, 4, 8 that hold N.
  const bool am = p.argmax_out != nullptr;
  using Kernel = void (*)(GemvParams);
  const Kernel kernel = p.N <= 1   ? (am ? gemv_kernel<1, true> : gemv_kernel<1, false>)
                        : p.N <= 2 ? (am ? gemv_kernel<2, true> : gemv_kernel<2, false>)
                        : p.N <= 4 ? (am ? gemv_kernel<4, true> : gemv_kernel<4, false>)
                                   : (am ? gemv_kernel<8, true> : gemv_kernel<8, false>);
  if (smem > 48 * 1024)
    DT_CUDA_OK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
                        op);
  DT_CUDA_OK(launch_dependent(kernel, dim3(blocks), dim3(kGemvThreads), smem, static_cast<cudaStream_t>(stream), p),
             op);
}

void gdn_step(const GdnStepParams& p, void* stream) {
  const char* op = "gdn_decode_step (GPU)";
  DT_CHECK(p.qkv && p.z && p.a && p.b && p.A_log && p.dt_bias && p.norm_w && p.state && p.y, "{}: null pointer", op);
  DT_CHECK(p.N >= 1 && p.Hk >= 1 && p.Hv % p.Hk == 0 && p.dk >= 1 && p.dk <= kGdnMaxDim && p.dv >= 1 &&
               p.dv <= kGdnMaxDim,
           "{}: bad sizes N {}, Hk {}, Hv {}, dk {}, dv {} (head dims 1 to {}, Hv a multiple of Hk)", op, p.N, p.Hk,
           p.Hv, p.dk, p.dv, kGdnMaxDim);
  const dim3 grid(static_cast<unsigned>(p.Hv), static_cast<unsigned>(p.N));
  const auto st = static_cast<cudaStream_t>(stream);
  // The split kernel where dk / kPer is a power of two (a column's threads in one warp) and the
  // block fits: kPer 16 up to dk 64, 32 above.
  const int64_t per = p.dk <= 64 ? 16 : 32, R = p.dk / per;
  if (p.dk % per == 0 && R >= 1 && R <= 32 && (R & (R - 1)) == 0 && p.dv * R <= 1024) {
    const int threads = static_cast<int>((p.dv * R + 31) / 32 * 32);
    DT_CUDA_OK(launch_dependent(per == 16 ? gdn_step_split_kernel<16> : gdn_step_split_kernel<32>, grid,
                                dim3(threads), 0, st, p),
               op);
  } else {
    const int threads = static_cast<int>(std::max<int64_t>(32, (std::max(p.dk, p.dv) + 31) / 32 * 32));
    DT_CUDA_OK(launch_dependent(gdn_step_kernel, grid, dim3(threads), 0, st, p), op);
  }
}

}  // namespace dt::cuda
