// Emulated-GPU checks of the decode kernels against the double CPU references (infer/cpu/decode_ref.h),
// GoogleTest: the GEMV and the GDN token (infer/cuda/decode_fused.cu), the split attention of GQA
// and MLA with its merge (infer/cuda/decode_attention.cu), the conv step, RoPE, the cache write, the
// argmax and the attention's token before the attention (infer/cuda/decode_ops.cu). The GPU tests
// (tests/gpu/test_infer_cuda.cpp) run the same kernels at the models' sizes.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/dtype.h"
#include "core/fp8.h"
#include "infer/cpu/decode_ref.h"
#include "kernels/cpu/rmsnorm.h"
#include "infer/cuda/decode_cuda.h"
#include "tests/gdn_step_ref.h"
#include "tests/gemv_input_ref.h"

using namespace dt;

namespace {

// n bf16 values, normal with standard deviation `scale`.
std::vector<uint16_t> randn_bf16(int64_t n, uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd;
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (auto& e : v) e = f32_to_bf16(static_cast<float>(scale * nd(rng)));
  return v;
}
// n fp32 values, normal with standard deviation `scale` (plus `mean`).
std::vector<float> randn_f32(int64_t n, uint64_t seed, double scale = 1.0, double mean = 0.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd;
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& e : v) e = static_cast<float>(mean + scale * nd(rng));
  return v;
}
std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }
std::vector<double> to_double(const std::vector<uint16_t>& v) {
  std::vector<double> d(v.size());
  for (size_t i = 0; i < v.size(); ++i) d[i] = bf16_to_f32(v[i]);
  return d;
}

// |got - want| / rms(want) at most tol everywhere (and no NaN: the outputs start poisoned).
void expect_close(const std::string& what, const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double ss = 0;
  for (double w : want) ss += w * w;
  const double rms = std::sqrt(ss / static_cast<double>(want.size())) + 1e-30;
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_TRUE(std::fabs(got[i] - want[i]) <= tol * rms) << what << "[" << i << "] = " << got[i] << ", want " << want[i];
}

// The GEMV of the emulated kernel: x bf16 [N, C] (x2 for the two-operand inputs, nw for the norm),
// two weights sharing it: w0 [rows0, C] into bf16 y0 with a residual, w1 [rows1, C] into fp32 y1.
// Rows of 2056 inputs are longer than the loads before the wait. Again with the
// residual settled (read before the wait by lane n for sequence n): the same bits.
TEST(EmuGemv, MatchesTheReference) {
  for (int64_t N : {1, 3})
    for (int64_t C : {72, 1000, 2056})
      for (GemvInput kind : {GemvInput::kPlain, GemvInput::kSwiGLU, GemvInput::kGate, GemvInput::kRmsNorm}) {
        const bool zc = C == 72;
        SCOPED_TRACE("N " + std::to_string(N) + ", C " + std::to_string(C) + ", kind " + std::to_string(int(kind)));
        const int64_t rows0 = 37, rows1 = 5;
        const uint64_t salt = 10 * N + C + static_cast<uint64_t>(kind);
        const auto x = randn_bf16(N * C, salt), x2 = randn_bf16(N * C, salt + 1);
        const auto w0 = randn_bf16(rows0 * C, salt + 2, 1 / std::sqrt(double(C)));
        const auto w1 = randn_bf16(rows1 * C, salt + 3, 1 / std::sqrt(double(C)));
        const auto res = randn_bf16(N * rows0, salt + 4);
        std::vector<float> nw(static_cast<size_t>(C));
        for (int64_t c = 0; c < C; ++c) nw[c] = 0.5f + 0.01f * static_cast<float>(c % 17);
        std::vector<uint16_t> y0(static_cast<size_t>(N * rows0), 0xFFFF);
        std::vector<float> y1(static_cast<size_t>(N * rows1), NAN);
        cuda::GemvParams p;
        p.seg[0].w = w0.data(), p.seg[0].y = y0.data(), p.seg[0].residual = res.data(), p.seg[0].row_end = rows0;
        p.seg[1].w = w1.data(), p.seg[1].y = y1.data(), p.seg[1].y_f32 = true, p.seg[1].row_end = rows0 + rows1;
        p.n_seg = 2, p.in = kind, p.x = x.data(), p.x2 = x2.data(), p.norm_w = nw.data(), p.eps = 1e-6f;
        p.zero_centered = zc, p.N = N, p.C = C, p.ldx = C;
        cuda::gemv(p, nullptr);
        const std::vector<double> in = gemv_input_rounded(kind, to_double(x), to_double(x2),
                                                          std::vector<double>(nw.begin(), nw.end()), zc, 1e-6, N, C);
        std::vector<double> want0(y0.size()), want1(y1.size());
        decode_gemv_ref<double>(want0.data(), to_double(w0).data(), GemvInput::kPlain, in.data(), nullptr, nullptr, 0.0,
                                false, to_double(res).data(), N, C, C, rows0);
        decode_gemv_ref<double>(want1.data(), to_double(w1).data(), GemvInput::kPlain, in.data(), nullptr, nullptr, 0.0,
                                false, nullptr, N, C, C, rows1);
        expect_close("y0 (bf16, with the residual)", to_double(y0), want0, 1.0 / 64);
        expect_close("y1 (fp32)", std::vector<double>(y1.begin(), y1.end()), want1, 1e-3);
        std::vector<uint16_t> y0_settled(y0.size(), 0xFFFF);
        p.seg[0].y = y0_settled.data(), p.seg[0].settled = true;
        cuda::gemv(p, nullptr);
        EXPECT_EQ(y0_settled, y0) << "the residual settled";
      }
}

