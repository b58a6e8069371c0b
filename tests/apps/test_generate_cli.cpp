// `deltatron generate` through the binary: a tiny hybrid checkpoint (GDN, gated GQA, MLA) with the
// GPT-2 vocabulary, generated from end to end (--json structure, greedy output equal to the
// engine's own, a seed repeating its tokens, the streamed text), and every bad input a clear error.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "data/tokenizer.h"
#include "infer/engine.h"
#include "io/safetensors.h"
#include "layers/model.h"
#include "tests/apps/bad_input_util.h"
#include "tests/layers/gradcheck.h"
#include "trainer/adamw.h"
#include "trainer/config.h"
#include "trainer/train_checkpoint.h"

#include "core/device.h"

namespace dt {
namespace {

using bad_input::BadInput;
using bad_input::CliResult;

Config tiny_generate_config() {
  Config c = default_config();
  c.model.vocab_size = 50304;
  c.model.d_model = 16;
  c.model.d_ff = 24;
  c.model.layers = parse_layer_pattern("[gdn, attn, mla]");
  c.model.attn = {.n_heads = 2, .n_kv_heads = 1, .head_dim = 8, .rotary_dim = 4, .rope_theta = 10000.0,
                  .qk_norm = true, .output_gate = true};
  c.model.mla = {.n_heads = 2, .q_lora_rank = 6, .kv_lora_rank = 5, .qk_nope_head_dim = 4, .qk_rope_head_dim = 4,
                 .v_head_dim = 4, .rope_theta = 10000.0, .rope_interleave = true};
  c.model.gdn = {.n_k_heads = 1, .n_v_heads = 2, .head_k_dim = 8, .head_v_dim = 4, .conv_kernel = 4, .chunk_size = 8};
  c.run.threads = 1;
  return c;
}

class GenerateCli : public BadInput {
 protected:
  void SetUp() override {
    BadInput::SetUp();
    cfg_ = tiny_generate_config();
    Model model(cfg_.model, 1, 1);
    testing::randomize_params(model.params(), 17);
    AdamW opt(model.params(), {});
    ckpt_ = path("tiny.h5");
    save_train_checkpoint(ckpt_, cfg_, model.params(), opt, CheckpointState{});
  }
  nlohmann::json json_of(const std::string& args) {
    CliResult r = run("generate --checkpoint " + quote(ckpt_) + " " + args + " --json");
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out, nullptr, false);
  }
  static std::string quote(const std::string& s) { return bad_input::quote(s); }

