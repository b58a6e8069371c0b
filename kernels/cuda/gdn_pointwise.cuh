// Small device helpers of the GDN pointwise kernels (kernels/cuda/gdn_pointwise.cu, gdn_norm.cu,
// gdn_conv.cu); the bf16 loads and stores and the warp sum are common.cuh's.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.cuh"

namespace dt::cuda {

// log(1 + e^x) without overflow; sigmoid without exp of a positive number (as gdn_common.h).
// sigmoid_stable_f32 differs from common.cuh's sigmoid_f32 (1 / (1 + e^-x) for every x) in its
// arithmetic below 0, so the two give different bits there.
__device__ __forceinline__ float softplus_f32(float x) { return fmaxf(x, 0.f) + log1pf(expf(-fabsf(x))); }
__device__ __forceinline__ float sigmoid_stable_f32(float x) {
  if (x >= 0.f) return 1.f / (1.f + expf(-x));
  const float e = expf(x);
  return e / (1.f + e);
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

}  // namespace dt::cuda