// The GEMV with the GDN conv on its output (GemvSegment::conv_w), 3 CTAs of rows: with the tail
// settled (read before the wait for each warp's first row, up to conv size 4), the same outputs and
// shifted tails as without, for conv sizes 1 to 5.
TEST(EmuGemv, TheSettledConvTailGivesTheSameBits) {
  const int64_t N = 3, C = 72, rows = 20;
  const auto x = randn_bf16(N * C, 5), w = randn_bf16(rows * C, 6, 1 / std::sqrt(double(C)));
  for (int64_t K = 1; K <= 5; ++K) {
    SCOPED_TRACE("conv size " + std::to_string(K));
    std::vector<float> cw(static_cast<size_t>(rows * K));
    for (size_t i = 0; i < cw.size(); ++i) cw[i] = 0.3f - 0.05f * static_cast<float>(i % 13);
    const auto tail = randn_bf16(N * std::max<int64_t>(K - 1, 1) * rows, 7 + K);
    auto run = [&](bool settled, std::vector<uint16_t>& t) {
      std::vector<uint16_t> y(static_cast<size_t>(N * rows), 0xFFFF);
      cuda::GemvParams p;
      p.seg[0].w = w.data(), p.seg[0].y = y.data(), p.seg[0].row_end = rows, p.seg[0].settled = settled;
      p.seg[0].conv_w = cw.data(), p.seg[0].conv_k = K, p.seg[0].conv_tail = K > 1 ? t.data() : nullptr;
      p.n_seg = 1, p.x = x.data(), p.N = N, p.C = C, p.ldx = C;
      cuda::gemv(p, nullptr);
      return y;
    };
    std::vector<uint16_t> tail_late = tail, tail_settled = tail;
    const std::vector<uint16_t> late = run(false, tail_late), settled = run(true, tail_settled);
    for (uint16_t v : late) ASSERT_NE(v, 0xFFFF) << "an output left unwritten";
    EXPECT_EQ(settled, late) << "outputs";
    EXPECT_EQ(tail_settled, tail_late) << "tails";
    if (K > 1) {
      EXPECT_NE(tail_late, tail) << "the tail did not shift";
    }
  }
}

