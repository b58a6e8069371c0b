// The MLA fp8 latent cache on the GPU against the CPU path (core/fp8.h, infer/cpu/decode_ref.h), its
// reference: (a) the GPU's e4m3 conversion and its block quantiser give the CPU's bytes and scales,
// bit for bit, on every bf16, random floats and the edge cases (ties, subnormals, saturation, NaN,
// zero and tiny blocks), through the decode step's write (host position and device counter) and
// the prefill's capture; (b) the GPU's attention over an fp8 cache matches the CPU's fp8 reference
// within bf16 error, and the GPU engine with the fp8 cache holds exactly the quantisation of the
// latents its bf16 cache holds, and its logits stay within bf16 error of the CPU engine's with the
// fp8 cache; (c) on a briefly trained MLA hybrid the CPU and the GPU pick the same greedy tokens
// with the fp8 cache (or the test names the near-tie that split them), CUDA graph and op by op
// alike. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/fp8.h"
#include "core/philox.h"
#include "infer/cpu/decode_ref.h"
#include "infer/cuda/decode_cuda.h"
#include "infer/decode_ops.h"
#include "infer/engine.h"
#include "layers/model.h"
#include "tests/gpu/counting_model.h"
#include "tests/gpu/infer_cuda_util.h"
#include "tests/infer/infer_test_util.h"
#include "tests/layers/gradcheck.h"
#include "trainer/adamw.h"
#include "trainer/runtime.h"

namespace dt {
namespace {

using namespace infer_cuda_testing;
using infer_testing::random_tokens;
using infer_testing::row_error;

// bf16 rounding of the logits' inputs at every op (tests/gpu/test_decode_cuda.cpp's kLogitRtol).
constexpr double kLogitRtol = 3e-2;

// gpu_config with a latent the fp8 cache takes (kv_lora_rank a multiple of 128).
ModelConfig fp8_gpu_config(std::vector<MixerKind> layers, int64_t kvr = 128) {
  ModelConfig c = gpu_config(std::move(layers));
  c.mla.kv_lora_rank = static_cast<int>(kvr);
  return c;
}

// ---- (a) the quantiser ----

TEST(MlaFp8Cuda, E4m3ConversionEqualsTheCpuBitwise) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  std::vector<float> x;
  for (uint32_t h = 0; h < 65536; ++h) x.push_back(bf16_to_f32(static_cast<uint16_t>(h)));  // every bf16
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (float v : {1.0625f, 1.1875f, 1.9375f, 17.f, 19.f, 432.f, 0x1p-10f, 3 * 0x1p-10f, 15 * 0x1p-10f, 448.f, 449.f,
                  463.9f, 464.f, 465.f, 1e30f, inf, nan, 1e-45f, 1e-40f, 0.f, std::numeric_limits<float>::max()}) {
    x.push_back(v);
    x.push_back(-v);
  }
  std::mt19937_64 rng(run_seed());
  std::uniform_real_distribution<float> mant(-1.f, 1.f);
  std::uniform_int_distribution<int> ex(-16, 12);
  for (int i = 0; i < 200000; ++i) x.push_back(std::ldexp(mant(rng), ex(rng)));
  const auto n = static_cast<int64_t>(x.size());
  Dev dx(DType::kF32, {n}), dq(DType::kF8E4M3, {n});
  dx.upload(x);
  cuda::e4m3_encode(static_cast<uint8_t*>(dq.t().data), dx.t().ptr<float>(), n, nullptr);
  const std::vector<uint8_t> got = dq.raw();
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i)
    if (got[i] != f32_to_e4m3(x[i]) && bad++ < 10)
      ADD_FAILURE() << "x = " << x[i] << ": GPU " << int(got[i]) << ", CPU " << int(f32_to_e4m3(x[i]));
  EXPECT_EQ(bad, 0) << "of " << n;
}

