// Element types and bf16 conversion (round to nearest even, NaN kept quiet).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace dt {

// kF8E4M3: fp8 e4m3 bytes (core/fp8.h), only in the MLA fp8 latent cache (infer/decode_state.h).
enum class DType : uint8_t { kF32, kBF16, kF64, kI32, kU16, kF8E4M3 };

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);

// float -> bf16 bits, round to nearest even; NaN stays NaN (quiet), +-inf stay inf.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

inline float bf16_to_f32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round a float to the nearest bf16 value, staying in float (for references run "in bf16").
inline float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() { return DType::kF32; }
template <>
constexpr DType dtype_of<double>() { return DType::kF64; }
template <>
constexpr DType dtype_of<int32_t>() { return DType::kI32; }
template <>
constexpr DType dtype_of<uint16_t>() { return DType::kU16; }

}  // namespace dt
