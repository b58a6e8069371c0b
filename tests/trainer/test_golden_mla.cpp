// Our MLA layer against Hugging Face transformers' DeepseekV3Attention (tests/golden/README.md
// says how the file was made): output, input gradient and every weight gradient, float32 here
// against a float64 reference.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "golden_io.h"
#include "layers/mla.h"

namespace dt {
namespace {

using golden::GoldenFile;
using golden::golden_path;
using nlohmann::json;

const json& key(const json& hf, const char* k) {
  DT_CHECK(hf.contains(k), "Hugging Face config: key '{}' is missing; is this a DeepSeek-V3 config "
           "(model_type deepseek_v3)?", k);
  return hf.at(k);
}

// The attention part of a Hugging Face DeepSeek-V3 config (model_type deepseek_v3) as our
// ModelConfig with one MLA layer; the MoE fields are not ours to map. Table in
// tests/golden/README.md.
ModelConfig model_config_from_deepseek_v3(const json& hf) {
  DT_CHECK(key(hf, "model_type") == "deepseek_v3", "Hugging Face config: model_type is {}, expected deepseek_v3",
           key(hf, "model_type").dump());
  DT_CHECK(!hf.value("attention_bias", false), "Hugging Face config: attention_bias true is not supported");
  DT_CHECK(key(hf, "num_key_value_heads") == key(hf, "num_attention_heads"),
           "Hugging Face config: MLA needs num_key_value_heads ({}) = num_attention_heads ({})",
           key(hf, "num_key_value_heads").dump(), key(hf, "num_attention_heads").dump());
  const json& rope = key(hf, "rope_parameters");
  // yarn would also rescale the softmax (mscale), which we do not build.
  DT_CHECK(rope.value("rope_type", "default") == "default",
           "Hugging Face config: rope_parameters.rope_type {} is not supported (only default)",
           rope.value("rope_type", std::string("default")));
  ModelConfig c;
  c.vocab_size = key(hf, "vocab_size");
  c.d_model = key(hf, "hidden_size");
  c.d_ff = key(hf, "intermediate_size");
  c.layers = {MixerKind::kMla};
  c.zero_centered_norm = false;  // DeepseekV3RMSNorm: w * x
  c.norm_eps = key(hf, "rms_norm_eps");
  c.mla.n_heads = key(hf, "num_attention_heads");
  c.mla.q_lora_rank = key(hf, "q_lora_rank").is_null() ? 0 : key(hf, "q_lora_rank").get<int>();
  c.mla.kv_lora_rank = key(hf, "kv_lora_rank");
  c.mla.qk_nope_head_dim = key(hf, "qk_nope_head_dim");
  c.mla.qk_rope_head_dim = key(hf, "qk_rope_head_dim");
  c.mla.v_head_dim = key(hf, "v_head_dim");
  c.mla.rope_theta = key(rope, "rope_theta");
  c.mla.rope_interleave = hf.value("rope_interleave", true);
  return c;
}

TEST(GoldenMla, ConfigMappingRefusesWhatWeDoNotBuild) {
  GoldenFile f(golden_path("deepseek_v3_mla.h5"));
  const json hf = json::parse(f.attr_string("config_json"));
  ModelConfig c = model_config_from_deepseek_v3(hf);
  EXPECT_GT(c.mla.q_lora_rank, 0);
  EXPECT_TRUE(c.mla.rope_interleave);
  json bad = hf;
  bad["rope_parameters"]["rope_type"] = "yarn";
  EXPECT_THROW(model_config_from_deepseek_v3(bad), Error);
  bad = hf;
  bad["num_key_value_heads"] = 1;
  EXPECT_THROW(model_config_from_deepseek_v3(bad), Error);
  bad = hf;
  bad["q_lora_rank"] = nullptr;
  EXPECT_EQ(model_config_from_deepseek_v3(bad).mla.q_lora_rank, 0);
}

// DeepseekV3Attention alone: 4 heads, q_lora_rank 24, kv_lora_rank 32, nope 16, rope 8
// (interleaved, HF's default), v 16; B=2, T=37, causal.
TEST(GoldenMla, MatchesTransformersDeepseekV3Attention) {
  golden::check_layer<MLA>("deepseek_v3_mla.h5", "deepseek_v3 MLA", model_config_from_deepseek_v3,
                           [](ModelConfig&) {}, /*tol_out=*/1e-5, /*tol_grad=*/1e-4);
}

}  // namespace
}  // namespace dt