// The GEMV with the greedy argmax (GemvParams::argmax_out): each sequence's id is the first largest
// of the fp32 logits the same call writes, among the first `vocab` rows: 100 rows over 13 CTAs (the
// last to arrive merges every CTA's pairs), rows 17 and 61 tie for the largest (17 wins), row 95,
// larger still, lies past the vocab (never wins); the logits are the double reference's. The counter
// moves one on a call, the workspace's count is back at zero after each of two calls, and the chosen
// rows of the embedding table (the weights themselves, as tied embeddings) come out in
// argmax_embed_out.
TEST(EmuGemv, TheArgmaxIsTheFirstLargestLogit) {
  for (int64_t N : {1, 3}) {
    SCOPED_TRACE("N " + std::to_string(N));
    const int64_t C = 72, rows = 100, vocab = 90;
    auto x = randn_bf16(N * C, 70 + N);
    for (auto& e : x) e &= 0x7fff;  // positive inputs: a row of ones sums them
    auto w = randn_bf16(rows * C, 80 + N, 1 / std::sqrt(double(C)));
    for (int64_t c = 0; c < C; ++c) w[17 * C + c] = w[61 * C + c] = f32_to_bf16(1.f), w[95 * C + c] = f32_to_bf16(2.f);
    std::vector<float> y(static_cast<size_t>(N * rows), NAN);
    std::vector<int32_t> ids(static_cast<size_t>(N), -7), ws(static_cast<size_t>(cuda::kGemvArgmaxWs), 0);
    int32_t counter = 41;
    cuda::GemvParams p;
    p.seg[0].w = w.data(), p.seg[0].y = y.data(), p.seg[0].y_f32 = true, p.seg[0].row_end = rows, p.n_seg = 1;
    p.x = x.data(), p.N = N, p.C = C, p.ldx = C;
    p.argmax_out = ids.data(), p.argmax_counter = &counter, p.argmax_ws = ws.data(), p.argmax_vocab = vocab;
    std::vector<uint16_t> embedded(static_cast<size_t>(N * C), 0xFFFF);
    p.argmax_embed = w.data(), p.argmax_embed_out = embedded.data();
    for (int call = 1; call <= 2; ++call) {
      cuda::gemv(p, nullptr);
      std::vector<double> want(y.size());
      decode_gemv_ref<double>(want.data(), to_double(w).data(), GemvInput::kPlain, to_double(x).data(), nullptr,
                              nullptr, 0.0, false, nullptr, N, C, C, rows);
      expect_close("the logits", std::vector<double>(y.begin(), y.end()), want, 1e-3);
      for (int64_t n = 0; n < N; ++n) {
        const float* l = y.data() + n * rows;
        EXPECT_EQ(std::max_element(l, l + vocab) - l, 17) << "the logits, sequence " << n;
        EXPECT_EQ(ids[n], 17) << "call " << call << ", sequence " << n;
        EXPECT_TRUE(std::equal(w.begin() + 17 * C, w.begin() + 18 * C, embedded.begin() + n * C))
            << "call " << call << ", the embedding of sequence " << n;
      }
      EXPECT_EQ(counter, 41 + call);
      EXPECT_EQ(ws[0], 0) << "call " << call;
    }
  }
}

