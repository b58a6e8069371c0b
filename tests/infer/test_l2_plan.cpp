// The decode step's L2 plan (infer/l2_plan.h): each GEMV prefetches the weights of the GEMV two
// further on, wrapping to the step's start; a group is cut to its first kL2PrefetchMaxBytes by rows;
// a weight that does not open a GEMV of the plan prefetches nothing.
#include <gtest/gtest.h>

#include <vector>

#include "core/tensor.h"
#include "infer/l2_plan.h"

namespace dt {
namespace {

struct HostWeight {
  explicit HostWeight(Shape s) : data(static_cast<size_t>(s.numel())), t(data.data(), DType::kF32, Device::kCPU, s) {}
  std::vector<float> data;
  Tensor t;
};

TEST(L2Plan, EachGemvPrefetchesTheOneTwoFurtherOnWrappingAround) {
  HostWeight q({6, 4}), k({2, 4}), o({4, 6}), up({8, 4}), head({4096, 2048});  // head: 32 MiB of fp32
  L2Plan plan;
  plan.add({q.t, k.t});
  plan.add({o.t});
  plan.add({up.t});
  plan.add({head.t});
  auto same = [](const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].data, want[i].data) << i;
      EXPECT_EQ(got[i].shape, want[i].shape) << i;
    }
  };
  same(plan.after(q.t), {up.t});
  same(plan.after(up.t), {q.t, k.t});  // the next step's first GEMV
  same(plan.after(head.t), {o.t});
  // The head's group: its first 16 MiB, whole rows of 8 KiB.
  const std::vector<Tensor>& cut = plan.after(o.t);
  ASSERT_EQ(cut.size(), 1u);
  EXPECT_EQ(cut[0].data, head.t.data);
  EXPECT_EQ(cut[0].size(0), kL2PrefetchMaxBytes / (2048 * 4));
  EXPECT_EQ(cut[0].size(1), 2048);
  EXPECT_TRUE(plan.after(k.t).empty()) << "k is not the first weight of its GEMV";
  HostWeight other({2, 2});
  EXPECT_TRUE(plan.after(other.t).empty());
}

// A group's later weights are cut once the first ones fill it.
TEST(L2Plan, AGroupStopsAtItsCap) {
  HostWeight big({2048, 2048}), after({16, 4}), a({2, 2}), b({2, 2});  // big: exactly 16 MiB
  L2Plan plan;
  plan.add({a.t});
  plan.add({b.t});
  plan.add({big.t, after.t});
  const std::vector<Tensor>& g = plan.after(a.t);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].size(0), 2048);
}

}  // namespace
}  // namespace dt
