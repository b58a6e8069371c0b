// DpGradSync's buckets, single process: a stand-in communicator whose "avg" adds 1 to every
// element shows that each gradient element is reduced exactly once (not skipped, not twice) and
// that packed buckets copy back; the bucket plans for lists and arenas; any_nonfinite and friends
// in a world of one. The real means over 2 and 4 ranks are tested in tests/mpi/test_mpi_dp.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/arena.h"
#include "core/error.h"
#include "parallel/dp_grads.h"

namespace dt {
namespace {

// all_reduce(t) adds 1 to each f32 element and counts calls; other collectives are not used here.
class PlusOneCommunicator final : public Communicator {
 public:
  PlusOneCommunicator() : Communicator(0, 2, "dp", Device::kCPU, 10) {}
  std::string_view backend() const override { return "plus-one"; }
  int calls = 0;

 protected:
  std::unique_ptr<CommRequest> do_all_reduce(const Tensor& t, ReduceOp op) override {
    EXPECT_EQ(op, ReduceOp::kAvg);
    ++calls;
    float* p = static_cast<float*>(t.data);
    for (int64_t i = 0; i < t.numel(); ++i) p[i] += 1.0f;
    return completed_request();
  }
  std::unique_ptr<CommRequest> do_reduce_scatter(const Tensor&, const Tensor&, ReduceOp) override {
    DT_FAIL("unused");
  }
  std::unique_ptr<CommRequest> do_all_gather(const Tensor&, const Tensor&) override { DT_FAIL("unused"); }
  void do_broadcast(const Tensor&, int) override {}
  void do_barrier() override {}
  std::unique_ptr<Communicator> do_split(int, int, std::string) override { DT_FAIL("unused"); }
};

TEST(DpGradSync, ListEveryElementOnceInPlaceOrPacked) {
  PlusOneCommunicator dp;
  std::vector<float> block(20), lone1(9), lone2(3), huge(50);
  for (size_t i = 0; i < block.size(); ++i) block[i] = static_cast<float>(i);
  std::vector<Tensor> grads = {
      Tensor(block.data(), DType::kF32, Device::kCPU, {4}),       // 0-2 back to back
      Tensor(block.data() + 4, DType::kF32, Device::kCPU, {2, 3}),
      Tensor(block.data() + 10, DType::kF32, Device::kCPU, {5}),
      Tensor(lone1.data(), DType::kF32, Device::kCPU, {9}),       // 3-4 apart: packed
      Tensor(lone2.data(), DType::kF32, Device::kCPU, {3}),
      Tensor(),                                                   // no gradient
      Tensor(huge.data(), DType::kF32, Device::kCPU, {50}),       // larger than a bucket
      Tensor(block.data() + 15, DType::kF32, Device::kCPU, {5}),  // not adjacent to 4 in the list
  };
  DpGradSync sync(dp, grads, 64);  // 16 floats
  // 0-2: 4 + 6 + 5 = 15 floats, adjacent: in place. 3-4: 9 + 3 = 12, apart: packed. 6: 50 floats
  // in parts of 16 (16, 16, 16, 2). 7: alone at the end (it would not fit after 6 anyway).
  std::vector<std::vector<int>> members;
  for (int b = 0; b < sync.num_buckets(); ++b) members.push_back(sync.bucket(b).members);
  const std::vector<std::vector<int>> expected = {{0, 1, 2}, {3, 4}, {6}, {6}, {6}, {6}, {7}};
  EXPECT_EQ(members, expected);
  EXPECT_TRUE(sync.bucket(0).in_place);
  EXPECT_EQ(sync.bucket(0).flat.data, block.data());
  EXPECT_EQ(sync.bucket(0).flat.numel(), 15);
  EXPECT_FALSE(sync.bucket(1).in_place);
  EXPECT_EQ(sync.bucket(1).pieces.size(), 2u);
  EXPECT_EQ(sync.bucket(5).flat.numel(), 2);  // 50 = 16 + 16 + 16 + 2
  sync.all_reduce_mean();
  EXPECT_EQ(dp.calls, 7);
  for (size_t i = 0; i < block.size(); ++i) EXPECT_EQ(block[i], static_cast<float>(i) + 1.0f) << i;
  for (float v : lone1) EXPECT_EQ(v, 1.0f);
  for (float v : lone2) EXPECT_EQ(v, 1.0f);
  for (float v : huge) EXPECT_EQ(v, 1.0f);
}

TEST(DpGradSync, ArenaInBucketSizeParts) {
  PlusOneCommunicator dp;
  Arena grads("grads", Device::kCPU);
  grads.declare("a", DType::kF32, {3});
  grads.declare("b", DType::kF32, {100});
  grads.declare("c", DType::kF32, {2, 5});
  grads.allocate();
  DpGradSync sync(dp, grads, 256);  // 64 floats; the arena is 3 slots at 256-byte offsets
  int64_t covered = 0;
  for (int b = 0; b < sync.num_buckets(); ++b) {
    EXPECT_TRUE(sync.bucket(b).in_place);
    EXPECT_EQ(sync.bucket(b).flat.data, static_cast<char*>(grads.base()) + covered * 4);
    covered += sync.bucket(b).flat.numel();
  }
  EXPECT_EQ(covered * 4, static_cast<int64_t>(grads.bytes()));
  // Slot b (100 floats at byte 256) spans buckets 1 and 2.
  EXPECT_EQ(sync.bucket(1).members, (std::vector<int>{1}));
  EXPECT_EQ(sync.bucket(2).members, (std::vector<int>{1}));
  sync.start(2);
  sync.start(0);
  sync.wait_all();
  EXPECT_EQ(dp.calls, 2);
  EXPECT_THROW(sync.wait(1), Error);  // never started
  for (int b = 0; b < sync.num_buckets(); ++b)
    if (b != 0 && b != 2) sync.start(b);
  EXPECT_THROW(sync.start(1), Error);  // started twice
  sync.wait_all();
  for (int s = 0; s < 3; ++s) {
    const Tensor g = grads.get(s);
    for (int64_t i = 0; i < g.numel(); ++i) EXPECT_EQ(static_cast<float*>(g.data)[i], 1.0f) << s << " " << i;
  }
}

TEST(DpGradSync, RefusesWhatItCannotAverage) {
  PlusOneCommunicator dp;
  std::vector<int32_t> ints(4);
  std::vector<Tensor> bad = {Tensor(ints.data(), DType::kI32, Device::kCPU, {4})};
  EXPECT_THROW(DpGradSync(dp, bad), Error);
  Arena unallocated("grads", Device::kCPU);
  unallocated.declare("a", DType::kF32, {3});
  EXPECT_THROW(DpGradSync(dp, unallocated), Error);
  Arena mixed("grads", Device::kCPU);
  mixed.declare("a", DType::kF32, {3});
  mixed.declare("b", DType::kF64, {3});
  mixed.allocate();
  try {
    DpGradSync sync(dp, mixed);
    ADD_FAILURE() << "mixed dtypes accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mixes dtypes"), std::string::npos) << e.what();
  }
}

