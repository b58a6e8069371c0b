// `deltatron export --format hf`, through the binary: the files a tiny hybrid checkpoint exports to,
// model.safetensors against config.json and bitwise against the checkpoint (fp32, and bf16 as the
// rounding of fp32), the refusals (models Qwen3.5 cannot express, bad flags, bad checkpoints) and
// the rules for --out. transformers itself loads an export in scripts/hf_check.py (docs/export.md).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "hf/qwen35.h"
#include "io/safetensors.h"
#include "layers/model.h"
#include "trainer/adamw.h"
#include "trainer/checkpoint_format.h"
#include "trainer/train_checkpoint.h"
#include "tests/trainer/trainer_test_util.h"

namespace dt {
namespace {

namespace fs = std::filesystem;
using namespace trainer_testing;

std::string quote(const std::string& s) { return "'" + s + "'"; }

// The tiny test hybrid with GPT-2's vocabulary (the smallest that exports) and `edit` applied.
Config export_config(const std::string& dir, void (*edit)(Config&) = nullptr) {
  Config c = tiny_config(dir);
  c.model.vocab_size = 50304;
  c.model.d_model = 16;
  c.model.d_ff = 24;
  c.model.layers = parse_layer_pattern("[gdn, attn, gdn]");
  c.model.tie_embeddings = false;
  if (edit) edit(c);
  return c;
}

// A checkpoint of `cfg`'s model with every parameter drawn at random (norm weights included, which
// init leaves at 0 or 1), values of every magnitude so that bf16 rounding has work to do.
std::string make_checkpoint(const std::string& path, const Config& cfg) {
  Model model(cfg.model, 1, 1);
  model.init(1);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const ParamInfo& p : model.params().infos()) {
    Tensor t = model.params().master(p.name);
    float* x = t.ptr<float>();
    for (int64_t i = 0; i < t.numel(); ++i) x[i] = normal(rng) * std::ldexp(1.0f, static_cast<int>(i % 9) - 4);
  }
  AdamW opt(model.params(), {});
  CheckpointState state;
  state.step = 42;
  save_train_checkpoint(path, cfg, model.params(), opt, state);
  return path;
}

// name -> fp32 values of the checkpoint's /params.
std::map<std::string, std::vector<float>> checkpoint_params(const std::string& path, const ModelConfig& m) {
  std::map<std::string, std::vector<float>> out;
  CheckpointGroup g{"params", {}};
  for (const ParamInfo& p : Model::param_infos(m)) {
    const Shape s = p.full_shape.ndim > 0 ? p.full_shape : p.shape;
    out[p.name].resize(static_cast<size_t>(s.numel()));
    g.tensors.push_back({p.name, Tensor(out[p.name].data(), DType::kF32, Device::kCPU, s)});
  }
  checkpoint_load_group(path, g);
  return out;
}

class ExportCli : public ::testing::Test {
 protected:
  void SetUp() override {
    write_tiny_shards(dir_.str());
    cfg_ = export_config(dir_.str());
    ckpt_ = make_checkpoint(dir_ / "step_00000042.h5", cfg_);
  }
  RunResult run(const std::string& args) { return run_deltatron("export --format hf " + args, dir_.str()); }
  RunResult export_to(const std::string& out, const std::string& extra = "") {
    return run("--checkpoint " + quote(ckpt_) + " --out " + quote(out) + " " + extra);
  }
  // Entries of the scratch directory whose names start with '.' (an export's temporary directories).
  std::vector<std::string> hidden_leftovers() {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_.str()))
      if (e.path().filename().string()[0] == '.') out.push_back(e.path().string());
    return out;
  }
  // The export of a checkpoint of the model changed by `edit` must fail, naming every piece.
  void expect_model_refused(const std::string& name, void (*edit)(Config&), const std::vector<std::string>& pieces) {
    const std::string ckpt = make_checkpoint(dir_ / (name + ".h5"), export_config(dir_.str(), edit));
    RunResult r = run("--checkpoint " + quote(ckpt) + " --out " + quote(dir_ / name));
    for (const std::string& p : pieces) expect_cli_error(r, p);
    EXPECT_FALSE(fs::exists(dir_ / name));
    EXPECT_TRUE(hidden_leftovers().empty());
  }

  ScratchDir dir_;
  Config cfg_;
  std::string ckpt_;
};

