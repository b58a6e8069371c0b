// Small device helpers of the GDN pointwise kernels (kernels/cuda/gdn_pointwise.cu).
#pragma once

#include <cuda_runtime.h>

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

}  // namespace gdn_cuda
}  // namespace dt
