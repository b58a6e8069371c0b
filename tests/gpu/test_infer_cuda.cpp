// The GPU decode ops (infer/decode_ops.h -> infer/cuda/) against their CPU references
// (infer/cpu/decode_ref.h) run in double on the same bf16 inputs. Odd sizes, cache lengths 1, 37
// and past 1000 (several splits of the positions, a length short of the capacity), the position
// from the host and from the device counter; every output and the workspace poisoned with NaN
// first. Skips without a GPU.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "infer/cpu/decode_ref.h"
#include "infer/cuda/decode_cuda.h"
#include "infer/decode_ops.h"
#include "tests/gdn_step_ref.h"
#include "tests/gemv_input_ref.h"
#include "tests/gpu/infer_cuda_util.h"

namespace dt {
namespace {

using namespace infer_cuda_testing;


TEST(DecodeOpsCuda, ConvStepMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  const int64_t N = 3, C = 37;
  for (int64_t K : {1, 2, 4, 6}) {
    SCOPED_TRACE("K = " + std::to_string(K));
    const std::vector<float> x = randn(N * C, 1), w = randn(C * K, 2, 0.5, false);
    const std::vector<float> tail = K > 1 ? randn(N * (K - 1) * C, 3) : std::vector<float>{};
    Dev dx(DType::kBF16, {N, C}), dy(DType::kBF16, {N, C}), dw(DType::kF32, {C, 1, K});
    Dev dtail(DType::kBF16, {N, std::max<int64_t>(K - 1, 1), C});
    dx.upload(x), dw.upload(w);
    if (K > 1) dtail.upload(tail);
    dy.poison(ctx);
    decode_conv_step(ctx, dy, K > 1 ? dtail.t() : Tensor{}, dx, dw);
    std::vector<double> y(N * C), tl = to_double(tail);
    decode_conv_step_ref<double>(y.data(), K > 1 ? tl.data() : nullptr, to_double(x).data(), to_double(w).data(), N, C,
                                 K);
    expect_close("y", dy.download(), y, kBf16Rel, kFloorRel);
    if (K > 1) expect_close("tail (a copy: exact)", dtail.download(), tl, 0, 0);
  }
}

TEST(DecodeOpsCuda, RopeMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  const int64_t N = 2, H = 3, D = 40;
  Dev counter(DType::kI32, {1});
  for (bool interleaved : {false, true})
    for (int64_t rot : {8, 24, 40})
      for (int64_t pos : {0, 5, 1000, 131071})
        for (bool on_device : {false, true}) {
          SCOPED_TRACE(std::string(interleaved ? "interleaved" : "halves") + ", rot " + std::to_string(rot) +
                       ", pos " + std::to_string(pos) + (on_device ? " from the counter" : " from the host"));
          const std::vector<float> x = randn(N * H * D, 10 + rot + pos);
          Dev dx(DType::kBF16, {N, H, D});
          dx.upload(x);
          DecodePosition at{pos, {}};
          if (on_device) {  // the host value is wrong on purpose: the kernel must read the counter
            counter.set_i32(static_cast<int32_t>(pos));
            at = DecodePosition{0, counter.t()};
          }
          decode_rope(ctx, dx, at, rot, 10000.0, interleaved);
          std::vector<double> want = to_double(x);
          decode_rope_ref<double>(want.data(), N, H, D, pos, rot, 10000.0, interleaved);
          expect_close("x", dx.download(), want, kBf16Rel, kFloorRel);
        }
}

// The attention layer's token before the attention in one kernel against the CPU's composition
// of the unfused ops in double: query and key heads RMS-normed (or not), RoPE on part or all of
// the head, the gate split off (or none), head dims with and without a multiple of 8, the position
// from the host and from the counter; outputs and caches poisoned (the cache rows other than the
// position must stay so). With the norms the GPU rounds the normed head to bf16 before RoPE, as
// the unfused kernels store it, and the reference does not: a rotated feature then carries up to
// 2^-9 (|x1| + |x2|) of error, which for a feature near zero is not relative to it, hence a floor
// of 2% of the RMS there (a wrong head, pair or position moves features by O(RMS)).
TEST(DecodeOpsCuda, AttnPrepMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  Context cpu;
  const int64_t N = 3, H = 4, Hkv = 2, cap = 7, pos = 5;
  Dev counter(DType::kI32, {1});
  for (int64_t hd : {64, 36})
    for (bool gated : {false, true})
      for (bool norm : {false, true})
        for (bool on_device : {false, true}) {
          const int64_t rot = hd == 64 ? 64 : 20, qw = gated ? 2 * hd : hd;
          SCOPED_TRACE(fmt::format("hd {}, rot {}{}{}{}", hd, rot, gated ? ", gated" : "", norm ? ", qk norm" : "",
                                   on_device ? ", the counter" : ""));
          const uint64_t salt = 500 + hd + 2 * gated + 4 * norm;
          const std::vector<float> qg = randn(N * H * qw, salt), k = randn(N * Hkv * hd, salt + 1),
                                   v = randn(N * Hkv * hd, salt + 2);
          const std::vector<float> qn = randn(hd, salt + 3, 0.5, false), kn = randn(hd, salt + 4, 0.5, false);
          Dev dqg(DType::kBF16, {N, H * qw}), dk(DType::kBF16, {N, Hkv * hd}), dv(DType::kBF16, {N, Hkv * hd});
          Dev dqn(DType::kF32, {hd}), dkn(DType::kF32, {hd}), dq(DType::kBF16, {N, H, hd}), dg(DType::kBF16, {N, H, hd});
          Dev dkc(DType::kBF16, {N, cap, Hkv, hd}), dvc(DType::kBF16, {N, cap, Hkv, hd});
          dqg.upload(qg), dk.upload(k), dv.upload(v), dqn.upload(qn), dkn.upload(kn);
          for (const Dev* d : {&dq, &dg, &dkc, &dvc}) d->poison(ctx);
          DecodePosition at{pos, {}};
          if (on_device) {  // the host value is wrong on purpose: the kernel must read the counter
            counter.set_i32(static_cast<int32_t>(pos));
            at = DecodePosition{0, counter.t()};
          }
          AttnPrepArgs a;
          a.q = dq, a.gate = gated ? dg.t() : Tensor{}, a.k_cache = dkc, a.v_cache = dvc;
          a.qg = dqg, a.k = dk, a.v = dv, a.qn_w = norm ? dqn.t() : Tensor{}, a.kn_w = norm ? dkn.t() : Tensor{};
          a.n_heads = H, a.n_kv_heads = Hkv, a.head_dim = hd, a.rotary_dim = rot, a.eps = 1e-6, a.theta = 10000.0;
          a.zero_centered = true;
          decode_attn_prep(ctx, a, at);
          // The CPU in double: the same op on host tensors.
          std::vector<double> hqg = to_double(qg), hk = to_double(k), hv = to_double(v), hqn = to_double(qn),
                              hkn = to_double(kn);
          std::vector<double> hq(N * H * hd), hg(N * H * hd), hkc(N * cap * Hkv * hd, 0.0), hvc(hkc.size(), 0.0);
          auto host = [](std::vector<double>& x, Shape s) { return Tensor(x.data(), DType::kF64, Device::kCPU, s); };
          AttnPrepArgs c = a;
          c.q = host(hq, {N, H, hd}), c.gate = gated ? host(hg, {N, H, hd}) : Tensor{};
          c.k_cache = host(hkc, {N, cap, Hkv, hd}), c.v_cache = host(hvc, {N, cap, Hkv, hd});
          c.qg = host(hqg, {N, H * qw}), c.k = host(hk, {N, Hkv * hd}), c.v = host(hv, {N, Hkv * hd});
          c.qn_w = norm ? host(hqn, {hd}) : Tensor{}, c.kn_w = norm ? host(hkn, {hd}) : Tensor{};
          decode_attn_prep(cpu, c, DecodePosition{pos, {}});
          const double floor = norm ? 2e-2 : kFloorRel;
          expect_close("q", dq.download(), hq, kBf16Rel, floor);
          if (gated) expect_close("gate", dg.download(), hg, kBf16Rel, kFloorRel);
          // The position's rows against the CPU; every other row still poisoned.
          const std::vector<float> gk = dkc.download(), gv = dvc.download();
          const int64_t row = Hkv * hd;
          for (int64_t n = 0; n < N; ++n)
            for (int64_t t = 0; t < cap; ++t) {
              const int64_t o = (n * cap + t) * row;
              const std::vector<float> rk(gk.begin() + o, gk.begin() + o + row), rv(gv.begin() + o, gv.begin() + o + row);
              if (t == pos) {
                expect_close("k cache", rk, std::vector<double>(hkc.begin() + o, hkc.begin() + o + row), kBf16Rel,
                             floor);
                expect_close("v cache", rv, std::vector<double>(hvc.begin() + o, hvc.begin() + o + row), kBf16Rel,
                             kFloorRel);
              } else {
                EXPECT_TRUE(std::all_of(rk.begin(), rk.end(), [](float f) { return std::isnan(f); })) << "k row " << t;
                EXPECT_TRUE(std::all_of(rv.begin(), rv.end(), [](float f) { return std::isnan(f); })) << "v row " << t;
              }
            }
        }
}

TEST(DecodeOpsCuda, CacheWriteMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  const int64_t N = 3, cap = 37, H = 3, D = 10;
  Dev counter(DType::kI32, {1});
  for (DType dtype : {DType::kBF16, DType::kF32})
    for (int64_t pos : {0, 17, 36}) {
      const std::vector<float> cache = randn(N * cap * H * D, 20 + pos), src = randn(N * H * D, 21 + pos);
      Dev dc(dtype, {N, cap, H, D}), ds(dtype, {N, H, D});
      dc.upload(cache), ds.upload(src);
      counter.set_i32(static_cast<int32_t>(pos));
      cache_write(ctx, dc, ds, DecodePosition{pos, counter.t()});
      std::vector<double> want = to_double(cache);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t e = 0; e < H * D; ++e) want[(n * cap + pos) * H * D + e] = src[n * H * D + e];
      expect_close("cache at position " + std::to_string(pos), dc.download(), want, 0, 0);
    }
}

// Greedy decoding's argmax: rows of odd lengths (shorter and longer than the block's 1024 threads),
// ties (the first index wins), NaN (never wins; a row of NaN gives 0), a vocabulary limit below the
// row length, and the output poisoned first.
TEST(DecodeOpsCuda, ArgmaxMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t V : {1, 7, 1000, 1025, 50257})
    for (int64_t N : {1, 3, 64}) {
      SCOPED_TRACE(fmt::format("N {}, V {}", N, V));
      std::vector<float> x = randn(N * V, 40 + V + N, 1.0, false);
      if (N > 1) x[V + (V - 1)] = x[V] = 9.f;  // row 1: a tie of its first and last ids
      if (N > 1 && V > 9 * 1024) x[V + 1024] = x[V + 9 * 1024] = 9.f;  // and of ids one thread reads
      if (N > 3 && V > 9 * 1024) x[3 * V + 1024] = x[3 * V + 9 * 1024] = 50.f;  // row 3: the same, not at 0
      if (N > 2 && V > 2) x[2 * V] = nan, x[2 * V + V / 2] = nan;  // row 2: NaN first and in the middle
      if (N == 64) std::fill(x.begin() + 5 * V, x.begin() + 6 * V, nan);  // row 5: all NaN
      Dev dx(DType::kF32, {N, V}), dout(DType::kI32, {N});
      dx.upload(x);
      for (int64_t vocab : {V, std::max<int64_t>(V - 3, 1)}) {
        dout.upload_i32(std::vector<int32_t>(static_cast<size_t>(N), -7));  // poison
        decode_argmax(ctx, dout, dx, vocab);
        std::vector<int32_t> want(static_cast<size_t>(N));
        decode_argmax_ref(want.data(), x.data(), N, vocab, V);
        EXPECT_EQ(dout.download_i32(), want) << "vocab " << vocab;
        // With the position counter (a greedy step's last kernel): the same ids, the counter one on.
        Dev counter(DType::kI32, {1});
        counter.set_i32(41);
        dout.upload_i32(std::vector<int32_t>(static_cast<size_t>(N), -7));
        decode_argmax(ctx, dout, dx, vocab, counter);
        EXPECT_EQ(dout.download_i32(), want) << "vocab " << vocab << ", with the counter";
        EXPECT_EQ(counter.download_i32(), std::vector<int32_t>{42});
      }
    }
}

