// The MLA fp8 latent cache on the CPU (the reference of the GPU's): the cache holds exactly
// core/fp8.h's quantisation of the latents; the attention over it is the attention over the latents
// read back; the logits stay within the fp8 tolerance of the bf16 (here fp32) cache's for a small
// MLA model and an MLA hybrid; a prefill's capture and token-by-token decode fill the same cache
// (up to single codes one step apart) and give the same logits within a tight bound; runs repeat
// bit for bit; sequences decode independently; the state's sizes; and the clear errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <span>

#include "core/fp8.h"
#include "infer/cpu/decode_ref.h"
#include "infer/decode_ops.h"
#include "infer/engine.h"
#include "layers/decode_memory.h"
#include "tests/infer/infer_test_util.h"

namespace dt {
namespace {

using infer_testing::odd_config;
using infer_testing::random_tokens;
using infer_testing::row_error;

// The fp8 cache needs kv_lora_rank a multiple of 128: two blocks here.
ModelConfig fp8_config(std::vector<MixerKind> layers) {
  ModelConfig cfg = odd_config(std::move(layers));
  cfg.mla.kv_lora_rank = 256;
  return cfg;
}

// Logits of feeding `tokens` one by one from an empty state of the given format: [T, V].
std::vector<float> token_by_token(Engine& engine, const std::vector<int32_t>& tokens, MlaCache f,
                                  std::unique_ptr<DecodeState>* keep = nullptr) {
  Context ctx;
  auto state = engine.new_state(1, static_cast<int64_t>(tokens.size()), f);
  std::vector<float> all;
  for (int32_t t : tokens) {
    const std::vector<float> l = engine.step(ctx, std::span(&t, 1), *state);
    all.insert(all.end(), l.begin(), l.end());
  }
  if (keep) *keep = std::move(state);
  return all;
}

// A prefill of the first P tokens, then steps of the rest: the logits after each token from P - 1 on.
std::vector<float> prefill_then_decode(Engine& engine, const std::vector<int32_t>& tokens, int64_t P, MlaCache f,
                                       std::unique_ptr<DecodeState>* keep = nullptr) {
  Context ctx;
  auto state = engine.new_state(1, static_cast<int64_t>(tokens.size()), f);
  std::vector<float> all = engine.prefill(ctx, std::span(tokens.data(), P), *state);
  for (size_t t = P; t < tokens.size(); ++t) {
    const std::vector<float> l = engine.step(ctx, std::span(&tokens[t], 1), *state);
    all.insert(all.end(), l.begin(), l.end());
  }
  if (keep) *keep = std::move(state);
  return all;
}

struct Case {
  std::string name;
  ModelConfig cfg;
};

std::vector<Case> cases() {
  using K = MixerKind;
  std::vector<Case> c{{"mla", fp8_config({K::kMla})}, {"mla_two_layers_qlora0", fp8_config({K::kMla, K::kMla})}};
  c[1].cfg.mla.q_lora_rank = 0;
  c[1].cfg.mla.rope_interleave = false;
  Case hybrid{"hybrid", fp8_config({K::kGdn, K::kAttn, K::kMla, K::kGdn})};
  hybrid.cfg.tie_embeddings = false;
  c.push_back(hybrid);
  return c;
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class MlaFp8 : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    weights_ = std::make_unique<Model>(GetParam().cfg, 1, 1);
    testing::randomize_params(weights_->params(), 23);
    engine_ = std::make_unique<Engine>(GetParam().cfg, weights_->params());
  }
  std::unique_ptr<Model> weights_;
  std::unique_ptr<Engine> engine_;
};

// The fp8 cache moves the logits by the latent's rounding (e4m3 keeps 3 mantissa bits: up to 2^-4
// relative per value, about 3% RMS, more for values far below their block's largest), carried
// through the attention and the layers after it. On these small random models that is up to 7.3%
// of max(max |logit|, 1) (printed per case: 2.3% with one MLA layer, 7.3% with two, 4.3% for the
// hybrid); kFp8Rtol bounds it with a factor 2 of room.
constexpr double kFp8Rtol = 0.15;

TEST_P(MlaFp8, LogitsStayWithinTheFp8ToleranceOfTheBf16Cache) {
  const ModelConfig& cfg = GetParam().cfg;
  const int64_t T = 24, V = cfg.vocab_size;
  const std::vector<int32_t> tokens = random_tokens(T, cfg.vocab_size, 31);
  const std::vector<float> ref = token_by_token(*engine_, tokens, MlaCache::kBf16);
  const std::vector<float> got = token_by_token(*engine_, tokens, MlaCache::kFp8);
  double worst = 0;
  for (int64_t t = 0; t < T; ++t) worst = std::max(worst, row_error(got.data() + t * V, ref.data() + t * V, V));
  std::printf("[ fp8 ] %s: logits with the fp8 cache vs the bf16 cache: max error %.3g of the scale\n",
              GetParam().name.c_str(), worst);
  EXPECT_LE(worst, kFp8Rtol);
  EXPECT_GT(worst, 0.0) << "the fp8 cache changed nothing: is it used?";
}

// A prefill then steps against token by token, both with the fp8 cache. The first MLA layer's latents
// do not depend on any cache: both quantise the same latents, up to the fp32 rounding of the chunked
// forward against the step's, so the codes agree except where a latent lies within that rounding of
// a midpoint between two e4m3 values (then they are neighbours; measured: none differ). The logits
// do not agree that tightly: within the prompt the prefill attends over the exact latents (the
// training forward never quantises) while token-by-token decode attends over the fp8 ones, and
// what the layers after an MLA layer keep (a later MLA layer's latents, a GDN state) carries that
// difference into the steps; so the bound is the fp8 one, kFp8Rtol (measured up to 4.0%).
TEST_P(MlaFp8, PrefillCaptureThenDecodeAgainstTokenByToken) {
  const ModelConfig& cfg = GetParam().cfg;
  const int64_t T = 17, V = cfg.vocab_size;
  const std::vector<int32_t> tokens = random_tokens(T, cfg.vocab_size, 37);
  std::unique_ptr<DecodeState> a;
  const std::vector<float> ref = token_by_token(*engine_, tokens, MlaCache::kFp8, &a);
  int first_mla = 0;
  while (cfg.layers[first_mla] != MixerKind::kMla) ++first_mla;
  double worst = 0;
  int64_t differing = 0, compared = 0, later = 0;
  for (int64_t P : {1, 5, 12, 17}) {
    std::unique_ptr<DecodeState> b;
    const std::vector<float> got = prefill_then_decode(*engine_, tokens, P, MlaCache::kFp8, &b);
    for (int64_t t = P - 1; t < T; ++t)
      worst = std::max(worst, row_error(got.data() + (t - P + 1) * V, ref.data() + t * V, V));
    for (int i = first_mla; i < cfg.n_layers(); ++i) {
      const LayerDecodeState &la = a->layer(i), &lb = b->layer(i);
      if (la.kind != MixerKind::kMla) continue;
      const auto* qa = static_cast<const uint8_t*>(la.latent.data);
      const auto* qb = static_cast<const uint8_t*>(lb.latent.data);
      const int64_t kvr = cfg.mla.kv_lora_rank, nb = kvr / kFp8Block;
      for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < kvr; ++j) {
          const float sa = la.latent_scale.ptr<float>()[t * nb + j / kFp8Block],
                      sb = lb.latent_scale.ptr<float>()[t * nb + j / kFp8Block];
          const bool same = qa[t * kvr + j] == qb[t * kvr + j] && sa == sb;
          if (i > first_mla) {  // inputs moved by the first MLA layer's fp8 attention: counted only
            later += !same;
            continue;
          }
          ++compared;
          if (same) continue;
          ++differing;
          const double va = e4m3_to_f32(qa[t * kvr + j]) * sa, vb = e4m3_to_f32(qb[t * kvr + j]) * sb;
          // neighbours: one e4m3 step apart (2^-3 relative at most, or a subnormal step)
          EXPECT_LE(std::fabs(va - vb), std::max(std::fabs(va), std::fabs(vb)) / 8 + std::max(sa, sb) * 0x1p-9)
              << "layer " << i << " position " << t << " value " << j;
        }
    }
  }
  std::printf("[ fp8 ] %s: prefill + decode vs token by token: logits max error %.3g; first MLA layer: %lld of %lld "
              "latent codes differ; later MLA layers: %lld differ\n",
              GetParam().name.c_str(), worst, static_cast<long long>(differing), static_cast<long long>(compared),
              static_cast<long long>(later));
  EXPECT_LE(worst, kFp8Rtol);
  EXPECT_LE(differing * 100, compared) << "more than 1% of the first MLA layer's codes differ";
}

