// Emulated-GPU checks of the decode GEMV kernel (infer/cuda/decode_fused.cu gemv) against the double
// CPU reference (infer/cpu/decode_ref.h), GoogleTest. The GPU tests (tests/gpu/test_infer_cuda.cpp)
// run the same kernel at the models' sizes.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/dtype.h"
#include "infer/cpu/decode_ref.h"
#include "infer/cuda/decode_cuda.h"
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
TEST(EmuGemv, MatchesTheReference) {
  for (int64_t N : {1, 3})
    for (int64_t C : {72, 1000})
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

}  // namespace
