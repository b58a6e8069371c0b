// Shared by the tests/infer suites: small models of odd sizes with random weights, and the
// comparison of two logit rows.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "layers/model.h"
#include "tests/layers/gradcheck.h"

namespace dt::infer_testing {

// Odd sizes everywhere; GDN chunk 4 so that prompts of 11 or 13 tokens end in a partial chunk.
inline ModelConfig odd_config(std::vector<MixerKind> layers) {
  ModelConfig cfg;
  cfg.vocab_size = 41;
  cfg.d_model = 22;
  cfg.d_ff = 30;
  cfg.layers = std::move(layers);
  cfg.attn = AttnConfig{.n_heads = 6, .n_kv_heads = 2, .head_dim = 6, .rotary_dim = 4, .rope_theta = 100.0,
                        .qk_norm = true, .output_gate = true};
  cfg.mla = MlaConfig{.n_heads = 3, .q_lora_rank = 10, .kv_lora_rank = 7, .qk_nope_head_dim = 5,
                      .qk_rope_head_dim = 4, .v_head_dim = 3, .rope_theta = 100.0, .rope_interleave = true};
  cfg.gdn = GdnConfig{.n_k_heads = 2, .n_v_heads = 4, .head_k_dim = 5, .head_v_dim = 3, .conv_kernel = 4,
                      .chunk_size = 4};
  return cfg;
}

inline std::vector<int32_t> random_tokens(int64_t n, int vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> d(0, vocab - 1);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

// max |a - b| / max(max |b|, 1) of a row of n.
inline double row_error(const float* a, const float* b, int64_t n) {
  double diff = 0, scale = 1;
  for (int64_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::fabs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return diff / scale;
}

// Row-wise agreement: max |a - b| <= rtol * max(max |b|, 1).
inline void expect_close_rows(const float* a, const float* b, int64_t n, double rtol, const std::string& what) {
  double diff = 0, scale = 1;
  for (int64_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  EXPECT_LE(diff, rtol * scale) << what << ": max difference " << diff << " (scale " << scale << ")";
}

}  // namespace dt::infer_testing