TEST_P(MlaFp8, RunsRepeatBitForBit) {
  const ModelConfig& cfg = GetParam().cfg;
  const std::vector<int32_t> prompt = random_tokens(9, cfg.vocab_size, 41);
  GenerateOptions o;
  o.max_new_tokens = 8;
  o.mla_cache = MlaCache::kFp8;
  o.batch = 2;
  o.sampling.temperature = 1.0;
  std::vector<float> first, second;
  Context ctx;
  o.on_logits = [&](int64_t, std::span<const float> row) { first.insert(first.end(), row.begin(), row.end()); };
  const GenerateResult a = engine_->generate(ctx, prompt, o);
  o.on_logits = [&](int64_t, std::span<const float> row) { second.insert(second.end(), row.begin(), row.end()); };
  const GenerateResult b = engine_->generate(ctx, prompt, o);
  EXPECT_EQ(a.tokens, b.tokens);
  ASSERT_EQ(first.size(), second.size());
  EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)), 0);
  EXPECT_LT(a.state_bytes, engine_->new_state(2, 9 + 7)->bytes());  // smaller than the fp32 latent's state
  EXPECT_EQ(a.state_bytes, engine_->new_state(2, 9 + 7, MlaCache::kFp8)->bytes());
}

// Three sequences from one prefill (broadcast_first copies the codes and scales), fed different
// tokens: each matches its own single-sequence run.
TEST_P(MlaFp8, SequencesDecodeIndependently) {
  const ModelConfig& cfg = GetParam().cfg;
  const int64_t P = 6, steps = 4, V = cfg.vocab_size;
  const int N = 3;
  const std::vector<int32_t> prompt = random_tokens(P, cfg.vocab_size, 43);
  Context ctx;
  auto state = engine_->new_state(N, P + steps, MlaCache::kFp8);
  engine_->prefill(ctx, prompt, *state);
  std::vector<std::vector<int32_t>> fed(N);
  for (int n = 0; n < N; ++n) fed[n] = random_tokens(steps, cfg.vocab_size, 200 + n);
  std::vector<std::vector<float>> batched;
  for (int64_t s = 0; s < steps; ++s) {
    std::vector<int32_t> ids;
    for (int n = 0; n < N; ++n) ids.push_back(fed[n][s]);
    batched.push_back(engine_->step(ctx, ids, *state));
  }
  for (int n = 0; n < N; ++n) {
    auto one = engine_->new_state(1, P + steps, MlaCache::kFp8);
    engine_->prefill(ctx, prompt, *one);
    for (int64_t s = 0; s < steps; ++s) {
      const std::vector<float> l = engine_->step(ctx, std::span(&fed[n][s], 1), *one);
      infer_testing::expect_close_rows(batched[s].data() + n * V, l.data(), V, 1e-6,
                                       fmt::format("sequence {} step {}", n, s));
    }
  }
}

