// The device-side toolbox of the CUDA kernels (kernels/cuda/*.cu, infer/cuda/*.cu), namespace
// dt::cuda: bf16 conversions and vectorised bf16 / fp32 loads and stores, fixed-order warp and
// block reductions, RoPE's angle, and the deterministic column sum. bf16 travels as its raw
// uint16_t bits; all math is fp32 (or double where a kernel says so). Every reduction here has an
// order that depends on the sizes only: the same inputs give the same bits. Host-side checks of
// CUDA calls: core/cuda_check.h (included here). The few PTX instructions have a host form beside
// them (the #else of #ifdef __CUDA_ARCH__), so that the host compiler takes this file too: the CPU emulation of
// the GDN kernels (tools/gdn_emu) compiles it with its own cuda_runtime.h.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "core/error.h"
#include "core/cuda_check.h"

namespace dt::cuda {

// ---- scalar conversions ----

__device__ __forceinline__ float bf16_bits_to_f32(uint16_t h) { return __uint_as_float(static_cast<uint32_t>(h) << 16); }
// Round to nearest even; NaN stays NaN (as core/dtype.h's f32_to_bf16).
__device__ __forceinline__ uint16_t f32_to_bf16_bits(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }

inline constexpr uint16_t kBf16NaN = 0x7fc0;

// ---- vectorised loads and stores of V consecutive elements ----
// The pointer must be aligned to the whole vector (2V bytes for bf16, 4V for fp32 with V <= 4,
// 16 for fp32 with V = 8); the host side of each launcher checks that before choosing V > 1.

template <int V>
struct Bf16Word;  // the raw storage type of V bf16 values: one load or store instruction
template <>
struct Bf16Word<1> { using type = uint16_t; };
template <>
struct Bf16Word<2> { using type = uint32_t; };
template <>
struct Bf16Word<4> { using type = uint2; };
template <>
struct Bf16Word<8> { using type = uint4; };

template <int V>
__device__ __forceinline__ void load_bf16(const uint16_t* p, float (&f)[V]) {
  union {
    typename Bf16Word<V>::type raw;
    uint16_t h[V];
  } u;
  u.raw = *reinterpret_cast<const typename Bf16Word<V>::type*>(p);
#pragma unroll
  for (int k = 0; k < V; ++k) f[k] = bf16_bits_to_f32(u.h[k]);
}

template <int V>
__device__ __forceinline__ void store_bf16(uint16_t* p, const float (&f)[V]) {
  union {
    typename Bf16Word<V>::type raw;
    uint16_t h[V];
  } u;
#pragma unroll
  for (int k = 0; k < V; ++k) u.h[k] = f32_to_bf16_bits(f[k]);
  *reinterpret_cast<typename Bf16Word<V>::type*>(p) = u.raw;
}

// kPair: V = 2 as one float2 (p 8-byte aligned); false: one float at a time (p 4-byte aligned).
template <int V, bool kPair = true>
__device__ __forceinline__ void load_f32(const float* p, float (&f)[V]) {
  if constexpr (V % 4 == 0) {
#pragma unroll
    for (int k = 0; k < V; k += 4) {
      const float4 q = *reinterpret_cast<const float4*>(p + k);
      f[k] = q.x, f[k + 1] = q.y, f[k + 2] = q.z, f[k + 3] = q.w;
    }
  } else if constexpr (V == 2 && kPair) {
    const float2 q = *reinterpret_cast<const float2*>(p);
    f[0] = q.x, f[1] = q.y;
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) f[k] = p[k];
  }
}

template <int V>
__device__ __forceinline__ void store_f32(float* p, const float (&f)[V]) {
  if constexpr (V % 4 == 0) {
#pragma unroll
    for (int k = 0; k < V; k += 4) *reinterpret_cast<float4*>(p + k) = make_float4(f[k], f[k + 1], f[k + 2], f[k + 3]);
  } else if constexpr (V == 2) {
    *reinterpret_cast<float2*>(p) = make_float2(f[0], f[1]);
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) p[k] = f[k];
  }
}

// ---- bf16 pairs and 16-byte blocks held in registers (uint32_t / uint4 words) ----

// lo in the low half (the lower address), hi in the high half; round to nearest even.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
#ifdef __CUDA_ARCH__
  uint32_t w;  // one instruction, the rounding of f32_to_bf16_bits
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(hi), "f"(lo));
  return w;
#else
  return static_cast<uint32_t>(f32_to_bf16_bits(lo)) | (static_cast<uint32_t>(f32_to_bf16_bits(hi)) << 16);
#endif
}