// The fused GEMV: 1 to 8 sequences, input widths from 8 to 4104 (up to 1024 the first row's weights
// are all loaded before the wait, past it not all), one weight with a residual or
// four weights with bf16 and fp32 outputs, for each way of taking the input (plain, SwiGLU, the
// sigmoid gate, RMSNorm plain and zero-centred); outputs poisoned. The reference takes the input
// as the GPU rounds it to bf16.
TEST(DecodeOpsCuda, GemvMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  for (int64_t N : {1, 3, 8})
    for (int64_t C : {8, 72, 776, 2056, 4104})
      for (GemvInput kind : {GemvInput::kPlain, GemvInput::kSwiGLU, GemvInput::kGate, GemvInput::kRmsNorm}) {
        const bool zc = C % 16 == 8;
        SCOPED_TRACE(fmt::format("N {}, C {}, input kind {}{}", N, C, static_cast<int>(kind), zc ? ", zero-centred" : ""));
        const uint64_t salt = 100 + N * 7 + C + static_cast<uint64_t>(kind);
        const std::vector<float> x = randn(N * C, salt), x2 = randn(N * C, salt + 1);
        const std::vector<float> nw = randn(C, salt + 2, 0.5, false);
        Dev dx(DType::kBF16, {N, C}), dx2(DType::kBF16, {N, C}), dnw(DType::kF32, {C});
        dx.upload(x), dx2.upload(x2), dnw.upload(nw);
        // the input as the GPU rounds it
        const std::vector<double> in = gemv_input_rounded(kind, to_double(x), to_double(x2), to_double(nw), zc, 1e-6, N, C);
        GemvIn gin = dx.t();
        if (kind == GemvInput::kSwiGLU) gin = GemvIn::swiglu(dx, dx2);
        if (kind == GemvInput::kGate) gin = GemvIn::gated(dx, dx2);
        if (kind == GemvInput::kRmsNorm) gin = GemvIn::rmsnorm(dx, dnw, 1e-6, zc);
        // rows and output dtype of each weight; the first has a residual when it is the only one
        const std::vector<std::pair<int64_t, bool>> shapes = {{37, false}, {5, false}, {3, true}, {130, true}};
        for (int n_w : {1, 4}) {
          std::vector<std::unique_ptr<Dev>> w, y, res;
          std::vector<std::vector<float>> wh, rh;
          for (int i = 0; i < n_w; ++i) {
            const auto [rows, f32] = shapes[i];
            wh.push_back(randn(rows * C, salt + 10 + i, 1.0 / std::sqrt(double(C))));
            w.push_back(std::make_unique<Dev>(DType::kBF16, Shape{rows, C}));
            w.back()->upload(wh.back());
            y.push_back(std::make_unique<Dev>(f32 ? DType::kF32 : DType::kBF16, Shape{N, rows}));
            y.back()->poison(ctx);
            rh.push_back(n_w == 1 ? randn(N * rows, salt + 20) : std::vector<float>{});
            res.push_back(std::make_unique<Dev>(DType::kBF16, Shape{N, rows}));
            if (n_w == 1) res.back()->upload(rh.back());
          }
          auto out = [&](int i) { return GemvOut{*w[i], *y[i], n_w == 1 ? res[i]->t() : Tensor{}}; };
          if (n_w == 1)
            decode_gemv(ctx, {out(0)}, gin);
          else
            decode_gemv(ctx, {out(0), out(1), out(2), out(3)}, gin);
          for (int i = 0; i < n_w; ++i) {
            const int64_t rows = shapes[i].first;
            std::vector<double> want(static_cast<size_t>(N * rows)), r = to_double(rh[i]);
            decode_gemv_ref<double>(want.data(), to_double(wh[i]).data(), GemvInput::kPlain, in.data(), nullptr,
                                    nullptr, 0.0, false, n_w == 1 ? r.data() : nullptr, N, C, C, rows);
            expect_close(fmt::format("y{}", i), y[i]->download(), want, kBf16Rel, kFloorRel);
          }
          if (n_w == 1) {  // the residual read before the grid wait (settled): the same bits
            Dev y_settled(DType::kBF16, {N, shapes[0].first});
            y_settled.poison(ctx);
            decode_gemv(ctx, {GemvOut(*w[0], y_settled, res[0]->t()).settled()}, gin);
            EXPECT_EQ(y_settled.raw(), y[0]->raw()) << "the settled residual";
          }
        }
      }
}

