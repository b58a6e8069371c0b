// decode_gemv with the greedy argmax on the CPU (infer/decode_ops.h): the ids are the first largest
// logit of each sequence, and with an embedding table the chosen ids' rows land in embed_out, the
// next step's input. A table that cannot serve the ids is refused with a message naming it.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "infer/decode_ops.h"

namespace dt {
namespace {

Tensor view(std::vector<float>& v, Shape s) { return Tensor(v.data(), DType::kF32, Device::kCPU, s); }
Tensor view(std::vector<double>& v, Shape s) { return Tensor(v.data(), DType::kF64, Device::kCPU, s); }
Tensor view(std::vector<int32_t>& v, Shape s) { return Tensor(v.data(), DType::kI32, Device::kCPU, s); }

std::vector<float> randn(int64_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

TEST(DecodeGemvCpu, TheArgmaxWritesTheChosenIdsEmbeddingRows) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  Context ctx;
  const int64_t N = 3, C = 5, V = 11, vocab = 9;  // the argmax over the first 9 of 11 rows
  std::vector<float> x = randn(N * C, rng), w = randn(V * C, rng), table = randn(V * C, rng);
  std::vector<float> y(static_cast<size_t>(N * V), std::numeric_limits<float>::quiet_NaN());
  std::vector<float> rows(static_cast<size_t>(N * C), std::numeric_limits<float>::quiet_NaN());
  std::vector<int32_t> ids(static_cast<size_t>(N), -1);
  decode_gemv(ctx, {{view(w, {V, C}), view(y, {N, V})}}, view(x, {N, C}), {},
              GemvArgmax{view(ids, {N}), vocab, {}, {}, view(table, {V, C}), view(rows, {N, C})});
  for (int64_t n = 0; n < N; ++n) {
    const float* yn = y.data() + n * V;
    EXPECT_EQ(ids[n], std::max_element(yn, yn + vocab) - yn) << "sequence " << n;
    ASSERT_GE(ids[n], 0);
    EXPECT_TRUE(std::equal(rows.begin() + n * C, rows.begin() + (n + 1) * C, table.begin() + ids[n] * C))
        << "the embedding row of sequence " << n << "'s id " << ids[n];
  }

  // Bad tables: fewer rows than the vocab, rows of another width, another dtype than embed_out.
  auto expect_error = [&](const Tensor& bad_table, const std::string& piece) {
    try {
      decode_gemv(ctx, {{view(w, {V, C}), view(y, {N, V})}}, view(x, {N, C}), {},
                  GemvArgmax{view(ids, {N}), vocab, {}, {}, bad_table, view(rows, {N, C})});
      ADD_FAILURE() << "no error for the table " << bad_table.str();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(piece), std::string::npos) << e.what();
    }
  };
  std::vector<float> short_table(static_cast<size_t>((vocab - 1) * C)), wide_table(static_cast<size_t>(V * (C + 1)));
  std::vector<double> f64_table(static_cast<size_t>(V * C));
  expect_error(view(short_table, {vocab - 1, C}), "must hold the vocab 9");
  expect_error(view(wide_table, {V, C + 1}), "does not match ids");
  expect_error(view(f64_table, {V, C}), "of one dtype");
}

}  // namespace
}  // namespace dt