// The 8 bf16 of a 16-byte block, in address order.
__device__ __forceinline__ void unpack_bf16x8(const uint4& u, float x[8]) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
  for (int i = 0; i < 4; ++i) {
    x[2 * i] = __uint_as_float(w[i] << 16);
    x[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

__device__ __forceinline__ uint4 pack_bf16x8(const float d[8]) {
  return make_uint4(pack_bf16x2(d[0], d[1]), pack_bf16x2(d[2], d[3]), pack_bf16x2(d[4], d[5]),
                    pack_bf16x2(d[6], d[7]));
}

// ---- warp reductions: butterflies, every lane ends with the same bits ----

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
// The same sum with explicitly rounded adds (__fadd_rn: never contracted into an FMA with the
// caller's arithmetic).
__device__ __forceinline__ float warp_sum_rn(float v) {
  for (int o = 16; o > 0; o >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// A NaN loses to a number (fmaxf).
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// ---- block reductions ----

// The sum over the CTA (blockDim.x a multiple of 32) of v, returned to every thread: warp sums,
// then the per-warp sums added in warp order. red: blockDim.x / 32 floats of shared memory.
__device__ __forceinline__ float block_sum(float v, float* red) {
  v = warp_sum(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();  // red's last use is over
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float t = 0.f;
  for (int w = 0; w < warps; ++w) t += red[w];
  return t;
}

// The sum over a CTA of kThreads threads (a power of two) of one double each, a fixed halving
// tree in shared memory; the result is valid in thread 0.
template <int kThreads>
__device__ double block_sum_tree(double x) {
  __shared__ double red[kThreads];
  red[threadIdx.x] = x;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  return red[0];
}

// ---- pointwise ----

// 1 / (1 + e^-x) in fp32 (the reference's form; e^-x overflowing to inf gives 0, as it should).
__device__ __forceinline__ float sigmoid_f32(float x) { return 1.f / (1.f + expf(-x)); }

// RoPE's angle t inv_freq in double, reduced mod 2 pi, then fp32 sincos (training and decode
// share it, so a position gives the same rotation in both).
__device__ __forceinline__ void rope_sincos(double t, double inv_freq, float* s, float* c) {
  const double a = t * inv_freq;
  const double turns = rint(a * 0.15915494309189535);                     // a / (2 pi)
  const float r = static_cast<float>(fma(-turns, 6.283185307179586, a));  // in [-pi, pi]
  sincosf(r, s, c);
}

// ---- the deterministic column sum ----

// dst[c] += sum over rows r of src[r * cols + c] for c < cols, without atomics: CTA of 32 columns
// x 32 row lanes (kColumnSumThreads threads, grid column_sum_grid(cols)); lane j sums rows j,
// j + 32, ... in order (coalesced along the columns), then the 32 lane sums are added in lane
// order. Rows: the integer type of the row count and index (int or int64_t).
inline constexpr int kColumnSumLanes = 32;
inline constexpr int kColumnSumThreads = 32 * kColumnSumLanes;

template <class Rows>
__device__ __forceinline__ void column_sum_add(float* dst, const float* src, Rows rows, int64_t cols) {
  __shared__ float red[kColumnSumLanes][33];  // +1: no bank conflicts on the column reads
  const int col = threadIdx.x % 32, j = threadIdx.x / 32;
  const int64_t c = blockIdx.x * static_cast<int64_t>(32) + col;
  float s = 0.f;
  if (c < cols)
    for (Rows k = j; k < rows; k += kColumnSumLanes) s += src[k * cols + c];
  red[j][col] = s;
  __syncthreads();
  if (j == 0 && c < cols) {
    float t = 0.f;
    for (int jj = 0; jj < kColumnSumLanes; ++jj) t += red[jj][col];
    dst[c] += t;
  }
}

template <class Rows>
__global__ void __launch_bounds__(kColumnSumThreads) column_sum_add_kernel(float* dst, const float* src, Rows rows,
                                                                           int64_t cols) {
  column_sum_add<Rows>(dst, src, rows, cols);
}

inline unsigned column_sum_grid(int64_t cols) { return static_cast<unsigned>((cols + 31) / 32); }

// ---- programmatic dependent launch (sm_90) ----

// A kernel launched by launch_dependent (below) may start once every CTA of the kernel before it
// in the stream has called grid_launch_dependents (or exited): its CTAs then run beside that
// kernel's, and may read what never changes (weights) while it works. grid_dependency_wait blocks
// until the kernel before has completed and its writes are visible; a dependent kernel calls it
// before it reads anything that kernel writes, and before it writes anything. Both are no-ops in
// a kernel not launched so. Completion is transitive: a kernel waits on its predecessor, which
// waited on its own, so everything earlier in the stream is complete too. On the host (the CPU
// emulation, which runs kernels one after another) both do nothing.
__device__ __forceinline__ void grid_launch_dependents() {
#ifdef __CUDA_ARCH__
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void grid_dependency_wait() {
#ifdef __CUDA_ARCH__
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, s>>>(args...) as a programmatic dependent of the stream's previous
// kernel (cudaLaunchAttributeProgrammaticStreamSerialization); the kernel must call
// grid_dependency_wait as above.
template <class... Params, class... Args>
cudaError_t launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                             Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = s;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr, cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// ---- host: stream-ordered scratch ----

// *p = `bytes` of scratch on stream s, from `pool` (a cudaMemPool_t: the Deltatron context's own pool,
// kernels/cuda_context.h) or, with a null pool, from the device's current pool. Free it with
// cudaFreeAsync on the same stream.
inline cudaError_t scratch_malloc(void** p, size_t bytes, void* pool, cudaStream_t s) {
  return pool ? cudaMallocFromPoolAsync(p, bytes, static_cast<cudaMemPool_t>(pool), s) : cudaMallocAsync(p, bytes, s);
}

}  // namespace dt::cuda
