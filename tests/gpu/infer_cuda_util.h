// Shared by the GPU decode suites (test_infer_cuda.cpp, test_decode_cuda.cpp): GPU tensors filled
// from host floats (tests/gpu/gpu_tensor.h), random bf16-exact inputs, the tolerance check, and GPU-sized small models.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "kernels/fill.h"
#include "layers/model_config.h"
#include "tests/gpu/gpu_tensor.h"
#include "tests/gpu/gpu_testing.h"

namespace dt::infer_cuda_testing {

using gpu_testing::gpu_context;
using gpu_testing::run_seed;



// n normals * scale, rounded to bf16 when asked (then the GPU and the reference see the same numbers).
inline std::vector<float> randn(int64_t n, uint64_t salt, double scale = 1.0, bool bf16 = true) {
  std::mt19937_64 rng(run_seed() ^ (salt * 0x9E3779B97F4A7C15ull));
  std::normal_distribution<double> d(0.0, scale);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = bf16 ? round_bf16(static_cast<float>(d(rng))) : static_cast<float>(d(rng));
  return x;
}


inline double rms(const std::vector<double>& x) {
  double s = 0;
  for (double v : x) s += v * v;
  return x.empty() ? 0.0 : std::sqrt(s / static_cast<double>(x.size()));
}

// Every element finite and |got - want| <= rel |want| + floor_rel RMS(want).
inline void expect_close(const std::string& what, const std::vector<float>& got, const std::vector<double>& want,
                         double rel, double floor_rel) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const double floor = floor_rel * rms(want);
  int64_t bad = 0, worst = 0;
  double worst_excess = -1e300;
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::fabs(double(got[i]) - want[i]), lim = rel * std::fabs(want[i]) + floor;
    const double excess = std::isfinite(got[i]) ? err - lim : 1e300;
    if (excess > 0) ++bad;
    if (excess > worst_excess) worst_excess = excess, worst = static_cast<int64_t>(i);
  }
  if (want.empty()) return;
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << want.size() << " elements off; worst at " << worst
                    << ": got " << got[worst] << ", want " << want[worst] << " (rel " << rel << ", floor " << floor
                    << ")";
}

// bf16 output rounding (2^-8 relative) with a factor 2 of room, and a floor for outputs near 0.
inline constexpr double kBf16Rel = 1.0 / 128;
inline constexpr double kFloorRel = 1e-3;

// Sizes the GPU kernels take (head dims multiples of 8, GDN chunk <= 64), odd elsewhere; GDN chunk 16
// so that prompts of 37 tokens end in a partial chunk.
inline ModelConfig gpu_config(std::vector<MixerKind> layers) {
  ModelConfig c;
  c.vocab_size = 301;
  c.d_model = 64;
  c.d_ff = 88;
  c.layers = std::move(layers);
  c.tie_embeddings = false;
  c.attn = AttnConfig{.n_heads = 4, .n_kv_heads = 2, .head_dim = 32, .rotary_dim = 16, .rope_theta = 10000.0,
                      .qk_norm = true, .output_gate = true};
  c.mla = MlaConfig{.n_heads = 2, .q_lora_rank = 24, .kv_lora_rank = 32, .qk_nope_head_dim = 16,
                    .qk_rope_head_dim = 16, .v_head_dim = 32, .rope_theta = 10000.0, .rope_interleave = true};
  c.gdn = GdnConfig{.n_k_heads = 1, .n_v_heads = 2, .head_k_dim = 32, .head_v_dim = 32, .conv_kernel = 4,
                    .chunk_size = 16};
  return c;
}

}  // namespace dt::infer_cuda_testing
