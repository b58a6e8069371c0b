// Cross-entropy over bf16 logits on the GPU (reference: kernels/cpu/cross_entropy.h):
//   lse_n  = log sum_v exp(x[n, v]),   loss_n = lse_n - x[n, t_n]
//   dx[n, v] = grad_scale (exp(x[n, v] - lse_n) - [v == t_n])
// torch: F.cross_entropy(x.float(), t, reduction="none"), and its gradient times grad_scale.
//
// One CTA per row. Each thread keeps an online (max m, sum s) pair in fp32 over its elements, read
// 8 bf16 at a time (16-byte loads; the few elements before the first 16-byte boundary of an unaligned
// row, e.g. vocab 50257, and after the last one, one at a time):
//   a new block of values with max M > m:  s <- s exp(m - M), m <- M;   then s += sum exp(x - m)
// and the pairs are combined across the CTA in a fixed order (warp butterflies, then warp 0), so the
// result is bitwise the same run to run. The fused kernel keeps the row's 16-byte blocks in shared memory
// during that one read (up to kMaxCachedVocab), then writes dlogits over the logits from there: the
// logits are read from global memory once. Rows whose target is outside [0, vocab) lower *bad_row to
// their index; the host reads it back and throws (cross_entropy_ops.cpp).
//
// Measured on an H200 at [16384, 50304] (bench_dense_ops, 2026-11-29): forward 0.53 ms (3.1 TB/s of
// logits read), backward 0.85 ms (3.9 TB/s read + written), fused 1.60 ms (2.1 TB/s): the fused kernel
// is slower than forward + backward (1.38 ms), likely because the 98 KiB row cache allows only two
// 512-thread CTAs per SM and each CTA reads, reduces, then writes in turn. Next to try: no cache
// (re-read from L2) at full occupancy, or several rows per CTA.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/error.h"
#include "kernels/cuda/dense_mm_launch.h"

