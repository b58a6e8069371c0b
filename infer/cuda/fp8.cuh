// The device side of core/fp8.h (the MLA fp8 latent cache): e4m3 conversions in namespace dt::cuda,
// for infer/cuda/mla_fp8.cu (the quantiser) and decode_attention.cu (the attention's reads).
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "core/fp8.h"

namespace dt::cuda {

// core/fp8.h's f32_to_e4m3: NaN -> 0x7f (tested first, so the pattern does not depend on the
// conversion's NaN handling), else the satfinite round to nearest even of cuda_fp8.h.
__device__ __forceinline__ uint8_t f32_to_e4m3_bits(float x) {
  if (isnan(x)) return kE4m3NaN;
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

// e4m3 bits -> float, exact (through fp16, which holds every e4m3 value); 0x7f / 0xff give NaN.
__device__ __forceinline__ float e4m3_bits_to_f32(uint8_t q) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(q), __NV_E4M3)));
}

}  // namespace dt::cuda
