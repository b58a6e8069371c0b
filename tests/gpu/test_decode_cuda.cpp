// The GPU decode engine (infer/engine.h on a CUDA context: bf16, a CUDA graph per step) against the
// GPU's own prefill and the CPU fp32 model on the same weights: for every mixer and a hybrid, the
// logits of feeding a prompt token by token, and of a prefill followed by decode steps, match the
// GPU prefill's and the CPU's full forward within bf16 error; the graph and op-by-op steps give the same tokens; a seed repeats; and on a briefly
// trained model the CPU and the GPU agree on 32 greedy tokens (or the test names the near-tie that
// split them). Each comparison prints its worst error. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "core/philox.h"
#include "infer/engine.h"
#include "layers/model.h"
#include "tests/gpu/counting_model.h"
#include "tests/gpu/infer_cuda_util.h"
#include "tests/infer/infer_test_util.h"
#include "trainer/adamw.h"
#include "trainer/runtime.h"

namespace dt {
namespace {

using infer_cuda_testing::copy_masters;
using infer_cuda_testing::counting_prompt;
using infer_cuda_testing::EnginePair;
using infer_cuda_testing::expect_same_or_near_tie;
using infer_cuda_testing::gpu_config;
using infer_cuda_testing::train_counting_model;
using infer_testing::random_tokens;
using infer_testing::row_error;

// bf16 activations (8 significant bits) rounded at every op of every layer: the logits carry a few
// 1e-3 of their scale; 3e-2 of max(max |logit|, 1) catches a wrong position, state or cache entry
// (those move logits by O(1)) with room for the rounding. It bounds the GPU decode against the GPU's
// own prefill (the same bf16 weights on both sides).
constexpr double kLogitRtol = 3e-2;

// Against the CPU's fp32 model the GPU's bf16 error depends on the random weights (a near-cancelling
// residual stream amplifies the rounding), so the bound is relative to that of the GPU training
// forward (the chunked prefill, tested against the CPU in test_model_cuda.cpp) on the same prompt:
// the decode may not be more than half again as far from the CPU as the prefill is, plus kLogitRtol.
double cpu_limit(double prefill_error) { return 1.5 * prefill_error + kLogitRtol; }

// A CPU fp32 model with random weights, its full forward's logits [T, V] of `prompt`, and a GPU
// model with the same master weights (the engine's weights on the GPU).
struct Twin {
  Model cpu, gpu;
  std::vector<float> logits;
  Twin(const ModelConfig& cfg, const std::vector<int32_t>& prompt, uint64_t seed)
      : cpu(cfg, 1, static_cast<int>(prompt.size())), gpu(cfg, 1, 1, DType::kF32, Device::kCUDA) {
    testing::randomize_params(cpu.params(), seed);
    Context ctx;
    cpu.forward(ctx, prompt.data(), prompt.data());
    const Tensor l = cpu.logits();
    logits.assign(l.ptr<float>(), l.ptr<float>() + l.numel());
    copy_masters(cpu.params(), gpu.params());
  }
  // The worst row error, over the prompt, of the GPU prefill's logits (bf16, all positions) against
  // the CPU's: the bf16 error of these weights.
  double gpu_prefill_error(const ModelConfig& cfg, const std::vector<int32_t>& prompt) {
    Runtime rt(Device::kCUDA);
    Engine engine(cfg, gpu.params());
    auto state = engine.new_state(1, static_cast<int64_t>(prompt.size()));
    std::vector<float> all;
    engine.prefill(rt.ctx(), prompt, *state, &all);
    const int64_t V = cfg.vocab_size;
    double worst = 0;
    for (size_t t = 0; t < prompt.size(); ++t)
      worst = std::max(worst, row_error(all.data() + t * V, logits.data() + t * V, V));
    return worst;
  }
};

struct Case {
  std::string name;
  ModelConfig cfg;
  int64_t T = 37;
};

std::vector<Case> cases() {
  using K = MixerKind;
  std::vector<Case> c;
  c.push_back({"gdn", gpu_config({K::kGdn, K::kGdn})});
  Case tc{"gdn_tensor_core_chunk64", gpu_config({K::kGdn})};
  tc.cfg.gdn.head_k_dim = tc.cfg.gdn.head_v_dim = 64, tc.cfg.gdn.chunk_size = 64, tc.T = 70;
  c.push_back(tc);
  Case rec{"gdn_recurrent_conv1", gpu_config({K::kGdn})};
  rec.cfg.gdn.chunk_size = 0, rec.cfg.gdn.conv_kernel = 1;
  c.push_back(rec);
  c.push_back({"attn_gated", gpu_config({K::kAttn, K::kAttn})});
  Case plain{"attn_ungated", gpu_config({K::kAttn})};
  plain.cfg.attn.qk_norm = false, plain.cfg.attn.output_gate = false, plain.cfg.attn.n_kv_heads = 4;
  plain.cfg.zero_centered_norm = false;
  c.push_back(plain);
  for (bool interleave : {true, false})
    for (int q_lora : {0, 24}) {
      Case m{std::string("mla_") + (interleave ? "interleaved" : "halves") + "_qlora" + std::to_string(q_lora),
             gpu_config({K::kMla})};
      m.cfg.mla.rope_interleave = interleave, m.cfg.mla.q_lora_rank = q_lora;
      c.push_back(m);
    }
  c.push_back({"hybrid", gpu_config({K::kGdn, K::kAttn, K::kMla, K::kGdn})});
  return c;
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class DecodeCuda : public ::testing::TestWithParam<Case> {};

TEST_P(DecodeCuda, TokenByTokenMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  const Case& c = GetParam();
  const int64_t T = c.T, V = c.cfg.vocab_size;
  const std::vector<int32_t> prompt = random_tokens(T, c.cfg.vocab_size, 7);
  Twin twin(c.cfg, prompt, 3);
  const double limit = cpu_limit(twin.gpu_prefill_error(c.cfg, prompt));
  Runtime rt(Device::kCUDA);
  for (bool graph : {true, false}) {
    SCOPED_TRACE(graph ? "CUDA graph" : "op by op");
    Engine engine(c.cfg, twin.gpu.params());
    engine.set_cuda_graph(graph);
    auto state = engine.new_state(1, T);
    double worst = 0;
    for (int64_t t = 0; t < T; ++t) {
      const std::vector<float> l = engine.step(rt.ctx(), std::span(&prompt[t], 1), *state);
      const double e = row_error(l.data(), twin.logits.data() + t * V, V);
      worst = std::max(worst, e);
      EXPECT_LE(e, limit) << "token " << t;
    }
    std::printf("%s, %s: token by token, worst logit error %.3e of the scale (limit %.3e)\n", c.name.c_str(),
                graph ? "graph" : "op by op", worst, limit);
    EXPECT_EQ(state->length(), T);
    // Step 1 runs op by op (it builds the GEMM plans), step 2 records the graph; it replays from then on.
    EXPECT_EQ(engine.graph_replays(), graph ? T - 1 : 0);
  }
}

TEST_P(DecodeCuda, PrefillThenDecodeMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  const Case& c = GetParam();
  const int64_t T = c.T, V = c.cfg.vocab_size;
  const std::vector<int32_t> prompt = random_tokens(T, c.cfg.vocab_size, 11);
  Twin twin(c.cfg, prompt, 5);
  const double limit = cpu_limit(twin.gpu_prefill_error(c.cfg, prompt));
  Runtime rt(Device::kCUDA);
  Engine engine(c.cfg, twin.gpu.params());
  // Shorter and longer than the conv tail, inside, at the end of and past a chunk.
  for (int64_t P : {int64_t{1}, int64_t{3}, int64_t{16}, int64_t{17}, T - 5}) {
    SCOPED_TRACE("prefill of " + std::to_string(P));
    auto state = engine.new_state(1, T);
    std::vector<float> l = engine.prefill(rt.ctx(), std::span(prompt.data(), P), *state);
    double worst = row_error(l.data(), twin.logits.data() + (P - 1) * V, V);
    EXPECT_LE(worst, limit) << "the prefill's last logits";
    for (int64_t t = P; t < T; ++t) {
      l = engine.step(rt.ctx(), std::span(&prompt[t], 1), *state);
      const double e = row_error(l.data(), twin.logits.data() + t * V, V);
      worst = std::max(worst, e);
      EXPECT_LE(e, limit) << "token " << t;
    }
    std::printf("%s: prefill %lld + decode, worst logit error %.3e (limit %.3e)\n", c.name.c_str(),
                static_cast<long long>(P), worst, limit);
  }
}

// The consistency on one device: the GPU's own prefill of the whole prompt (the chunked
// forward, every position's logits through the decoder's LM head) against feeding the prompt token by
// token through the GPU decode path, both bf16; unlike the comparisons with the CPU's fp32 model
// above, the weights and their rounding are the same on both sides.
TEST_P(DecodeCuda, TokenByTokenMatchesTheGpuPrefill) {
  SKIP_WITHOUT_GPU();
  const Case& c = GetParam();
  const int64_t T = c.T, V = c.cfg.vocab_size;
  const std::vector<int32_t> prompt = random_tokens(T, c.cfg.vocab_size, 13);
  Twin twin(c.cfg, prompt, 9);
  Runtime rt(Device::kCUDA);
  Engine engine(c.cfg, twin.gpu.params());
  std::vector<float> prefill;
  auto full = engine.new_state(1, T);
  engine.prefill(rt.ctx(), prompt, *full, &prefill);
  ASSERT_EQ(static_cast<int64_t>(prefill.size()), T * V);
  auto state = engine.new_state(1, T);
  double worst = 0;
  for (int64_t t = 0; t < T; ++t) {
    const std::vector<float> l = engine.step(rt.ctx(), std::span(&prompt[t], 1), *state);
    const double e = row_error(l.data(), prefill.data() + t * V, V);
    worst = std::max(worst, e);
    EXPECT_LE(e, kLogitRtol) << "token " << t;
  }
  double prefill_vs_cpu = 0;
  for (int64_t t = 0; t < T; ++t)
    prefill_vs_cpu = std::max(prefill_vs_cpu, row_error(prefill.data() + t * V, twin.logits.data() + t * V, V));
  std::printf("%s: token by token against the GPU prefill, worst logit error %.3e of the scale (the GPU prefill "
              "against the CPU: %.3e)\n",
              c.name.c_str(), worst, prefill_vs_cpu);
}

INSTANTIATE_TEST_SUITE_P(Mixers, DecodeCuda, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

// A prompt of 1200 tokens (19 splits of the cached positions) and decode steps past it: the
// attention kernels at a long context, against the CPU's full forward.
TEST(DecodeCudaLong, LongPromptThenDecodeMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  using K = MixerKind;
  const ModelConfig cfg = gpu_config({K::kGdn, K::kAttn, K::kMla});
  const int64_t P = 1200, T = 1206, V = cfg.vocab_size;
  const std::vector<int32_t> prompt = random_tokens(T, cfg.vocab_size, 21);
  Twin twin(cfg, prompt, 23);
  const double limit = cpu_limit(twin.gpu_prefill_error(cfg, prompt));
  Runtime rt(Device::kCUDA);
  Engine engine(cfg, twin.gpu.params());
  auto state = engine.new_state(1, T);
  std::vector<float> l = engine.prefill(rt.ctx(), std::span(prompt.data(), P), *state);
  EXPECT_LE(row_error(l.data(), twin.logits.data() + (P - 1) * V, V), limit) << "prefill";
  for (int64_t t = P; t < T; ++t) {
    l = engine.step(rt.ctx(), std::span(&prompt[t], 1), *state);
    EXPECT_LE(row_error(l.data(), twin.logits.data() + t * V, V), limit) << "token " << t;
  }
}

GenerateOptions sampled(int batch, uint64_t seed) {
  GenerateOptions o;
  o.max_new_tokens = 24;
  o.batch = batch;
  o.seed = seed;
  o.sampling = SamplerOptions{1.0, 20, 0.95};
  return o;
}

TEST(DecodeCudaGeneration, GraphAndOpByOpGiveTheSameTokens) {
  SKIP_WITHOUT_GPU();
  using K = MixerKind;
  const ModelConfig cfg = gpu_config({K::kGdn, K::kAttn, K::kMla, K::kGdn});
  const std::vector<int32_t> prompt = random_tokens(19, cfg.vocab_size, 31);
  Twin twin(cfg, prompt, 33);
  Runtime rt(Device::kCUDA);
  Engine engine(cfg, twin.gpu.params());
  for (int batch : {1, 3}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    GenerateOptions o = sampled(batch, 5);
    for (double temperature : {0.0, 1.0}) {
      o.sampling.temperature = temperature;
      o.cuda_graph = true;
      const GenerateResult with = engine.generate(rt.ctx(), prompt, o);
      o.cuda_graph = false;
      const GenerateResult without = engine.generate(rt.ctx(), prompt, o);
      EXPECT_EQ(with.tokens, without.tokens) << "temperature " << temperature;
      // Every step after the first replays the graph (the first too when this state landed where the
      // last one was, with the same size: the recording is then still valid).
      EXPECT_GE(with.graph_replays, with.decode_steps - 1);
      EXPECT_LE(with.graph_replays, with.decode_steps);
      EXPECT_EQ(without.graph_replays, 0);
    }
  }
}

TEST(DecodeCudaGeneration, ASeedRepeatsItsTokens) {
  SKIP_WITHOUT_GPU();
  using K = MixerKind;
  const ModelConfig cfg = gpu_config({K::kGdn, K::kAttn, K::kMla});
  const std::vector<int32_t> prompt = random_tokens(13, cfg.vocab_size, 41);
  Twin twin(cfg, prompt, 43);
  Runtime rt(Device::kCUDA);
  Engine engine(cfg, twin.gpu.params());
  const GenerateResult a = engine.generate(rt.ctx(), prompt, sampled(3, 9));
  const GenerateResult b = engine.generate(rt.ctx(), prompt, sampled(3, 9));
  EXPECT_EQ(a.tokens, b.tokens);
  Engine again(cfg, twin.gpu.params());  // a fresh engine (a new decoder and graph)
  EXPECT_EQ(again.generate(rt.ctx(), prompt, sampled(3, 9)).tokens, a.tokens);
}

// A model trained for a few seconds on counting sequences ((start + 3 t) mod V): its next tokens are
// confident, as a trained checkpoint's are. The CPU (fp32) and the GPU (bf16) pick the same 32 greedy
// tokens, or the first that differs is a near-tie of the CPU's logits (printed with its margin).
TEST(DecodeCudaGeneration, CpuAndGpuGreedyAgreeOnATrainedModel) {
  SKIP_WITHOUT_GPU();
  using K = MixerKind;
  const ModelConfig cfg = gpu_config({K::kGdn, K::kAttn, K::kMla, K::kGdn});
  const int V = cfg.vocab_size;
  Runtime rt(Device::kCUDA);
  const std::unique_ptr<Model> trained = train_counting_model(rt, cfg);
  EnginePair e(cfg, *trained);
  Engine &cpu = e.cpu, &gpu = e.gpu;
  const std::vector<int32_t> prompt = counting_prompt(V);
  GenerateOptions o;
  o.max_new_tokens = 32;
  Context cpu_ctx;
  const std::vector<int32_t> a = cpu.generate(cpu_ctx, prompt, o).tokens[0];
  const std::vector<int32_t> b = gpu.generate(rt.ctx(), prompt, o).tokens[0];
  ASSERT_EQ(a.size(), 32u);
  ASSERT_EQ(b.size(), 32u);
  // Nine sequences take the unfused step (cuBLAS GEMMs; the fused kernels take up to 8): greedy,
  // each gives the one sequence's tokens on this confident model.
  GenerateOptions nine = o;
  nine.batch = 9;
  for (const std::vector<int32_t>& seq : gpu.generate(rt.ctx(), prompt, nine).tokens)
    EXPECT_EQ(seq, b) << "a sequence of a batch of 9 (unfused step) differs from the batch of 1 (fused step)";
  expect_same_or_near_tie(cpu, prompt, a, b, MlaCache::kBf16, kLogitRtol, "bf16 caches");
}

}  // namespace
}  // namespace dt