// The GEMV with many rows a warp (rows of 144 bytes: about 16 a warp) or a few long ones (4 KB), two
// weights (the second one's rows start mid-CTA; residual on the first, fp32 output on the second),
// against the double reference; then the same GEMV asking L2 for regions of odd sizes, one shorter
// than the grid has CTAs: the same bits (the prefetch is a hint). Outputs poisoned.
TEST(DecodeOpsCuda, GemvWithManyRowsAndAPrefetchMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  for (int64_t N : {1, 3})
    for (auto [C, rows0, rows1] : {std::tuple<int64_t, int64_t, int64_t>{2056, 5003, 2998}, {72, 60001, 9777}}) {
      SCOPED_TRACE(fmt::format("N {}, C {}, rows {} + {}", N, C, rows0, rows1));
      const uint64_t salt = 900 + N + C;
      const std::vector<float> x = randn(N * C, salt), w0 = randn(rows0 * C, salt + 1, 1.0 / std::sqrt(double(C))),
                               w1 = randn(rows1 * C, salt + 2, 1.0 / std::sqrt(double(C))),
                               res = randn(N * rows0, salt + 3);
      Dev dx(DType::kBF16, {N, C}), dw0(DType::kBF16, {rows0, C}), dw1(DType::kBF16, {rows1, C});
      Dev dres(DType::kBF16, {N, rows0}), dy0(DType::kBF16, {N, rows0}), dy1(DType::kF32, {N, rows1});
      Dev dy0b(DType::kBF16, {N, rows0}), dy1b(DType::kF32, {N, rows1}), far(DType::kBF16, {1001, 24});
      Dev dy0c(DType::kBF16, {N, rows0});
      dx.upload(x), dw0.upload(w0), dw1.upload(w1), dres.upload(res);
      for (const Dev* d : {&dy0, &dy1, &dy0b, &dy1b, &dy0c}) d->poison(ctx);
      decode_gemv(ctx, {{dw0, dy0, dres}, {dw1, dy1, {}}}, dx.t());
      const Tensor tiny = far.t().narrow0(0, 3);  // 144 bytes: fewer 16-byte blocks than CTAs
      decode_gemv(ctx, {{dw0, dy0b, dres}, {dw1, dy1b, {}}}, dx.t(), {far.t(), dw1.t(), tiny});
      // The residual settled: each warp's first row reads it before the wait, its later rows after.
      decode_gemv(ctx, {GemvOut(dw0, dy0c, dres).settled(), {dw1, dy1b, {}}}, dx.t());
      std::vector<double> want0(static_cast<size_t>(N * rows0)), want1(static_cast<size_t>(N * rows1));
      decode_gemv_ref<double>(want0.data(), to_double(w0).data(), GemvInput::kPlain, to_double(x).data(), nullptr,
                              nullptr, 0.0, false, to_double(res).data(), N, C, C, rows0);
      decode_gemv_ref<double>(want1.data(), to_double(w1).data(), GemvInput::kPlain, to_double(x).data(), nullptr,
                              nullptr, 0.0, false, nullptr, N, C, C, rows1);
      expect_close("y0 (with the residual)", dy0.download(), want0, kBf16Rel, kFloorRel);
      expect_close("y1 (fp32)", dy1.download(), want1, kBf16Rel, kFloorRel);
      EXPECT_EQ(dy0b.raw(), dy0.raw()) << "y0 with the prefetch";
      EXPECT_EQ(dy0c.raw(), dy0.raw()) << "y0 with the residual settled";
      EXPECT_EQ(dy1b.raw(), dy1.raw()) << "y1 with the prefetch";
    }
}

