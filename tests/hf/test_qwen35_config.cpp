// hf/qwen35: the one mapping between ModelConfig and transformers' Qwen3.5 text config, both ways.
// The reference config is the one transformers itself wrote into the golden model file.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "hf/qwen35.h"
#include "tests/trainer/golden_io.h"
#include "trainer/config.h"

namespace dt {
namespace {

using nlohmann::json;

json golden_hf_config() {
  golden::GoldenFile f(golden::golden_path("qwen35_model.h5"));
  return json::parse(f.attr_string("config_json"));
}

void expect_same_model(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.d_model, b.d_model);
  EXPECT_EQ(a.d_ff, b.d_ff);
  EXPECT_EQ(a.layers, b.layers);
  EXPECT_EQ(a.tie_embeddings, b.tie_embeddings);
  EXPECT_EQ(a.zero_centered_norm, b.zero_centered_norm);
  EXPECT_EQ(a.norm_eps, b.norm_eps);
  EXPECT_EQ(a.init_std, b.init_std);
  EXPECT_EQ(a.attn.n_heads, b.attn.n_heads);
  EXPECT_EQ(a.attn.n_kv_heads, b.attn.n_kv_heads);
  EXPECT_EQ(a.attn.head_dim, b.attn.head_dim);
  EXPECT_EQ(a.attn.rotary_dim, b.attn.rotary_dim);
  EXPECT_EQ(a.attn.rope_theta, b.attn.rope_theta);
  EXPECT_EQ(a.attn.qk_norm, b.attn.qk_norm);
  EXPECT_EQ(a.attn.output_gate, b.attn.output_gate);
  EXPECT_EQ(a.gdn.n_k_heads, b.gdn.n_k_heads);
  EXPECT_EQ(a.gdn.n_v_heads, b.gdn.n_v_heads);
  EXPECT_EQ(a.gdn.head_k_dim, b.gdn.head_k_dim);
  EXPECT_EQ(a.gdn.head_v_dim, b.gdn.head_v_dim);
  EXPECT_EQ(a.gdn.conv_kernel, b.gdn.conv_kernel);
}

// The refusal of `m`, which must name every piece of `pieces`.
void expect_refused(const ModelConfig& m, const std::vector<std::string>& pieces) {
  try {
    qwen35_config_json(m, {});
    ADD_FAILURE() << "expected the model to be refused";
  } catch (const Error& e) {
    for (const std::string& p : pieces) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

ModelConfig hybrid() {
  ModelConfig m = default_config().model;
  m.layers = parse_layer_pattern("[gdn, gdn, attn]");
  m.attn.qk_norm = true;
  m.attn.output_gate = true;
  m.attn.rotary_dim = 16;
  return m;
}

// transformers' config.json -> ModelConfig -> our config.json: every key we write holds the value
// transformers wrote, and reading ours back gives the same ModelConfig.
TEST(HfQwen35Config, TransformersConfigRoundTrips) {
  const json hf = golden_hf_config();
  const ModelConfig m = model_config_from_qwen35(hf);
  Qwen35ExportInfo info;
  info.max_position_embeddings = hf["max_position_embeddings"];
  const json ours = json::parse(qwen35_config_json(m, info).dump());
  for (const auto& [k, v] : ours.items()) {
    if (k == "architectures" || k == "bos_token_id" || k == "eos_token_id" || k == "dtype" || k == "torch_dtype")
      continue;  // null in the golden file, which transformers wrote without a tokenizer or a dtype
    ASSERT_TRUE(hf.contains(k)) << k;
    EXPECT_EQ(v, hf[k]) << k;
  }
  EXPECT_EQ(ours["architectures"], json::array({"Qwen3_5ForCausalLM"}));
  EXPECT_EQ(ours["model_type"], "qwen3_5_text");
  expect_same_model(model_config_from_qwen35(ours), m);
}

// ModelConfig -> config.json -> ModelConfig (-> the same config.json), for models with and without
// each kind of layer.
TEST(HfQwen35Config, ModelConfigRoundTrips) {
  for (const char* pattern : {"[gdn, gdn, attn]", "[attn]", "[gdn]", "[attn, gdn, gdn, gdn, attn]"}) {
    ModelConfig m = hybrid();
    m.layers = parse_layer_pattern(pattern);
    m.tie_embeddings = std::string(pattern) == "[gdn]";
    m.norm_eps = 1e-5;
    m.attn.rope_theta = 500000.0;
    m.gdn.conv_kernel = 3;
    const json j = json::parse(qwen35_config_json(m, {}).dump());
    EXPECT_EQ(j["num_hidden_layers"], m.n_layers()) << pattern;
    expect_same_model(model_config_from_qwen35(j), m);
    EXPECT_EQ(json::parse(qwen35_config_json(model_config_from_qwen35(j), {}).dump()), j) << pattern;
  }
  ModelConfig m = hybrid();
  m.attn.rotary_dim = m.attn.head_dim;  // full RoPE: factor 1
  EXPECT_EQ(qwen35_config_json(m, {})["rope_parameters"]["partial_rotary_factor"], 1.0);
  expect_same_model(model_config_from_qwen35(json::parse(qwen35_config_json(m, {}).dump())), m);
}

TEST(HfQwen35Config, RefusesWhatQwen35CannotExpress) {
  ModelConfig m = hybrid();
  m.layers = parse_layer_pattern("[gdn, mla]");
  expect_refused(m, {"MLA layers", "layer 1 is mla"});
  m = hybrid();
  m.attn.output_gate = false;
  expect_refused(m, {"ungated attention", "model.attn.output_gate"});
  m = hybrid();
  m.attn.qk_norm = false;
  expect_refused(m, {"qk_norm"});
  m = hybrid();
  m.zero_centered_norm = false;
  expect_refused(m, {"non-zero-centred norms", "model.zero_centered_norm"});
  m = hybrid();
  m.attn.rotary_dim = 0;
  expect_refused(m, {"without RoPE"});
  m = hybrid();  // several at once: every one named
  m.attn.output_gate = false;
  m.attn.qk_norm = false;
  m.zero_centered_norm = false;
  expect_refused(m, {"output_gate", "qk_norm", "zero_centered_norm"});
  // Attention settings do not matter to a model without attention layers; the GDN chunk size never does.
  m = hybrid();
  m.layers = parse_layer_pattern("[gdn, gdn]");
  m.attn.output_gate = false;
  m.attn.qk_norm = false;
  m.gdn.chunk_size = 0;
  EXPECT_NO_THROW(qwen35_config_json(m, {}));
}

TEST(HfQwen35Config, ReaderRefusesWhatWeDoNotBuild) {
  const json hf = golden_hf_config();
  auto refused = [](const json& j, const std::string& piece) {
    try {
      model_config_from_qwen35(j);
      ADD_FAILURE() << "expected a refusal naming " << piece;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(piece), std::string::npos) << e.what();
    }
  };
  json bad = hf;
  bad["hidden_act"] = "gelu";
  refused(bad, "hidden_act");
  bad = hf;
  bad["rope_parameters"]["rope_type"] = "yarn";
  refused(bad, "rope_type");
  bad = hf;
  bad["layer_types"][0] = "sliding_attention";
  refused(bad, "sliding_attention");
  bad = hf;
  bad.erase("head_dim");
  refused(bad, "'head_dim' is missing");
  bad = hf;
  bad["model_type"] = "qwen3_next";
  refused(bad, "model_type");
  bad = hf;
  bad["attention_bias"] = true;
  refused(bad, "attention_bias");
  bad = hf;
  bad["hidden_size"] = "wide";
  refused(bad, "hidden_size");
  bad = hf;
  bad["num_hidden_layers"] = 3;
  refused(bad, "num_hidden_layers");
  // No partial_rotary_factor anywhere: transformers' Qwen3.5 default, 0.25.
  bad = hf;
  bad.erase("partial_rotary_factor");
  bad["rope_parameters"].erase("partial_rotary_factor");
  EXPECT_EQ(model_config_from_qwen35(bad).attn.rotary_dim, hf["head_dim"].get<int>() / 4);
}

}  // namespace
}  // namespace dt