TEST(DpAgreement, NonfiniteInAWorldOfOne) {
  auto w = make_communicator({.backend = CommBackend::kSingle});
  std::vector<float> a(100, 1.0f);
  std::vector<double> b(7, 2.0);
  std::vector<uint16_t> c(3, f32_to_bf16(1.0f));
  std::vector<Tensor> ts = {Tensor(a.data(), DType::kF32, Device::kCPU, {100}),
                            Tensor(b.data(), DType::kF64, Device::kCPU, {7}),
                            Tensor(c.data(), DType::kBF16, Device::kCPU, {3})};
  EXPECT_FALSE(any_nonfinite(*w, ts));
  a[99] = INFINITY;
  EXPECT_TRUE(any_nonfinite(*w, ts));
  a[99] = 1.0f;
  b[0] = std::nan("");
  EXPECT_TRUE(any_nonfinite(*w, ts));
  b[0] = 2.0;
  c[2] = f32_to_bf16(-INFINITY);
  EXPECT_TRUE(any_nonfinite(*w, ts));
  EXPECT_TRUE(any_rank(*w, true));
  EXPECT_FALSE(any_rank(*w, false));
  EXPECT_EQ(all_reduce_value(*w, 2.5, ReduceOp::kAvg), 2.5);
}

}  // namespace
}  // namespace dt
