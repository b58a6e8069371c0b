// The single-process communicator (what every plain `deltatron train` gets), the argument checks
// every backend shares, the TP mappings and process groups in a world of one. The multi-rank
// behaviour is tested under mpirun in tests/mpi.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "parallel/communicator.h"
#include "parallel/mpi_runtime.h"
#include "parallel/process_groups.h"
#include "parallel/tp_mappings.h"

namespace dt {
namespace {

std::unique_ptr<Communicator> single() { return make_communicator({.backend = CommBackend::kSingle}); }

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CommSingle, AutoIsSingleWithoutALauncher) {
  if (launched_with_mpi()) GTEST_SKIP() << "run under mpirun";
  auto w = make_communicator({});
  EXPECT_EQ(w->backend(), "single");
  EXPECT_EQ(w->rank(), 0);
  EXPECT_EQ(w->size(), 1);
  EXPECT_EQ(w->name(), "world");
  EXPECT_FALSE(several_ranks());
  EXPECT_EQ(world_rank(), 0);
  MpiRuntime mpi;  // starts nothing without a launcher
  EXPECT_FALSE(mpi.active());
  EXPECT_EQ(mpi.world_size(), 1);
}

TEST(CommSingle, CollectivesOfOneRank) {
  auto w = single();
  std::vector<float> x = {1.5f, -2.0f, std::nanf(""), 4.0f};
  const std::vector<float> x0 = x;
  Tensor t(x.data(), DType::kF32, Device::kCPU, {2, 2});
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
    w->all_reduce(t, op);
    EXPECT_EQ(std::memcmp(x.data(), x0.data(), 16), 0) << reduce_op_name(op);
  }
  std::vector<float> out(4, std::nanf(""));
  Tensor o(out.data(), DType::kF32, Device::kCPU, {4});
  w->reduce_scatter(o, t, ReduceOp::kSum);
  EXPECT_EQ(std::memcmp(out.data(), x0.data(), 16), 0);
  std::fill(out.begin(), out.end(), 7.0f);
  w->all_gather(o, t);
  EXPECT_EQ(std::memcmp(out.data(), x0.data(), 16), 0);
  w->broadcast(t, 0);
  w->barrier();
  auto req = w->all_reduce_async(t);
  EXPECT_TRUE(req->test());
  req->wait();
  auto sub = w->split(3, 0, "tp");
  EXPECT_EQ(sub->size(), 1);
  EXPECT_EQ(sub->name(), "tp");
  EXPECT_EQ(sub->backend(), "single");
}

TEST(CommSingle, BadArgumentsSayWhatAndWhere) {
  auto w = single();
  std::vector<uint16_t> u(4);
  std::vector<float> a(6), b(5);
  EXPECT_NE(message_of([&] { w->all_reduce(Tensor(u.data(), DType::kU16, Device::kCPU, {4})); })
                .find("all_reduce of u16[4] cpu on communicator 'world' (single backend, rank 0 of 1): argument 't' "
                      "has dtype u16; collectives take f32, f64, bf16 or i32"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              w->reduce_scatter(Tensor(b.data(), DType::kF32, Device::kCPU, {5}),
                                Tensor(a.data(), DType::kF32, Device::kCPU, {6}));
            }).find("in must hold 1 chunks of out's 5 elements (5), got 6 elements"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              w->all_gather(Tensor(a.data(), DType::kF32, Device::kCPU, {6}),
                            Tensor(b.data(), DType::kF32, Device::kCPU, {5}));
            }).find("out must hold 1 x 5 = 5 elements, got 6"),
            std::string::npos);
  float gpu_fake = 0;
  EXPECT_NE(message_of([&] { w->all_reduce(Tensor(&gpu_fake, DType::kF32, Device::kCUDA, {1})); })
                .find("is on the GPU but this communicator takes CPU tensors (GPU tensors go through an NCCL"),
            std::string::npos);
  Tensor strided(a.data(), DType::kF32, Device::kCPU, {3, 2});
  strided.stride[0] = 1, strided.stride[1] = 3;  // a transpose
  EXPECT_NE(message_of([&] { w->all_reduce(strided); }).find("is not contiguous"), std::string::npos);
  EXPECT_NE(message_of([&] { w->broadcast(Tensor(a.data(), DType::kF32, Device::kCPU, {6}), 1); })
                .find("root 1 is not a rank of the group"),
            std::string::npos);
  std::vector<int32_t> i(2);
  EXPECT_NE(message_of([&] { w->all_reduce(Tensor(i.data(), DType::kI32, Device::kCPU, {2}), ReduceOp::kAvg); })
                .find("avg needs a floating-point tensor"),
            std::string::npos);
  EXPECT_THROW(w->split(-1, 0, "x"), Error);
  // Empty tensors are fine and touch nothing.
  w->all_reduce(Tensor(nullptr, DType::kF32, Device::kCPU, {0}));
}