// The state: f8e4m3 latents and fp32 scales; per token, layers/decode_memory.h's fp8 count in the
// GPU's layout (the CPU keeps the rope key in fp32).
TEST_P(MlaFp8, StateSizes) {
  const ModelConfig& cfg = GetParam().cfg;
  auto s8 = engine_->new_state(2, 19, MlaCache::kFp8);
  auto s16 = engine_->new_state(2, 19);
  EXPECT_EQ(s8->mla_cache(), MlaCache::kFp8);
  const int64_t kvr = cfg.mla.kv_lora_rank;
  const auto L = std::count(cfg.layers.begin(), cfg.layers.end(), MixerKind::kMla);
  for (int i = 0; i < cfg.n_layers(); ++i) {
    const LayerDecodeState& l = s8->layer(i);
    if (l.kind != MixerKind::kMla) {
      EXPECT_FALSE(l.latent_scale.defined());
      continue;
    }
    EXPECT_EQ(l.latent.dtype, DType::kF8E4M3);
    EXPECT_EQ(l.latent.shape, (Shape{2, 19, kvr}));
    EXPECT_EQ(l.latent_scale.dtype, DType::kF32);
    EXPECT_EQ(l.latent_scale.shape, (Shape{2, 19, kvr / kFp8Block}));
    EXPECT_FALSE(s16->layer(i).latent_scale.defined());
  }
  EXPECT_EQ(s8->cache_bytes_per_token() - s16->cache_bytes_per_token(), L * (kvr + 4 * kvr / 128 - 4 * kvr));
  const DecodeMemory m8 = decode_memory(cfg, MlaCache::kFp8), m16 = decode_memory(cfg);
  EXPECT_EQ(m16.cache_bytes_per_token - m8.cache_bytes_per_token, L * (2 * kvr - kvr - 4 * kvr / 128));
  EXPECT_EQ(m8.state_bytes_per_sequence, m16.state_bytes_per_sequence);
  EXPECT_LT(s8->bytes(), s16->bytes());
}