// The LM head's GEMV with the greedy argmax (GemvArgmax): the ids are decode_argmax's of the logits
// the same call writes, which are the GEMV's without the argmax bit for bit; the counter moves one
// on a call, and three calls in a row give the same ids and leave the workspace's count at zero;
// with an embedding table (the weights themselves, as tied embeddings) the chosen rows come out too.
// 1 to 8 sequences, 1 to 50304 rows (more CTAs than SMs). With 1000 rows and more, each sequence n
// has a tie of two rows a_n < b_n far apart (the same weights, x_n / 2: the largest logit; the first
// wins), a larger row past the vocabulary (it must not win) and row 3 gives NaN (never wins).
TEST(DecodeOpsCuda, GemvWithTheArgmaxIsTheArgmaxOfItsLogits) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  const int64_t ws_elems = decode_gemv_argmax_workspace(Device::kCUDA);
  Dev ws(DType::kI32, {ws_elems}), counter(DType::kI32, {1});
  ws.upload_i32(std::vector<int32_t>(static_cast<size_t>(ws_elems), 0));
  for (int64_t N : {1, 2, 3, 8})
    for (auto [C, V] : {std::pair<int64_t, int64_t>{72, 1}, {72, 7}, {776, 1000}, {768, 50304}}) {
      SCOPED_TRACE(fmt::format("N {}, C {}, rows {}", N, C, V));
      const uint64_t salt = 1300 + N * 11 + V;
      const std::vector<float> x = randn(N * C, salt);
      std::vector<float> w = randn(V * C, salt + 1, 1.0 / std::sqrt(double(C)));
      const int64_t vocab = V >= 1000 ? V - 47 : V;
      std::vector<int32_t> tie_first;
      if (V >= 1000) {
        for (int64_t n = 0; n < N; ++n) {
          const int64_t a = V / 3 + n * 37, b = a + 29 * 8 + 5;
          for (int64_t c = 0; c < C; ++c) w[a * C + c] = w[b * C + c] = 0.5f * x[n * C + c];
          tie_first.push_back(static_cast<int32_t>(a));
        }
        for (int64_t c = 0; c < C; ++c) w[(V - 1) * C + c] = x[c];  // past the vocabulary
        w[3 * C] = std::numeric_limits<float>::quiet_NaN();
      }
      Dev dx(DType::kBF16, {N, C}), dw(DType::kBF16, {V, C}), dy(DType::kF32, {N, V}), dy_plain(DType::kF32, {N, V});
      Dev ids(DType::kI32, {N}), want_ids(DType::kI32, {N}), emb(DType::kBF16, {N, C});
      dx.upload(x), dw.upload(w);
      dy.poison(ctx), dy_plain.poison(ctx), emb.poison(ctx);
      decode_gemv(ctx, {{dw, dy_plain, {}}}, dx.t());
      counter.set_i32(41);
      std::vector<int32_t> first;
      for (int call = 0; call < 3; ++call) {
        ids.upload_i32(std::vector<int32_t>(static_cast<size_t>(N), -7));  // poison
        decode_gemv(ctx, {{dw, dy, {}}}, dx.t(), {}, GemvArgmax{ids, vocab, counter, ws, dw, emb});
        const std::vector<int32_t> got = ids.download_i32();
        if (call == 0) first = got;
        EXPECT_EQ(got, first) << "call " << call;
      }
      EXPECT_EQ(counter.download_i32(), std::vector<int32_t>{44});
      EXPECT_EQ(ws.download_i32()[0], 0) << "the arrival count";
      EXPECT_EQ(dy.raw(), dy_plain.raw()) << "the logits";
      decode_argmax(ctx, want_ids, dy, vocab);
      EXPECT_EQ(first, want_ids.download_i32()) << "decode_argmax of the same logits";
      if (!tie_first.empty()) {
        EXPECT_EQ(first, tie_first) << "the first of each tie";
      }
      const std::vector<uint8_t> table = dw.raw(), rows = emb.raw();
      for (int64_t n = 0; n < N; ++n)
        EXPECT_TRUE(std::equal(rows.begin() + n * C * 2, rows.begin() + (n + 1) * C * 2, table.begin() + first[n] * C * 2))
            << "the embedding of sequence " << n << "'s id " << first[n];
    }
  // Bad input: a second weight, an output that is not f32, a workspace too small.
  Dev dx(DType::kBF16, {1, 8}), dw(DType::kBF16, {4, 8}), y(DType::kF32, {1, 4}), y16(DType::kBF16, {1, 4});
  Dev ids(DType::kI32, {1}), small(DType::kI32, {16});
  auto expect_error = [](auto&& f, const std::string& piece) {
    try {
      f();
      ADD_FAILURE() << "no error";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(piece), std::string::npos) << e.what();
    }
  };
  expect_error([&] { decode_gemv(ctx, {{dw, y, {}}, {dw, y, {}}}, dx.t(), {}, GemvArgmax{ids, 4, {}, ws, {}, {}}); },
               "the argmax takes one weight");
  expect_error([&] { decode_gemv(ctx, {{dw, y16, {}}}, dx.t(), {}, GemvArgmax{ids, 4, {}, ws, {}, {}}); },
               "the argmax takes one weight with an f32 output");
  expect_error([&] { decode_gemv(ctx, {{dw, y, {}}}, dx.t(), {}, GemvArgmax{ids, 4, {}, small, {}, {}}); },
               "contiguous i32 workspace of at least");
  expect_error([&] { decode_gemv(ctx, {{dw, y, {}}}, dx.t(), {}, GemvArgmax{ids, 5, {}, ws, {}, {}}); }, "vocab 5");
}

