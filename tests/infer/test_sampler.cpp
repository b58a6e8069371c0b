// The sampler (infer/sampler.h) and the engine's generation loop: greedy is argmax, the cuts and the
// temperature shape the distribution as specified, draws follow it, a seed repeats its tokens.
#include <gtest/gtest.h>

#include <limits>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "infer/engine.h"
#include "infer/sampler.h"
#include "tests/infer/infer_test_util.h"

namespace dt {
namespace {

const std::vector<float> kLogits = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, -3.0f};  // ids 1 and 3 tie

TEST(Sampler, GreedyIsArgmaxLowestIdOnTies) {
  for (double u : {0.001, 0.5, 0.999}) EXPECT_EQ(sample_token(kLogits, {}, u), 1);
  EXPECT_EQ(sample_token(std::vector<float>{-5.f, -1.f, -2.f}, {}, 0.3), 1);
}

// NaN never wins (a broken row must not pick NaN's index), and a row of NaN gives 0: the rule the
// GPU's greedy kernel (infer/cuda/decode_ops.cu) shares.
TEST(Sampler, GreedySkipsNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(sample_token(std::vector<float>{nan, -1.f, 3.f, nan, 3.f}, {}, 0.5), 2);
  EXPECT_EQ(sample_token(std::vector<float>{nan, nan}, {}, 0.5), 0);
  EXPECT_EQ(sample_token(std::vector<float>{-std::numeric_limits<float>::infinity(), nan}, {}, 0.5), 0);
}

TEST(Sampler, TopK1AndTinyTopPAreGreedy) {
  const std::vector<float> logits = {0.1f, -0.4f, 3.0f, 2.9f, 0.0f};
  for (double u : {0.001, 0.3, 0.7, 0.999}) {
    EXPECT_EQ(sample_token(logits, {.temperature = 1.0, .top_k = 1}, u), 2);
    EXPECT_EQ(sample_token(logits, {.temperature = 1.5, .top_p = 1e-6}, u), 2);
  }
}

TEST(Sampler, TemperatureScalesTheSoftmax) {
  const std::vector<float> logits = {1.0f, 0.0f, -0.5f};
  for (double temp : {0.5, 1.0, 2.0}) {
    auto dist = sampling_distribution(logits, {.temperature = temp});
    ASSERT_EQ(dist.size(), 3u);
    double z = 0;
    for (float l : logits) z += std::exp(l / temp);
    for (auto [id, p] : dist) EXPECT_NEAR(p, std::exp(logits[id] / temp) / z, 1e-12) << "temperature " << temp;
  }
}

TEST(Sampler, CutsKeepTheMostLikelyAndRenormalise) {
  // probabilities 0.5, 0.3, 0.15, 0.05
  const std::vector<float> logits = {std::log(0.3f), std::log(0.05f), std::log(0.5f), std::log(0.15f)};
  auto k2 = sampling_distribution(logits, {.temperature = 1.0, .top_k = 2});
  ASSERT_EQ(k2.size(), 2u);
  EXPECT_EQ(k2[0].first, 2);
  EXPECT_EQ(k2[1].first, 0);
  EXPECT_NEAR(k2[0].second, 0.625, 1e-6);
  auto p = sampling_distribution(logits, {.temperature = 1.0, .top_p = 0.9});  // 0.5 + 0.3 < 0.9 <= + 0.15
  ASSERT_EQ(p.size(), 3u);
  EXPECT_NEAR(p[2].second, 0.15 / 0.95, 1e-6);
}

// Many Philox draws follow the distribution: 40000 draws, each frequency within 0.015 of its
// probability (about 5 standard deviations; a wrong sampler misses by far more).
TEST(Sampler, DrawsFollowTheDistribution) {
  const std::vector<float> logits = {std::log(0.1f), std::log(0.2f), std::log(0.3f), std::log(0.4f)};
  for (SamplerOptions o : {SamplerOptions{.temperature = 1.0}, SamplerOptions{.temperature = 2.0, .top_k = 3},
                           SamplerOptions{.temperature = 1.0, .top_p = 0.65}}) {
    const auto dist = sampling_distribution(logits, o);
    std::vector<double> want(4, 0.0), got(4, 0.0);
    for (auto [id, p] : dist) want[id] = p;
    const int n = 40000;
    for (int i = 0; i < n; ++i) got[sample_token(logits, o, sampler_uniform(1234, 0, i))] += 1.0 / n;
    for (int id = 0; id < 4; ++id)
      EXPECT_NEAR(got[id], want[id], 0.015) << "token " << id << " at temperature " << o.temperature << ", top_k "
                                            << o.top_k << ", top_p " << o.top_p;
  }
}

TEST(Sampler, BadOptionsNameTheFlag) {
  auto expect = [](SamplerOptions o, const char* piece) {
    try {
      check_sampler_options(o);
      ADD_FAILURE() << "no error for " << piece;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(piece), std::string::npos) << e.what();
    }
  };
  expect({.temperature = -0.5}, "--temperature = -0.5");
  expect({.temperature = 1, .top_k = -1}, "--top-k = -1");
  expect({.temperature = 1, .top_p = 0}, "--top-p = 0");
  expect({.temperature = 1, .top_p = 1.5}, "--top-p = 1.5");
}

