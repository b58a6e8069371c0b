// The decode path against the chunked forward, on the CPU in fp32: for every mixer (and a hybrid),
// the logits of a prompt from one prefill equal those of feeding it token by token through the
// decode steps; a prefill of the first part followed by decode steps of the rest gives them too
// (the captured state is right); several sequences decode as one.
#include <gtest/gtest.h>

#include <cstring>
#include <span>

#include "infer/engine.h"
#include "layers/decode_memory.h"
#include "tests/infer/infer_test_util.h"

namespace dt {
namespace {

using infer_testing::expect_close_rows;
using infer_testing::odd_config;
using infer_testing::random_tokens;

constexpr double kRtol = 1e-4;

struct Case {
  std::string name;
  ModelConfig cfg;
};

std::vector<Case> cases() {
  using K = MixerKind;
  std::vector<Case> c;
  c.push_back({"gdn", odd_config({K::kGdn, K::kGdn})});
  Case rec{"gdn_recurrent_conv1", odd_config({K::kGdn})};
  rec.cfg.gdn.chunk_size = 0;
  rec.cfg.gdn.conv_kernel = 1;
  c.push_back(rec);
  Case wide{"gdn_conv_wider_than_prompt_part", odd_config({K::kGdn})};
  wide.cfg.gdn.conv_kernel = 6;
  c.push_back(wide);
  c.push_back({"attn_gated", odd_config({K::kAttn, K::kAttn})});
  Case plain{"attn_ungated", odd_config({K::kAttn})};
  plain.cfg.attn.qk_norm = false;
  plain.cfg.attn.output_gate = false;
  plain.cfg.attn.n_kv_heads = 3;
  plain.cfg.zero_centered_norm = false;
  c.push_back(plain);
  for (bool interleave : {true, false})
    for (int q_lora : {0, 10}) {
      Case m{fmt::format("mla_{}_qlora{}", interleave ? "interleaved" : "halves", q_lora), odd_config({K::kMla})};
      m.cfg.mla.rope_interleave = interleave;
      m.cfg.mla.q_lora_rank = q_lora;
      c.push_back(m);
    }
  Case hybrid{"hybrid", odd_config({K::kGdn, K::kAttn, K::kMla, K::kGdn})};
  hybrid.cfg.tie_embeddings = false;
  c.push_back(hybrid);
  return c;
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class DecodeConsistency : public ::testing::TestWithParam<Case> {};

// The full prefill's logits [T, V] of `prompt`, from a model that then serves as the engine's weights.
struct Reference {
  Model model;
  std::vector<float> logits;
  Reference(const ModelConfig& cfg, const std::vector<int32_t>& prompt, uint64_t seed)
      : model(cfg, 1, static_cast<int>(prompt.size())) {
    testing::randomize_params(model.params(), seed);
    Context ctx;
    model.forward(ctx, prompt.data(), prompt.data());
    const Tensor l = model.logits();
    logits.assign(l.ptr<float>(), l.ptr<float>() + l.numel());
  }
};

TEST_P(DecodeConsistency, TokenByTokenEqualsPrefill) {
  const ModelConfig& cfg = GetParam().cfg;
  const int64_t T = 11, V = cfg.vocab_size;
  const std::vector<int32_t> prompt = random_tokens(T, cfg.vocab_size, 7);
  Reference ref(cfg, prompt, 3);
  Engine engine(cfg, ref.model.params());
  Context ctx;
  auto state = engine.new_state(1, T);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<float> l = engine.step(ctx, std::span(&prompt[t], 1), *state);
    expect_close_rows(l.data(), ref.logits.data() + t * V, V, kRtol, fmt::format("token {}", t));
  }
  EXPECT_EQ(state->length(), T);
}

TEST_P(DecodeConsistency, PrefillThenDecodeEqualsPrefill) {
  const ModelConfig& cfg = GetParam().cfg;
  const int64_t T = 13, V = cfg.vocab_size;
  const std::vector<int32_t> prompt = random_tokens(T, cfg.vocab_size, 11);
  Reference ref(cfg, prompt, 5);
  Engine engine(cfg, ref.model.params());
  Context ctx;
  for (int64_t P : {1, 2, 6, 9}) {  // shorter and longer than the conv tail, inside and past a chunk
    auto state = engine.new_state(1, T);
    std::vector<float> l = engine.prefill(ctx, std::span(prompt.data(), P), *state);
    expect_close_rows(l.data(), ref.logits.data() + (P - 1) * V, V, kRtol, fmt::format("prefill of {}", P));
    for (int64_t t = P; t < T; ++t) {
      l = engine.step(ctx, std::span(&prompt[t], 1), *state);
      expect_close_rows(l.data(), ref.logits.data() + t * V, V, kRtol, fmt::format("prefill {} + token {}", P, t));
    }
  }
}

// Three sequences from one prefill, fed different tokens: each matches its own single-sequence run.
TEST_P(DecodeConsistency, SequencesDecodeIndependently) {
  const ModelConfig& cfg = GetParam().cfg;
  const int64_t P = 5, steps = 4, V = cfg.vocab_size;
  const std::vector<int32_t> prompt = random_tokens(P, cfg.vocab_size, 13);
  Reference ref(cfg, prompt, 9);
  Engine engine(cfg, ref.model.params());
  Context ctx;
  const int N = 3;
  std::vector<std::vector<int32_t>> fed(N);
  for (int n = 0; n < N; ++n) fed[n] = random_tokens(steps, cfg.vocab_size, 100 + n);
  std::vector<std::vector<float>> batched;  // per step [N * V]
  {
    auto state = engine.new_state(N, P + steps);
    engine.prefill(ctx, prompt, *state);
    for (int64_t s = 0; s < steps; ++s) {
      std::vector<int32_t> ids;
      for (int n = 0; n < N; ++n) ids.push_back(fed[n][s]);
      batched.push_back(engine.step(ctx, ids, *state));
    }
  }
  for (int n = 0; n < N; ++n) {
    auto state = engine.new_state(1, P + steps);
    engine.prefill(ctx, prompt, *state);
    for (int64_t s = 0; s < steps; ++s) {
      std::vector<float> l = engine.step(ctx, std::span(&fed[n][s], 1), *state);
      expect_close_rows(batched[s].data() + n * V, l.data(), V, 1e-6, fmt::format("sequence {} step {}", n, s));
    }
  }
}

// A state of N sequences filled from a prefilled state of one (generate's widening,
// DecodeState::fill_from_first) decodes bit for bit as one prefilled with N sequences (broadcast_first).
TEST_P(DecodeConsistency, FilledFromOneSequenceEqualsPrefilledWithN) {
  const ModelConfig& cfg = GetParam().cfg;
  const int64_t P = 7, steps = 4;
  const int N = 3;
  const std::vector<int32_t> prompt = random_tokens(P, cfg.vocab_size, 8);
  Reference ref(cfg, prompt, 9);
  Engine engine(cfg, ref.model.params());
  Context ctx;
  auto wide = engine.new_state(N, P + steps);
  engine.prefill(ctx, prompt, *wide);
  auto one = engine.new_state(1, P + steps);
  engine.prefill(ctx, prompt, *one);
  auto filled = engine.new_state(N, P + steps);
  filled->fill_from_first(*one);
  EXPECT_EQ(filled->length(), P);
  for (int64_t s = 0; s < steps; ++s) {
    std::vector<int32_t> ids;
    for (int n = 0; n < N; ++n) ids.push_back(static_cast<int32_t>((7 * s + 3 * n) % cfg.vocab_size));
    const std::vector<float> a = engine.step(ctx, ids, *wide), b = engine.step(ctx, ids, *filled);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "step " << s;
  }
  // Another capacity is another layout: refused, naming both.
  auto other = engine.new_state(N, P + steps + 1);
  try {
    other->fill_from_first(*one);
    ADD_FAILURE() << "no error for a state of another capacity";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("capacity (11 vs 12)"), std::string::npos) << e.what();
  }
}

// The engine's state holds exactly what layers/decode_memory.h counts (there in bf16 / fp32 bytes).
TEST_P(DecodeConsistency, StateSizesAgreeWithDecodeMemory) {
  const ModelConfig& cfg = GetParam().cfg;
  Model weights(cfg, 1, 1);
  Engine engine(cfg, weights.params());
  auto state = engine.new_state(2, 17);
  const DecodeMemory m = decode_memory(cfg);
  EXPECT_EQ(state->recurrent_elements() * kDecodeStateElemBytes + state->conv_tail_elements() * kDecodeCacheElemBytes,
            m.state_bytes_per_sequence);
  EXPECT_EQ(state->cache_elements_per_token() * kDecodeCacheElemBytes, m.cache_bytes_per_token);
  const int64_t elems = 2 * (state->recurrent_elements() + state->conv_tail_elements() +
                             17 * state->cache_elements_per_token());
  EXPECT_GE(state->bytes(), static_cast<size_t>(elems) * sizeof(float));
  EXPECT_LE(state->bytes(), static_cast<size_t>(elems) * sizeof(float) + 256 * 2 * cfg.n_layers());
}

INSTANTIATE_TEST_SUITE_P(Mixers, DecodeConsistency, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace dt