// The GDN token (cuda::gdn_step: the split kernel where dk / 16 or dk / 32 is a power of two, else
// one thread a column) against the rounded double reference (tests/gdn_step_ref.h): GQA-style key
// heads, head dims from 8 to 128, dk != dv, a few sequences; the output poisoned first.
TEST(EmuGdnStep, MatchesTheRoundedReference) {
  struct Dims {
    int64_t N, Hk, Hv, dk, dv;
  };
  for (const Dims d : {Dims{1, 2, 2, 64, 64}, Dims{3, 1, 3, 16, 40}, Dims{2, 2, 4, 128, 128}, Dims{1, 1, 1, 8, 96},
                       Dims{2, 1, 2, 24, 16}}) {
    SCOPED_TRACE("N " + std::to_string(d.N) + ", Hk " + std::to_string(d.Hk) + ", Hv " + std::to_string(d.Hv) +
                 ", dk " + std::to_string(d.dk) + ", dv " + std::to_string(d.dv));
    const int64_t W = 2 * d.Hk * d.dk + d.Hv * d.dv, HV = d.Hv * d.dv;
    const uint64_t salt = 300 + d.dk + d.dv;
    const auto qkv = randn_bf16(d.N * W, salt), z = randn_bf16(d.N * HV, salt + 1);
    const auto a = randn_f32(d.N * d.Hv, salt + 2), b = randn_f32(d.N * d.Hv, salt + 3);
    const auto A_log = randn_f32(d.Hv, salt + 4, 0.5), dt_bias = randn_f32(d.Hv, salt + 5, 0.5);
    const auto w = randn_f32(d.dv, salt + 6, 0.2, 1.0);
    std::vector<float> S = randn_f32(d.N * d.Hv * d.dk * d.dv, salt + 7, 0.3);
    std::vector<uint16_t> y(static_cast<size_t>(d.N * HV), 0xFFFF);
    std::vector<double> want(y.size()), state = to_double(S);
    const double q_scale = 1.0 / std::sqrt(double(d.dk)), eps = 1e-6;
    cuda::GdnStepParams p;
    p.qkv = qkv.data(), p.z = z.data(), p.a = a.data(), p.b = b.data(), p.A_log = A_log.data();
    p.dt_bias = dt_bias.data(), p.norm_w = w.data(), p.state = S.data(), p.y = y.data();
    p.N = d.N, p.Hk = d.Hk, p.Hv = d.Hv, p.dk = d.dk, p.dv = d.dv, p.ld_qkv = W, p.ld_z = HV, p.ld_y = HV;
    p.q_scale = static_cast<float>(q_scale), p.eps = static_cast<float>(eps);
    cuda::gdn_step(p, nullptr);
    gdn_step_ref_rounded(want, state, to_double(qkv), to_double(z), to_double(a), to_double(b), to_double(A_log),
                         to_double(dt_bias), to_double(w), d.N, d.Hk, d.Hv, d.dk, d.dv, W, q_scale, eps);
    expect_close("y", to_double(y), want, 1.0 / 32);
    expect_close("state", to_double(S), state, 1e-3);
  }
}

