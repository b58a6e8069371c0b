// Emulation shim: the e4m3 conversions of cuda_fp8.h that infer/cuda/fp8.cuh calls, through the
// host encoder and decoder of core/fp8.h (their definitions match the device's), host-only.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/fp8.h"
#include "cuda_fp16.h"

using std::isnan;
using __nv_fp8_storage_t = unsigned char;
enum __nv_saturation_t { __NV_NOSAT, __NV_SATFINITE };
enum __nv_fp8_interpretation_t { __NV_E4M3, __NV_E5M2 };
inline __nv_fp8_storage_t __nv_cvt_float_to_fp8(float x, __nv_saturation_t, __nv_fp8_interpretation_t) {
  return dt::f32_to_e4m3(x);
}
inline __half_raw __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t q, __nv_fp8_interpretation_t) {
  return {dt::e4m3_to_f32(q)};
}
