// `deltatron info CONFIG.yaml`: the model a training config makes, as text or one JSON object, with
// the counts of layers/param_count.h and the bytes of layers/decode_memory.h; a file that is not a
// valid config gets exactly `deltatron train --config`'s error.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "layers/decode_memory.h"
#include "layers/param_count.h"
#include "trainer/config.h"
#include "trainer_test_util.h"

namespace dt {
namespace {

using namespace trainer_testing;

const std::string kSourceDir = DELTATRON_SOURCE_DIR;

TEST(InfoConfig, Json) {
  ScratchDir dir;
  RunResult r = run_deltatron("info configs/experiments/gdn_124m.yaml --json", dir.str(), kSourceDir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const Config c = load_config(kSourceDir + "/configs/experiments/gdn_124m.yaml");
  EXPECT_EQ(j.at("config"), "configs/experiments/gdn_124m.yaml");
  EXPECT_EQ(j.at("layers"), nlohmann::json(std::vector<std::string>(12, "gdn")));
  const ParamCount n = count_params(c.model);
  EXPECT_EQ(j.at("parameters").get<int64_t>(), n.total);
  for (const auto& [part, count] : n.by_part) EXPECT_EQ(j.at("parameters_by_kind").at(part).get<int64_t>(), count);
  const nlohmann::json& d = j.at("decode");
  const int64_t gdn_layer = 12 * 64 * 64 * 4 + 3 * (3 * 768) * 2;  // fp32 state, bf16 conv tail
  EXPECT_EQ(d.at("state_bytes_per_sequence").get<int64_t>(), 12 * gdn_layer);
  EXPECT_EQ(d.at("cache_bytes_per_token").get<int64_t>(), 0);
  for (const char* t : {"1024", "8192", "32768", "131072"})
    EXPECT_EQ(d.at("bytes_per_sequence").at(t).get<int64_t>(), 12 * gdn_layer) << t;
}

// configs/quickstart.yaml by hand (tests/trainer/test_experiments.cpp has the parts): 3 GDN layers
// of 8192 + 768 bytes, one attention layer of 128 bytes per token; --set applies as in `train`.
TEST(InfoConfig, QuickstartTextAndSet) {
  ScratchDir dir;
  RunResult r = run_deltatron("info configs/quickstart.yaml", dir.str(), kSourceDir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::string piece :
       {"layers:     4: gdn, gdn, gdn, attn", "gdn 3, attn 1", "d_model:    64", "untied", "parameters: ",
        "state      26880 bytes", "cache      128 bytes per token", "32K        4221184 bytes", "2·L·t·d",
        "L·H·d_head²", "valid:      yes"})
    EXPECT_NE(r.out.find(piece), std::string::npos) << "expected '" << piece << "' in:\n" << r.out;
  r = run_deltatron("info configs/quickstart.yaml --json --set model.layers=[mla] --set model.mla.kv_lora_rank=100",
                    dir.str(), kSourceDir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("layers"), nlohmann::json({"mla"}));
  EXPECT_EQ(j.at("decode").at("cache_bytes_per_token").get<int64_t>(), (100 + 32) * 2);
  EXPECT_EQ(j.at("decode").at("bytes_per_sequence").at("1024").get<int64_t>(), 1024 * (100 + 32) * 2);
  EXPECT_TRUE(j.at("decode_mla_fp8").is_null()) << "kv_lora_rank 100 does not take the fp8 cache";
  EXPECT_FALSE(nlohmann::json::parse(run_deltatron("info configs/quickstart.yaml --json", dir.str(), kSourceDir).out)
                   .contains("decode_mla_fp8"));  // no MLA layers
  // kv_lora_rank 128: the fp8 figures, in the JSON and the text.
  const std::string mla128 = "info configs/quickstart.yaml --set model.layers=[mla] --set model.mla.kv_lora_rank=128";
  r = run_deltatron(mla128 + " --json", dir.str(), kSourceDir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json f = nlohmann::json::parse(r.out).at("decode_mla_fp8");
  EXPECT_EQ(f.at("cache_bytes_per_token").get<int64_t>(), 128 + 4 + 32 * 2);
  EXPECT_EQ(f.at("bytes_per_sequence").at("32768").get<int64_t>(), 32768 * (128 + 4 + 32 * 2));
  r = run_deltatron(mla128, dir.str(), kSourceDir);
  for (const std::string piece : {"with --mla-cache fp8", "cache      196 bytes per token", "128 fp8 e4m3 + 1 fp32 scales"})
    EXPECT_NE(r.out.find(piece), std::string::npos) << "expected '" << piece << "' in:\n" << r.out;
}

// Each bad config: exit 1, `deltatron: error: ` and the same message `train --config` gives.
TEST(InfoConfig, BadConfigsAsTrainRefusesThem) {
  ScratchDir dir;
  struct Case {
    const char* file;
    const char* text;
    const char* piece;
  };
  const Case cases[] = {
      {"list.yaml", "- gdn\n- attn\n", "the top level must be a mapping"},
      {"unknown.yaml", "model:\n  d_model: 64\n  atn:\n    n_heads: 2\n", "unknown.yaml:3: unknown key 'model.atn'"},
      {"invalid.yaml", "model:\n  attn: {n_heads: 12, n_kv_heads: 5}\n",
       "model.attn.n_heads = 12 must be divisible by model.attn.n_kv_heads = 5"},
      {"broken.yaml", "model: [\n", "not valid YAML"},
  };
  for (const Case& c : cases) {
    write_text(dir / c.file, c.text);
    const RunResult info = run_deltatron("info " + dir / c.file, dir.str());
    EXPECT_EQ(info.exit_code, 1) << c.file << ": " << info.out;
    EXPECT_EQ(info.err.rfind("deltatron: error: ", 0), 0u) << info.err;
    EXPECT_NE(info.err.find(c.piece), std::string::npos) << "expected '" << c.piece << "' in: " << info.err;
    const RunResult train = run_deltatron("train --config " + dir / c.file, dir.str());
    EXPECT_EQ(info.err, train.err) << c.file;
  }
  const RunResult set = run_deltatron("info configs/quickstart.yaml --set model.d_modl=8", dir.str(), kSourceDir);
  EXPECT_EQ(set.exit_code, 1);
  EXPECT_NE(set.err.find("unknown key 'model.d_modl'"), std::string::npos) << set.err;
  write_text(dir / "notes.txt", "model: {}\n");
  const RunResult json = run_deltatron("info --json " + dir / "notes.txt", dir.str());
  EXPECT_EQ(json.exit_code, 1);
  EXPECT_NE(json.err.find("--json applies to a YAML config"), std::string::npos) << json.err;
}

}  // namespace
}  // namespace dt
