#include "hf/qwen35.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace dt {

namespace {

using nlohmann::json;

const json& key(const json& hf, const char* k) {
  DT_CHECK(hf.contains(k) && !hf.at(k).is_null(),
           "Hugging Face config: key '{}' is missing; is this a Qwen3.5 text config (model_type {})?", k,
           kQwen35ModelType);
  return hf.at(k);
}

template <class T>
T get(const json& hf, const char* k) {
  const json& v = key(hf, k);
  try {
    return v.get<T>();
  } catch (const json::exception&) {
    DT_FAIL("Hugging Face config: key '{}' is {}, not a value of the expected type", k, v.dump());
  }
}

bool has(const ModelConfig& m, MixerKind k) { return std::find(m.layers.begin(), m.layers.end(), k) != m.layers.end(); }

// HF's rotary dims: int(head_dim * partial_rotary_factor).
int hf_rotary_dim(int head_dim, double factor) { return static_cast<int>(head_dim * factor); }

}  // namespace

std::vector<std::string> qwen35_unsupported(const ModelConfig& m) {
  std::vector<std::string> why;
  for (int i = 0; i < m.n_layers(); ++i) {
    if (m.layers[i] == MixerKind::kMla) {
      why.push_back(fmt::format("MLA layers (layer {} is mla): Qwen3.5 has only linear_attention (GDN) and "
                                "full_attention (gated GQA) layers",
                                i));
      break;
    }
  }
  if (m.layers.empty()) why.push_back("a model without layers");
  if (!m.zero_centered_norm)
    why.push_back("non-zero-centred norms (model.zero_centered_norm false): Qwen3.5's RMSNorm is x * (1 + w)");
  if (has(m, MixerKind::kAttn)) {
    const AttnConfig& a = m.attn;
    if (!a.output_gate)
      why.push_back("ungated attention (model.attn.output_gate false): Qwen3.5's full_attention always gates its "
                    "output with sigmoid(gate) from q_proj");
    if (!a.qk_norm)
      why.push_back("attention without qk_norm (model.attn.qk_norm false): Qwen3.5's full_attention always has "
                    "q_norm and k_norm");
    if (a.rotary_dim == 0)
      why.push_back("attention without RoPE (model.attn.rotary_dim 0): Qwen3.5 rotates at least one pair of dims");
    else if (hf_rotary_dim(a.head_dim, static_cast<double>(a.rotary_dim) / a.head_dim) != a.rotary_dim)
      why.push_back(fmt::format("model.attn.rotary_dim {} of head_dim {}: Hugging Face computes the rotary dims as "
                                "int(head_dim * partial_rotary_factor), which does not give {} back",
                                a.rotary_dim, a.head_dim, a.rotary_dim));
  }
  return why;
}

nlohmann::ordered_json qwen35_config_json(const ModelConfig& m, const Qwen35ExportInfo& info) {
  const std::vector<std::string> why = qwen35_unsupported(m);
  if (!why.empty()) {
    std::string list;
    for (const std::string& w : why) list += "\n  - " + w;
    DT_FAIL("this model cannot be expressed as Hugging Face {} ({}):{}\nOnly hybrids of GDN and gated GQA "
            "with qk_norm, zero-centred norms and (partial) RoPE export; docs/export.md lists the rules",
            kQwen35Architecture, kQwen35ModelType, list);
  }
  const AttnConfig& a = m.attn;
  const GdnConfig& g = m.gdn;
  const double partial = static_cast<double>(a.rotary_dim) / a.head_dim;
  nlohmann::ordered_json layer_types = nlohmann::ordered_json::array();
  for (MixerKind k : m.layers) layer_types.push_back(k == MixerKind::kGdn ? "linear_attention" : "full_attention");
  nlohmann::ordered_json j;
  j["architectures"] = {kQwen35Architecture};
  j["model_type"] = kQwen35ModelType;
  j["vocab_size"] = m.vocab_size;
  j["hidden_size"] = m.d_model;
  j["intermediate_size"] = m.d_ff;
  j["hidden_act"] = "silu";
  j["num_hidden_layers"] = m.n_layers();
  j["layer_types"] = layer_types;
  j["num_attention_heads"] = a.n_heads;
  j["num_key_value_heads"] = a.n_kv_heads;
  j["head_dim"] = a.head_dim;
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["partial_rotary_factor"] = partial;
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", a.rope_theta}, {"partial_rotary_factor", partial}};
  j["linear_num_key_heads"] = g.n_k_heads;
  j["linear_num_value_heads"] = g.n_v_heads;
  j["linear_key_head_dim"] = g.head_k_dim;
  j["linear_value_head_dim"] = g.head_v_dim;
  j["linear_conv_kernel_dim"] = g.conv_kernel;
  j["rms_norm_eps"] = m.norm_eps;
  j["initializer_range"] = m.init_std;
  j["tie_word_embeddings"] = m.tie_embeddings;
  j["max_position_embeddings"] = info.max_position_embeddings;
  j["bos_token_id"] = info.bos_token_id;
  j["eos_token_id"] = info.eos_token_id;
  j["pad_token_id"] = nullptr;
  j["use_cache"] = true;
  j["dtype"] = info.dtype;
  j["torch_dtype"] = info.dtype;  // the key's name before transformers 5
  return j;
}