// The GEMV with the GDN conv on its output against the GEMV and then decode_conv_step, both on the
// GPU: the same bits, for the outputs and the shifted tails (conv sizes 1, 2, 4 and 5; a second
// weight without the conv beside it; outputs poisoned); and with the tail settled (read before the
// grid wait up to conv size 4, after it above).
TEST(DecodeOpsCuda, GemvWithTheConvIsTheConvStepBitwise) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  for (int64_t N : {1, 5})
    for (int64_t K : {1, 2, 4, 5}) {
      SCOPED_TRACE(fmt::format("N {}, K {}", N, K));
      const int64_t C = 72, rows = 40, rows2 = 9;
      const uint64_t salt = 700 + N * 10 + K;
      Dev dx(DType::kBF16, {N, C}), dw(DType::kBF16, {rows, C}), dw2(DType::kBF16, {rows2, C});
      Dev dcw(DType::kF32, {rows, 1, K}), dnw(DType::kF32, {C});
      dx.upload(randn(N * C, salt)), dw.upload(randn(rows * C, salt + 1, 0.2)), dw2.upload(randn(rows2 * C, salt + 2));
      dcw.upload(randn(rows * K, salt + 3, 0.5, false)), dnw.upload(randn(C, salt + 4, 0.5, false));
      const std::vector<float> tail = randn(N * std::max<int64_t>(K - 1, 1) * rows, salt + 5);
      const Shape tail_shape{N, std::max<int64_t>(K - 1, 1), rows};
      Dev tail_a(DType::kBF16, tail_shape), tail_b(DType::kBF16, tail_shape), tail_c(DType::kBF16, tail_shape);
      tail_a.upload(tail), tail_b.upload(tail), tail_c.upload(tail);
      Dev y_fused(DType::kBF16, {N, rows}), y2(DType::kBF16, {N, rows2}), pre(DType::kBF16, {N, rows}),
          y_ref(DType::kBF16, {N, rows}), y_settled(DType::kBF16, {N, rows});
      for (const Dev* d : {&y_fused, &y2, &pre, &y_ref, &y_settled}) d->poison(ctx);
      const GemvIn in = GemvIn::rmsnorm(dx, dnw, 1e-6, true);
      decode_gemv(ctx, {GemvOut::with_conv(dw, y_fused, dcw, K > 1 ? tail_a.t() : Tensor{}), {dw2, y2}}, in);
      decode_gemv(ctx, {GemvOut::with_conv(dw, y_settled, dcw, K > 1 ? tail_c.t() : Tensor{}).settled(), {dw2, y2}},
                  in);
      decode_gemv(ctx, {{dw, pre, {}}}, in);
      decode_conv_step(ctx, y_ref, K > 1 ? tail_b.t() : Tensor{}, pre, dcw);
      EXPECT_EQ(y_fused.raw(), y_ref.raw()) << "outputs";
      EXPECT_EQ(tail_a.raw(), tail_b.raw()) << "tails";
      EXPECT_EQ(y_settled.raw(), y_ref.raw()) << "outputs, the tail settled";
      EXPECT_EQ(tail_c.raw(), tail_b.raw()) << "tails, the tail settled";
      for (float v : y2.download()) ASSERT_TRUE(std::isfinite(v)) << "the second weight's output";
    }
}