// Rows of kvr bf16 latents with every edge case in some block, and random ones.
std::vector<float> edge_rows(int64_t rows, int64_t kvr, uint64_t salt) {
  std::vector<float> x = randn(rows * kvr, salt, 2.0);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  auto block = [&](int64_t r, int64_t b) { return x.data() + r * kvr + b * kFp8Block; };
  const int64_t nb = kvr / kFp8Block;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r % nb;
    float* p = block(r, b);
    switch (r % 8) {
      case 0:  // s = 1: ties, subnormal ties, -0
        p[0] = 448.f;
        for (float v : {17.f, 19.f, 1.0625f, 1.1875f, 432.f, 0x1p-10f, 3 * 0x1p-10f, 15 * 0x1p-10f, -0.f, -17.f})
          *++p = v;
        break;
      case 1: std::fill(p, p + kFp8Block, 0.f); break;                   // a zero block: s = 1
      case 2: p[5] = 450.f, p[6] = -451.f; break;                        // amax > 448: s = 2
      case 3: p[1] = inf, p[2] = -inf, p[3] = nan; break;                // non-finite values
      case 4:
        for (int64_t i = 0; i < kFp8Block; ++i) p[i] *= 1e-37f;          // tiny: the e >= -126 clamp
        break;
      case 5:
        for (int64_t i = 0; i < kFp8Block; ++i) p[i] = round_bf16(p[i] * 1e-4f);  // many subnormal codes
        p[0] = 1.f;
        break;
      default: break;
    }
  }
  for (float& v : x) v = round_bf16(v);
  return x;
}

void cpu_quantize(const std::vector<float>& x, int64_t kvr, std::vector<uint8_t>& q, std::vector<float>& s) {
  const int64_t rows = static_cast<int64_t>(x.size()) / kvr;
  q.assign(x.size(), 0);
  s.assign(static_cast<size_t>(rows * kvr / kFp8Block), 0.f);
  for (int64_t r = 0; r < rows; ++r)
    e4m3_quantize_row(x.data() + r * kvr, kvr, q.data() + r * kvr, s.data() + r * kvr / kFp8Block);
}

TEST(MlaFp8Cuda, CacheWritesEqualTheCpuQuantisationBitwise) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  Dev counter(DType::kI32, {1});
  for (int64_t kvr : {128, 512}) {
    const int64_t N = 3, cap = 40;
    SCOPED_TRACE("kvr " + std::to_string(kvr));
    Dev q(DType::kF8E4M3, {N, cap, kvr}), s(DType::kF32, {N, cap, kvr / kFp8Block});
    // the prefill's capture: 33 rows into sequence 0's positions 0 .. 32
    const std::vector<float> rows = edge_rows(33, kvr, 60 + kvr);
    Dev src(DType::kBF16, {33, kvr});
    src.upload(rows);
    latent_cache_fill_fp8(ctx, q, s, src);
    std::vector<uint8_t> wq;
    std::vector<float> ws;
    cpu_quantize(rows, kvr, wq, ws);
    const std::vector<uint8_t> gq = q.raw();
    const std::vector<float> gs = s.download();
    EXPECT_EQ(std::memcmp(gq.data(), wq.data(), wq.size()), 0) << "capture: codes";
    EXPECT_EQ(std::memcmp(gs.data(), ws.data(), ws.size() * 4), 0) << "capture: scales";
    // the decode step's write at positions 33 and 39, from the host and from the device counter
    for (int64_t pos : {33, 39})
      for (bool on_device : {false, true}) {
        const std::vector<float> x = edge_rows(N, kvr, 70 + pos + on_device);
        Dev one(DType::kBF16, {N, kvr});
        one.upload(x);
        DecodePosition at{pos, {}};
        if (on_device) counter.set_i32(static_cast<int32_t>(pos)), at.counter = counter.t();
        latent_cache_write_fp8(ctx, q, s, one, at);
        cpu_quantize(x, kvr, wq, ws);
        const std::vector<uint8_t> all = q.raw();
        const std::vector<float> alls = s.download();
        for (int64_t n = 0; n < N; ++n) {
          EXPECT_EQ(std::memcmp(all.data() + (n * cap + pos) * kvr, wq.data() + n * kvr, kvr), 0)
              << "write at " << pos << (on_device ? " (counter)" : "") << ", sequence " << n;
          EXPECT_EQ(std::memcmp(alls.data() + (n * cap + pos) * (kvr / kFp8Block), ws.data() + n * (kvr / kFp8Block),
                                kvr / kFp8Block * 4),
                    0)
              << "scales at " << pos << ", sequence " << n;
        }
      }
  }
}

