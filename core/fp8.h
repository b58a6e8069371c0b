// fp8 e4m3 in software, and the block scaling of the MLA fp8 latent cache (infer/decode_state.h).
//
// e4m3 is the "E4M3FN" format of NVIDIA's __nv_fp8_e4m3 (cuda_fp8.h): a sign bit, 4 exponent bits
// (bias 7) and 3 mantissa bits; no infinities; 0x7f and 0xff are NaN; the largest finite value is
// 448 (0x7e), the smallest normal 2^-6 (0x08), the smallest subnormal 2^-9 (0x01).
//
// Encoding (f32_to_e4m3), the same as the GPU's __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3):
//   - round to nearest, ties to even (a tie between 0 and 2^-9 gives 0, keeping the sign);
//   - finite values of magnitude >= 448 saturate to +-448 (everything from 448 up to the midpoint
//     464 rounds there anyway; beyond it satfinite clamps), and so do +-inf;
//   - NaN gives 0x7f whatever its sign (the GPU kernels test for NaN before their conversion, so
//     both sides give this one pattern).
// Decoding (e4m3_to_f32) is exact: every e4m3 value is a float.
//
// Block scaling: a block of values x (kFp8Block = 128 latent values) is stored as q = e4m3(x / s)
// with one fp32 scale s = 2^e, e the smallest integer with amax / 2^e <= 448, where amax is the
// largest finite |x| of the block; the value read back is e4m3_to_f32(q) * s. s is a power of two,
// so x / s (computed as x * 2^-e) is exact on every device, and the block's largest value lands in
// [224, 448]: the top binade of e4m3 (relative error <= 2^-4 for every value that stays normal).
// Two edge cases: a block of zeros (amax 0) has s = 1, and e is at least -126 (s and 1/s normal
// floats), which only matters for blocks below 448 * 2^-126 ~ 5e-36. The scale's exponent is
// computed from the float's bits (e4m3_scale_exponent), on the host and in the CUDA kernels alike.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define DT_FP8_HD __host__ __device__
#else
#define DT_FP8_HD
#endif

namespace dt {

inline constexpr int64_t kFp8Block = 128;           // latent values per fp32 scale
inline constexpr float kE4m3Max = 448.0f;           // the largest finite e4m3 value
inline constexpr uint8_t kE4m3NaN = 0x7f;           // the NaN every encoder here gives

DT_FP8_HD inline uint32_t fp8_float_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

DT_FP8_HD inline float fp8_bits_float(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// 2^e as a float, for -126 <= e <= 127 (a normal float: exact).
DT_FP8_HD inline float fp8_exp2(int e) { return fp8_bits_float(static_cast<uint32_t>(e + 127) << 23); }

// The block scale's exponent for the largest finite magnitude amax >= 0 of a block: the smallest
// e >= -126 with amax / 2^e <= 448, or 0 when amax is 0. With amax = (1 + m / 2^23) 2^(E - 127)
// (E its exponent field, m its mantissa field): amax / 2^e <= 1.75 * 2^8 iff
// e >= E - 135 + (m > 0.75 * 2^23).
DT_FP8_HD inline int e4m3_scale_exponent(float amax) {
  const uint32_t u = fp8_float_bits(amax) & 0x7fffffffu;
  if (u == 0) return 0;
  const int E = static_cast<int>(u >> 23);
  if (E == 0) return -126;  // a subnormal amax: the clamp
  const int e = E - 135 + ((u & 0x7fffffu) > 0x600000u ? 1 : 0);
  return e < -126 ? -126 : e;
}

// float -> e4m3 bits: round to nearest even, saturate to +-448, NaN -> 0x7f (see the top).
inline uint8_t f32_to_e4m3(float x) {
  const uint32_t u = fp8_float_bits(x);
  const auto sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return kE4m3NaN;
  if (a >= 0x43e00000u) return static_cast<uint8_t>(sign | 0x7eu);  // |x| >= 448, inf included
  if (a >= 0x3c800000u) {  // |x| >= 2^-6: a normal e4m3
    // exponent field E - 120, the top 3 mantissa bits, the other 20 rounded off (a carry moves
    // into the exponent, and stops at 448 since |x| < 448)
    auto r = static_cast<uint32_t>((((a >> 23) - 120u) << 3) | ((a >> 20) & 7u));
    const uint32_t rest = a & 0xfffffu;
    if (rest > 0x80000u || (rest == 0x80000u && (r & 1u))) ++r;
    return static_cast<uint8_t>(sign | r);
  }
  // |x| < 2^-6: k 2^-9 with k = |x| 2^9 rounded to nearest even (k = 8 is 2^-6, the smallest normal:
  // its bits are 0x08). |x| 2^9 is exact in float.
  const float y = fp8_bits_float(a) * 512.0f;
  auto k = static_cast<uint32_t>(y);
  const float frac = y - static_cast<float>(k);
  if (frac > 0.5f || (frac == 0.5f && (k & 1u))) ++k;
  return static_cast<uint8_t>(sign | k);
}

// e4m3 bits -> float, exact; 0x7f and 0xff give NaN.
inline float e4m3_to_f32(uint8_t q) {
  const int e = (q >> 3) & 0xf, m = q & 7;
  float v;
  if (e == 15 && m == 7)
    v = std::nanf("");
  else if (e == 0)
    v = std::ldexp(static_cast<float>(m), -9);
  else
    v = std::ldexp(static_cast<float>(8 + m), e - 10);  // (1 + m / 8) 2^(e - 7)
  return (q & 0x80) ? -v : v;
}

// One block: q[i] = e4m3(x[i] / s) for i < n; returns the scale s (see the top).
template <class T>
float e4m3_quantize_block(const T* x, int64_t n, uint8_t* q) {
  float amax = 0.f;
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(static_cast<float>(x[i]));
    if (std::isfinite(a) && a > amax) amax = a;
  }
  const int e = e4m3_scale_exponent(amax);
  const float inv = fp8_exp2(-e);
  for (int64_t i = 0; i < n; ++i) q[i] = f32_to_e4m3(static_cast<float>(x[i]) * inv);
  return fp8_exp2(e);
}

// A row of `width` values (a multiple of kFp8Block): q[width], scales[width / kFp8Block].
template <class T>
void e4m3_quantize_row(const T* x, int64_t width, uint8_t* q, float* scales) {
  for (int64_t b = 0; b * kFp8Block < width; ++b)
    scales[b] = e4m3_quantize_block(x + b * kFp8Block, kFp8Block, q + b * kFp8Block);
}

// The row back: x[i] = e4m3_to_f32(q[i]) * scales[i / kFp8Block].
template <class T>
void e4m3_dequantize_row(const uint8_t* q, const float* scales, int64_t width, T* x) {
  for (int64_t i = 0; i < width; ++i) x[i] = static_cast<T>(e4m3_to_f32(q[i]) * scales[i / kFp8Block]);
}

}  // namespace dt