// The fused GDN token: GQA-style key heads, head dims from 8 to 128 (dk != dv), a few sequences;
// the output and the updated state against the rounded double reference (tests/gdn_step_ref.h; y
// poisoned first).
// Left: fp32 sums in another order and a rounding that lands on the other side of a bf16 tie, so the
// floor is 1% of the RMS (a wrong head, column or gate moves them by O(RMS)).
TEST(DecodeOpsCuda, GdnStepMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  struct Dims { int64_t N, Hk, Hv, dk, dv; };
  for (const Dims d : {Dims{1, 2, 2, 64, 64}, Dims{3, 1, 3, 16, 40}, Dims{2, 2, 4, 128, 128}, Dims{1, 1, 1, 8, 96}}) {
    SCOPED_TRACE(fmt::format("N {}, Hk {}, Hv {}, dk {}, dv {}", d.N, d.Hk, d.Hv, d.dk, d.dv));
    const int64_t W = 2 * d.Hk * d.dk + d.Hv * d.dv, salt = 300 + d.dk + d.dv;
    const std::vector<float> qkv = randn(d.N * W, salt), z = randn(d.N * d.Hv * d.dv, salt + 1);
    const std::vector<float> a = randn(d.N * d.Hv, salt + 2, 1.0, false), b = randn(d.N * d.Hv, salt + 3, 1.0, false);
    const std::vector<float> A_log = randn(d.Hv, salt + 4, 0.5, false), dt_bias = randn(d.Hv, salt + 5, 0.5, false);
    const std::vector<float> w = randn(d.dv, salt + 6, 1.0, false);
    const std::vector<float> S = randn(d.N * d.Hv * d.dk * d.dv, salt + 7, 0.3, false);
    Dev dqkv(DType::kBF16, {d.N, W}), dz(DType::kBF16, {d.N, d.Hv * d.dv}), dy(DType::kBF16, {d.N, d.Hv * d.dv});
    Dev da(DType::kF32, {d.N, d.Hv}), db(DType::kF32, {d.N, d.Hv}), dA(DType::kF32, {d.Hv}), ddt(DType::kF32, {d.Hv});
    Dev dw(DType::kF32, {d.dv}), dS(DType::kF32, {d.N, d.Hv, d.dk, d.dv});
    dqkv.upload(qkv), dz.upload(z), da.upload(a), db.upload(b), dA.upload(A_log), ddt.upload(dt_bias), dw.upload(w);
    dS.upload(S);
    dy.poison(ctx);
    const double q_scale = 1.0 / std::sqrt(double(d.dk)), eps = 1e-6;
    gdn_decode_step(ctx, dy, dS, dqkv, dz, da, db, dA, ddt, dw, d.Hk, d.dk, q_scale, eps);
    std::vector<double> y(static_cast<size_t>(d.N * d.Hv * d.dv)), state = to_double(S);
    gdn_step_ref_rounded(y, state, to_double(qkv), to_double(z), to_double(a), to_double(b), to_double(A_log),
                         to_double(dt_bias), to_double(w), d.N, d.Hk, d.Hv, d.dk, d.dv, W, q_scale, eps);
    expect_close("y", dy.download(), y, 2 * kBf16Rel, 1e-2);
    expect_close("state", dS.download(), state, kBf16Rel, 1e-2);
  }
}