TEST_F(ExportCli, WritesTheHuggingFaceFiles) {
  RunResult r = export_to(dir_ / "hf");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("step 42"), std::string::npos) << r.out;
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(dir_ / "hf")) files.insert(e.path().filename().string());
  EXPECT_EQ(files, (std::set<std::string>{"config.json", "generation_config.json", "model.safetensors", "vocab.json",
                                          "merges.txt", "tokenizer_config.json", "special_tokens_map.json"}));
  const nlohmann::json config = nlohmann::json::parse(read_text(dir_ / "hf/config.json"));
  EXPECT_EQ(config["model_type"], "qwen3_5_text");
  EXPECT_EQ(config["architectures"], nlohmann::json::array({"Qwen3_5ForCausalLM"}));
  EXPECT_EQ(config["layer_types"], nlohmann::json::array({"linear_attention", "full_attention", "linear_attention"}));
  EXPECT_EQ(config["bos_token_id"], 50256);
  EXPECT_EQ(config["eos_token_id"], 50256);
  EXPECT_EQ(config["dtype"], "float32");
  EXPECT_EQ(config["max_position_embeddings"], cfg_.train.seq_len);
  EXPECT_EQ(config["rope_parameters"]["partial_rotary_factor"], 0.5);  // rotary_dim 8 of head_dim 16
  const nlohmann::json gen = nlohmann::json::parse(read_text(dir_ / "hf/generation_config.json"));
  EXPECT_EQ(gen["eos_token_id"], 50256);
  const nlohmann::json tok = nlohmann::json::parse(read_text(dir_ / "hf/tokenizer_config.json"));
  EXPECT_EQ(tok["tokenizer_class"], "GPT2Tokenizer");
  EXPECT_EQ(tok["eos_token"], "<|endoftext|>");
  const std::string assets = std::string(DELTATRON_SOURCE_DIR) + "/assets/gpt2";
  EXPECT_EQ(read_text(dir_ / "hf/vocab.json"), read_text(assets + "/encoder.json"));
  EXPECT_EQ(read_text(dir_ / "hf/merges.txt"), read_text(assets + "/vocab.bpe"));
  EXPECT_TRUE(hidden_leftovers().empty());
}

// Names and shapes: exactly the model that config.json describes (read back through the one
// mapping), and by hand for the tensors whose layout matters to transformers.
TEST_F(ExportCli, TensorsMatchConfigJson) {
  ASSERT_EQ(export_to(dir_ / "hf").exit_code, 0);
  const SafetensorsFile f = read_safetensors(dir_ / "hf/model.safetensors");
  EXPECT_EQ(f.metadata.at("format"), "pt");
  EXPECT_EQ(f.metadata.at("deltatron_checkpoint_step"), "42");
  EXPECT_EQ(f.header_bytes % 8, 0u);
  const ModelConfig m = model_config_from_qwen35(nlohmann::json::parse(read_text(dir_ / "hf/config.json")));
  std::map<std::string, std::vector<int64_t>> want;
  for (const ParamInfo& p : Model::param_infos(m)) want[p.name] = p.shape.vec();
  std::map<std::string, std::vector<int64_t>> got;
  for (const auto& [name, t] : f.tensors) {
    got[name] = t.shape;
    EXPECT_EQ(t.dtype, DType::kF32) << name;
  }
  EXPECT_EQ(got, want);
  const int64_t C = 16, V = 50304;
  const GdnConfig& g = cfg_.model.gdn;
  const AttnConfig& a = cfg_.model.attn;
  const int64_t key = int64_t{g.n_k_heads} * g.head_k_dim, value = int64_t{g.n_v_heads} * g.head_v_dim;
  EXPECT_EQ(got["model.embed_tokens.weight"], (std::vector<int64_t>{V, C}));
  EXPECT_EQ(got["lm_head.weight"], (std::vector<int64_t>{V, C}));
  EXPECT_EQ(got["model.layers.0.linear_attn.in_proj_qkv.weight"], (std::vector<int64_t>{2 * key + value, C}));
  EXPECT_EQ(got["model.layers.0.linear_attn.conv1d.weight"],
            (std::vector<int64_t>{2 * key + value, 1, g.conv_kernel}));
  EXPECT_EQ(got["model.layers.0.linear_attn.A_log"], (std::vector<int64_t>{g.n_v_heads}));
  EXPECT_EQ(got["model.layers.0.linear_attn.dt_bias"], (std::vector<int64_t>{g.n_v_heads}));
  EXPECT_EQ(got["model.layers.0.linear_attn.norm.weight"], (std::vector<int64_t>{g.head_v_dim}));
  EXPECT_EQ(got["model.layers.1.self_attn.q_proj.weight"],
            (std::vector<int64_t>{2 * int64_t{a.n_heads} * a.head_dim, C}));  // [q_h | gate_h] per head
  EXPECT_EQ(got["model.layers.1.self_attn.k_proj.weight"], (std::vector<int64_t>{int64_t{a.n_kv_heads} * a.head_dim, C}));
  EXPECT_EQ(got["model.layers.1.self_attn.q_norm.weight"], (std::vector<int64_t>{a.head_dim}));
  EXPECT_EQ(got["model.norm.weight"], (std::vector<int64_t>{C}));
}