ModelConfig model_config_from_qwen35(const json& hf) {
  DT_CHECK(hf.is_object(), "Hugging Face config: not a JSON object");
  DT_CHECK(key(hf, "model_type") == kQwen35ModelType, "Hugging Face config: model_type is {}, expected {}",
           key(hf, "model_type").dump(), kQwen35ModelType);
  DT_CHECK(key(hf, "hidden_act") == "silu", "Hugging Face config: hidden_act {} is not supported (only silu)",
           key(hf, "hidden_act").dump());
  DT_CHECK(!hf.value("attention_bias", false), "Hugging Face config: attention_bias true is not supported");
  const json& rope = key(hf, "rope_parameters");
  DT_CHECK(rope.is_object(), "Hugging Face config: rope_parameters is not an object");
  DT_CHECK(rope.value("rope_type", "default") == "default",
           "Hugging Face config: rope_parameters.rope_type {} is not supported (only default)",
           rope.value("rope_type", std::string("default")));
  ModelConfig c;
  c.vocab_size = get<int>(hf, "vocab_size");
  c.d_model = get<int>(hf, "hidden_size");
  c.d_ff = get<int>(hf, "intermediate_size");
  const json& types = key(hf, "layer_types");
  DT_CHECK(types.is_array() && types.size() == get<size_t>(hf, "num_hidden_layers"),
           "Hugging Face config: layer_types {} does not hold num_hidden_layers = {} entries", types.dump(),
           key(hf, "num_hidden_layers").dump());
  c.layers.clear();
  for (const json& t : types) {
    if (t == "linear_attention") {
      c.layers.push_back(MixerKind::kGdn);
    } else if (t == "full_attention") {
      c.layers.push_back(MixerKind::kAttn);
    } else {
      DT_FAIL("Hugging Face config: layer type {} is not supported (linear_attention or full_attention)", t.dump());
    }
  }
  c.tie_embeddings = get<bool>(hf, "tie_word_embeddings");
  c.zero_centered_norm = true;  // Qwen3_5RMSNorm: x * (1 + w)
  c.norm_eps = get<double>(hf, "rms_norm_eps");
  c.init_std = hf.value("initializer_range", c.init_std);
  c.attn.n_heads = get<int>(hf, "num_attention_heads");
  c.attn.n_kv_heads = get<int>(hf, "num_key_value_heads");
  c.attn.head_dim = get<int>(hf, "head_dim");
  // transformers reads rope_parameters.partial_rotary_factor (1 when absent; the config class fills
  // in its own default, 0.25, from a top-level key when the file has none). mrope_section is
  // ignored: with text-only positions its three sections see the same position, which is plain RoPE.
  const double partial = rope.value("partial_rotary_factor", hf.value("partial_rotary_factor", 0.25));
  c.attn.rotary_dim = hf_rotary_dim(c.attn.head_dim, partial);
  c.attn.rope_theta = get<double>(rope, "rope_theta");
  c.attn.qk_norm = true;      // q_norm, k_norm (zero-centred)
  c.attn.output_gate = true;  // q_proj emits [q_h | gate_h] per head
  c.gdn.n_k_heads = get<int>(hf, "linear_num_key_heads");
  c.gdn.n_v_heads = get<int>(hf, "linear_num_value_heads");
  c.gdn.head_k_dim = get<int>(hf, "linear_key_head_dim");
  c.gdn.head_v_dim = get<int>(hf, "linear_value_head_dim");
  c.gdn.conv_kernel = get<int>(hf, "linear_conv_kernel_dim");
  return c;
}

}  // namespace dt
