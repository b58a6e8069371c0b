// Our MLA layer against Hugging Face transformers' DeepseekV3Attention (tests/golden/README.md
// says how the file was made): output, input gradient and every weight gradient, float32 here
// against a float64 reference.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "golden_deepseek_v3.h"
#include "golden_io.h"
#include "layers/mla.h"

namespace dt {
namespace {

using golden::GoldenFile;
using golden::golden_path;
using golden::model_config_from_deepseek_v3;
using nlohmann::json;

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
