// The one mapping between our ModelConfig and Hugging Face's Qwen3.5 text model
// (transformers' Qwen3_5ForCausalLM, config.json with model_type qwen3_5_text), both ways.
// `deltatron export --format hf` writes config.json through qwen35_config_json; the golden tests
// read the reference files' configs through model_config_from_qwen35. docs/export.md has the
// table, and what is refused and why.
//
// Parameters need no mapping: every Deltatron parameter already has its Hugging Face name, shape
// and layout (Model::param_infos), which the golden tests check one to one against transformers.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "layers/model_config.h"

namespace dt {

inline constexpr const char* kQwen35ModelType = "qwen3_5_text";
inline constexpr const char* kQwen35Architecture = "Qwen3_5ForCausalLM";

// What config.json says beyond the model's shape.
struct Qwen35ExportInfo {
  std::string dtype = "float32";      // torch's name of the weights' dtype: float32 or bfloat16
  int max_position_embeddings = 2048;  // the context the model was trained at
  int bos_token_id = 50256;           // GPT-2's <|endoftext|>
  int eos_token_id = 50256;
};

// Every feature of `m` that Qwen3.5 cannot express, one sentence each naming the feature and why;
// empty when the model exports. Only the kinds of layer that `m` has are looked at.
std::vector<std::string> qwen35_unsupported(const ModelConfig& m);

// config.json of the model. Throws dt::Error listing qwen35_unsupported(m) when it is not empty.
nlohmann::ordered_json qwen35_config_json(const ModelConfig& m, const Qwen35ExportInfo& info);

// A Qwen3.5 text config.json as our ModelConfig (what is not in config.json keeps its default:
// the GDN chunk size). Throws dt::Error naming the key at fault, and refuses what we do not build
// (hidden_act other than silu, attention_bias, rope types other than default, other layer types).
ModelConfig model_config_from_qwen35(const nlohmann::json& hf);

}  // namespace dt