struct AttnCase {
  int64_t N, H, Hkv, Dqk, Dv, cap, len;
};

TEST(DecodeOpsCuda, AttentionMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  Dev counter(DType::kI32, {1});
  const AttnCase cases[] = {
      {2, 6, 2, 40, 24, 1, 1},      {1, 4, 4, 32, 32, 37, 37},    {3, 6, 3, 24, 40, 37, 5},
      {2, 8, 1, 64, 64, 1000, 1000}, {1, 4, 2, 128, 128, 1500, 1283}, {2, 2, 1, 72, 256, 1100, 1037},
      {1, 2, 2, 16, 8, 4200, 4111}, {1, 12, 12, 64, 64, 1535, 1100}, {1, 3, 1, 64, 64, 2048, 2048},
  };
  for (const AttnCase& c : cases)
    for (bool on_device : {false, true}) {
      SCOPED_TRACE("N " + std::to_string(c.N) + ", H " + std::to_string(c.H) + "/" + std::to_string(c.Hkv) + ", D " +
                   std::to_string(c.Dqk) + "/" + std::to_string(c.Dv) + ", len " + std::to_string(c.len) + " of " +
                   std::to_string(c.cap) + (on_device ? ", counter" : ", host"));
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.Dqk));
      const std::vector<float> q = randn(c.N * c.H * c.Dqk, 30 + c.cap), k = randn(c.N * c.cap * c.Hkv * c.Dqk, 31),
                               v = randn(c.N * c.cap * c.Hkv * c.Dv, 32);
      Dev dq(DType::kBF16, {c.N, c.H, c.Dqk}), dk(DType::kBF16, {c.N, c.cap, c.Hkv, c.Dqk}),
          dv(DType::kBF16, {c.N, c.cap, c.Hkv, c.Dv}), dout(DType::kBF16, {c.N, c.H, c.Dv});
      Dev ws(DType::kF32, {decode_attention_workspace(Device::kCUDA, c.N, c.H, c.cap, c.Dv)});
      dq.upload(q), dk.upload(k), dv.upload(v);
      dout.poison(ctx), ws.poison(ctx);
      DecodePosition at{c.len - 1, {}};
      if (on_device) {
        counter.set_i32(static_cast<int32_t>(c.len - 1));
        at.counter = counter.t();
      }
      decode_attention(ctx, dout, dq, dk, dv, at, scale, ws);
      std::vector<double> want(c.N * c.H * c.Dv);
      decode_attention_ref<double>(want.data(), to_double(q).data(), to_double(k).data(), to_double(v).data(), c.N,
                                   c.cap, c.H, c.Hkv, c.Dqk, c.Dv, c.len, scale);
      expect_close("o", dout.download(), want, kBf16Rel, kFloorRel);
      // Where the splits merged inside their clusters (up to 16 tiles of positions), the merge
      // kernel gives the same bits.
      Dev dmerged(DType::kBF16, {c.N, c.H, c.Dv});
      dmerged.poison(ctx), ws.poison(ctx);
      cuda::attention(static_cast<uint16_t*>(dmerged.t().data), static_cast<const uint16_t*>(dq.t().data),
                      static_cast<const uint16_t*>(dk.t().data), static_cast<const uint16_t*>(dv.t().data),
                      static_cast<float*>(ws.t().data), c.N, c.cap, c.H, c.Hkv, c.Dqk, c.Dv, c.len - 1,
                      on_device ? static_cast<const int32_t*>(counter.t().data) : nullptr, static_cast<float>(scale),
                      ctx.stream, /*clusters=*/false);
      EXPECT_EQ(dmerged.raw(), dout.raw()) << "the clusters' merge and the merge kernel differ";
    }
}