  Config cfg_;
  std::string ckpt_;
};

TEST_F(GenerateCli, GreedyJsonIsTheEnginesOwn) {
  const std::string prompt = "The quick brown fox";
  nlohmann::json j = json_of("--prompt " + quote(prompt) + " --max-new-tokens 9");
  ASSERT_TRUE(j.is_object());
  const Tokenizer tok = Tokenizer::load(Tokenizer::default_dir());
  const std::vector<int32_t> ids = tok.encode(prompt);
  EXPECT_EQ(j["prompt"]["text"], prompt);
  EXPECT_EQ(j["prompt"]["tokens"].get<std::vector<int32_t>>(), ids);
  ASSERT_EQ(j["continuations"].size(), 1u);
  const nlohmann::json& c = j["continuations"][0];
  for (const char* key : {"tokens", "text", "stop_reason"}) EXPECT_TRUE(c.contains(key)) << key;
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_EQ(j["cuda_graph"], false);
  for (const char* key : {"prefill_ms", "decode_ms", "decode_steps", "decode_tokens", "decode_tokens_per_s",
                          "steady_decode_ms", "steady_decode_tokens", "steady_decode_tokens_per_s"})
    EXPECT_TRUE(j["timing"].contains(key)) << key;

  // The engine in this process, on the checkpoint's weights.
  Model weights(cfg_.model, 1, 1);
  load_train_checkpoint(ckpt_, weights.params(), nullptr);
  Engine engine(cfg_.model, weights.params());
  GenerateOptions o;
  o.max_new_tokens = 9;
  o.stop_tokens = {Tokenizer::kEot};
  o.vocab_limit = tok.vocab_size();
  Context ctx;
  const GenerateResult r = engine.generate(ctx, ids, o);
  const auto tokens = c["tokens"].get<std::vector<int32_t>>();
  EXPECT_EQ(tokens, r.tokens[0]);
  EXPECT_EQ(c["text"], tok.decode(r.tokens[0]));
  EXPECT_EQ(c["stop_reason"], stop_reason_name(r.stop[0]));
  // The state's allocation: the prompt and 8 generated tokens fed back, at full capacity.
  EXPECT_EQ(j["memory"]["decode_state_bytes"], r.state_bytes);
  EXPECT_EQ(r.state_bytes, engine.new_state(1, static_cast<int64_t>(ids.size()) + 8)->bytes());
  EXPECT_EQ(j["memory"]["device_used_after_prefill_bytes"], 0);
  EXPECT_EQ(j["memory"]["device_used_after_decode_bytes"], 0);

  // The streamed text is the same continuation.
  CliResult plain = run("generate --checkpoint " + quote(ckpt_) + " --prompt " + quote(prompt) + " --max-new-tokens 9");
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_EQ(plain.out, tok.decode(r.tokens[0]) + "\n");
  EXPECT_NE(plain.err.find("tokens/s"), std::string::npos) << plain.err;

  // The prompt from a file and from standard input.
  bad_input::write_file(path("prompt.txt"), prompt);
  EXPECT_EQ(json_of("--prompt-file " + qpath("prompt.txt") + " --max-new-tokens 9")["continuations"], j["continuations"]);
  CliResult in = run("generate --checkpoint " + quote(ckpt_) + " --max-new-tokens 9 --json", path("prompt.txt"));
  ASSERT_EQ(in.code, 0) << in.err;
  EXPECT_EQ(nlohmann::json::parse(in.out)["continuations"], j["continuations"]);
}

TEST_F(GenerateCli, SampledRunsRepeatForASeed) {
  const std::string args = "--prompt 'Hello' --max-new-tokens 8 --temperature 1.5 --top-k 1000 --batch 2 ";
  nlohmann::json a = json_of(args + "--seed 3"), b = json_of(args + "--seed 3"), c = json_of(args + "--seed 4");
  ASSERT_EQ(a["continuations"].size(), 2u);
  EXPECT_EQ(a["continuations"], b["continuations"]);
  EXPECT_NE(a["continuations"], c["continuations"]);
  EXPECT_NE(a["continuations"][0]["tokens"], a["continuations"][1]["tokens"]);
  // Plain text: each continuation under its own header.
  CliResult r = run("generate --checkpoint " + quote(ckpt_) + " " + args + "--seed 3");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("=== continuation 1 of 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("=== continuation 2 of 2"), std::string::npos) << r.out;
}

TEST_F(GenerateCli, StopTextEndsAContinuation) {
  nlohmann::json full = json_of("--prompt 'Hello' --max-new-tokens 8");
  const std::string text = full["continuations"][0]["text"];
  ASSERT_GE(text.size(), 4u);
  const std::string stop = text.substr(2, 2);
  nlohmann::json cut = json_of("--prompt 'Hello' --max-new-tokens 8 --stop " + quote(stop));
  EXPECT_EQ(cut["continuations"][0]["text"], text.substr(0, text.find(stop)));
  EXPECT_EQ(cut["continuations"][0]["stop_reason"], "stop_text");
  CliResult r = run("generate --checkpoint " + quote(ckpt_) + " --prompt 'Hello' --max-new-tokens 8 --stop " + quote(stop));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, text.substr(0, text.find(stop)) + "\n");
}

// --logits-out: the context fed (prompt, then the generated tokens fed back) and the logits after each
// of its tokens, equal to one forward of the whole context; greedy picks each row's argmax.
TEST_F(GenerateCli, LogitsOutHoldsEveryPositionsLogits) {
  const std::string file = path("logits.safetensors");
  CliResult r = run("generate --checkpoint " + quote(ckpt_) + " --prompt 'The quick brown fox' --max-new-tokens 6 "
                    "--ignore-eos --json --logits-out " + quote(file));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(std::filesystem::exists(file + ".tmp"));
  const SafetensorsFile f = read_safetensors(file);
  const int64_t V = cfg_.model.vocab_size;
  const Tokenizer tok = Tokenizer::load(Tokenizer::default_dir());
  const std::vector<int32_t> prompt = tok.encode("The quick brown fox");
  const auto T = static_cast<int64_t>(prompt.size());
  ASSERT_EQ(f.metadata.at("prompt_tokens"), std::to_string(T));
  const SafetensorsTensor& ids = f.tensors.at("input_ids");
  const SafetensorsTensor& logits = f.tensors.at("logits");
  const SafetensorsTensor& gen = f.tensors.at("generated_ids");
  // Six tokens without a stop: the last is never fed back, so the context is T + 5.
  const int64_t R = T + 5;
  ASSERT_EQ(ids.shape, (std::vector<int64_t>{1, R}));
  ASSERT_EQ(logits.shape, (std::vector<int64_t>{1, R, V}));
  ASSERT_EQ(gen.shape, (std::vector<int64_t>{1, 6}));
  const auto* id = reinterpret_cast<const int32_t*>(ids.bytes.data());
  const auto* lg = reinterpret_cast<const float*>(logits.bytes.data());
  const auto* g = reinterpret_cast<const int32_t*>(gen.bytes.data());
  EXPECT_EQ(std::vector<int32_t>(id, id + T), prompt);
  EXPECT_EQ(std::vector<int32_t>(id + T, id + R), std::vector<int32_t>(g, g + 5));
  EXPECT_EQ(nlohmann::json::parse(r.out)["continuations"][0]["tokens"].get<std::vector<int32_t>>(),
            std::vector<int32_t>(g, g + 6));

  Model model(cfg_.model, 1, static_cast<int>(R));
  load_train_checkpoint(ckpt_, model.params(), nullptr);
  Context ctx;
  model.forward(ctx, id, id);
  const Tensor full = model.logits();
  const float* want = full.ptr<float>();
  double worst = 0, scale = 0;
  for (int64_t i = 0; i < R * V; ++i) {
    worst = std::max(worst, static_cast<double>(std::abs(want[i] - lg[i])));
    scale = std::max(scale, static_cast<double>(std::abs(want[i])));
  }
  EXPECT_LE(worst, 1e-4 * scale) << "logits: worst difference " << worst << " against " << scale;
  for (int64_t k = 0; k < 6; ++k) {  // greedy among the ids the tokenizer can write
    const float* row = lg + (T - 1 + k) * V;
    EXPECT_EQ(g[k], std::max_element(row, row + tok.vocab_size()) - row) << "token " << k;
  }
  expect_error("generate --checkpoint " + quote(ckpt_) + " --prompt 'a' --batch 2 --logits-out " + quote(file),
               {"--logits-out records one sequence", "--batch 2"});
}

// --device cuda end to end (skipped without a GPU): a checkpoint of sizes the GPU kernels take, the
// JSON names the device, steps after the first replay the CUDA graph, and --no-cuda-graph gives the
// same tokens op by op.
TEST_F(GenerateCli, CudaDeviceJson) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device present";
  Config c = tiny_generate_config();
  c.model.d_model = 64;
  c.model.d_ff = 96;
  c.model.attn.head_dim = 32, c.model.attn.rotary_dim = 16;
  c.model.mla = {.n_heads = 2, .q_lora_rank = 16, .kv_lora_rank = 32, .qk_nope_head_dim = 16, .qk_rope_head_dim = 16,
                 .v_head_dim = 32, .rope_theta = 10000.0, .rope_interleave = true};
  c.model.gdn = {.n_k_heads = 1, .n_v_heads = 2, .head_k_dim = 32, .head_v_dim = 32, .conv_kernel = 4, .chunk_size = 16};
  Model model(c.model, 1, 1);
  testing::randomize_params(model.params(), 19);
  AdamW opt(model.params(), {});
  const std::string ckpt = path("gpu.h5");
  save_train_checkpoint(ckpt, c, model.params(), opt, CheckpointState{});
  auto json = [&](const std::string& extra) {
    CliResult r = run("generate --checkpoint " + quote(ckpt) + " --prompt 'The quick brown fox' --max-new-tokens 12 "
                      "--device cuda --json" + extra);
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out, nullptr, false);
  };
  const nlohmann::json g = json(""), e = json(" --no-cuda-graph");
  ASSERT_TRUE(g.is_object() && e.is_object());
  EXPECT_EQ(g["device"], "cuda");
  EXPECT_EQ(g["continuations"][0]["tokens"], e["continuations"][0]["tokens"]);
  const int64_t steps = g["timing"]["decode_steps"];
  EXPECT_EQ(g["timing"]["graph_replays"], std::max<int64_t>(steps - 1, 0));
  EXPECT_EQ(g["cuda_graph"], steps > 1);
  EXPECT_EQ(e["timing"]["graph_replays"], 0);
  EXPECT_EQ(e["cuda_graph"], false);
}