// One query a (sequence, head) over a bf16 KV cache (cuda::attention), len of cap positions, the
// position from the host or from a device counter: GQA's tiled kernel (head dims powers of two;
// splits of a tile, one split, 3, 12 and 16 of them in clusters that merge inside, 64 splits of two
// tiles past 8K, a context of 1 and of 3 positions) and the general split kernel (other dims),
// against decode_attention_ref; o poisoned first. Each case runs twice: as it comes (clusters where
// the splits fit one) and with the merge kernel, which give the same bits.
TEST(EmuAttention, MatchesTheReference) {
  struct Case {
    int64_t N, H, Hkv, Dqk, Dv, cap, len;
  };
  for (const Case c : {Case{1, 4, 2, 64, 64, 300, 300}, Case{2, 2, 1, 16, 8, 9000, 8801}, Case{3, 6, 3, 24, 40, 37, 5},
                       Case{2, 3, 3, 32, 32, 1, 1}, Case{1, 2, 2, 32, 32, 37, 3}, Case{1, 2, 1, 64, 64, 1535, 1100},
                       Case{2, 1, 1, 128, 128, 2048, 1999}})
    for (bool counter : {false, true}) {
      SCOPED_TRACE("N " + std::to_string(c.N) + ", H " + std::to_string(c.H) + "/" + std::to_string(c.Hkv) +
                   ", D " + std::to_string(c.Dqk) + "/" + std::to_string(c.Dv) + ", len " + std::to_string(c.len) +
                   " of " + std::to_string(c.cap) + (counter ? ", counter" : ", host"));
      const float scale = 1.f / std::sqrt(static_cast<float>(c.Dqk));
      const auto q = randn_bf16(c.N * c.H * c.Dqk, 30 + c.cap), k = randn_bf16(c.N * c.cap * c.Hkv * c.Dqk, 31);
      const auto v = randn_bf16(c.N * c.cap * c.Hkv * c.Dv, 32);
      const int32_t pos = static_cast<int32_t>(c.len - 1);
      std::vector<uint16_t> outs[2];
      for (bool clusters : {true, false}) {
        std::vector<uint16_t>& o = outs[clusters ? 0 : 1];
        o.assign(static_cast<size_t>(c.N * c.H * c.Dv), 0xFFFF);
        std::vector<float> ws(static_cast<size_t>(cuda::attention_workspace_elems(c.N, c.H, c.cap, c.Dv)), NAN);
        // with the counter, a host position that would be wrong
        cuda::attention(o.data(), q.data(), k.data(), v.data(), ws.data(), c.N, c.cap, c.H, c.Hkv, c.Dqk, c.Dv,
                        counter ? 0 : pos, counter ? &pos : nullptr, scale, nullptr, clusters);
      }
      std::vector<double> want(outs[0].size());
      decode_attention_ref<double>(want.data(), to_double(q).data(), to_double(k).data(), to_double(v).data(), c.N,
                                   c.cap, c.H, c.Hkv, c.Dqk, c.Dv, c.len, scale);
      expect_close("o", to_double(outs[0]), want, 1.0 / 64);
      EXPECT_EQ(outs[0], outs[1]) << "the clusters' merge and the merge kernel differ";
    }
}

// MLA in the latent space (cuda::mla_attention: q_lat = W_kb^T q_nope, the split kernel over the
// latent and the rope keys, the merge, W_vb o_lat), over a bf16 latent cache and over an fp8 one
// (cuda::mla_attention_fp8, the latent quantised per block by core/fp8.h), against
// mla_decode_attention_ref and its fp8 form; o poisoned first.
TEST(EmuMlaAttention, MatchesTheReference) {
  struct Case {
    int64_t N, H, dn, dr, dv, kvr, cap, len;
  };
  for (const Case c : {Case{2, 3, 24, 8, 16, 128, 37, 11}, Case{1, 2, 16, 16, 24, 256, 300, 297}})
    for (bool fp8 : {false, true}) {
      SCOPED_TRACE("N " + std::to_string(c.N) + ", H " + std::to_string(c.H) + ", dn/dr/dv/kvr " +
                   std::to_string(c.dn) + "/" + std::to_string(c.dr) + "/" + std::to_string(c.dv) + "/" +
                   std::to_string(c.kvr) + ", len " + std::to_string(c.len) + " of " + std::to_string(c.cap) +
                   (fp8 ? ", fp8 cache" : ", bf16 cache"));
      const float scale = 1.f / std::sqrt(static_cast<float>(c.dn + c.dr));
      const auto qn = randn_bf16(c.N * c.H * c.dn, 40 + c.cap), qp = randn_bf16(c.N * c.H * c.dr, 41);
      const auto w = randn_bf16(c.H * (c.dn + c.dv) * c.kvr, 42, 1 / std::sqrt(double(c.kvr)));
      const auto cc = randn_bf16(c.N * c.cap * c.kvr, 43), pe = randn_bf16(c.N * c.cap * c.dr, 44);
      std::vector<uint16_t> o(static_cast<size_t>(c.N * c.H * c.dv), 0xFFFF);
      std::vector<float> ws(static_cast<size_t>(cuda::mla_workspace_elems(c.N, c.H, c.cap, c.kvr)), NAN);
      std::vector<double> want(o.size());
      const int32_t pos = static_cast<int32_t>(c.len - 1);
      if (fp8) {
        const int64_t rows = c.N * c.cap, nb = c.kvr / kFp8Block;
        std::vector<uint8_t> cq(static_cast<size_t>(rows * c.kvr));
        std::vector<float> cs(static_cast<size_t>(rows * nb));
        const std::vector<double> cd = to_double(cc);
        for (int64_t r = 0; r < rows; ++r)
          e4m3_quantize_row<double>(cd.data() + r * c.kvr, c.kvr, cq.data() + r * c.kvr, cs.data() + r * nb);
        cuda::mla_attention_fp8(o.data(), qn.data(), qp.data(), w.data(), cq.data(), cs.data(), pe.data(), ws.data(),
                                c.N, c.cap, c.H, c.dn, c.dr, c.dv, c.kvr, pos, nullptr, scale, nullptr);
        mla_decode_attention_fp8_ref<double>(want.data(), to_double(qn).data(), to_double(qp).data(),
                                             to_double(w).data(), cq.data(), cs.data(), to_double(pe).data(), c.N,
                                             c.cap, c.H, c.dn, c.dr, c.dv, c.kvr, c.len, scale);
      } else {
        cuda::mla_attention(o.data(), qn.data(), qp.data(), w.data(), cc.data(), pe.data(), ws.data(), c.N, c.cap, c.H,
                            c.dn, c.dr, c.dv, c.kvr, pos, nullptr, scale, nullptr);
        mla_decode_attention_ref<double>(want.data(), to_double(qn).data(), to_double(qp).data(), to_double(w).data(),
                                         to_double(cc).data(), to_double(pe).data(), c.N, c.cap, c.H, c.dn, c.dr, c.dv,
                                         c.kvr, c.len, scale);
      }
      expect_close("o", to_double(o), want, 1.0 / 64);
    }
}

