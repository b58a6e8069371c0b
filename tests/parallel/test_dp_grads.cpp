// DpGradSync's buckets, single process: a stand-in communicator whose "avg" adds 1 to every
// element shows that each gradient element is reduced exactly once (not skipped, not twice) and
// that packed buckets copy back; the bucket plans for lists and arenas; any_nonfinite and friends
// in a world of one. The real means over 2 and 4 ranks are tested in tests/mpi/test_mpi_dp.cpp.
#include <gtest/gtest.h>

#include <algorithm>
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

// Rank `rank` of a pretend group of `size`, f32 only: all_reduce and reduce_scatter add 1 to what
// this rank keeps (its chunk, for reduce_scatter); all_gather fills rank r's chunk with 100 + r for
// the other ranks. Records the first element's address of each all_reduce / reduce_scatter input.
class FakeRankCommunicator final : public Communicator {
 public:
  FakeRankCommunicator(int rank, int size) : Communicator(rank, size, "dp", Device::kCPU, 10) {}
  std::string_view backend() const override { return "fake"; }
  std::vector<const void*> started;

 protected:
  std::unique_ptr<CommRequest> do_all_reduce(const Tensor& t, ReduceOp op) override {
    EXPECT_EQ(op, ReduceOp::kAvg);
    started.push_back(t.data);
    for (int64_t i = 0; i < t.numel(); ++i) static_cast<float*>(t.data)[i] += 1.0f;
    return completed_request();
  }
  std::unique_ptr<CommRequest> do_reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op) override {
    EXPECT_EQ(op, ReduceOp::kAvg);
    started.push_back(in.data);
    const float* src = static_cast<const float*>(in.data) + rank() * out.numel();
    for (int64_t i = 0; i < out.numel(); ++i) static_cast<float*>(out.data)[i] = src[i] + 1.0f;
    return completed_request();
  }
  std::unique_ptr<CommRequest> do_all_gather(const Tensor& out, const Tensor& in) override {
    float* o = static_cast<float*>(out.data);
    for (int r = 0; r < size(); ++r)
      for (int64_t i = 0; i < in.numel(); ++i)
        if (r == rank()) o[r * in.numel() + i] = static_cast<const float*>(in.data)[i];
        else o[r * in.numel() + i] = 100.0f + r;
    return completed_request();
  }
  void do_broadcast(const Tensor&, int) override {}
  void do_barrier() override {}
  std::unique_ptr<Communicator> do_split(int, int, std::string) override { DT_FAIL("unused"); }
};

// Slots of 100, 30, 64, 5 floats, each in whole 256-byte blocks: 128, 64, 64, 64 floats of room, 320 in all.
void declare_four(Arena& a) {
  a.declare("a", DType::kF32, {100});
  a.declare("b", DType::kF32, {30});
  a.declare("c", DType::kF32, {64});
  a.declare("d", DType::kF32, {5});
  a.allocate();
}

TEST(DpGradSync, GradsReadyStartsABucketOnceAllItsSlotsAreFinal) {
  FakeRankCommunicator dp(0, 2);
  Arena grads("grads", Device::kCPU);
  declare_four(grads);  // slot bytes: a [0, 400), b [512, 632), c [768, 1024), d [1024, 1044); 1280 in all
  DpGradSync sync(dp, grads, 512);  // buckets of 128 floats: [0, 512) [512, 1024) [1024, 1280)
  ASSERT_EQ(sync.num_buckets(), 3);
  EXPECT_EQ(sync.bucket(1).members, (std::vector<int>{1, 2}));
  const char* base = static_cast<const char*>(grads.base());
  for (int step = 0; step < 2; ++step) {
    dp.started.clear();
    sync.grads_ready(3, 4);  // d: bucket 2 is complete
    EXPECT_EQ(dp.started, (std::vector<const void*>{base + 1024}));
    sync.grads_ready(2, 3);  // c: bucket 1 still waits for b
    EXPECT_EQ(dp.started.size(), 1u);
    sync.grads_ready(2, 3);  // reported twice: nothing new
    sync.grads_ready(1, 2);
    EXPECT_EQ(dp.started, (std::vector<const void*>{base + 1024, base + 512}));
    sync.finish();  // a was never reported: bucket 0 starts here
    EXPECT_EQ(dp.started, (std::vector<const void*>{base + 1024, base + 512, base}));
  }
  for (int s = 0; s < 4; ++s)
    for (int64_t i = 0; i < grads.get(s).numel(); ++i) EXPECT_EQ(grads.get(s).ptr<float>()[i], 2.0f) << s;
  EXPECT_THROW(sync.grads_ready(3, 5), Error);
}

