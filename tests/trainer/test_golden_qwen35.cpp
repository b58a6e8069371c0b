// Our CPU model against Hugging Face transformers' Qwen3.5 (tests/golden/README.md says how the
// files were made): the whole Qwen3_5ForCausalLM (loss, logits, every gradient), then its two
// mixers alone, which place a mismatch. Float32 here against a float64 reference.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "golden_io.h"
#include "hf/qwen35.h"
#include "layers/attention.h"
#include "layers/gdn.h"
#include "layers/model.h"

namespace dt {
namespace {

using golden::ErrorTable;
using golden::GoldenFile;
using golden::golden_path;
using golden::rel_error;
using nlohmann::json;


constexpr double kTolOut = 1e-5;   // loss, logits, a layer's output
constexpr double kTolGrad = 1e-4;  // every gradient

// The file itself: targets are the inputs shifted by one, and the stored loss is the mean
// cross-entropy of the stored logits (recomputed here in double), so the reading of the
// convention cannot drift.
TEST(GoldenQwen35, FileIsConsistent) {
  GoldenFile f(golden_path("qwen35_model.h5"));
  std::vector<int64_t> shape = f.shape("input_ids");
  ASSERT_EQ(shape.size(), 2u);
  ASSERT_EQ(f.shape("target_ids"), shape);
  const int64_t B = shape[0], T = shape[1];
  ModelConfig cfg = model_config_from_qwen35(json::parse(f.attr_string("config_json")));
  const int64_t V = cfg.vocab_size;
  ASSERT_EQ(f.shape("logits"), (std::vector<int64_t>{B, T, V}));
  std::vector<int32_t> in = f.read<int32_t>("input_ids"), tgt = f.read<int32_t>("target_ids");
  std::vector<double> logits = f.read<double>("logits");
  double sum = 0;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      if (t + 1 < T) {
        EXPECT_EQ(tgt[b * T + t], in[b * T + t + 1]) << "b " << b << " t " << t;
      }
      const double* row = &logits[(b * T + t) * V];
      double m = row[0];
      for (int64_t v = 1; v < V; ++v) m = std::max(m, row[v]);
      double se = 0;
      for (int64_t v = 0; v < V; ++v) se += std::exp(row[v] - m);
      sum += m + std::log(se) - row[tgt[b * T + t]];
    }
  }
  EXPECT_LE(rel_error({sum / double(B * T)}, f.read<double>("loss")), 1e-12);
  EXPECT_EQ(f.attr_string("below_float64_ops"), "") << "the reference was not computed wholly in float64";
}

TEST(GoldenQwen35, ConfigMappingRefusesWhatWeDoNotBuild) {
  GoldenFile f(golden_path("qwen35_model.h5"));
  const json hf = json::parse(f.attr_string("config_json"));
  EXPECT_NO_THROW(model_config_from_qwen35(hf));
  json bad = hf;
  bad["hidden_act"] = "gelu";
  EXPECT_THROW(model_config_from_qwen35(bad), Error);
  bad = hf;
  bad["rope_parameters"]["rope_type"] = "yarn";
  EXPECT_THROW(model_config_from_qwen35(bad), Error);
  bad = hf;
  bad["layer_types"][0] = "sliding_attention";
  EXPECT_THROW(model_config_from_qwen35(bad), Error);
  bad = hf;
  bad.erase("head_dim");
  EXPECT_THROW(model_config_from_qwen35(bad), Error);
}

// Qwen3_5ForCausalLM: [linear_attention x3, full_attention], tied embeddings, B=2, T=37.
TEST(GoldenQwen35, ModelMatchesTransformers) {
  GoldenFile f(golden_path("qwen35_model.h5"));
  ModelConfig cfg = model_config_from_qwen35(json::parse(f.attr_string("config_json")));
  std::vector<int64_t> shape = f.shape("input_ids");
  ASSERT_EQ(shape.size(), 2u);
  const int B = static_cast<int>(shape[0]), T = static_cast<int>(shape[1]);
  std::vector<int32_t> inputs = f.read<int32_t>("input_ids"), targets = f.read<int32_t>("target_ids");

  Model model(cfg, B, T);
  ASSERT_TRUE(golden::load_params(f, model.params()));
  Context ctx;
  fill(ctx, model.logits(), NAN);  // poison: a logit forward leaves unwritten fails
  model.params().zero_grads();
  const double loss = model.forward(ctx, inputs.data(), targets.data());
  std::vector<double> logits = golden::to_host_f64(model.logits());  // before backward reuses it
  model.backward(ctx, 1.0);

  ErrorTable errors("qwen35_model (Qwen3_5ForCausalLM)");
  errors.add("loss", rel_error({loss}, f.read<double>("loss")), kTolOut);
  errors.add("logits", rel_error(logits, f.read<double>("logits")), kTolOut);
  golden::compare_grads(f, model.params(), errors, kTolGrad);
  errors.check();

  // Nothing of the last step leaks into the next (recurrent state, caches): same loss, bitwise.
  EXPECT_EQ(model.forward(ctx, inputs.data(), targets.data()), loss);
}

// Qwen3_5GatedDeltaNet alone, B=1, T=70: two chunks of 64, the second partial.
TEST(GoldenQwen35, GatedDeltaNetChunkedMatchesTransformers) {
  golden::check_layer<GatedDeltaNet>("qwen35_gdn_layer.h5", "qwen35 GatedDeltaNet, chunk 64",
                                     model_config_from_qwen35, [](ModelConfig& c) { c.gdn.chunk_size = 64; },
                                     kTolOut, kTolGrad);
}

TEST(GoldenQwen35, GatedDeltaNetRecurrentMatchesTransformers) {
  golden::check_layer<GatedDeltaNet>("qwen35_gdn_layer.h5", "qwen35 GatedDeltaNet, token by token",
                                     model_config_from_qwen35, [](ModelConfig& c) { c.gdn.chunk_size = 0; },
                                     kTolOut, kTolGrad);
}

// Qwen3_5Attention alone: 4 query heads on 2 KV heads of 16, rotary on 8 dims (factor 0.5),
// q/k norm and the output gate.
TEST(GoldenQwen35, GatedAttentionMatchesTransformers) {
  golden::check_layer<Attention>("qwen35_attn_layer.h5", "qwen35 Attention", model_config_from_qwen35,
                                 [](ModelConfig&) {}, kTolOut, kTolGrad);
}

}  // namespace
}  // namespace dt
