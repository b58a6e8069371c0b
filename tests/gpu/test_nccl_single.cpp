// The NCCL communicator with one rank on one GPU (what the H200 machine can run): every collective
// on every dtype, outputs poisoned before each call; ordering after the compute stream, and the
// stream-side wait (wait() leaves the host free, the compute stream is ordered after the collective);
// DP gradient buckets (overlapped, and ZeRO-1's reduce-scatter / all-gather with AdamW), the
// nonfinite agreement and the TP mappings on device tensors. With one rank every collective is a
// copy or nothing, but the events and streams run as with many. Skips without a GPU or without NCCL
// in the build. Several ranks over NCCL need a machine with several GPUs (not run yet).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/arena.h"
#include "core/device.h"
#include "core/error.h"
#include "kernels/ops.h"
#include "layers/params.h"
#include "parallel/communicator.h"
#include "parallel/dp_grads.h"
#include "parallel/tp_mappings.h"
#include "trainer/adamw.h"

namespace dt {
namespace {

#define SKIP_WITHOUT_NCCL()                                                        \
  do {                                                                             \
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device present";        \
    if (!nccl_built()) GTEST_SKIP() << "this build has no NCCL";                   \
  } while (0)

std::unique_ptr<Communicator> nccl(void* stream = nullptr) {
  return make_communicator(
      {.backend = CommBackend::kNccl, .device = Device::kCUDA, .timeout_s = 120, .cuda_device = 0, .stream = stream});
}

// A device buffer, freed on scope exit.
struct DevBuf {
  void* p;
  size_t bytes;
  explicit DevBuf(size_t n) : p(device_alloc(n, Device::kCUDA)), bytes(n) {}
  ~DevBuf() { device_free(p, Device::kCUDA); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  void poison() { device_memset(p, 0xFF, bytes, Device::kCUDA); }  // NaN in every float dtype
  void upload(const std::vector<char>& h) { device_copy(p, Device::kCUDA, h.data(), Device::kCPU, h.size()); }
  std::vector<char> download() const {
    std::vector<char> h(bytes);
    device_copy(h.data(), Device::kCPU, p, Device::kCUDA, bytes);
    return h;
  }
};

std::vector<char> pattern(DType d, int64_t n, int seed) {
  std::vector<char> h(n * dtype_size(d));
  for (int64_t i = 0; i < n; ++i) {
    const double v = std::sin(0.37 * i + seed) * std::ldexp(1.0, static_cast<int>(i % 17) - 8);
    switch (d) {
      case DType::kF32: reinterpret_cast<float*>(h.data())[i] = static_cast<float>(v); break;
      case DType::kF64: reinterpret_cast<double*>(h.data())[i] = v; break;
      case DType::kBF16: reinterpret_cast<uint16_t*>(h.data())[i] = f32_to_bf16(static_cast<float>(v)); break;
      case DType::kI32: reinterpret_cast<int32_t*>(h.data())[i] = static_cast<int32_t>(v * 1e6); break;
      default: break;
    }
  }
  return h;
}

TEST(NcclSingle, EveryCollectiveOnEveryDtype) {
  SKIP_WITHOUT_NCCL();
  auto w = nccl();
  EXPECT_EQ(w->backend(), "nccl");
  EXPECT_EQ(w->size(), 1);
  EXPECT_EQ(w->rank(), 0);
  for (DType d : {DType::kF32, DType::kF64, DType::kBF16, DType::kI32}) {
    for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{1000}, int64_t{1} << 20}) {
      const std::vector<char> h = pattern(d, n, 1);
      DevBuf a(h.size()), out(h.size());
      Tensor A(a.p, d, Device::kCUDA, {n}), O(out.p, d, Device::kCUDA, {n});
      const std::string what = std::string(dtype_name(d)) + " n=" + std::to_string(n);
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
        if (op == ReduceOp::kAvg && d == DType::kI32) continue;
        a.upload(h);
        w->all_reduce(A, op);  // one rank: the identity
        EXPECT_EQ(a.download(), h) << what << " " << reduce_op_name(op);
      }
      a.upload(h);
      out.poison();
      w->reduce_scatter(O, A, ReduceOp::kSum);
      EXPECT_EQ(out.download(), h) << what << " reduce_scatter";
      out.poison();
      w->all_gather(O, A);
      EXPECT_EQ(out.download(), h) << what << " all_gather";
      w->all_gather(A, A);  // in place
      EXPECT_EQ(a.download(), h) << what << " all_gather in place";
      w->broadcast(A, 0);
      EXPECT_EQ(a.download(), h) << what << " broadcast";
    }
  }
  w->barrier();
  auto tp = w->split(0, 0, "tp");
  EXPECT_EQ(tp->size(), 1);
  EXPECT_EQ(tp->backend(), "nccl");
  tp->barrier();
}

TEST(NcclSingle, CollectivesWaitForTheComputeStream) {
  SKIP_WITHOUT_NCCL();
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  {
    auto w = nccl(s);
    const int64_t n = int64_t{16} << 20;  // 64 MiB: the copy takes long enough to be overtaken if unordered
    const std::vector<char> h = pattern(DType::kF32, n, 2);
    void* pinned = nullptr;  // pinned, so that the copy is truly asynchronous
    ASSERT_EQ(cudaMallocHost(&pinned, h.size()), cudaSuccess);
    std::memcpy(pinned, h.data(), h.size());
    DevBuf in(h.size()), out(h.size());
    for (int rep = 0; rep < 3; ++rep) {
      in.poison();
      out.poison();
      cudaDeviceSynchronize();
      ASSERT_EQ(cudaMemcpyAsync(in.p, pinned, h.size(), cudaMemcpyHostToDevice, s), cudaSuccess);
      // Queued on the communicator's stream behind an event on s: must see the copied data. wait()
      // orders s after it (s is a non-blocking stream: a legacy-stream copy would not wait for it).
      auto req = w->all_gather_async(Tensor(out.p, DType::kF32, Device::kCUDA, {n}),
                                     Tensor(in.p, DType::kF32, Device::kCUDA, {n}));
      req->wait();
      std::memset(pinned, 0xFF, h.size());
      ASSERT_EQ(cudaMemcpyAsync(pinned, out.p, h.size(), cudaMemcpyDeviceToHost, s), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      EXPECT_EQ(std::memcmp(pinned, h.data(), h.size()), 0) << "rep " << rep;
      std::memcpy(pinned, h.data(), h.size());
    }
    cudaFreeHost(pinned);
    // Several in flight, waited for in reverse order.
    DevBuf a(4000), b(8000);
    const std::vector<char> ha = pattern(DType::kF32, 1000, 3), hb = pattern(DType::kF64, 1000, 4);
    a.upload(ha);
    b.upload(hb);
    auto ra = w->all_reduce_async(Tensor(a.p, DType::kF32, Device::kCUDA, {1000}), ReduceOp::kAvg);
    auto rb = w->all_reduce_async(Tensor(b.p, DType::kF64, Device::kCUDA, {1000}), ReduceOp::kSum);
    rb->wait();
    while (!ra->test()) {
    }
    w->synchronize();  // the host sees every result
    EXPECT_EQ(a.download(), ha);
    EXPECT_EQ(b.download(), hb);
  }
  cudaStreamDestroy(s);
}

// A host callback on the compute stream that holds it until `open` is set, or 20 s have passed
// (then `expired`: the test thread was blocked, and the test fails instead of hanging).
struct StreamGate {
  std::atomic<bool> open{false}, expired{false};
};
void CUDART_CB hold_stream(void* p) {
  auto* gate = static_cast<StreamGate*>(p);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!gate->open.load()) {
    if (std::chrono::steady_clock::now() > deadline) {
      gate->expired = true;
      return;
    }
    std::this_thread::yield();
  }
}

TEST(NcclSingle, WaitOrdersTheComputeStreamWithoutBlockingTheHost) {
  SKIP_WITHOUT_NCCL();
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);  // a blocking stream, as the trainer's
  {
    auto w = nccl(s);
    const std::vector<char> h = pattern(DType::kF32, 4096, 8);
    DevBuf in(h.size()), out(h.size());
    in.upload(h);
    out.poison();
    StreamGate gate;
    ASSERT_EQ(cudaLaunchHostFunc(s, hold_stream, &gate), cudaSuccess);  // the "backward" still running
    auto req = w->all_gather_async(Tensor(out.p, DType::kF32, Device::kCUDA, {4096}),
                                   Tensor(in.p, DType::kF32, Device::kCUDA, {4096}));
    req->wait();                 // returns at once: a host wait could not end while s is held
    EXPECT_FALSE(req->test());   // the collective waits behind the held stream
    EXPECT_FALSE(gate.expired) << "wait() blocked the host until the stream was released";
    gate.open = true;
    w->synchronize();            // now the host waits, under the timeout
    EXPECT_TRUE(req->test());
    EXPECT_EQ(out.download(), h);
  }
  cudaStreamDestroy(s);
}