TEST_F(ExportCli, Fp32IsTheCheckpointBitForBit) {
  ASSERT_EQ(export_to(dir_ / "hf", "--dtype fp32").exit_code, 0);
  const SafetensorsFile f = read_safetensors(dir_ / "hf/model.safetensors");
  const auto params = checkpoint_params(ckpt_, cfg_.model);
  ASSERT_EQ(f.tensors.size(), params.size());
  for (const auto& [name, values] : params) {
    const SafetensorsTensor& t = f.tensors.at(name);
    ASSERT_EQ(t.bytes.size(), values.size() * 4) << name;
    EXPECT_EQ(std::memcmp(t.bytes.data(), values.data(), t.bytes.size()), 0) << name;
  }
}

TEST_F(ExportCli, Bf16IsTheRoundingOfFp32) {
  ASSERT_EQ(export_to(dir_ / "hf", "--dtype bf16").exit_code, 0);
  const SafetensorsFile f = read_safetensors(dir_ / "hf/model.safetensors");
  EXPECT_EQ(nlohmann::json::parse(read_text(dir_ / "hf/config.json"))["dtype"], "bfloat16");
  const auto params = checkpoint_params(ckpt_, cfg_.model);
  int64_t inexact = 0;
  for (const auto& [name, values] : params) {
    const SafetensorsTensor& t = f.tensors.at(name);
    ASSERT_EQ(t.dtype, DType::kBF16) << name;
    ASSERT_EQ(t.bytes.size(), values.size() * 2) << name;
    std::vector<uint16_t> want(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      want[i] = f32_to_bf16(values[i]);
      inexact += bf16_to_f32(want[i]) != values[i];
    }
    EXPECT_EQ(std::memcmp(t.bytes.data(), want.data(), t.bytes.size()), 0) << name;
  }
  EXPECT_GT(inexact, 0) << "random fp32 weights should not all be bf16 values already";
  // Round to nearest even, by hand: 1 + 2^-8 is halfway between bf16 1 and 1 + 2^-7, and goes to 1.
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
}

