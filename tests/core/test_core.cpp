#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "core/arena.h"
#include "core/dtype.h"
#include "core/philox.h"
#include "core/tensor.h"

namespace dt {
namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(Bf16, ExactValuesRoundTrip) {
  for (float f : {0.0f, -0.0f, 1.0f, -2.5f, 65536.0f, 0.15625f}) EXPECT_EQ(bf16_to_f32(f32_to_bf16(f)), f);
}

TEST(Bf16, RoundsToNearestEven) {
  // 1 + 2^-8 lies exactly halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1).
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(from_bits(0x3f808000u))), 1.0f);
  // 1 + 3*2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6 (even): goes up.
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f818000u)), 0x3f82u);
  // Just above halfway rounds up.
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f808001u)), 0x3f81u);
  // Just below halfway rounds down.
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f807fffu)), 0x3f80u);
}

TEST(Bf16, SpecialValues) {
  float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(inf)), inf);
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(-inf)), -inf);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload sits only in the low bits must not become inf.
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(from_bits(0x7f800001u)))));
  // The largest finite float rounds to inf in bf16 (as in PyTorch).
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::max())), inf);
}

TEST(Bf16, RelativeErrorBound) {
  for (int i = 1; i < 10000; ++i) {
    float f = std::sin(static_cast<float>(i)) * static_cast<float>(i);
    float r = round_bf16(f);
    EXPECT_LE(std::fabs(r - f), std::fabs(f) * (1.0f / 256.0f)) << f;
  }
  (void)bits;
}

TEST(Philox, KnownAnswer) {
  // Random123's known-answer test for philox4x32-10: counter = key = 0.
  PhiloxOut r = philox4x32(0, 0, 0);
  EXPECT_EQ(r.v[0], 0x6627e8d5u);
  EXPECT_EQ(r.v[1], 0xe169c58du);
  EXPECT_EQ(r.v[2], 0xbc57ac4cu);
  EXPECT_EQ(r.v[3], 0x9b00dbd8u);
}

TEST(Philox, NormalMoments) {
  double s = 0, s2 = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    double x = philox_normal(42, 7, i);
    s += x;
    s2 += x * x;
  }
  EXPECT_NEAR(s / n, 0.0, 0.01);
  EXPECT_NEAR(s2 / n, 1.0, 0.01);
  EXPECT_NE(philox_normal(42, 7, 0), philox_normal(43, 7, 0));
  EXPECT_NE(philox_normal(42, 7, 0), philox_normal(42, 8, 0));
}

TEST(Tensor, ShapesAndViews) {
  float buf[24];
  Tensor t(buf, DType::kF32, Device::kCPU, {2, 3, 4});
  EXPECT_EQ(t.numel(), 24);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.size(-1), 4);
  Tensor v = t.view({6, 4});
  EXPECT_EQ(v.size(0), 6);
  EXPECT_THROW(t.view({5, 5}), Error);
  Tensor n = v.narrow0(2, 3);
  EXPECT_EQ(n.ptr<float>(), buf + 8);
  EXPECT_THROW(v.narrow0(5, 2), Error);
  EXPECT_THROW(t.ptr<double>(), Error);
}

TEST(Arena, OneAllocationNamedTable) {
  Arena a("test", Device::kCPU);
  int s0 = a.declare("a", DType::kF32, {3, 5});
  int s1 = a.declare("b", DType::kF64, {7});
  EXPECT_THROW(a.declare("a", DType::kF32, {1}), Error);
  EXPECT_THROW(a.get(s0), Error);  // before allocate
  a.allocate();
  Tensor ta = a.get(s0), tb = a.get("b");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ta.data) % 256, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(tb.data) % 256, 0u);
  EXPECT_EQ(tb.data, a.get(s1).data);
  EXPECT_EQ(ta.ptr<float>()[14], 0.0f);  // zeroed
  EXPECT_THROW(a.get("missing"), Error);
  EXPECT_THROW(a.declare("c", DType::kF32, {1}), Error);  // after allocate
  EXPECT_GE(a.bytes(), 15 * 4 + 7 * 8u);
}

}  // namespace
}  // namespace dt

#include "core/sha256.h"

namespace dt {
namespace {

TEST(Sha256, KnownAnswers) {
  EXPECT_EQ(sha256_hex("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc", 3), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace dt

#include <cstdio>
#include <filesystem>

namespace dt {
namespace {

TEST(Sha256, StreamingAndFileMatchOneShot) {
  std::string text(100000, 'x');
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>('a' + i * 7 % 26);
  Sha256 h;
  h.update(text.data(), 12345);
  h.update(text.data() + 12345, text.size() - 12345);
  EXPECT_EQ(h.hex(), sha256_hex(text.data(), text.size()));
  std::string path = (std::filesystem::temp_directory_path() / "dt_sha_test.bin").string();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
  EXPECT_EQ(sha256_file_hex(path), sha256_hex(text.data(), text.size()));
  EXPECT_EQ(sha256_file_hex(path, 512), sha256_hex(text.data() + 512, text.size() - 512));
  std::filesystem::remove(path);
  EXPECT_THROW(sha256_file_hex(path), Error);
}

}  // namespace
}  // namespace dt