// The overlapped sync and ZeRO-1 on the device with one rank: buckets started from grads_ready on
// the compute stream, the reduce-scatter and all-gather in place (copies of one rank), and a ZeRO-1
// AdamW step equal to the plain one bit for bit (masters, bf16 copies, moments).
TEST(NcclSingle, OverlappedSyncAndZeroOneOnDevice) {
  SKIP_WITHOUT_NCCL();
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  {
    auto w = nccl(s);
    Context ctx;
    ctx.device = Device::kCUDA;
    ctx.stream = s;
    auto make = [](ParamStore& ps) {
      ps.declare({"w", {37, 29}, Init::kNormal, 0.5, TpSplit::kReplicated, /*decay=*/true});
      ps.declare({"norm", {29}, Init::kOnes, 0, TpSplit::kReplicated, /*decay=*/false});
      ps.declare({"emb", {101, 7}, Init::kNormal, 0.5, TpSplit::kReplicated, /*decay=*/true});
      ps.allocate();
      ps.init(3);
      for (int k = 0; k < ps.size(); ++k) {  // gradients: a fixed pattern
        const Tensor g = ps.grad(k);
        const std::vector<char> hg = pattern(DType::kF32, g.numel(), 10 + k);
        device_copy(g.data, Device::kCUDA, hg.data(), Device::kCPU, hg.size());
      }
    };
    ParamStore plain(DType::kF32, Device::kCUDA), sharded(DType::kF32, Device::kCUDA);
    make(plain);
    make(sharded);
    DpGradSync sync_plain(*w, plain.grads_arena(), 1024);
    DpGradSync sync_zero(*w, sharded.grads_arena(), 1024, DpGradMode::kShardedMean);
    EXPECT_EQ(sync_zero.shard_numel() * 4, static_cast<int64_t>(sharded.grads_arena().bytes()));
    sync_plain.grads_ready(1, 3);
    sync_plain.grads_ready(0, 1);
    sync_plain.finish();
    sync_zero.grads_ready(2, 3);
    sync_zero.grads_ready(0, 2);
    sync_zero.finish();
    AdamW opt_plain(plain, {}), opt_zero(sharded, {}, &sync_zero);
    for (int step = 0; step < 2; ++step) {
      opt_plain.step(ctx, 1e-2);
      opt_zero.step(ctx, 1e-2);
    }
    w->synchronize();
    auto host = [](const Tensor& t) {
      std::vector<char> b(t.bytes());
      device_copy(b.data(), Device::kCPU, t.data, t.device, t.bytes());
      return b;
    };
    WholeMoments m_plain(plain), m_zero(sharded);
    opt_plain.gather_moments(m_plain);
    opt_zero.gather_moments(m_zero);
    for (int k = 0; k < plain.size(); ++k) {
      EXPECT_EQ(host(plain.master(k)), host(sharded.master(k))) << k;
      if (plain.compute_copy(k).defined()) {
        EXPECT_EQ(host(plain.compute_copy(k)), host(sharded.compute_copy(k))) << k;
      }
      EXPECT_EQ(host(m_plain.m(k)), host(m_zero.m(k))) << k;
      EXPECT_EQ(host(m_plain.v(k)), host(m_zero.v(k))) << k;
    }
  }
  cudaStreamDestroy(s);
}