TEST(CommSingle, BackendsNotBuiltOrNotStartedAreClearErrors) {
  if (!nccl_built()) {
    EXPECT_NE(message_of([] { make_communicator({.backend = CommBackend::kNccl, .device = Device::kCUDA}); })
                  .find("this build has no NCCL"),
              std::string::npos);
  }
  if (!launched_with_mpi()) {
    const std::string m = message_of([] { make_communicator({.backend = CommBackend::kMpi}); });
    EXPECT_TRUE(m.find("create a dt::MpiRuntime first") != std::string::npos ||
                m.find("this build has no MPI") != std::string::npos)
        << m;
  }
  EXPECT_NE(message_of([] { make_communicator({.backend = CommBackend::kMpi, .device = Device::kCUDA}); })
                .find("the MPI communicator takes CPU tensors"),
            std::string::npos);
  EXPECT_THROW(make_communicator({.timeout_s = 0}), Error);
}

TEST(CommSingle, ProcessGroupsOfAWorldOfOne) {
  auto w = single();
  ProcessGroups g = make_process_groups(*w, ProcessGrid(0, 1, 1));
  EXPECT_EQ(g.tp->size(), 1);
  EXPECT_EQ(g.dp->size(), 1);
  EXPECT_EQ(g.tp->name(), "tp");
  EXPECT_EQ(g.dp->name(), "dp");
  EXPECT_THROW(make_process_groups(*w, ProcessGrid(1, 2, 1)), Error);  // a grid of 2 on a world of 1
}

TEST(TpMappingsSingle, AWorldOfOneCopiesAndChecksShapes) {
  auto tp = single();
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, y(6, std::nanf(""));
  Tensor X(x.data(), DType::kF32, Device::kCPU, {2, 3}), Y(y.data(), DType::kF32, Device::kCPU, {2, 3});
  gather_from_tp_region_forward(*tp, Y, X);
  EXPECT_EQ(y, x);
  std::fill(y.begin(), y.end(), std::nanf(""));
  scatter_to_tp_region_forward(*tp, Y, X);
  EXPECT_EQ(y, x);
  std::fill(y.begin(), y.end(), std::nanf(""));
  gather_from_tp_region_backward(*tp, Y, X);
  EXPECT_EQ(y, x);
  std::fill(y.begin(), y.end(), std::nanf(""));
  scatter_to_tp_region_backward(*tp, Y, X);
  EXPECT_EQ(y, x);
  copy_to_tp_region_forward(*tp, X);
  copy_to_tp_region_backward(*tp, X);
  reduce_from_tp_region_forward(*tp, X);
  reduce_from_tp_region_backward(*tp, X);
  EXPECT_EQ(x, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  // Leading dims must agree; the last one must be size x the part's.
  Tensor Y3(y.data(), DType::kF32, Device::kCPU, {3, 2});
  EXPECT_NE(message_of([&] { gather_from_tp_region_forward(*tp, Y3, X); }).find("dimension 0 differs"),
            std::string::npos);
  Tensor Y1(y.data(), DType::kF32, Device::kCPU, {6});
  EXPECT_NE(message_of([&] { scatter_to_tp_region_forward(*tp, X, Y1); }).find("same number of dimensions"),
            std::string::npos);
}

}  // namespace
}  // namespace dt