// The GDN conv step alone (cuda::conv_step): conv sizes 1 to 6, against decode_conv_step_ref; the
// tail shifts by one, exactly.
TEST(EmuDecodeOps, ConvStepMatchesTheReference) {
  const int64_t N = 3, C = 37;
  for (int64_t K : {1, 2, 4, 6}) {
    SCOPED_TRACE("K " + std::to_string(K));
    const auto x = randn_bf16(N * C, 1), tail0 = randn_bf16(N * std::max<int64_t>(K - 1, 1) * C, 3);
    const auto w = randn_f32(C * K, 2, 0.5);
    std::vector<uint16_t> y(static_cast<size_t>(N * C), 0xFFFF), tail = tail0;
    cuda::conv_step(y.data(), K > 1 ? tail.data() : nullptr, x.data(), w.data(), N, C, K, nullptr);
    std::vector<double> want(y.size()), tl = to_double(tail0);
    decode_conv_step_ref<double>(want.data(), K > 1 ? tl.data() : nullptr, to_double(x).data(), to_double(w).data(), N,
                                 C, K);
    expect_close("y", to_double(y), want, 1.0 / 64);
    if (K > 1) {
      EXPECT_EQ(to_double(tail), tl) << "the tail";
    }
  }
}

// RoPE in place (cuda::rope): halves and interleaved pairs, part or all of the head rotated, small
// and large positions, from the host and from the counter (the host value wrong on purpose).
TEST(EmuDecodeOps, RopeMatchesTheReference) {
  const int64_t N = 2, H = 3, D = 40;
  for (bool interleaved : {false, true})
    for (int64_t rot : {8, 40})
      for (int32_t pos : {0, 5, 131071})
        for (bool counter : {false, true}) {
          SCOPED_TRACE(std::string(interleaved ? "interleaved" : "halves") + ", rot " + std::to_string(rot) +
                       ", pos " + std::to_string(pos) + (counter ? " from the counter" : " from the host"));
          auto x = randn_bf16(N * H * D, 10 + rot + pos);
          std::vector<double> want = to_double(x);
          cuda::rope(x.data(), N * H, D, rot, 10000.0, interleaved, counter ? 0 : pos, counter ? &pos : nullptr,
                     nullptr);
          decode_rope_ref<double>(want.data(), N, H, D, pos, rot, 10000.0, interleaved);
          expect_close("x", to_double(x), want, 1.0 / 64);
        }
}