// ---- (b) the attention and the engine ----

TEST(MlaFp8Cuda, AttentionMatchesTheCpuFp8Reference) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  Dev counter(DType::kI32, {1});
  struct C {
    int64_t N, H, dn, dr, dv, kvr, cap, len;
  };
  const C cases[] = {{2, 3, 24, 8, 16, 128, 1, 1},
                     {1, 2, 16, 16, 32, 256, 37, 37},
                     {3, 5, 8, 8, 8, 384, 37, 11},
                     {1, 2, 128, 64, 128, 512, 1300, 1201}};
  for (const C& c : cases)
    for (bool on_device : {false, true}) {
      SCOPED_TRACE("kvr " + std::to_string(c.kvr) + ", len " + std::to_string(c.len) + " of " +
                   std::to_string(c.cap) + (on_device ? ", counter" : ", host"));
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.dn + c.dr));
      const std::vector<float> qn = randn(c.N * c.H * c.dn, 80 + c.cap), qp = randn(c.N * c.H * c.dr, 81),
                               w = randn(c.H * (c.dn + c.dv) * c.kvr, 82, 1.0 / std::sqrt(double(c.kvr))),
                               cc = randn(c.N * c.cap * c.kvr, 83), pe = randn(c.N * c.cap * c.dr, 84);
      std::vector<uint8_t> q;
      std::vector<float> sc;
      cpu_quantize(cc, c.kvr, q, sc);
      Dev dqn(DType::kBF16, {c.N, c.H, c.dn}), dqp(DType::kBF16, {c.N, c.H, c.dr}),
          dw(DType::kBF16, {c.H * (c.dn + c.dv), c.kvr}), dc(DType::kF8E4M3, {c.N, c.cap, c.kvr}),
          ds(DType::kF32, {c.N, c.cap, c.kvr / kFp8Block}), dpe(DType::kBF16, {c.N, c.cap, c.dr}),
          dout(DType::kBF16, {c.N, c.H, c.dv});
      Dev ws(DType::kF32, {mla_decode_workspace(Device::kCUDA, c.N, c.H, c.cap, c.kvr)});
      dqn.upload(qn), dw.upload(w), ds.upload(sc), dqp.upload(qp), dpe.upload(pe);
      device_copy(dc.t().data, Device::kCUDA, q.data(), Device::kCPU, q.size());
      dout.poison(ctx), ws.poison(ctx);
      DecodePosition at{c.len - 1, {}};
      if (on_device) counter.set_i32(static_cast<int32_t>(c.len - 1)), at.counter = counter.t();
      mla_decode_attention_fp8(ctx, dout, dqn, dqp, dw, dc, ds, dpe, at, scale, ws);
      std::vector<double> want(c.N * c.H * c.dv);
      mla_decode_attention_fp8_ref<double>(want.data(), to_double(qn).data(), to_double(qp).data(),
                                           to_double(w).data(), q.data(), sc.data(), to_double(pe).data(), c.N, c.cap,
                                           c.H, c.dn, c.dr, c.dv, c.kvr, c.len, scale);
      expect_close("o", dout.download(), want, kBf16Rel, kFloorRel);
    }
}

// A CPU fp32 model and a GPU model with the same master weights.
struct Twin {
  Model cpu, gpu;
  Twin(const ModelConfig& cfg, uint64_t seed) : cpu(cfg, 1, 1), gpu(cfg, 1, 1, DType::kF32, Device::kCUDA) {
    testing::randomize_params(cpu.params(), seed);
    copy_masters(cpu.params(), gpu.params());
  }
};