TEST(NcclSingle, DpGradsAndAgreementOnDevice) {
  SKIP_WITHOUT_NCCL();
  auto w = nccl();
  Arena grads("grads", Device::kCUDA);
  grads.declare("a", DType::kF32, {3, 7});
  grads.declare("b", DType::kF32, {1000});
  grads.allocate();
  const std::vector<char> ha = pattern(DType::kF32, 21, 5), hb = pattern(DType::kF32, 1000, 6);
  device_copy(grads.get(0).data, Device::kCUDA, ha.data(), Device::kCPU, ha.size());
  device_copy(grads.get(1).data, Device::kCUDA, hb.data(), Device::kCPU, hb.size());
  DpGradSync(*w, grads, 1024).all_reduce_mean();  // one rank: the mean is the value
  std::vector<char> back(hb.size());
  device_copy(back.data(), Device::kCPU, grads.get(1).data, Device::kCUDA, back.size());
  EXPECT_EQ(back, hb);
  // A list that packs: two separate allocations.
  DevBuf x(84), y(40);
  x.upload(ha);
  y.upload(std::vector<char>(hb.begin(), hb.begin() + 40));
  std::vector<Tensor> list = {Tensor(x.p, DType::kF32, Device::kCUDA, {21}), Tensor(y.p, DType::kF32, Device::kCUDA, {10})};
  DpGradSync packed(*w, list);
  EXPECT_FALSE(packed.bucket(0).in_place);
  packed.all_reduce_mean();
  EXPECT_EQ(x.download(), ha);
  EXPECT_FALSE(any_nonfinite(*w, list));
  const float nan = std::nanf("");
  device_copy(static_cast<char*>(y.p) + 8, Device::kCUDA, &nan, Device::kCPU, 4);
  EXPECT_TRUE(any_nonfinite(*w, list));
  EXPECT_TRUE(any_rank(*w, true));
  EXPECT_FALSE(any_rank(*w, false));
  EXPECT_EQ(all_reduce_value(*w, 3.25, ReduceOp::kSum), 3.25);
}

TEST(NcclSingle, TpMappingsOnDevice) {
  SKIP_WITHOUT_NCCL();
  auto tp = nccl();
  const std::vector<char> h = pattern(DType::kBF16, 6 * 10, 7);
  DevBuf x(h.size()), y(h.size());
  x.upload(h);
  Tensor X(x.p, DType::kBF16, Device::kCUDA, {6, 10}), Y(y.p, DType::kBF16, Device::kCUDA, {6, 10});
  y.poison();
  scatter_to_tp_region_forward(*tp, Y, X);  // 2-D copy path
  EXPECT_EQ(y.download(), h);
  y.poison();
  gather_from_tp_region_forward(*tp, Y, X);
  EXPECT_EQ(y.download(), h);
  reduce_from_tp_region_forward(*tp, X);
  copy_to_tp_region_backward(*tp, X);
  EXPECT_EQ(x.download(), h);
}

TEST(NcclSingle, RefusesHostTensors) {
  SKIP_WITHOUT_NCCL();
  auto w = nccl();
  std::vector<float> host(4);
  try {
    w->all_reduce(Tensor(host.data(), DType::kF32, Device::kCPU, {4}));
    ADD_FAILURE() << "a host tensor was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is on the CPU but this communicator takes GPU tensors"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dt
