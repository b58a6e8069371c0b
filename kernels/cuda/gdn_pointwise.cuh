// Small device helpers of the GDN pointwise kernels (kernels/cuda/gdn_pointwise.cu).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace dt {
namespace gdn_cuda {

// log(1 + e^x) without overflow; sigmoid without exp of a positive number (as gdn_common.h).
__device__ __forceinline__ float softplus_f(float x) { return fmaxf(x, 0.f) + log1pf(expf(-fabsf(x))); }
__device__ __forceinline__ float sigmoid_f(float x) {
  if (x >= 0.f) return 1.f / (1.f + expf(-x));
  const float e = expf(x);
  return e / (1.f + e);
}

// Sum over a warp in a fixed butterfly order: every lane gets the same, deterministic value.
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// ---- per-head kernels: a group of G lanes per (row, head) item ----
// A head of d features is nvec = d / V vectors of V bf16 (one 2V-byte access each); G = the
// smallest power of two >= min(nvec, 32) lanes share an item (32 / G items per warp), lane g of
// the group holding vectors g, g + G, ... (at most NV of them).
__host__ __device__ __forceinline__ int head_group_size(int nvec) {
  int g = 1;
  while (g < nvec && g < 32) g <<= 1;
  return g;
}

// Sum over the G lanes of a group (G a power of two) in a fixed butterfly order: every lane of the
// group gets the same, deterministic value. All 32 lanes of the warp must call it.
__device__ __forceinline__ float group_sum(float v, int G) {
  for (int o = G >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <int V>
struct Bf16Vec;  // the raw storage of V bf16 values: one load or store instruction
template <>
struct Bf16Vec<1> { using type = uint16_t; };
template <>
struct Bf16Vec<2> { using type = uint32_t; };
template <>
struct Bf16Vec<4> { using type = uint2; };
template <>
struct Bf16Vec<8> { using type = uint4; };

// V consecutive bf16 <-> fp32; p aligned to 2V bytes (the launchers check).
template <int V>
__device__ __forceinline__ void load_bf16v(const uint16_t* p, float (&f)[V]) {
  union {
    typename Bf16Vec<V>::type raw;
    uint16_t h[V];
  } u;
  u.raw = *reinterpret_cast<const typename Bf16Vec<V>::type*>(p);
#pragma unroll
  for (int k = 0; k < V; ++k) f[k] = __bfloat162float(__ushort_as_bfloat16(u.h[k]));
}
template <int V>
__device__ __forceinline__ void store_bf16v(uint16_t* p, const float (&f)[V]) {
  union {
    typename Bf16Vec<V>::type raw;
    uint16_t h[V];
  } u;
#pragma unroll
  for (int k = 0; k < V; ++k) u.h[k] = __bfloat16_as_ushort(__float2bfloat16_rn(f[k]));
  *reinterpret_cast<typename Bf16Vec<V>::type*>(p) = u.raw;
}
// V consecutive fp32; p aligned to 16 bytes when V is a multiple of 4.
template <int V>
__device__ __forceinline__ void load_f32v(const float* p, float (&f)[V]) {
  if constexpr (V % 4 == 0) {
#pragma unroll
    for (int k = 0; k < V; k += 4) {
      const float4 q = *reinterpret_cast<const float4*>(p + k);
      f[k] = q.x, f[k + 1] = q.y, f[k + 2] = q.z, f[k + 3] = q.w;
    }
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) f[k] = p[k];
  }
}

}  // namespace gdn_cuda
}  // namespace dt