// The cache write (cuda::cache_write): the source rows land at the position (from the counter), every
// other row untouched.
TEST(EmuDecodeOps, CacheWriteTouchesOnlyThePosition) {
  const int64_t N = 3, cap = 37, row = 30;
  for (int32_t pos : {0, 17, 36}) {
    SCOPED_TRACE("pos " + std::to_string(pos));
    const auto cache0 = randn_bf16(N * cap * row, 20 + pos), src = randn_bf16(N * row, 21 + pos);
    std::vector<uint16_t> cache = cache0, want = cache0;
    cuda::cache_write(cache.data(), src.data(), N, cap, row * 2, 0, &pos, nullptr);
    for (int64_t n = 0; n < N; ++n)
      std::copy(src.begin() + n * row, src.begin() + (n + 1) * row, want.begin() + (n * cap + pos) * row);
    EXPECT_EQ(cache, want);
  }
}

// Greedy decoding's argmax (cuda::argmax_rows): rows shorter and longer than the block, ties (the
// first wins), NaN (never wins; a row of NaN gives 0), rows ld apart past V; with the counter, the
// same ids and the counter one on.
TEST(EmuDecodeOps, ArgmaxMatchesTheReference) {
  for (int64_t V : {1, 7, 1025, 5000}) {
    SCOPED_TRACE("V " + std::to_string(V));
    const int64_t N = 3, ld = V + 3;
    auto x = randn_f32(N * ld, 40 + V);
    if (V > 2) x[ld] = x[ld + V - 1] = 9.f;                      // row 1: its first and last tie
    if (V > 1024) x[2 * ld + 1] = x[2 * ld + 1025] = 9.f;        // row 2: a tie one thread reads
    if (V > 2) x[2 * ld] = NAN;                                  // and NaN first
    if (V == 7) std::fill(x.begin(), x.begin() + V, NAN);        // row 0: all NaN
    for (int64_t n = 0; n < N; ++n) x[n * ld + V] = 100.f;       // past V: never read
    std::vector<int32_t> ids(static_cast<size_t>(N), -7), want(ids.size());
    decode_argmax_ref(want.data(), x.data(), N, V, ld);
    cuda::argmax_rows(ids.data(), x.data(), N, V, ld, nullptr, nullptr);
    EXPECT_EQ(ids, want);
    int32_t counter = 41;
    std::fill(ids.begin(), ids.end(), -7);
    cuda::argmax_rows(ids.data(), x.data(), N, V, ld, &counter, nullptr);
    EXPECT_EQ(ids, want) << "with the counter";
    EXPECT_EQ(counter, 42);
  }
}