TEST(DpGradSync, ShardedBucketsSplitTheArenaInChunksWithPadding) {
  const int n = 3;  // 320 floats: 3 does not divide them
  std::vector<std::vector<std::pair<int64_t, int64_t>>> shards;
  for (int rank = 0; rank < n; ++rank) {
    FakeRankCommunicator dp(rank, n);
    Arena grads("grads", Device::kCPU), masters("params", Device::kCPU);
    declare_four(grads);
    declare_four(masters);
    float* g = static_cast<float*>(grads.base());
    for (int64_t i = 0; i < 320; ++i) g[i] = static_cast<float>(i);
    DpGradSync sync(dp, grads, 400, DpGradMode::kShardedMean);  // 100 floats: buckets of 99 (whole chunks of 33)
    ASSERT_EQ(sync.num_buckets(), 4);                             // 3 x 99 + 23, padded to 24
    for (int b = 0; b < 3; ++b) EXPECT_TRUE(sync.bucket(b).in_place && sync.bucket(b).flat.numel() == 99) << b;
    const GradBucket& last = sync.bucket(3);
    EXPECT_FALSE(last.in_place);
    EXPECT_EQ(last.count, 23);
    EXPECT_EQ(last.flat.numel(), 24);  // chunks of 8: the last rank's holds 7 real elements
    EXPECT_EQ(last.shard_count, rank == n - 1 ? 7 : 8);
    sync.all_reduce_mean();
    // This rank's chunks hold "the mean" (+1), the rest keeps the local gradients; padding never lands in the arena.
    std::vector<char> mine(320, 0);
    for (const auto& [off, cnt] : sync.shard_ranges())
      for (int64_t i = off; i < off + cnt; ++i) mine[i] = 1;
    for (int64_t i = 0; i < 320; ++i) EXPECT_EQ(g[i], static_cast<float>(i) + (mine[i] ? 1.0f : 0.0f)) << rank << " " << i;
    EXPECT_EQ(sync.shard_numel(), std::count(mine.begin(), mine.end(), 1));
    shards.push_back(sync.shard_ranges());
    // The gather keeps this rank's chunks and takes the others' (marked 100 + r) in their places.
    float* p = static_cast<float*>(masters.base());
    for (int64_t i = 0; i < 320; ++i) p[i] = mine[i] ? -1.0f : std::nanf("");
    sync.all_gather_shards(masters);
    for (int b = 0; b < sync.num_buckets(); ++b) {
      const GradBucket& k = sync.bucket(b);
      const int64_t chunk = k.flat.numel() / n;
      for (int64_t i = k.offset; i < k.offset + k.count; ++i) {
        const int owner = static_cast<int>((i - k.offset) / chunk);
        EXPECT_EQ(p[i], owner == rank ? -1.0f : 100.0f + owner) << rank << " " << i;
      }
    }
    Arena other("other", Device::kCPU);
    other.declare("x", DType::kF32, {7});
    other.allocate();
    EXPECT_THROW(sync.all_gather_shards(other), Error);  // not laid out like the gradients
  }
  // Together the ranks' shards cover every element once.
  std::vector<int> cover(320, 0);
  for (const auto& ranges : shards)
    for (const auto& [off, cnt] : ranges)
      for (int64_t i = off; i < off + cnt; ++i) ++cover[i];
  for (int64_t i = 0; i < 320; ++i) EXPECT_EQ(cover[i], 1) << i;
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