struct MlaCase {
  int64_t N, H, dn, dr, dv, kvr, cap, len;
};

TEST(DecodeOpsCuda, MlaAttentionMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  SEED_TRACE();
  Context ctx = gpu_context();
  Dev counter(DType::kI32, {1});
  const MlaCase cases[] = {
      {2, 3, 24, 8, 16, 40, 1, 1},        {1, 2, 16, 16, 32, 32, 37, 37},    {3, 5, 8, 8, 8, 24, 37, 11},
      {2, 4, 32, 16, 24, 72, 1000, 1000}, {1, 2, 128, 64, 128, 512, 1300, 1201},
  };
  for (const MlaCase& c : cases)
    for (bool on_device : {false, true}) {
      SCOPED_TRACE("N " + std::to_string(c.N) + ", H " + std::to_string(c.H) + ", dn/dr/dv/kvr " +
                   std::to_string(c.dn) + "/" + std::to_string(c.dr) + "/" + std::to_string(c.dv) + "/" +
                   std::to_string(c.kvr) + ", len " + std::to_string(c.len) + " of " + std::to_string(c.cap) +
                   (on_device ? ", counter" : ", host"));
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.dn + c.dr));
      const std::vector<float> qn = randn(c.N * c.H * c.dn, 40 + c.cap), qp = randn(c.N * c.H * c.dr, 41),
                               w = randn(c.H * (c.dn + c.dv) * c.kvr, 42, 1.0 / std::sqrt(double(c.kvr))),
                               cc = randn(c.N * c.cap * c.kvr, 43), pe = randn(c.N * c.cap * c.dr, 44);
      Dev dqn(DType::kBF16, {c.N, c.H, c.dn}), dqp(DType::kBF16, {c.N, c.H, c.dr}),
          dw(DType::kBF16, {c.H * (c.dn + c.dv), c.kvr}), dc(DType::kBF16, {c.N, c.cap, c.kvr}),
          dpe(DType::kBF16, {c.N, c.cap, c.dr}), dout(DType::kBF16, {c.N, c.H, c.dv});
      Dev ws(DType::kF32, {mla_decode_workspace(Device::kCUDA, c.N, c.H, c.cap, c.kvr)});
      dqn.upload(qn), dw.upload(w), dc.upload(cc);
      dqp.upload(qp), dpe.upload(pe);
      dout.poison(ctx), ws.poison(ctx);
      DecodePosition at{c.len - 1, {}};
      if (on_device) {
        counter.set_i32(static_cast<int32_t>(c.len - 1));
        at.counter = counter.t();
      }
      mla_decode_attention(ctx, dout, dqn, dqp, dw, dc, dpe, at, scale, ws);
      std::vector<double> want(c.N * c.H * c.dv);
      mla_decode_attention_ref<double>(want.data(), to_double(qn).data(), to_double(qp).data(), to_double(w).data(),
                                       to_double(cc).data(), to_double(pe).data(), c.N, c.cap, c.H, c.dn, c.dr, c.dv,
                                       c.kvr, c.len, scale);
      expect_close("o", dout.download(), want, kBf16Rel, kFloorRel);
    }
}

// Wrong dtypes, a missing workspace and a bad counter are errors naming the op and the tensor.
TEST(DecodeOpsCuda, BadInputIsAClearError) {
  SKIP_WITHOUT_GPU();
  Context ctx = gpu_context();
  Dev q32(DType::kF32, {1, 2, 8}), q(DType::kBF16, {1, 2, 8}), k(DType::kBF16, {1, 5, 1, 8}),
      v(DType::kBF16, {1, 5, 1, 8}), o(DType::kBF16, {1, 2, 8}), c64(DType::kF32, {2});
  Dev ws(DType::kF32, {decode_attention_workspace(Device::kCUDA, 1, 2, 5, 8)});
  auto expect_error = [](auto&& f, const std::vector<std::string>& pieces) {
    try {
      f();
      ADD_FAILURE() << "no error";
    } catch (const std::exception& e) {
      for (const std::string& p : pieces) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
  };
  expect_error([&] { decode_attention(ctx, o, q32, k, v, {2, {}}, 1.0, ws); }, {"decode_attention", "q", "bf16"});
  expect_error([&] { decode_attention(ctx, o, q, k, v, {2, {}}, 1.0); }, {"decode_attention", "workspace"});
  expect_error([&] { decode_attention(ctx, o, q, k, v, {5, {}}, 1.0, ws); }, {"decode_attention", "position 5"});
  expect_error([&] { decode_rope(ctx, q, {0, c64.t()}, 8, 1e4, false); }, {"decode_rope", "counter", "int32"});
}

}  // namespace
}  // namespace dt
