// Data-parallel gradient mean (DpGradSync) over lists and over an arena, with buckets small enough
// to split, pack and reduce in place; the agreement helpers (any_nonfinite, any_rank,
// all_reduce_value). Expected values: the mean in rank order, sum / size, computed here.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "core/arena.h"
#include "parallel/dp_grads.h"
#include "tests/mpi/mpi_test_util.h"

namespace dt::mpitest {
namespace {

// Gradient `k` of rank r: value(r, 600 + k, i) as float.
void fill_grad(float* p, int64_t n, int rank, int k) {
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(value(rank, 600 + k, i));
}
float mean_ref(int size, int k, int64_t i) {
  float acc = static_cast<float>(value(0, 600 + k, i));
  for (int r = 1; r < size; ++r) acc += static_cast<float>(value(r, 600 + k, i));
  return acc / static_cast<float>(size);
}

TEST(MpiDpGrads, MeanOfAListInBuckets) {
  Communicator& w = world();
  // Gradients 0-2 back to back in one buffer (one in-place bucket when they fit), 3-4 on their own
  // (packed together), 5 larger than a bucket (reduced in parts), 6 undefined (no gradient).
  const std::vector<int64_t> sizes = {3, 5, 4, 7, 2, 61, 0};
  std::vector<float> block(3 + 5 + 4), g3(7), g4(2), g5(61);
  std::vector<Tensor> grads = {
      Tensor(block.data(), DType::kF32, Device::kCPU, {3}),
      Tensor(block.data() + 3, DType::kF32, Device::kCPU, {5}),
      Tensor(block.data() + 8, DType::kF32, Device::kCPU, {2, 2}),
      Tensor(g3.data(), DType::kF32, Device::kCPU, {7}),
      Tensor(g4.data(), DType::kF32, Device::kCPU, {2}),
      Tensor(g5.data(), DType::kF32, Device::kCPU, {61}),
      Tensor(),
  };
  for (size_t bucket_bytes : {size_t{48}, size_t{64}, size_t{1} << 20}) {
    for (size_t k = 0; k < grads.size(); ++k) fill_grad(static_cast<float*>(grads[k].data), sizes[k], w.rank(), k);
    DpGradSync sync(w, grads, bucket_bytes);
    if (bucket_bytes == 48) {
      // 48 bytes = 12 floats: [0,1,2] in place, [3,4] packed, 5 in parts of 12 (6 buckets).
      ASSERT_EQ(sync.num_buckets(), 2 + 6);
      EXPECT_TRUE(sync.bucket(0).in_place);
      EXPECT_EQ(sync.bucket(0).members, (std::vector<int>{0, 1, 2}));
      EXPECT_FALSE(sync.bucket(1).in_place);
      EXPECT_EQ(sync.bucket(1).members, (std::vector<int>{3, 4}));
    }
    // Start the buckets last first (as the backward finishes them), wait in the other order.
    for (int b = sync.num_buckets() - 1; b >= 0; --b) sync.start(b);
    for (int b = 0; b < sync.num_buckets(); ++b) sync.wait(b);
    for (size_t k = 0; k < grads.size(); ++k) {
      const float* p = static_cast<const float*>(grads[k].data);
      int bad = 0;
      for (int64_t i = 0; i < sizes[k]; ++i) bad += p[i] != mean_ref(w.size(), k, i);
      EXPECT_EQ(bad, 0) << "gradient " << k << ", buckets of " << bucket_bytes << " bytes";
    }
    EXPECT_TRUE(same_bytes_on_all_ranks(block.data(), block.size() * 4));
    EXPECT_TRUE(same_bytes_on_all_ranks(g5.data(), g5.size() * 4));
  }
}

TEST(MpiDpGrads, MeanOfAWholeArenaInPlace) {
  Communicator& w = world();
  Arena grads("grads", Device::kCPU);
  const std::vector<Shape> shapes = {{3, 5}, {1}, {7}, {64, 3}, {2, 2, 2}};
  for (size_t k = 0; k < shapes.size(); ++k) grads.declare(fmt::format("g{}", k), DType::kF32, shapes[k]);
  grads.allocate();
  for (size_t k = 0; k < shapes.size(); ++k) {
    Tensor g = grads.get(static_cast<int>(k));
    fill_grad(static_cast<float*>(g.data), g.numel(), w.rank(), 100 + k);
  }
  DpGradSync sync(w, grads, 400);  // 100 floats a bucket: slots (256-byte aligned) cut across buckets
  EXPECT_GT(sync.num_buckets(), 2);
  EXPECT_TRUE(sync.bucket(0).in_place);
  sync.all_reduce_mean();
  for (size_t k = 0; k < shapes.size(); ++k) {
    Tensor g = grads.get(static_cast<int>(k));
    const float* p = static_cast<const float*>(g.data);
    int bad = 0;
    for (int64_t i = 0; i < g.numel(); ++i) bad += p[i] != mean_ref(w.size(), 100 + k, i);
    EXPECT_EQ(bad, 0) << "slot " << k;
  }
  // The padding between slots was zero and is still zero.
  const char* base = static_cast<const char*>(grads.base());
  size_t nonzero_padding = 0, at = 0;
  for (const ArenaEntry& e : grads.entries()) {
    for (size_t b = at; b < e.offset; ++b) nonzero_padding += base[b] != 0;
    at = e.offset + e.bytes;
  }
  EXPECT_EQ(nonzero_padding, 0u);
  EXPECT_TRUE(same_bytes_on_all_ranks(grads.base(), grads.bytes()));
}

TEST(MpiDpGrads, Bf16GradientsAverageInFloat) {
  Communicator& w = world();
  std::vector<uint16_t> g(37);
  for (size_t i = 0; i < g.size(); ++i) g[i] = f32_to_bf16(static_cast<float>(value(w.rank(), 700, i)));
  std::vector<Tensor> grads = {Tensor(g.data(), DType::kBF16, Device::kCPU, {37})};
  DpGradSync(w, grads).all_reduce_mean();
  for (size_t i = 0; i < g.size(); ++i) {
    float acc = round_bf16(static_cast<float>(value(0, 700, i)));
    for (int r = 1; r < w.size(); ++r) acc += round_bf16(static_cast<float>(value(r, 700, i)));
    EXPECT_EQ(g[i], f32_to_bf16(acc / static_cast<float>(w.size()))) << i;
  }
}

TEST(MpiDpGrads, ANonfiniteValueOnOneRankIsSeenByAll) {
  Communicator& w = world();
  for (int bad_rank = 0; bad_rank < w.size(); ++bad_rank) {
    for (float poison : {std::nanf(""), INFINITY, -INFINITY}) {
      std::vector<float> a(10, 1.0f), b(1000, 2.0f);
      std::vector<uint16_t> c(5, f32_to_bf16(3.0f));
      if (w.rank() == bad_rank) b[777] = poison;
      std::vector<Tensor> ts = {Tensor(a.data(), DType::kF32, Device::kCPU, {10}),
                                Tensor(b.data(), DType::kF32, Device::kCPU, {1000}),
                                Tensor(c.data(), DType::kBF16, Device::kCPU, {5})};
      EXPECT_TRUE(any_nonfinite(w, ts)) << "bad rank " << bad_rank;
      b[777] = 2.0f;
      if (w.rank() == bad_rank) c[4] = f32_to_bf16(poison);
      EXPECT_TRUE(any_nonfinite(w, ts)) << "bad rank " << bad_rank << " (bf16)";
      c[4] = f32_to_bf16(3.0f);
      EXPECT_FALSE(any_nonfinite(w, ts));
    }
  }
  EXPECT_TRUE(any_rank(w, w.rank() == w.size() - 1));
  EXPECT_FALSE(any_rank(w, false));
  // Several flags in one reduction, each on its own: the first set on the last rank only, the
  // second nowhere, the third on rank 0 only.
  bool flags[3] = {w.rank() == w.size() - 1, false, w.rank() == 0};
  any_rank_each(w, flags);
  EXPECT_TRUE(flags[0]);
  EXPECT_FALSE(flags[1]);
  EXPECT_TRUE(flags[2]);
  EXPECT_EQ(all_reduce_value(w, w.rank() + 1.0, ReduceOp::kMax), static_cast<double>(w.size()));
  EXPECT_EQ(all_reduce_value(w, w.rank() + 1.0, ReduceOp::kSum), w.size() * (w.size() + 1) / 2.0);
}

}  // namespace
}  // namespace dt::mpitest
