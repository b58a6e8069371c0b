// Device-side pieces shared by the dense elementwise kernels (embedding.cu, rmsnorm.cu, rope.cu,
// elementwise.cu, optim.cu): vectorised bf16 / fp32 loads and stores, a fixed-order warp sum and
// the launch check. bf16 travels as its raw uint16_t bits; all math is fp32 (or double where a
// kernel says so).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/error.h"
#include "kernels/cuda/dense_elem.h"

// Every launch and runtime call goes through this: it names the op, the file and the line.
#define DT_DENSE_CUDA_CHECK(call, what)                                                               \
  do {                                                                                                \
    cudaError_t err_ = (call);                                                                        \
    DT_CHECK(err_ == cudaSuccess, "{}: CUDA error {} ({}) at {}:{}", what, static_cast<int>(err_),   \
             cudaGetErrorString(err_), __FILE__, __LINE__);                                           \
  } while (0)

namespace dt {
namespace dense_cuda {

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

template <int V>
__device__ __forceinline__ void load_f32(const float* p, float (&f)[V]) {
  if constexpr (V % 4 == 0) {
#pragma unroll
    for (int k = 0; k < V; k += 4) {
      const float4 q = *reinterpret_cast<const float4*>(p + k);
      f[k] = q.x, f[k + 1] = q.y, f[k + 2] = q.z, f[k + 3] = q.w;
    }
  } else if constexpr (V == 2) {
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

// ---- reductions ----

// Sum over a warp in a fixed butterfly order: every lane gets the same, deterministic value.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// 1 / (1 + e^-x) in fp32 (the reference's form; e^-x overflowing to inf gives 0, as it should).
__device__ __forceinline__ float sigmoid_f32(float x) { return 1.f / (1.f + expf(-x)); }

}  // namespace dense_cuda
}  // namespace dt