INSTANTIATE_TEST_SUITE_P(Models, MlaFp8, ::testing::ValuesIn(cases()), [](const auto& info) { return info.param.name; });

// With one MLA layer first, the latents do not depend on the cache: the fp8 cache then holds exactly
// core/fp8.h's quantisation of what the fp32 cache holds, position by position.
TEST(MlaFp8Cache, HoldsTheQuantisedLatents) {
  const ModelConfig cfg = fp8_config({MixerKind::kMla, MixerKind::kGdn});
  Model weights(cfg, 1, 1);
  testing::randomize_params(weights.params(), 29);
  Engine engine(cfg, weights.params());
  const std::vector<int32_t> tokens = random_tokens(10, cfg.vocab_size, 47);
  for (int64_t P : {0, 4}) {  // token by token, and a prefill of 4 then steps
    std::unique_ptr<DecodeState> s16, s8;
    if (P == 0) {
      token_by_token(engine, tokens, MlaCache::kBf16, &s16);
      token_by_token(engine, tokens, MlaCache::kFp8, &s8);
    } else {
      prefill_then_decode(engine, tokens, P, MlaCache::kBf16, &s16);
      prefill_then_decode(engine, tokens, P, MlaCache::kFp8, &s8);
    }
    const int64_t kvr = cfg.mla.kv_lora_rank, T = 10;
    std::vector<uint8_t> q(static_cast<size_t>(T * kvr));
    std::vector<float> sc(static_cast<size_t>(T * kvr / kFp8Block));
    for (int64_t t = 0; t < T; ++t)
      e4m3_quantize_row(s16->layer(0).latent.ptr<float>() + t * kvr, kvr, q.data() + t * kvr,
                        sc.data() + t * kvr / kFp8Block);
    EXPECT_EQ(std::memcmp(q.data(), s8->layer(0).latent.data, q.size()), 0) << "prefill " << P;
    EXPECT_EQ(std::memcmp(sc.data(), s8->layer(0).latent_scale.data, sc.size() * 4), 0) << "prefill " << P;
    EXPECT_EQ(std::memcmp(s16->layer(0).rope_key.data, s8->layer(0).rope_key.data, s16->layer(0).rope_key.bytes()), 0);
  }
}

