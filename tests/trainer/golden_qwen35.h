// The Hugging Face Qwen3.5 text config of the golden files as our ModelConfig (shared by the CPU
// golden tests here and the GPU ones in tests/gpu).
#pragma once

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "layers/model_config.h"

namespace dt::golden {

using nlohmann::json;

inline const json& key(const json& hf, const char* k) {
  DT_CHECK(hf.contains(k) && !hf.at(k).is_null(), "Hugging Face config: key '{}' is missing; is this a Qwen3.5 text "
           "config (model_type qwen3_5_text)?", k);
  return hf.at(k);
}

// A Hugging Face Qwen3.5 text config (config.json of Qwen3_5ForCausalLM, model_type
// qwen3_5_text) as our ModelConfig. The Hugging Face export writes the inverse; the table is in
// tests/golden/README.md. Features we do not build are refused by name.
inline ModelConfig model_config_from_qwen35(const json& hf) {
  DT_CHECK(key(hf, "model_type") == "qwen3_5_text", "Hugging Face config: model_type is {}, expected qwen3_5_text",
           key(hf, "model_type").dump());
  DT_CHECK(key(hf, "hidden_act") == "silu", "Hugging Face config: hidden_act {} is not supported (only silu)",
           key(hf, "hidden_act").dump());
  DT_CHECK(!hf.value("attention_bias", false), "Hugging Face config: attention_bias true is not supported");
  const json& rope = key(hf, "rope_parameters");
  DT_CHECK(rope.value("rope_type", "default") == "default",
           "Hugging Face config: rope_parameters.rope_type {} is not supported (only default)",
           rope.value("rope_type", std::string("default")));
  ModelConfig c;
  c.vocab_size = key(hf, "vocab_size");
  c.d_model = key(hf, "hidden_size");
  c.d_ff = key(hf, "intermediate_size");
  const json& types = key(hf, "layer_types");
  DT_CHECK(types.size() == key(hf, "num_hidden_layers").get<size_t>(),
           "Hugging Face config: layer_types has {} entries, num_hidden_layers is {}", types.size(),
           key(hf, "num_hidden_layers").dump());
  for (const json& t : types) {
    if (t == "linear_attention") {
      c.layers.push_back(MixerKind::kGdn);
    } else if (t == "full_attention") {
      c.layers.push_back(MixerKind::kAttn);
    } else {
      DT_FAIL("Hugging Face config: layer type {} is not supported (linear_attention or full_attention)", t.dump());
    }
  }
  c.tie_embeddings = key(hf, "tie_word_embeddings");
  c.zero_centered_norm = true;  // Qwen3_5RMSNorm: x * (1 + w)
  c.norm_eps = key(hf, "rms_norm_eps");
  c.init_std = hf.value("initializer_range", c.init_std);
  c.attn.n_heads = key(hf, "num_attention_heads");
  c.attn.n_kv_heads = key(hf, "num_key_value_heads");
  c.attn.head_dim = key(hf, "head_dim");
  // HF: dim = int(head_dim * partial_rotary_factor). mrope_section is ignored: with text-only
  // positions its three sections see the same position, which is plain RoPE.
  double partial = rope.value("partial_rotary_factor", hf.value("partial_rotary_factor", 1.0));
  c.attn.rotary_dim = static_cast<int>(c.attn.head_dim * partial);
  c.attn.rope_theta = key(rope, "rope_theta");
  c.attn.qk_norm = true;      // q_norm, k_norm (zero-centred)
  c.attn.output_gate = true;  // q_proj emits [q_h | gate_h]
  c.gdn.n_k_heads = key(hf, "linear_num_key_heads");
  c.gdn.n_v_heads = key(hf, "linear_num_value_heads");
  c.gdn.head_k_dim = key(hf, "linear_key_head_dim");
  c.gdn.head_v_dim = key(hf, "linear_value_head_dim");
  c.gdn.conv_kernel = key(hf, "linear_conv_kernel_dim");
  return c;
}

}  // namespace dt::golden
