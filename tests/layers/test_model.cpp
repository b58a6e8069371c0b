// The whole model: finite-difference gradients of the mean loss for every parameter (double),
// f32 vs f64 agreement, parameter table (names, init, TP split, decay), summary and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "layers/model.h"
#include "tests/layers/gradcheck.h"

namespace dt {
namespace {

using testing::expect_gradient;
using testing::load;
using testing::poison;
using testing::randomize_params;
using testing::store;

constexpr int kB = 2, kT = 7;

ModelConfig tiny_config(std::vector<MixerKind> layers) {
  ModelConfig cfg;
  cfg.vocab_size = 37;
  cfg.d_model = 24;
  cfg.d_ff = 40;
  cfg.layers = std::move(layers);
  cfg.attn = AttnConfig{.n_heads = 4, .n_kv_heads = 2, .head_dim = 6, .rotary_dim = 4, .rope_theta = 100.0,
                        .qk_norm = true, .output_gate = true};
  cfg.mla = MlaConfig{.n_heads = 3, .q_lora_rank = 10, .kv_lora_rank = 12, .qk_nope_head_dim = 4,
                      .qk_rope_head_dim = 4, .v_head_dim = 6, .rope_theta = 100.0, .rope_interleave = true};
  cfg.gdn = GdnConfig{.n_k_heads = 2, .n_v_heads = 4, .head_k_dim = 4, .head_v_dim = 6, .conv_kernel = 4,
                      .chunk_size = 4};
  return cfg;
}

std::vector<int32_t> random_ids(int64_t n, int vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> d(0, vocab - 1);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

void check_model_gradients(const ModelConfig& cfg, uint64_t seed) {
  Model model(cfg, kB, kT, DType::kF64);
  randomize_params(model.params(), seed);
  auto inputs = random_ids(kB * kT, cfg.vocab_size, seed + 1), targets = random_ids(kB * kT, cfg.vocab_size, seed + 2);
  Context ctx;
  auto loss = [&] {
    poison(model.activations());
    return model.forward(ctx, inputs.data(), targets.data());
  };
  ASSERT_TRUE(std::isfinite(loss()));
  // Grads start non-zero: backward must accumulate. loss_scale 2 is divided out below.
  ParamStore& ps = model.params();
  for (int s = 0; s < ps.size(); ++s) store(ps.grad(s), std::vector<double>(ps.grad(s).numel(), 0.5));
  model.backward(ctx, 2.0);
  for (int s = 0; s < ps.size(); ++s) {
    std::vector<double> g = load(ps.grad(s));
    for (double& x : g) x = (x - 0.5) / 2.0;
    expect_gradient(ps.infos()[s].name, loss, ps.param(s).ptr<double>(), g.data(), g.size(), seed + 10 + s);
  }
}

TEST(Model, GradientsAttnMlaTied) { check_model_gradients(tiny_config({MixerKind::kAttn, MixerKind::kMla}), 100); }

TEST(Model, GradientsMlaAttnUntiedPlainNorms) {
  ModelConfig cfg = tiny_config({MixerKind::kMla, MixerKind::kAttn});
  cfg.tie_embeddings = false;
  cfg.zero_centered_norm = false;
  cfg.attn.output_gate = false;
  cfg.mla.q_lora_rank = 0;
  check_model_gradients(cfg, 200);
}

TEST(Model, GradientsGdnAttn) { check_model_gradients(tiny_config({MixerKind::kGdn, MixerKind::kAttn}), 300); }

TEST(Model, FloatMatchesDouble) {
  ModelConfig cfg = tiny_config({MixerKind::kAttn, MixerKind::kMla});
  auto inputs = random_ids(kB * kT, cfg.vocab_size, 1), targets = random_ids(kB * kT, cfg.vocab_size, 2);
  std::vector<double> logits[2];
  double loss[2];
  for (DType dt : {DType::kF32, DType::kF64}) {
    Model model(cfg, kB, kT, dt);
    randomize_params(model.params(), 7);
    poison(model.activations());
    Context ctx;
    loss[dt == DType::kF64] = model.forward(ctx, inputs.data(), targets.data());
    logits[dt == DType::kF64] = load(model.logits());
    EXPECT_EQ(model.logits().shape, Shape({kB, kT, cfg.vocab_size}));
  }
  double num = 0, den = 0;
  for (size_t i = 0; i < logits[0].size(); ++i) {
    num = std::max(num, std::fabs(logits[0][i] - logits[1][i]));
    den = std::max(den, std::fabs(logits[1][i]));
  }
  EXPECT_LE(num / den, 1e-5) << num << " / " << den;
  EXPECT_NEAR(loss[0], loss[1], 1e-5 * loss[1]);
}

TEST(Model, InitialLossIsLogVocab) {
  ModelConfig cfg = tiny_config({MixerKind::kAttn, MixerKind::kMla});
  // At init the logits are ~N(0, 0.12^2): the mean loss over 64 tokens is log V within ~0.05.
  const int B = 4, T = 16;
  Model model(cfg, B, T);
  model.init(1234);
  auto inputs = random_ids(B * T, cfg.vocab_size, 3), targets = random_ids(B * T, cfg.vocab_size, 4);
  Context ctx;
  double loss = model.forward(ctx, inputs.data(), targets.data());
  EXPECT_NEAR(loss, std::log(cfg.vocab_size), 0.1);
  // Same seed, same parameters; a step of backward leaves finite gradients everywhere.
  model.params().zero_grads();
  model.backward(ctx);
  for (int s = 0; s < model.params().size(); ++s)
    for (double g : load(model.params().grad(s))) ASSERT_TRUE(std::isfinite(g)) << model.params().infos()[s].name;
}

TEST(Model, ParameterTable) {
  ModelConfig cfg = tiny_config({MixerKind::kAttn, MixerKind::kMla});
  cfg.tie_embeddings = false;
  Model model(cfg, 1, 3);
  model.init(5);
  const ParamStore& ps = model.params();
  auto info = [&](const std::string& n) { return ps.infos()[ps.slot(n)]; };
  const double out_std = cfg.init_std / std::sqrt(2.0 * cfg.n_layers());
  // Hugging Face names, first and last in HF's order.
  EXPECT_EQ(ps.infos().front().name, "model.embed_tokens.weight");
  EXPECT_EQ(ps.infos().back().name, "lm_head.weight");
  EXPECT_EQ(ps.infos()[ps.size() - 2].name, "model.norm.weight");
  for (const char* n : {"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.q_norm.weight",
                        "model.layers.0.self_attn.k_norm.weight", "model.layers.0.mlp.gate_proj.weight",
                        "model.layers.0.input_layernorm.weight", "model.layers.0.post_attention_layernorm.weight",
                        "model.layers.1.self_attn.q_a_proj.weight", "model.layers.1.self_attn.kv_b_proj.weight"})
    EXPECT_TRUE(ps.contains(n)) << n;
  // q_proj emits [q_h | gate_h] per head.
  EXPECT_EQ(info("model.layers.0.self_attn.q_proj.weight").shape, Shape({2 * 4 * 6, 24}));
  EXPECT_EQ(info("model.layers.0.self_attn.k_proj.weight").shape, Shape({2 * 6, 24}));
  // Init: GPT-2's scaled residual projections; norms zero-centred (0) except DeepSeek's (1).
  EXPECT_DOUBLE_EQ(info("model.layers.0.self_attn.o_proj.weight").std, out_std);
  EXPECT_DOUBLE_EQ(info("model.layers.1.self_attn.o_proj.weight").std, out_std);
  EXPECT_DOUBLE_EQ(info("model.layers.1.mlp.down_proj.weight").std, out_std);
  EXPECT_DOUBLE_EQ(info("model.layers.0.self_attn.q_proj.weight").std, cfg.init_std);
  EXPECT_EQ(info("model.norm.weight").init, Init::kZeros);
  EXPECT_EQ(info("model.layers.1.self_attn.kv_a_layernorm.weight").init, Init::kOnes);
  for (double w : load(ps.param("model.layers.0.self_attn.q_norm.weight"))) EXPECT_EQ(w, 0.0);
  for (double w : load(ps.param("model.layers.1.self_attn.q_a_layernorm.weight"))) EXPECT_EQ(w, 1.0);
  // TP split (docs/parallel.md, "Tensor parallelism in the layers") and weight decay.
  EXPECT_EQ(info("model.embed_tokens.weight").split, TpSplit::kColumn);
  EXPECT_EQ(info("lm_head.weight").split, TpSplit::kColumn);
  EXPECT_EQ(info("model.layers.0.self_attn.v_proj.weight").split, TpSplit::kColumn);
  EXPECT_EQ(info("model.layers.0.self_attn.o_proj.weight").split, TpSplit::kRow);
  EXPECT_EQ(info("model.layers.1.self_attn.q_a_proj.weight").split, TpSplit::kReplicated);
  EXPECT_EQ(info("model.layers.1.self_attn.q_b_proj.weight").split, TpSplit::kColumn);
  EXPECT_EQ(info("model.layers.1.self_attn.kv_a_proj_with_mqa.weight").split, TpSplit::kReplicated);
  EXPECT_EQ(info("model.layers.1.mlp.up_proj.weight").split, TpSplit::kColumn);
  EXPECT_EQ(info("model.layers.1.mlp.down_proj.weight").split, TpSplit::kRow);
  for (const ParamInfo& p : ps.infos()) {
    bool norm = p.name.find("norm") != std::string::npos;
    EXPECT_EQ(p.decay, !norm) << p.name;
    if (norm) {
      EXPECT_EQ(p.split, TpSplit::kReplicated) << p.name;
    }
  }
}

TEST(Model, TiedEmbeddingHasNoLmHeadWeight) {
  ModelConfig cfg = tiny_config({MixerKind::kAttn});
  Model tied(cfg, 1, 3);
  EXPECT_FALSE(tied.params().contains("lm_head.weight"));
  cfg.tie_embeddings = false;
  Model untied(cfg, 1, 3);
  EXPECT_TRUE(untied.params().contains("lm_head.weight"));
  EXPECT_EQ(untied.params().numel() - tied.params().numel(), int64_t{cfg.vocab_size} * cfg.d_model);
}

TEST(Model, Summary) {
  ModelConfig cfg = tiny_config({MixerKind::kAttn, MixerKind::kMla});
  Model model(cfg, 1, 3);
  std::string s = model.summary();
  EXPECT_NE(s.find("[attn, mla]"), std::string::npos) << s;
  EXPECT_NE(s.find(std::to_string(model.params().numel())), std::string::npos) << s;
}

TEST(Model, ClearErrors) {
  ModelConfig cfg = tiny_config({MixerKind::kAttn});
  Model model(cfg, 1, 3);
  Context ctx;
  EXPECT_THROW(model.backward(ctx), Error);
  std::vector<int32_t> ok{1, 2, 3}, bad{1, 37, 3};
  try {
    model.forward(ctx, bad.data(), ok.data());
    ADD_FAILURE() << "a token id >= vocab_size must be rejected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id 37 at position 1"), std::string::npos) << e.what();
  }
  try {
    model.forward(ctx, ok.data(), bad.data());
    ADD_FAILURE() << "a target id >= vocab_size must be rejected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("target id 37"), std::string::npos) << e.what();
  }
  cfg.layers.clear();
  EXPECT_THROW(Model(cfg, 1, 3), Error);
}

}  // namespace
}  // namespace dt