namespace dt {
namespace dense_mm_cuda {

namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
// 56K bf16 = 112 KiB of shared memory per CTA: two CTAs per SM (228 KiB on Hopper). GPT-2's 50304 fits.
constexpr int64_t kMaxCachedVocab = 56 * 1024;

enum Mode { kForward, kBackward, kFused };

__device__ __forceinline__ float bf16_to_float(uint16_t h) { return __uint_as_float(static_cast<uint32_t>(h) << 16); }

// Round to nearest even, NaN kept quiet (as dt::f32_to_bf16 on the host).
__device__ __forceinline__ uint16_t float_to_bf16(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

__device__ __forceinline__ void unpack8(const uint4& u, float x[8]) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
  for (int i = 0; i < 4; ++i) {
    x[2 * i] = __uint_as_float(w[i] << 16);
    x[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

__device__ __forceinline__ uint4 pack8(const float d[8]) {
  uint32_t w[4];
  for (int i = 0; i < 4; ++i)
    w[i] = static_cast<uint32_t>(float_to_bf16(d[2 * i])) | (static_cast<uint32_t>(float_to_bf16(d[2 * i + 1])) << 16);
  return make_uint4(w[0], w[1], w[2], w[3]);
}

struct MaxSum {
  float m, s;  // running max and sum of exp(x - m)
};

__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.f};
  return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

// Adds n values whose max is vmax (NaNs pass into the sum: a NaN logit gives a NaN loss).
__device__ __forceinline__ void accumulate(MaxSum& a, const float* x, int n, float vmax) {
  if (vmax > a.m) a.s *= expf(a.m - vmax), a.m = vmax;
  if (a.m == -INFINITY) return;
  for (int i = 0; i < n; ++i) a.s += expf(x[i] - a.m);
}

// The CTA's combined pair, returned to every thread.
__device__ MaxSum block_reduce(MaxSum a) {
  __shared__ MaxSum warp_pairs[kWarps];
  __shared__ MaxSum total;
  for (int o = 16; o > 0; o >>= 1) {
    MaxSum b{__shfl_xor_sync(0xffffffffu, a.m, o), __shfl_xor_sync(0xffffffffu, a.s, o)};
    a = combine(a, b);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_pairs[warp] = a;
  __syncthreads();
  if (warp == 0) {
    a = lane < kWarps ? warp_pairs[lane] : MaxSum{-INFINITY, 0.f};
    for (int o = 16; o > 0; o >>= 1) {
      MaxSum b{__shfl_xor_sync(0xffffffffu, a.m, o), __shfl_xor_sync(0xffffffffu, a.s, o)};
      a = combine(a, b);
    }
    if (lane == 0) total = a;
  }
  __syncthreads();
  return total;
}

// A row split into [0, head) scalars, nvec 16-byte blocks, [tail, vocab) scalars.
struct RowSplit {
  int64_t head, nvec, tail;
};

__device__ __forceinline__ RowSplit split_row(const uint16_t* row, const uint16_t* out, int64_t vocab) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(row);
  // An output row that is misaligned differently from the input row: all scalar.
  if (out != nullptr && (reinterpret_cast<uintptr_t>(out) % 16) != a % 16) return {vocab, 0, vocab};
  int64_t head = static_cast<int64_t>(((16 - a % 16) % 16) / 2);
  if (head > vocab) head = vocab;
  const int64_t nvec = (vocab - head) / 8;
  return {head, nvec, head + nvec * 8};
}

template <int kMode>
__global__ void __launch_bounds__(kThreads) cross_entropy_kernel(CrossEntropyParams p, bool cache_row) {
  extern __shared__ uint4 row_cache[];
  const int64_t r = blockIdx.x;
  const int64_t V = p.vocab;
  const uint16_t* x = p.logits + r * V;
  uint16_t* dx = kMode == kForward ? nullptr : p.dlogits + r * V;
  const RowSplit sp = split_row(x, dx, V);
  const uint4* xv = reinterpret_cast<const uint4*>(x + sp.head);
  const int32_t t = p.targets[r];
  const bool t_ok = t >= 0 && t < V;

  float lse;
  if constexpr (kMode == kBackward) {
    lse = p.lse[r];
  } else {
    MaxSum acc{-INFINITY, 0.f};
    for (int64_t i = threadIdx.x; i < sp.head; i += kThreads) {
      const float v = bf16_to_float(x[i]);
      accumulate(acc, &v, 1, v);
    }
    for (int64_t j = threadIdx.x; j < sp.nvec; j += kThreads) {
      const uint4 u = xv[j];
      if (kMode == kFused && cache_row) row_cache[j] = u;
      float v[8];
      unpack8(u, v);
      float vmax = v[0];
      for (int i = 1; i < 8; ++i) vmax = fmaxf(vmax, v[i]);
      accumulate(acc, v, 8, vmax);
    }
    for (int64_t i = sp.tail + threadIdx.x; i < V; i += kThreads) {
      const float v = bf16_to_float(x[i]);
      accumulate(acc, &v, 1, v);
    }
    // The target's logit is read before the reduction: after it, the fused kernel overwrites the row.
    const float x_t = threadIdx.x == 0 && t_ok ? bf16_to_float(x[t]) : 0.f;
    // block_reduce's __syncthreads also orders every read of the row (and the cache writes) before any
    // write of dlogits.
    const MaxSum tot = block_reduce(acc);
    lse = tot.m + logf(tot.s);
    if (threadIdx.x == 0) {
      p.lse[r] = lse;
      p.losses[r] = t_ok ? lse - x_t : __int_as_float(0x7fc00000);  // NaN for a bad target
    }
  }
  if (threadIdx.x == 0 && !t_ok) atomicMin(p.bad_row, static_cast<int>(r));
  if constexpr (kMode == kForward) return;

  // dlogits, each element read (from the cache or global) and written by the same thread.
  const float scale = p.grad_scale;
  auto grad = [&](float v, int64_t i) { return scale * (expf(v - lse) - (t_ok && i == t ? 1.f : 0.f)); };
  for (int64_t i = threadIdx.x; i < sp.head; i += kThreads) dx[i] = float_to_bf16(grad(bf16_to_float(x[i]), i));
  uint4* dxv = reinterpret_cast<uint4*>(dx + sp.head);
  for (int64_t j = threadIdx.x; j < sp.nvec; j += kThreads) {
    const uint4 u = (kMode == kFused && cache_row) ? row_cache[j] : xv[j];
    float v[8], d[8];
    unpack8(u, v);
    const int64_t i0 = sp.head + 8 * j;
    for (int i = 0; i < 8; ++i) d[i] = grad(v[i], i0 + i);
    dxv[j] = pack8(d);
  }
  for (int64_t i = sp.tail + threadIdx.x; i < V; i += kThreads) dx[i] = float_to_bf16(grad(bf16_to_float(x[i]), i));
}

#define DT_CE_CUDA_CHECK(call, what)                                                                  \
  do {                                                                                                \
    cudaError_t err_ = (call);                                                                        \
    DT_CHECK(err_ == cudaSuccess, "{}: CUDA error {} ({}) at {}:{}", what, static_cast<int>(err_),   \
             cudaGetErrorString(err_), __FILE__, __LINE__);                                           \
  } while (0)

template <int kMode>
void launch(const CrossEntropyParams& p, void* stream, const char* op) {
  DT_CHECK(p.logits && p.targets && p.lse && p.bad_row, "{}: null tensor pointer", op);
  DT_CHECK(kMode == kBackward || p.losses, "{}: null losses", op);
  DT_CHECK(kMode == kForward || p.dlogits, "{}: null dlogits", op);
  DT_CHECK(p.n >= 0 && p.n < kNoBadRow && p.vocab > 0, "{}: {} rows of vocab {} out of range", op, p.n, p.vocab);
  if (p.n == 0) return;
  const bool cache_row = kMode == kFused && p.vocab <= kMaxCachedVocab;
  const size_t smem = cache_row ? static_cast<size_t>((p.vocab + 7) / 8) * sizeof(uint4) : 0;
  if (smem > 48 * 1024)
    DT_CE_CUDA_CHECK(cudaFuncSetAttribute(cross_entropy_kernel<kMode>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(smem)),
                     op);
  cross_entropy_kernel<kMode>
      <<<static_cast<unsigned>(p.n), kThreads, smem, static_cast<cudaStream_t>(stream)>>>(p, cache_row);
  DT_CE_CUDA_CHECK(cudaGetLastError(), op);
}

}  // namespace

void cross_entropy_forward_launch(const CrossEntropyParams& p, void* stream) {
  launch<kForward>(p, stream, "cross_entropy_forward");
}
void cross_entropy_backward_launch(const CrossEntropyParams& p, void* stream) {
  launch<kBackward>(p, stream, "cross_entropy_backward");
}
void cross_entropy_fused_launch(const CrossEntropyParams& p, void* stream) {
  launch<kFused>(p, stream, "cross_entropy_fused");
}

}  // namespace dense_mm_cuda
}  // namespace dt