// Logits [T, V] of a prefill of P tokens then steps of the rest (P = 0: token by token).
std::vector<float> run(Engine& e, Context& ctx, const std::vector<int32_t>& tokens, int64_t P, MlaCache f,
                       std::unique_ptr<DecodeState>* keep = nullptr) {
  auto state = e.new_state(1, static_cast<int64_t>(tokens.size()), f);
  std::vector<float> all;
  if (P > 0) {
    e.prefill(ctx, std::span(tokens.data(), P), *state, &all);
  }
  for (size_t t = P; t < tokens.size(); ++t) {
    const std::vector<float> l = e.step(ctx, std::span(&tokens[t], 1), *state);
    all.insert(all.end(), l.begin(), l.end());
  }
  if (keep) *keep = std::move(state);
  return all;
}

// With the MLA layer first its latents do not depend on the cache: the GPU's fp8 cache holds
// exactly the quantisation (core/fp8.h) of the bf16 latents its bf16 cache holds, through the
// step's write inside the CUDA graph and through the prefill's capture.
TEST(MlaFp8Cuda, EngineCacheHoldsTheQuantisedBf16Latents) {
  SKIP_WITHOUT_GPU();
  const ModelConfig cfg = fp8_gpu_config({MixerKind::kMla, MixerKind::kGdn}, 256);
  Twin twin(cfg, 51);
  Runtime rt(Device::kCUDA);
  Engine engine(cfg, twin.gpu.params());
  const int64_t T = 29, kvr = cfg.mla.kv_lora_rank;
  const std::vector<int32_t> tokens = random_tokens(T, cfg.vocab_size, 53);
  for (int64_t P : {0, 20}) {
    SCOPED_TRACE("prefill " + std::to_string(P));
    std::unique_ptr<DecodeState> s16, s8;
    run(engine, rt.ctx(), tokens, P, MlaCache::kBf16, &s16);
    run(engine, rt.ctx(), tokens, P, MlaCache::kFp8, &s8);
    std::vector<uint16_t> lat(static_cast<size_t>(T * kvr));
    device_copy(lat.data(), Device::kCPU, s16->layer(0).latent.data, Device::kCUDA, lat.size() * 2);
    std::vector<float> x(lat.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = bf16_to_f32(lat[i]);
    std::vector<uint8_t> wq, gq(lat.size());
    std::vector<float> ws, gs(static_cast<size_t>(T * kvr / kFp8Block));
    cpu_quantize(x, kvr, wq, ws);
    device_copy(gq.data(), Device::kCPU, s8->layer(0).latent.data, Device::kCUDA, gq.size());
    device_copy(gs.data(), Device::kCPU, s8->layer(0).latent_scale.data, Device::kCUDA, gs.size() * 4);
    EXPECT_EQ(std::memcmp(gq.data(), wq.data(), wq.size()), 0);
    EXPECT_EQ(std::memcmp(gs.data(), ws.data(), ws.size() * 4), 0);
  }
}

// GPU fp8 against CPU fp8 (the reference path): the bf16 error of these weights, measured as the GPU
// bf16 cache against the CPU's, bounds it with the same room as test_decode_cuda.cpp's cpu_limit
// (1.5 times, plus kLogitRtol for the latent codes the bf16 rounding moves to a neighbour); and the GPU
// fp8 against the GPU bf16 stays within the CPU test's fp8 tolerance (tests/infer/test_mla_fp8.cpp).
TEST(MlaFp8Cuda, EngineMatchesTheCpuFp8Path) {
  SKIP_WITHOUT_GPU();
  using K = MixerKind;
  for (const ModelConfig& cfg : {fp8_gpu_config({K::kMla}), fp8_gpu_config({K::kGdn, K::kAttn, K::kMla, K::kGdn})}) {
    const int64_t T = 37, V = cfg.vocab_size;
    SCOPED_TRACE(cfg.n_layers() == 1 ? "mla" : "hybrid");
    Twin twin(cfg, 61);
    Runtime rt(Device::kCUDA);
    Context cpu_ctx;
    Engine cpu(cfg, twin.cpu.params()), gpu(cfg, twin.gpu.params());
    const std::vector<int32_t> tokens = random_tokens(T, cfg.vocab_size, 63);
    for (int64_t P : {0, 17}) {
      const std::vector<float> c16 = run(cpu, cpu_ctx, tokens, P, MlaCache::kBf16),
                               c8 = run(cpu, cpu_ctx, tokens, P, MlaCache::kFp8),
                               g16 = run(gpu, rt.ctx(), tokens, P, MlaCache::kBf16),
                               g8 = run(gpu, rt.ctx(), tokens, P, MlaCache::kFp8);
      double bf16_err = 0, fp8_err = 0, gpu_fp8 = 0;
      for (int64_t t = 0; t * V < static_cast<int64_t>(c8.size()); ++t) {
        bf16_err = std::max(bf16_err, row_error(g16.data() + t * V, c16.data() + t * V, V));
        fp8_err = std::max(fp8_err, row_error(g8.data() + t * V, c8.data() + t * V, V));
        gpu_fp8 = std::max(gpu_fp8, row_error(g8.data() + t * V, g16.data() + t * V, V));
      }
      std::printf("fp8 %s, prefill %lld: GPU vs CPU logits, fp8 cache %.3e, bf16 cache %.3e; GPU fp8 vs bf16 %.3e\n",
                  cfg.n_layers() == 1 ? "mla" : "hybrid", static_cast<long long>(P), fp8_err, bf16_err, gpu_fp8);
      EXPECT_LE(fp8_err, 1.5 * bf16_err + kLogitRtol) << "prefill " << P;
      EXPECT_LE(gpu_fp8, 5e-2) << "prefill " << P;
    }
  }
}

// ---- (c) greedy tokens ----

// A hybrid trained for a few seconds on counting sequences (test_decode_cuda.cpp's recipe), then 32
// greedy tokens with the fp8 cache on the CPU and the GPU (graph and op by op).
TEST(MlaFp8Cuda, CpuAndGpuGreedyAgreeOnATrainedModel) {
  SKIP_WITHOUT_GPU();
  using K = MixerKind;
  const ModelConfig cfg = fp8_gpu_config({K::kGdn, K::kAttn, K::kMla, K::kGdn});
  const int V = cfg.vocab_size;
  Runtime rt(Device::kCUDA);
  const std::unique_ptr<Model> trained = train_counting_model(rt, cfg);
  EnginePair e(cfg, *trained);
  Engine &cpu = e.cpu, &gpu = e.gpu;
  const std::vector<int32_t> prompt = counting_prompt(V);
  GenerateOptions o;
  o.max_new_tokens = 32;
  o.mla_cache = MlaCache::kFp8;
  Context cpu_ctx;
  const std::vector<int32_t> a = cpu.generate(cpu_ctx, prompt, o).tokens[0];
  const std::vector<int32_t> b = gpu.generate(rt.ctx(), prompt, o).tokens[0];
  ASSERT_EQ(a.size(), 32u);
  ASSERT_EQ(b.size(), 32u);
  GenerateOptions op = o;
  op.cuda_graph = false;
  EXPECT_EQ(gpu.generate(rt.ctx(), prompt, op).tokens[0], b) << "graph and op by op differ";
  // A bf16 state of the same capacity, then fp8 again: the decoder records each format's step
  // anew (a state may land at the last one's address: the format is part of the graph's key).
  GenerateOptions o16 = o;
  o16.mla_cache = MlaCache::kBf16;
  const std::vector<int32_t> c16 = gpu.generate(rt.ctx(), prompt, o16).tokens[0];
  EXPECT_EQ(gpu.generate(rt.ctx(), prompt, o).tokens[0], b) << "fp8 after bf16 on one engine differs";
  EXPECT_EQ(gpu.generate(rt.ctx(), prompt, o16).tokens[0], c16) << "bf16 after fp8 on one engine differs";
  expect_same_or_near_tie(cpu, prompt, a, b, MlaCache::kFp8, kLogitRtol, "fp8 cache");
}

}  // namespace
}  // namespace dt
