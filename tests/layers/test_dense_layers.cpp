// Gradient checks (finite differences in double) and f32-vs-f64 agreement for every dense layer:
// Linear, RMSNorm (both forms, per-head), MLP, Attention (GQA, qk_norm, output gate, partial
// rotary), MLA (q_lora_rank 0 and > 0, both RoPE layouts), Block. Odd sizes throughout.
#include <gtest/gtest.h>

#include "layers/attention.h"
#include "layers/block.h"
#include "layers/linear.h"
#include "layers/mla.h"
#include "layers/mlp.h"
#include "layers/rmsnorm.h"
#include "tests/layers/gradcheck.h"

namespace dt {
namespace {

using testing::check_layer_gradients;
using testing::expect_float_matches_double;

constexpr int kB = 2, kT = 7, kC = 24;

ModelConfig tiny_config() {
  ModelConfig cfg;
  cfg.vocab_size = 37;
  cfg.d_model = kC;
  cfg.d_ff = 40;
  cfg.layers = {MixerKind::kAttn, MixerKind::kMla};
  cfg.attn = AttnConfig{.n_heads = 4, .n_kv_heads = 2, .head_dim = 6, .rotary_dim = 4, .rope_theta = 100.0,
                        .qk_norm = true, .output_gate = true};
  cfg.mla = MlaConfig{.n_heads = 3, .q_lora_rank = 10, .kv_lora_rank = 12, .qk_nope_head_dim = 4,
                      .qk_rope_head_dim = 4, .v_head_dim = 6, .rope_theta = 100.0, .rope_interleave = true};
  return cfg;
}

TEST(LinearLayer, Gradients) {
  auto make = [] { return std::make_unique<Linear>("m.proj", 11, 13, 0.02, TpSplit::kColumn); };
  check_layer_gradients(make, kB, kT, 11, 13, 1);
  expect_float_matches_double(make, kB, kT, 11, 13, 2);
}

TEST(RMSNormLayer, GradientsZeroCentred) {
  auto make = [] { return std::make_unique<RMSNorm>("m.norm", kC, 1e-6, /*zero_centered=*/true); };
  check_layer_gradients(make, kB, kT, kC, kC, 3);
  expect_float_matches_double(make, kB, kT, kC, kC, 4);
}

TEST(RMSNormLayer, GradientsPlain) {
  auto make = [] { return std::make_unique<RMSNorm>("m.norm", kC, 1e-6, /*zero_centered=*/false); };
  check_layer_gradients(make, kB, kT, kC, kC, 5);
}

TEST(RMSNormLayer, GradientsPerHead) {
  // [B, T, 3 heads, 8]: one weight [8] shared by the heads, each head normalised on its own.
  auto make = [] { return std::make_unique<RMSNorm>("m.q_norm", 8, 1e-6, /*zero_centered=*/true, /*heads=*/3); };
  check_layer_gradients(make, kB, kT, kC, kC, 6);
}

TEST(MLPLayer, Gradients) {
  ModelConfig cfg = tiny_config();
  auto make = [&] { return std::make_unique<MLP>(cfg, "model.layers.0.mlp"); };
  check_layer_gradients(make, kB, kT, kC, kC, 7);
  expect_float_matches_double(make, kB, kT, kC, kC, 8);
}

struct AttnCase {
  const char* name;
  int n_heads, n_kv_heads, head_dim, rotary_dim;
  bool qk_norm, output_gate, zero_centered;
};

class AttentionLayer : public ::testing::TestWithParam<AttnCase> {};

TEST_P(AttentionLayer, Gradients) {
  const AttnCase& c = GetParam();
  ModelConfig cfg = tiny_config();
  cfg.zero_centered_norm = c.zero_centered;
  cfg.attn = AttnConfig{.n_heads = c.n_heads, .n_kv_heads = c.n_kv_heads, .head_dim = c.head_dim,
                        .rotary_dim = c.rotary_dim, .rope_theta = 100.0, .qk_norm = c.qk_norm,
                        .output_gate = c.output_gate};
  auto make = [&] { return std::make_unique<Attention>(cfg, "model.layers.0.self_attn"); };
  check_layer_gradients(make, kB, kT, kC, kC, 11);
  expect_float_matches_double(make, kB, kT, kC, kC, 12);
}

INSTANTIATE_TEST_SUITE_P(
    Variants, AttentionLayer,
    ::testing::Values(AttnCase{"plain_mha", 3, 3, 8, 8, false, false, true},
                      AttnCase{"gqa_partial_rotary", 4, 2, 6, 4, false, false, true},
                      AttnCase{"qk_norm", 4, 2, 6, 2, true, false, true},
                      AttnCase{"qk_norm_plain", 4, 1, 8, 4, true, false, false},
                      AttnCase{"output_gate", 4, 2, 6, 6, false, true, true},
                      AttnCase{"qwen35_full", 6, 2, 8, 4, true, true, true},
                      AttnCase{"no_rotary", 2, 1, 6, 0, true, true, true}),
    [](const auto& info) { return std::string(info.param.name); });

struct MlaCase {
  const char* name;
  int n_heads, q_lora_rank, kv_lora_rank, nope, rope, v;
  bool interleave;
};

class MlaLayer : public ::testing::TestWithParam<MlaCase> {};

TEST_P(MlaLayer, Gradients) {
  const MlaCase& c = GetParam();
  ModelConfig cfg = tiny_config();
  cfg.mla = MlaConfig{.n_heads = c.n_heads, .q_lora_rank = c.q_lora_rank, .kv_lora_rank = c.kv_lora_rank,
                      .qk_nope_head_dim = c.nope, .qk_rope_head_dim = c.rope, .v_head_dim = c.v,
                      .rope_theta = 100.0, .rope_interleave = c.interleave};
  auto make = [&] { return std::make_unique<MLA>(cfg, "model.layers.1.self_attn"); };
  check_layer_gradients(make, kB, kT, kC, kC, 21);
  expect_float_matches_double(make, kB, kT, kC, kC, 22);
}

INSTANTIATE_TEST_SUITE_P(Variants, MlaLayer,
                         ::testing::Values(MlaCase{"q_lora", 3, 10, 12, 4, 4, 6, true},
                                           MlaCase{"direct_q_proj", 3, 0, 12, 4, 4, 6, true},
                                           MlaCase{"rotate_half", 2, 9, 7, 6, 2, 5, false},
                                           MlaCase{"odd_dims", 5, 0, 9, 3, 6, 7, true}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(MlaLayer, DeclaresHuggingFaceNames) {
  ModelConfig cfg = tiny_config();
  for (int r : {0, 10}) {
    cfg.mla.q_lora_rank = r;
    ParamStore params(DType::kF32, Device::kCPU);
    Arena acts("activations", Device::kCPU);
    MLA mla(cfg, "model.layers.1.self_attn");
    mla.declare(params, acts, 1, 3);
    std::vector<std::string> names;
    for (const ParamInfo& p : params.infos()) names.push_back(p.name);
    std::string pre = "model.layers.1.self_attn.";
    std::vector<std::string> expect =
        r ? std::vector<std::string>{pre + "q_a_proj.weight", pre + "q_a_layernorm.weight", pre + "q_b_proj.weight"}
          : std::vector<std::string>{pre + "q_proj.weight"};
    for (const char* n : {"kv_a_proj_with_mqa.weight", "kv_a_layernorm.weight", "kv_b_proj.weight", "o_proj.weight"})
      expect.push_back(pre + n);
    EXPECT_EQ(names, expect);
    // DeepSeek's norms are plain (w = 1) even though the model's are zero-centred.
    EXPECT_TRUE(cfg.zero_centered_norm);
    EXPECT_EQ(params.infos()[params.slot(pre + "kv_a_layernorm.weight")].init, Init::kOnes);
    EXPECT_EQ(params.infos()[params.slot(pre + "kv_b_proj.weight")].shape,
              Shape({cfg.mla.n_heads * (cfg.mla.qk_nope_head_dim + cfg.mla.v_head_dim), cfg.mla.kv_lora_rank}));
  }
}

TEST(AttentionLayer, RejectsBadConfig) {
  ModelConfig cfg = tiny_config();
  cfg.attn.n_kv_heads = 3;  // does not divide 4
  EXPECT_THROW(Attention(cfg, "model.layers.0.self_attn"), Error);
  cfg = tiny_config();
  cfg.attn.rotary_dim = 5;
  EXPECT_THROW(Attention(cfg, "model.layers.0.self_attn"), Error);
  cfg.attn.rotary_dim = 8;  // > head_dim 6
  EXPECT_THROW(Attention(cfg, "model.layers.0.self_attn"), Error);
  cfg = tiny_config();
  cfg.mla.qk_rope_head_dim = 3;
  EXPECT_THROW(MLA(cfg, "model.layers.1.self_attn"), Error);
}

class BlockLayer : public ::testing::TestWithParam<MixerKind> {};

TEST_P(BlockLayer, Gradients) {
  ModelConfig cfg = tiny_config();
  cfg.layers = {GetParam()};
  auto make = [&] { return std::make_unique<Block>(cfg, 0); };
  check_layer_gradients(make, kB, kT, kC, kC, 31);
  expect_float_matches_double(make, kB, kT, kC, kC, 32);
}

INSTANTIATE_TEST_SUITE_P(Mixers, BlockLayer, ::testing::Values(MixerKind::kAttn, MixerKind::kMla),
                         [](const auto& info) { return info.param == MixerKind::kAttn ? "attn" : "mla"; });

}  // namespace
}  // namespace dt