class Generation : public ::testing::Test {
 protected:
  Generation() : cfg_(infer_testing::odd_config({MixerKind::kGdn, MixerKind::kAttn, MixerKind::kMla})), model_(cfg_, 1, 1) {
    testing::randomize_params(model_.params(), 21);
  }
  GenerateResult run(uint64_t seed, double temperature, int batch = 2) {
    Engine engine(cfg_, model_.params());
    GenerateOptions o;
    o.max_new_tokens = 12;
    o.batch = batch;
    o.seed = seed;
    o.sampling.temperature = temperature;
    Context ctx;
    return engine.generate(ctx, prompt_, o);
  }
  ModelConfig cfg_;
  Model model_;
  std::vector<int32_t> prompt_ = infer_testing::random_tokens(7, 41, 3);
};

TEST_F(Generation, ASeedRepeatsItsTokens) {
  const GenerateResult a = run(5, 1.0), b = run(5, 1.0), c = run(6, 1.0);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_NE(a.tokens, c.tokens);
  EXPECT_NE(a.tokens[0], a.tokens[1]);  // the sequences of a batch draw apart
  ASSERT_EQ(a.tokens[0].size(), 12u);
  EXPECT_EQ(a.decode_steps, 11);
}

TEST_F(Generation, GreedyIsTheArgmaxOfEachStep) {
  const GenerateResult g = run(5, 0.0, 1);
  EXPECT_EQ(g.tokens, run(99, 0.0, 1).tokens);  // the seed does not matter
  // Re-derive: prefill, then feed each chosen token, taking the argmax.
  Engine engine(cfg_, model_.params());
  Context ctx;
  auto state = engine.new_state(1, 32);
  std::vector<float> l = engine.prefill(ctx, prompt_, *state);
  for (int32_t tok : g.tokens[0]) {
    EXPECT_EQ(tok, sample_token(l, {}, 0.5));
    l = engine.step(ctx, std::span(&tok, 1), *state);
  }
}

// Greedy without a logits callback takes each step's choice where the logits are
// and feeds it to the next step there (Decoder::step with a greedy vocab, step_chained); with one, the host samples from the copied logits. The same tokens.
// generate prefills one sequence and copies it into the N sequences' state: each of the N greedy
// continuations is the one sequence's, and the state is the N sequences'.
TEST_F(Generation, GreedyOnTheDeviceEqualsGreedyFromTheLogits) {
  Engine engine(cfg_, model_.params());
  Context ctx;
  GenerateOptions o;
  o.max_new_tokens = 12;
  o.batch = 3;
  const GenerateResult direct = engine.generate(ctx, prompt_, o);
  int64_t rows = 0;
  o.on_logits = [&](int64_t, std::span<const float>) { ++rows; };
  const GenerateResult via_logits = engine.generate(ctx, prompt_, o);
  EXPECT_EQ(direct.tokens, via_logits.tokens);
  EXPECT_EQ(rows, static_cast<int64_t>(prompt_.size()) + 11);
  // The steady window opens once step 2's ids are on the host: greedy steps 2 to 9 run as one chunk,
  // so the window holds steps 10 and 11; from the logits, steps 3 to 11.
  EXPECT_EQ(direct.steady_decode_tokens, 3 * 2);
  EXPECT_EQ(via_logits.steady_decode_tokens, 3 * 9);
  EXPECT_GT(direct.steady_decode_ms, 0);
  EXPECT_EQ(direct.state_bytes, engine.new_state(3, static_cast<int64_t>(prompt_.size()) + 11)->bytes());
  o.on_logits = nullptr;
  o.batch = 1;
  const GenerateResult one = engine.generate(ctx, prompt_, o);
  for (const std::vector<int32_t>& t : direct.tokens) EXPECT_EQ(t, one.tokens[0]);
}

TEST_F(Generation, StopTokensEndASequence) {
  const GenerateResult g = run(5, 0.0, 1);
  ASSERT_GE(g.tokens[0].size(), 3u);
  Engine engine(cfg_, model_.params());
  GenerateOptions o;
  o.max_new_tokens = 12;
  o.stop_tokens = {g.tokens[0][2]};
  Context ctx;
  const GenerateResult s = engine.generate(ctx, prompt_, o);
  const auto first = std::find(g.tokens[0].begin(), g.tokens[0].end(), g.tokens[0][2]) - g.tokens[0].begin();
  EXPECT_EQ(s.tokens[0], std::vector<int32_t>(g.tokens[0].begin(), g.tokens[0].begin() + first));
  EXPECT_EQ(s.stop[0], StopReason::kStopToken);
}

}  // namespace
}  // namespace dt