// --mla-cache fp8 on a hybrid whose MLA latent takes it (kv_lora_rank 128): generates, says so in the
// JSON, holds a smaller state than bf16's; the flag is refused where it cannot apply.
TEST_F(GenerateCli, MlaCacheFp8) {
  Config c = tiny_generate_config();
  c.model.mla.kv_lora_rank = 128;
  Model model(c.model, 1, 1);
  testing::randomize_params(model.params(), 23);
  AdamW opt(model.params(), {});
  const std::string ckpt = path("mla128.h5");
  save_train_checkpoint(ckpt, c, model.params(), opt, CheckpointState{});
  auto json = [&](const std::string& extra) {
    CliResult r = run("generate --checkpoint " + quote(ckpt) + " --prompt 'The quick brown fox' --max-new-tokens 6 "
                      "--ignore-eos --json" + extra);
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out, nullptr, false);
  };
  const nlohmann::json plain = json(""), fp8 = json(" --mla-cache fp8"), again = json(" --mla-cache fp8");
  ASSERT_TRUE(plain.is_object() && fp8.is_object() && again.is_object());
  EXPECT_EQ(plain["options"]["mla_cache"], "bf16");
  EXPECT_EQ(json(" --mla-cache bf16")["continuations"], plain["continuations"]);  // the default
  EXPECT_EQ(fp8["options"]["mla_cache"], "fp8");
  EXPECT_EQ(fp8["continuations"][0]["tokens"].size(), 6u);
  EXPECT_EQ(fp8["continuations"], again["continuations"]);
  EXPECT_LT(fp8["memory"]["decode_state_bytes"].get<int64_t>(), plain["memory"]["decode_state_bytes"].get<int64_t>());
  // kv_lora_rank 5 (the tiny checkpoint's) and a model without MLA layers.
  expect_error("generate --checkpoint " + quote(ckpt_) + " --prompt hi --mla-cache fp8",
               {"--mla-cache fp8", "kv_lora_rank must be a multiple of 128", "is 5"});
  Config g = tiny_generate_config();
  g.model.layers = parse_layer_pattern("[gdn, attn]");
  Model gm(g.model, 1, 1);
  AdamW gopt(gm.params(), {});
  save_train_checkpoint(path("gdn.h5"), g, gm.params(), gopt, CheckpointState{});
  expect_error("generate --checkpoint " + qpath("gdn.h5") + " --prompt hi --mla-cache fp8",
               {"--mla-cache fp8 applies to the latent cache of MLA layers", "this model has none", "drop --mla-cache"});
  expect_error("generate --checkpoint " + qpath("gdn.h5") + " --prompt hi --mla-cache nonsense",
               {"--mla-cache: nonsense not in {bf16,fp8}"});
}

