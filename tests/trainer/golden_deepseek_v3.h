// The attention part of a Hugging Face DeepSeek-V3 config as our ModelConfig with one MLA layer
// (shared by the CPU golden test here and the GPU one in tests/gpu).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "layers/model_config.h"

namespace dt::golden {

using nlohmann::json;

inline const json& deepseek_key(const json& hf, const char* k) {
  DT_CHECK(hf.contains(k), "Hugging Face config: key '{}' is missing; is this a DeepSeek-V3 config "
           "(model_type deepseek_v3)?", k);
  return hf.at(k);
}

// The attention part of a Hugging Face DeepSeek-V3 config (model_type deepseek_v3) as our
// ModelConfig with one MLA layer; the MoE fields are not ours to map. Table in
// tests/golden/README.md.
inline ModelConfig model_config_from_deepseek_v3(const json& hf) {
  DT_CHECK(deepseek_key(hf, "model_type") == "deepseek_v3", "Hugging Face config: model_type is {}, expected deepseek_v3",
           deepseek_key(hf, "model_type").dump());
  DT_CHECK(!hf.value("attention_bias", false), "Hugging Face config: attention_bias true is not supported");
  DT_CHECK(deepseek_key(hf, "num_key_value_heads") == deepseek_key(hf, "num_attention_heads"),
           "Hugging Face config: MLA needs num_key_value_heads ({}) = num_attention_heads ({})",
           deepseek_key(hf, "num_key_value_heads").dump(), deepseek_key(hf, "num_attention_heads").dump());
  const json& rope = deepseek_key(hf, "rope_parameters");
  // yarn would also rescale the softmax (mscale), which we do not build.
  DT_CHECK(rope.value("rope_type", "default") == "default",
           "Hugging Face config: rope_parameters.rope_type {} is not supported (only default)",
           rope.value("rope_type", std::string("default")));
  ModelConfig c;
  c.vocab_size = deepseek_key(hf, "vocab_size");
  c.d_model = deepseek_key(hf, "hidden_size");
  c.d_ff = deepseek_key(hf, "intermediate_size");
  c.layers = {MixerKind::kMla};
  c.zero_centered_norm = false;  // DeepseekV3RMSNorm: w * x
  c.norm_eps = deepseek_key(hf, "rms_norm_eps");
  c.mla.n_heads = deepseek_key(hf, "num_attention_heads");
  c.mla.q_lora_rank = deepseek_key(hf, "q_lora_rank").is_null() ? 0 : deepseek_key(hf, "q_lora_rank").get<int>();
  c.mla.kv_lora_rank = deepseek_key(hf, "kv_lora_rank");
  c.mla.qk_nope_head_dim = deepseek_key(hf, "qk_nope_head_dim");
  c.mla.qk_rope_head_dim = deepseek_key(hf, "qk_rope_head_dim");
  c.mla.v_head_dim = deepseek_key(hf, "v_head_dim");
  c.mla.rope_theta = deepseek_key(rope, "rope_theta");
  c.mla.rope_interleave = hf.value("rope_interleave", true);
  return c;
}

}  // namespace dt::golden