// The op: mla_decode_attention_fp8 equals mla_decode_attention on the latents read back, bit for bit.
TEST(MlaFp8Cache, AttentionIsTheAttentionOverTheReadBackLatents) {
  const int64_t N = 2, cap = 9, H = 3, dn = 5, dr = 4, dv = 3, kvr = 256, pos = 6;
  std::mt19937_64 rng(3);
  std::normal_distribution<float> d(0.f, 1.f);
  auto randv = [&](int64_t n, float s) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = d(rng) * s;
    return v;
  };
  std::vector<float> qn = randv(N * H * dn, 1), qp = randv(N * H * dr, 1), w = randv(H * (dn + dv) * kvr, 0.1f);
  std::vector<float> lat = randv(N * cap * kvr, 3), pe = randv(N * cap * dr, 1), back(lat.size());
  std::vector<uint8_t> q(lat.size());
  std::vector<float> sc(lat.size() / kFp8Block);
  for (int64_t r = 0; r < N * cap; ++r) {
    e4m3_quantize_row(lat.data() + r * kvr, kvr, q.data() + r * kvr, sc.data() + r * kvr / kFp8Block);
    e4m3_dequantize_row(q.data() + r * kvr, sc.data() + r * kvr / kFp8Block, kvr, back.data() + r * kvr);
  }
  std::vector<float> o8(N * H * dv), o(N * H * dv);
  auto T = [](std::vector<float>& v, Shape s) { return Tensor(v.data(), DType::kF32, Device::kCPU, s); };
  Context ctx;
  mla_decode_attention_fp8(ctx, T(o8, {N, H, dv}), T(qn, {N, H, dn}), T(qp, {N, H, dr}), T(w, {H * (dn + dv), kvr}),
                           Tensor(q.data(), DType::kF8E4M3, Device::kCPU, {N, cap, kvr}), T(sc, {N, cap, kvr / 128}),
                           T(pe, {N, cap, dr}), {pos, {}}, 0.3);
  mla_decode_attention(ctx, T(o, {N, H, dv}), T(qn, {N, H, dn}), T(qp, {N, H, dr}), T(w, {H * (dn + dv), kvr}),
                       T(back, {N, cap, kvr}), T(pe, {N, cap, dr}), {pos, {}}, 0.3);
  EXPECT_EQ(o8, o);
  // and the cache write: a position's row quantised in place
  std::vector<float> src = randv(N * kvr, 2);
  latent_cache_write_fp8(ctx, Tensor(q.data(), DType::kF8E4M3, Device::kCPU, {N, cap, kvr}),
                         T(sc, {N, cap, kvr / 128}), T(src, {N, kvr}), {pos, {}});
  for (int64_t n = 0; n < N; ++n) {
    std::vector<uint8_t> want(kvr);
    float ws[2];
    e4m3_quantize_row(src.data() + n * kvr, kvr, want.data(), ws);
    EXPECT_EQ(std::memcmp(want.data(), q.data() + (n * cap + pos) * kvr, kvr), 0) << n;
    EXPECT_EQ(ws[0], sc[(n * cap + pos) * 2]);
    EXPECT_EQ(ws[1], sc[(n * cap + pos) * 2 + 1]);
  }
}

TEST(MlaFp8Cache, BadInputIsAClearError) {
  const ModelConfig odd = odd_config({MixerKind::kGdn, MixerKind::kMla});  // kv_lora_rank 7
  Model weights(odd, 1, 1);
  Engine engine(odd, weights.params());
  try {
    engine.new_state(1, 8, MlaCache::kFp8);
    FAIL() << "kv_lora_rank 7 took the fp8 cache";
  } catch (const Error& e) {
    const std::string m = e.what();
    for (const char* piece : {"--mla-cache fp8", "multiple of 128", "is 7"})
      EXPECT_NE(m.find(piece), std::string::npos) << m;
  }
  EXPECT_THROW(decode_memory(odd, MlaCache::kFp8), Error);
  // A model without MLA layers: the state has nothing to quantise (the CLI refuses the flag).
  const ModelConfig gdn = odd_config({MixerKind::kGdn});
  Model w2(gdn, 1, 1);
  Engine e2(gdn, w2.params());
  EXPECT_EQ(e2.new_state(1, 8, MlaCache::kFp8)->bytes(), e2.new_state(1, 8)->bytes());
  EXPECT_EQ(decode_memory(gdn, MlaCache::kFp8).cache_bytes_per_token, 0);
}

}  // namespace
}  // namespace dt