TEST_F(ExportCli, TiedEmbeddingsHaveNoLmHead) {
  const std::string ckpt =
      make_checkpoint(dir_ / "tied.h5", export_config(dir_.str(), [](Config& c) { c.model.tie_embeddings = true; }));
  RunResult r = run("--checkpoint " + quote(ckpt) + " --out " + quote(dir_ / "hf"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(read_text(dir_ / "hf/config.json"))["tie_word_embeddings"], true);
  const SafetensorsFile f = read_safetensors(dir_ / "hf/model.safetensors");
  EXPECT_TRUE(f.tensors.count("model.embed_tokens.weight"));
  EXPECT_FALSE(f.tensors.count("lm_head.weight"));
}

TEST_F(ExportCli, RefusesModelsQwen35CannotExpress) {
  expect_model_refused("mla", [](Config& c) { c.model.layers = parse_layer_pattern("[gdn, mla]"); }, {"MLA layers"});
  expect_model_refused("ungated", [](Config& c) { c.model.attn.output_gate = false; },
                       {"ungated attention", "output_gate"});
  expect_model_refused("no_qk_norm", [](Config& c) { c.model.attn.qk_norm = false; }, {"qk_norm"});
  expect_model_refused("plain_norms", [](Config& c) { c.model.zero_centered_norm = false; },
                       {"non-zero-centred norms"});
  expect_model_refused("small_vocab", [](Config& c) { c.model.vocab_size = 64; }, {"vocab_size 64", "50257"});
}

TEST_F(ExportCli, RefusesBadFlags) {
  expect_cli_error(export_to(dir_ / "hf", "--dtype fp16"), "--dtype fp16: give fp32 or bf16");
  expect_cli_error(run_deltatron("export --checkpoint " + quote(ckpt_) + " --out " + quote(dir_ / "hf"), dir_.str()),
                   "export needs --format");
  expect_cli_error(run_deltatron("export --format onnx --checkpoint " + quote(ckpt_) + " --out x", dir_.str()),
                   "--format onnx");
  expect_cli_error(run("--out " + quote(dir_ / "hf")), "export needs --checkpoint");
  expect_cli_error(run("--checkpoint " + quote(ckpt_)), "export needs --out");
  EXPECT_FALSE(fs::exists(dir_ / "hf"));
}

TEST_F(ExportCli, RefusesBadCheckpoints) {
  expect_cli_error(run("--checkpoint " + quote(dir_ / "missing.h5") + " --out " + quote(dir_ / "hf")),
                   "checkpoint " + (dir_ / "missing.h5") + " does not exist");
  expect_cli_error(run("--checkpoint " + quote(dir_.str()) + " --out " + quote(dir_ / "hf")), "is a directory");
  // One flipped byte in the middle of the tensor data: the checksum names the tensor.
  const std::string bad = dir_ / "corrupt.h5";
  fs::copy_file(ckpt_, bad);
  {
    std::fstream f(bad, std::ios::in | std::ios::out | std::ios::binary);
    const auto middle = static_cast<std::streamoff>(fs::file_size(bad) / 2);
    f.seekg(middle);
    char byte = 0;
    f.get(byte);
    f.seekp(middle);
    f.put(static_cast<char>(byte ^ 0x01));
  }
  RunResult r = run("--checkpoint " + quote(bad) + " --out " + quote(dir_ / "hf"));
  expect_cli_error(r, "corrupt.h5");
  // Not a checkpoint at all: a token shard, a text file.
  expect_cli_error(run("--checkpoint " + quote(dir_ / "tiny_val_000000.bin") + " --out " + quote(dir_ / "hf")),
                   "tiny_val_000000.bin");
  write_text(dir_ / "notes.txt", "not a checkpoint\n");
  expect_cli_error(run("--checkpoint " + quote(dir_ / "notes.txt") + " --out " + quote(dir_ / "hf")), "notes.txt");
  EXPECT_FALSE(fs::exists(dir_ / "hf"));
  EXPECT_TRUE(hidden_leftovers().empty());
}

TEST_F(ExportCli, OutRules) {
  // An empty directory is taken; one that holds files is refused, and --force replaces only an export.
  fs::create_directory(dir_ / "empty");
  EXPECT_EQ(export_to(dir_ / "empty").exit_code, 0);
  EXPECT_TRUE(fs::exists(dir_ / "empty/model.safetensors"));
  fs::create_directory(dir_ / "mine");
  write_text(dir_ / "mine/notes.txt", "keep me\n");
  expect_cli_error(export_to(dir_ / "mine"), "exists and is not empty");
  expect_cli_error(export_to(dir_ / "mine", "--force"), "does not hold an earlier export");
  EXPECT_EQ(read_text(dir_ / "mine/notes.txt"), "keep me\n");
  ASSERT_EQ(export_to(dir_ / "hf", "--dtype bf16").exit_code, 0);
  expect_cli_error(export_to(dir_ / "hf"), "pass --force");
  const RunResult forced = export_to(dir_ / "hf", "--force");
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_EQ(nlohmann::json::parse(read_text(dir_ / "hf/config.json"))["dtype"], "float32");
  // A trailing separator names the same directory.
  ASSERT_EQ(export_to(dir_ / "slash/").exit_code, 0);
  EXPECT_TRUE(fs::exists(dir_ / "slash/config.json"));
  // A file, or a directory under a missing parent.
  write_text(dir_ / "file", "x");
  expect_cli_error(export_to(dir_ / "file"), "is not a directory");
  expect_cli_error(export_to(dir_ / "no/such/dir"), "does not exist");
  // A failure after --out and the checkpoint were checked (a tokenizer directory without GPT-2's
  // files) leaves nothing.
  fs::create_directory(dir_ / "no_tokenizer");
  expect_cli_error(export_to(dir_ / "hf2", "--tokenizer " + quote(dir_ / "no_tokenizer")), "encoder.json");
  EXPECT_FALSE(fs::exists(dir_ / "hf2"));
  EXPECT_TRUE(hidden_leftovers().empty());
}

}  // namespace
}  // namespace dt