TEST_F(GenerateCli, BadInputIsAClearError) {
  const std::string g = "generate --checkpoint " + quote(ckpt_) + " ";
  expect_error(g + "--prompt 'a b c d e f' --max-new-tokens 10 --max-context 12",
               {"the prompt (--prompt) is 6 tokens", "the context would be 16 tokens", "over the limit of 12",
                "--max-context"});
  expect_error(g + "--prompt hi --top-p 0", {"--top-p = 0", "(0, 1]"});
  expect_error(g + "--prompt hi --top-p 1.5", {"--top-p = 1.5"});
  expect_error(g + "--prompt hi --temperature -1", {"--temperature = -1", ">= 0"});
  expect_error(g + "--prompt hi --top-k -2", {"--top-k = -2"});
  expect_error(g + "--prompt hi --batch 0", {"--batch = 0", ">= 1"});
  expect_error(g + "--prompt hi --max-new-tokens 0", {"--max-new-tokens = 0"});
  expect_error(g + "--prompt ''", {"the prompt (--prompt) is empty"});
  expect_error(g, {"the prompt (standard input) is empty"});
  bad_input::write_file(path("empty.txt"), "");
  expect_error(g + "--prompt-file " + qpath("empty.txt"), {"the prompt (--prompt-file) is empty"});
  expect_error(g + "--prompt-file " + qpath("missing.txt"), {"cannot open --prompt-file", "missing.txt"});
  expect_error(g + "--prompt hi --prompt-file " + qpath("empty.txt"), {"--prompt TEXT or --prompt-file FILE, not both"});
  expect_error("generate --prompt hi", {"generate needs --checkpoint FILE"});
  if (cuda_device_count() == 0)  // with a GPU it generates (GenerateCli.CudaDeviceJson)
    expect_error(g + "--prompt hi --device cuda", {"device cuda", "--device cpu"});
  // Files that are not a model checkpoint.
  bad_input::write_file(path("notes.txt"), "just some text\n");
  expect_error("generate --prompt hi --checkpoint " + qpath("notes.txt"), {path("notes.txt"), "not a Deltatron checkpoint"});
  expect_error("generate --prompt hi --checkpoint " + qpath("nothing.h5"), {path("nothing.h5"), "does not exist"});
  const std::string other_h5 = std::string(DELTATRON_TEST_DATA_DIR) + "/golden/qwen35_model.h5";  // HDF5, not ours
  expect_error("generate --prompt hi --checkpoint " + quote(other_h5), {other_h5, "not a Deltatron checkpoint"});
  // A truncated checkpoint.
  const std::string whole = bad_input::read_file(ckpt_);
  bad_input::write_file(path("truncated.h5"), whole.substr(0, whole.size() / 2));
  expect_error("generate --prompt hi --checkpoint " + qpath("truncated.h5"), {path("truncated.h5"), "corrupted or truncated"});
}

}  // namespace
}  // namespace dt