// The attention layer's token before the attention (cuda::attn_prep) against rmsnorm_forward_ref and
// decode_rope_ref in double: query and key heads RMS-normed (zero-centred) or not, RoPE on part or
// all of the head, the gate split off or none, head dims with and without a multiple of 8, the
// position from the counter; the caches' other rows untouched (poisoned). The GPU rounds the normed
// head to bf16 before RoPE and the reference does not, hence 1/32 of the RMS.
TEST(EmuDecodeOps, AttnPrepMatchesTheReference) {
  const int64_t N = 3, H = 4, Hkv = 2, cap = 7;
  const int32_t pos = 5;
  for (int64_t hd : {64, 36})
    for (bool gated : {false, true})
      for (bool norm : {false, true}) {
        const int64_t rot = hd == 64 ? 64 : 20, qw = gated ? 2 * hd : hd;
        SCOPED_TRACE("hd " + std::to_string(hd) + (gated ? ", gated" : "") + (norm ? ", qk norm" : ""));
        const uint64_t salt = 500 + hd + 2 * gated + 4 * norm;
        const auto qg = randn_bf16(N * H * qw, salt), k = randn_bf16(N * Hkv * hd, salt + 1);
        const auto v = randn_bf16(N * Hkv * hd, salt + 2);
        const auto qn = randn_f32(hd, salt + 3, 0.5), kn = randn_f32(hd, salt + 4, 0.5);
        std::vector<uint16_t> q(static_cast<size_t>(N * H * hd), 0xFFFF), gate(q.size(), 0xFFFF);
        std::vector<uint16_t> kc(static_cast<size_t>(N * cap * Hkv * hd), 0xFFFF), vc(kc.size(), 0xFFFF);
        cuda::AttnPrepParams p;
        p.qg = qg.data(), p.k = k.data(), p.v = v.data(), p.qn_w = norm ? qn.data() : nullptr;
        p.kn_w = norm ? kn.data() : nullptr, p.q = q.data(), p.gate = gated ? gate.data() : nullptr;
        p.k_cache = kc.data(), p.v_cache = vc.data(), p.N = N, p.H = H, p.Hkv = Hkv, p.hd = hd, p.cap = cap;
        p.pos = 0, p.pos_dev = &pos, p.eps = 1e-6f, p.zero_centered = true, p.interleaved = false;
        p.rot = static_cast<int>(rot), p.theta = 10000.0;
        cuda::attn_prep(p, nullptr);
        // the reference: each head normed (or not), rotated
        auto heads = [&](const std::vector<uint16_t>& src, int64_t heads_n, int64_t width,
                         const std::vector<float>& w) {
          std::vector<double> x(static_cast<size_t>(N * heads_n * hd)), rs(static_cast<size_t>(N * heads_n));
          const std::vector<double> s = to_double(src), wd = to_double(w);
          for (int64_t r = 0; r < N * heads_n; ++r)
            std::copy(s.begin() + (r / heads_n) * heads_n * width + (r % heads_n) * width,
                      s.begin() + (r / heads_n) * heads_n * width + (r % heads_n) * width + hd, x.begin() + r * hd);
          if (norm) rmsnorm_forward_ref<double>(x.data(), rs.data(), x.data(), wd.data(), N * heads_n, hd, 1e-6, true);
          decode_rope_ref<double>(x.data(), N, heads_n, hd, pos, rot, 10000.0, false);
          return x;
        };
        expect_close("q", to_double(q), heads(qg, H, qw, qn), 1.0 / 32);
        const std::vector<double> kw = heads(k, Hkv, hd, kn);
        const std::vector<double> kd = to_double(kc), vd = to_double(vc), vs = to_double(v);
        const int64_t row = Hkv * hd;
        for (int64_t n = 0; n < N; ++n)
          for (int64_t t = 0; t < cap; ++t) {
            const int64_t o = (n * cap + t) * row;
            if (t != pos) {
              EXPECT_TRUE(std::all_of(kc.begin() + o, kc.begin() + o + row, [](uint16_t b) { return b == 0xFFFF; }))
                  << "k row " << t;
              EXPECT_TRUE(std::all_of(vc.begin() + o, vc.begin() + o + row, [](uint16_t b) { return b == 0xFFFF; }))
                  << "v row " << t;
              continue;
            }
            expect_close("k cache", {kd.begin() + o, kd.begin() + o + row},
                         {kw.begin() + n * row, kw.begin() + (n + 1) * row}, 1.0 / 32);
            EXPECT_EQ(std::vector<double>(vd.begin() + o, vd.begin() + o + row),
                      std::vector<double>(vs.begin() + n * row, vs.begin() + (n + 1) * row))
                << "v cache (a copy)";
          }
        if (gated) {
          for (int64_t r = 0; r < N * H; ++r)
            EXPECT_TRUE(std::equal(gate.begin() + r * hd, gate.begin() + (r + 1) * hd, qg.begin() + r * qw + hd))
                << "the gate of head row " << r;
        }
      }
}

}  // namespace
