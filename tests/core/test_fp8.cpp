// core/fp8.h: the software e4m3 codec (exact values, round to nearest even with its ties, subnormals,
// saturation, the NaN policy), checked against an independent nearest-value search over every bf16
// and many random floats; and the block scaling of the MLA fp8 cache (the scale rule, zero blocks,
// non-finite values, the round trip's error bound).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/fp8.h"

namespace dt {
namespace {

// The finite e4m3 values by code: (1 + m/8) 2^(e-7), subnormals m 2^-9; computed here without core/fp8.h.
double value_of(int code) {
  const int e = (code >> 3) & 0xf, m = code & 7;
  const double v = e == 0 ? m * std::ldexp(1.0, -9) : (1.0 + m / 8.0) * std::ldexp(1.0, e - 7);
  return (code & 0x80) ? -v : v;
}

// The reference encoder: the nearest finite non-negative code by search, a tie to the even code
// (low bit 0), magnitudes from 448 up saturated; the sign copied; NaN 0x7f.
uint8_t reference_encode(float x) {
  if (std::isnan(x)) return 0x7f;
  const double a = std::fabs(static_cast<double>(x));
  const auto sign = static_cast<uint8_t>(std::signbit(x) ? 0x80 : 0);
  if (a >= 448.0) return sign | 0x7e;
  int best = 0;
  for (int c = 1; c <= 0x7e; ++c) {
    const double d = std::fabs(value_of(c) - a), db = std::fabs(value_of(best) - a);
    if (d < db || (d == db && (c & 1) == 0)) best = c;
  }
  return static_cast<uint8_t>(sign | best);
}

TEST(E4m3, EveryCodeDecodesExactlyAndReEncodesToItself) {
  for (int c = 0; c < 256; ++c) {
    const float v = e4m3_to_f32(static_cast<uint8_t>(c));
    if ((c & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(v)) << c;
      EXPECT_EQ(f32_to_e4m3(v), kE4m3NaN) << c;
      continue;
    }
    EXPECT_EQ(static_cast<double>(v), value_of(c)) << c;
    EXPECT_EQ(f32_to_e4m3(v), c) << c << " = " << v;  // -0 (0x80) included
  }
}

TEST(E4m3, ExactValues) {
  const std::pair<float, int> cases[] = {{0.f, 0x00},       {-0.f, 0x80},  {1.f, 0x38},         {-1.f, 0xb8},
                                         {1.5f, 0x3c},      {2.f, 0x40},   {448.f, 0x7e},       {-448.f, 0xfe},
                                         {0.015625f, 0x08}, {0x1p-9f, 0x01}, {7 * 0x1p-9f, 0x07}, {240.f, 0x77},
                                         {0.875f, 0x36},    {3.25f, 0x45}};
  for (auto [x, c] : cases) {
    EXPECT_EQ(f32_to_e4m3(x), c) << x;
    EXPECT_EQ(e4m3_to_f32(static_cast<uint8_t>(c)), x) << c;
  }
}

TEST(E4m3, RoundsToNearestWithTiesToEven) {
  const std::pair<float, int> cases[] = {
      {1.0625f, 0x38},      // midway 1 and 1.125: the even 1
      {1.1875f, 0x3a},      // midway 1.125 and 1.25: the even 1.25
      {1.9375f, 0x40},      // midway 1.875 and 2 (the next binade): 2, mantissa 0
      {17.f, 0x58},         // midway 16 and 18: 16
      {19.f, 0x5a},         // midway 18 and 20: 20
      {1.0624999f, 0x38},   // just below a tie: down
      {1.0625001f, 0x39},   // just above: up
      {432.f, 0x7e},        // midway 416 and 448: 448 (even)
      {-1.1875f, 0xba},     // ties are symmetric
  };
  for (auto [x, c] : cases) EXPECT_EQ(f32_to_e4m3(x), c) << x;
}

TEST(E4m3, Subnormals) {
  const std::pair<float, int> cases[] = {
      {0x1p-10f, 0x00},       // midway 0 and 2^-9: 0
      {-0x1p-10f, 0x80},      // keeping the sign
      {0x1.000002p-10f, 0x01},  // just above the midway
      {3 * 0x1p-10f, 0x02},   // midway 1 and 2 (x 2^-9): 2
      {5 * 0x1p-10f, 0x02},   // midway 2 and 3: 2
      {7 * 0x1p-10f, 0x04},   // midway 3 and 4: 4
      {15 * 0x1p-10f, 0x08},  // midway 7 x 2^-9 and 2^-6 (the smallest normal): 2^-6
      {0x1p-12f, 0x00},
      {1e-45f, 0x00},         // a float subnormal
      {-1e-45f, 0x80},
      {0.0117f, 0x06},        // 5.99 x 2^-9
  };
  for (auto [x, c] : cases) EXPECT_EQ(f32_to_e4m3(x), c) << x;
}

TEST(E4m3, SaturatesAndMapsNaNToOnePattern) {
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {448.f, 449.f, 463.9f, 464.f, 465.f, 480.f, 1e9f, std::numeric_limits<float>::max(), inf}) {
    EXPECT_EQ(f32_to_e4m3(x), 0x7e) << x;
    EXPECT_EQ(f32_to_e4m3(-x), 0xfe) << -x;
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(f32_to_e4m3(nan), 0x7f);
  EXPECT_EQ(f32_to_e4m3(-nan), 0x7f);
  EXPECT_EQ(f32_to_e4m3(std::numeric_limits<float>::signaling_NaN()), 0x7f);
}

TEST(E4m3, AgreesWithTheNearestValueSearch) {
  for (uint32_t h = 0; h < 65536; ++h) {  // every bf16, ties and subnormals included
    const float x = bf16_to_f32(static_cast<uint16_t>(h));
    ASSERT_EQ(f32_to_e4m3(x), reference_encode(x)) << "bf16 bits " << h << " = " << x;
  }
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> mant(-1.f, 1.f);
  std::uniform_int_distribution<int> ex(-14, 10);
  for (int i = 0; i < 200000; ++i) {
    const float x = std::ldexp(mant(rng), ex(rng));
    ASSERT_EQ(f32_to_e4m3(x), reference_encode(x)) << x;
  }
}

TEST(E4m3Scale, IsTheSmallestPowerOfTwoThatFits) {
  EXPECT_EQ(e4m3_scale_exponent(0.f), 0);
  EXPECT_EQ(e4m3_scale_exponent(448.f), 0);
  EXPECT_EQ(e4m3_scale_exponent(std::nextafter(448.f, 1e9f)), 1);
  EXPECT_EQ(e4m3_scale_exponent(896.f), 1);
  EXPECT_EQ(e4m3_scale_exponent(897.f), 2);
  EXPECT_EQ(e4m3_scale_exponent(1.f), -8);
  EXPECT_EQ(e4m3_scale_exponent(1.75f), -8);
  EXPECT_EQ(e4m3_scale_exponent(std::nextafter(1.75f, 2.f)), -7);
  EXPECT_EQ(e4m3_scale_exponent(std::numeric_limits<float>::max()), 120);
  EXPECT_EQ(e4m3_scale_exponent(1e-38f), -126);  // the clamp: s stays a normal float
  EXPECT_EQ(e4m3_scale_exponent(1e-45f), -126);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> lg(-30, 30);
  for (int i = 0; i < 100000; ++i) {
    const auto a = static_cast<float>(std::exp2(lg(rng)));
    const int e = e4m3_scale_exponent(a);
    ASSERT_LE(a / std::ldexp(1.0, e), 448.0) << a;
    ASSERT_GT(a / std::ldexp(1.0, e - 1), 448.0) << a;
    ASSERT_EQ(fp8_exp2(e), std::ldexp(1.f, e));
  }
}

TEST(E4m3Scale, BlockRoundTripWithinTheFormatsError) {
  std::mt19937 rng(11);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> x(kFp8Block), back(kFp8Block);
  std::vector<uint8_t> q(kFp8Block);
  for (float magnitude : {1e-30f, 1e-3f, 1.f, 300.f, 1e6f, 1e30f}) {
    for (float& v : x) v = d(rng) * magnitude;
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    const float s = e4m3_quantize_block(x.data(), kFp8Block, q.data());
    EXPECT_EQ(s, std::ldexp(1.f, e4m3_scale_exponent(amax))) << magnitude;
    EXPECT_GT(amax / s, 224.f) << magnitude;  // the largest value in the top binade
    for (int64_t i = 0; i < kFp8Block; ++i) {
      back[i] = e4m3_to_f32(q[i]) * s;
      EXPECT_EQ(q[i], f32_to_e4m3(x[i] / s)) << i;  // x / s is exact: the same as x * 2^-e
      // normal e4m3: relative 2^-4 (half of 2^-3); subnormal: half of 2^-9 s.
      EXPECT_LE(std::fabs(back[i] - x[i]), std::max(std::fabs(x[i]) / 16, s * 0x1p-10f)) << magnitude << " " << i;
    }
  }
}

TEST(E4m3Scale, ZeroBlocksAndNonFiniteValues) {
  std::vector<float> x(kFp8Block, 0.f);
  std::vector<uint8_t> q(kFp8Block, 0xaa);
  EXPECT_EQ(e4m3_quantize_block(x.data(), kFp8Block, q.data()), 1.f);
  for (uint8_t v : q) EXPECT_EQ(v, 0);
  x[3] = -0.f;
  e4m3_quantize_block(x.data(), kFp8Block, q.data());
  EXPECT_EQ(q[3], 0x80);
  // inf and NaN do not set the scale: the finite values do; inf saturates, NaN stays NaN.
  x[0] = 2.f, x[1] = std::numeric_limits<float>::infinity(), x[2] = std::numeric_limits<float>::quiet_NaN();
  x[4] = -std::numeric_limits<float>::infinity();
  const float s = e4m3_quantize_block(x.data(), kFp8Block, q.data());
  EXPECT_EQ(s, 0x1p-7f);  // 2 / 2^-7 = 256 <= 448 < 512
  EXPECT_EQ(q[0], f32_to_e4m3(256.f));
  EXPECT_EQ(q[1], 0x7e);
  EXPECT_EQ(q[2], kE4m3NaN);
  EXPECT_EQ(q[4], 0xfe);
  // a row of blocks: each its own scale, and back.
  std::vector<float> row(3 * kFp8Block), out(row.size()), scales(3);
  std::vector<uint8_t> rq(row.size());
  for (size_t i = 0; i < row.size(); ++i) row[i] = static_cast<float>(i / kFp8Block + 1) * (i % 2 ? 1.f : -0.5f);
  e4m3_quantize_row(row.data(), static_cast<int64_t>(row.size()), rq.data(), scales.data());
  EXPECT_EQ(scales[0], 0x1p-8f);
  EXPECT_EQ(scales[1], 0x1p-7f);
  EXPECT_EQ(scales[2], 0x1p-7f);  // 3 / 2^-7 = 384
  e4m3_dequantize_row(rq.data(), scales.data(), static_cast<int64_t>(row.size()), out.data());
  EXPECT_EQ(out, row);  // 1, 2, 3, 0.5, 1, 1.5 are e4m3 values times their scale
}

}  // namespace
}  // namespace dt
