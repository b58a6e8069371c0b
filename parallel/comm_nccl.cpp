// The NCCL communicator: GPU tensors. Built when CMake finds NCCL next to the CUDA toolkit (or
// under NCCL_HOME); otherwise make_communicator says how to get it.
//
// Streams: collectives run on the communicator's own stream, after the work already queued on the
// compute stream (an event), so that DP buckets can overlap the rest of the backward. A request
// completes when the event recorded after the collective has. wait() does not block the host: the
// compute stream waits for that event (cudaStreamWaitEvent), so the host keeps queueing the
// backward while buckets are in flight. synchronize() (and every blocking collective) polls an
// event recorded on the communicator's stream against the timeout and watches
// ncclCommGetAsyncError, so a peer that died or never came ends the job with a message instead of
// a hang.
//
// Same bits on every rank: NCCL reduces each element once (ring: reduce-scatter then all-gather;
// tree: reduce to the root then broadcast; NVLS: in the switch, then multicast) and copies the
// result to every rank. Run to run, NCCL is deterministic for a fixed topology, rank count and
// algorithm; set NCCL_ALGO / NCCL_PROTO to pin them across machines.
#include <string>

#include "core/error.h"
#include "parallel/comm_backends.h"

#ifdef DELTATRON_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

#include "core/cuda_check.h"
#endif

namespace dt {

#ifdef DELTATRON_HAVE_NCCL

namespace {

#define DT_NCCL_OK(call, what, comm)                                                                             \
  do {                                                                                                           \
    ncclResult_t r_ = (call);                                                                                    \
    DT_CHECK(r_ == ncclSuccess, "{}: {} failed: {} ({})", what, #call, ncclGetErrorString(r_),                  \
             ncclGetLastError(comm));                                                                            \
  } while (0)

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::kF32: return ncclFloat32;
    case DType::kF64: return ncclFloat64;
    case DType::kBF16: return ncclBfloat16;
    case DType::kI32: return ncclInt32;
    case DType::kU16:
    case DType::kF8E4M3: break;
  }
  DT_FAIL("NCCL collective on a {} tensor: collectives take f32, f64, bf16 or i32", dtype_name(t));
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kAvg: return ncclAvg;
  }
  DT_FAIL("unknown reduce op {}", static_cast<int>(op));
}

class NcclCommunicator;

class NcclRequest final : public CommRequest {
 public:
  NcclRequest(const NcclCommunicator* comm, cudaEvent_t done, std::string what)
      : comm_(comm), done_(done), what_(std::move(what)) {}
  ~NcclRequest() override {
    if (!finished_ && !waited_) host_wait();  // never ordered after: its buffers may go next
    cudaEventDestroy(done_);
  }
  bool test() override;
  void wait() override;

 private:
  void host_wait();

  const NcclCommunicator* comm_;
  cudaEvent_t done_;
  std::string what_;
  bool finished_ = false;
  bool waited_ = false;  // the compute stream waits for done_
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int rank, int size, std::string name, int cuda_device, cudaStream_t compute,
                   double timeout_s)
      : Communicator(rank, size, std::move(name), Device::kCUDA, timeout_s),
        comm_(comm), device_index_(cuda_device), compute_(compute) {
    DT_CUDA_OK(cudaSetDevice(device_index_), describe("setup"));
    DT_CUDA_OK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), describe("setup"));
    DT_CUDA_OK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), describe("setup"));
    DT_CUDA_OK(cudaEventCreateWithFlags(&sync_, cudaEventDisableTiming), describe("setup"));
    DT_CUDA_OK(cudaMalloc(&flag_, sizeof(int32_t)), describe("setup"));
  }
  ~NcclCommunicator() override {
    cudaSetDevice(device_index_);
    cudaStreamSynchronize(stream_);
    ncclCommDestroy(comm_);
    cudaFree(flag_);
    cudaEventDestroy(ready_);
    cudaEventDestroy(sync_);
    cudaStreamDestroy(stream_);
  }
  std::string_view backend() const override { return "nccl"; }
  cudaStream_t compute_stream() const { return compute_; }

  void synchronize() override {
    if (last_what_.empty()) return;  // nothing was ever started
    const std::string what = last_what_ + " (the last collective started on it)";
    DT_CUDA_OK(cudaSetDevice(device_index_), what);
    DT_CUDA_OK(cudaEventRecord(sync_, stream_), what);
    poll_until([&] { return event_done(sync_, what); }, timeout_s(), what);
  }

  // True once `e` has completed; ends the job on a CUDA or NCCL error.
  bool event_done(cudaEvent_t e, const std::string& what) const {
    const cudaError_t r = cudaEventQuery(e);
    if (r == cudaSuccess) return true;
    if (r != cudaErrorNotReady) abort_job(fmt::format("{}: CUDA error {}", what, cudaGetErrorString(r)));
    check_async(what);
    return false;
  }

  // Ends the job when NCCL reports an asynchronous error (a peer failed, a network error).
  void check_async(const std::string& what) const {
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm_, &async);
    if (async != ncclSuccess && async != ncclInProgress) {
      ncclCommAbort(comm_);
      abort_job(fmt::format("{}: NCCL failed: {} ({})", what, ncclGetErrorString(async), ncclGetLastError(comm_)));
    }
  }

 protected:
  std::unique_ptr<CommRequest> do_all_reduce(const Tensor& t, ReduceOp op) override {
    std::string what = describe(fmt::format("all_reduce({})", reduce_op_name(op)), &t);
    return enqueue(std::move(what), [&](cudaStream_t s) {
      return ncclAllReduce(t.data, t.data, static_cast<size_t>(t.numel()), nccl_type(t.dtype), nccl_op(op), comm_, s);
    });
  }
  std::unique_ptr<CommRequest> do_reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op) override {
    std::string what = describe(fmt::format("reduce_scatter({})", reduce_op_name(op)), &in);
    return enqueue(std::move(what), [&](cudaStream_t s) {
      return ncclReduceScatter(in.data, out.data, static_cast<size_t>(out.numel()), nccl_type(in.dtype),
                               nccl_op(op), comm_, s);
    });
  }
  std::unique_ptr<CommRequest> do_all_gather(const Tensor& out, const Tensor& in) override {
    std::string what = describe("all_gather", &in);
    return enqueue(std::move(what), [&](cudaStream_t s) {
      return ncclAllGather(in.data, out.data, static_cast<size_t>(in.numel()), nccl_type(in.dtype), comm_, s);
    });
  }
  void do_broadcast(const Tensor& t, int root) override {
    std::string what = describe(fmt::format("broadcast(root {})", root), &t);
    enqueue(std::move(what), [&](cudaStream_t s) {
      return ncclBroadcast(t.data, t.data, static_cast<size_t>(t.numel()), nccl_type(t.dtype), root, comm_, s);
    })->wait();
    synchronize();  // blocking, for the host too
  }
  void do_barrier() override {
    enqueue(describe("barrier"), [&](cudaStream_t s) {
      return ncclAllReduce(flag_, flag_, 1, ncclInt32, ncclSum, comm_, s);
    })->wait();
    synchronize();
  }
  std::unique_ptr<Communicator> do_split(int color, int key, std::string name) override {
    DT_CUDA_OK(cudaSetDevice(device_index_), describe("split"));
    ncclComm_t sub = nullptr;
    DT_NCCL_OK(ncclCommSplit(comm_, color, key, &sub, nullptr), describe("split"), comm_);
    int r = 0, n = 0;
    ncclCommUserRank(sub, &r);
    ncclCommCount(sub, &n);
    return std::make_unique<NcclCommunicator>(sub, r, n, std::move(name), device_index_, compute_, timeout_s());
  }

 private:
  template <class Launch>
  std::unique_ptr<CommRequest> enqueue(std::string what, Launch&& launch) {
    DT_CUDA_OK(cudaSetDevice(device_index_), what);
    // The collective starts once what the compute stream has queued so far (the tensor's producer) is done.
    DT_CUDA_OK(cudaEventRecord(ready_, compute_), what);
    DT_CUDA_OK(cudaStreamWaitEvent(stream_, ready_, 0), what);
    DT_NCCL_OK(launch(stream_), what, comm_);
    cudaEvent_t done = nullptr;
    DT_CUDA_OK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), what);
    DT_CUDA_OK(cudaEventRecord(done, stream_), what);
    last_what_ = what;
    return std::make_unique<NcclRequest>(this, done, std::move(what));
  }

  ncclComm_t comm_;
  int device_index_;
  cudaStream_t compute_;   // borrowed; nullptr: the legacy default stream
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  cudaEvent_t sync_ = nullptr;  // synchronize(): recorded on stream_ after everything started so far
  std::string last_what_;       // the last collective started, for synchronize()'s messages
  int32_t* flag_ = nullptr;     // the barrier's one element
};

bool NcclRequest::test() {
  if (!finished_) finished_ = comm_->event_done(done_, what_);
  return finished_;
}

void NcclRequest::wait() {
  if (waited_ || finished_) return;
  // Stream-side: later work on the compute stream starts after the collective; the host goes on.
  DT_CUDA_OK(cudaStreamWaitEvent(comm_->compute_stream(), done_, 0), what_);
  waited_ = true;
}

void NcclRequest::host_wait() { poll_until([this] { return test(); }, comm_->timeout_s(), what_); }

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int cuda_device, void* stream,
                                                     double timeout_s) {
  DT_CHECK(bootstrap.device() == Device::kCPU, "NCCL bootstrap needs a CPU communicator (MPI), got {}",
           bootstrap.backend());
  int n_devices = 0;
  DT_CHECK(cudaGetDeviceCount(&n_devices) == cudaSuccess && n_devices > 0,
           "the NCCL communicator needs a GPU, and this machine has none visible");
  DT_CHECK(cuda_device >= 0 && cuda_device < n_devices,
           "rank {} asks for GPU {} but {} GPUs are visible; launch at most {} ranks per node (mpirun "
           "--map-by ppr:{}:node) or set CUDA_VISIBLE_DEVICES", bootstrap.rank(), cuda_device, n_devices, n_devices,
           n_devices);
  // Rank 0 creates the unique id (its address and a magic); every rank must use the same one.
  ncclUniqueId id{};
  static_assert(sizeof(id) % sizeof(int32_t) == 0);
  if (bootstrap.rank() == 0) DT_NCCL_OK(ncclGetUniqueId(&id), "NCCL bootstrap", nullptr);
  bootstrap.broadcast(Tensor(&id, DType::kI32, Device::kCPU, {static_cast<int64_t>(sizeof(id) / sizeof(int32_t))}),
                      0);
  DT_CUDA_OK(cudaSetDevice(cuda_device), "NCCL bootstrap");
  ncclComm_t comm = nullptr;
  DT_NCCL_OK(ncclCommInitRank(&comm, bootstrap.size(), id, bootstrap.rank()), "NCCL bootstrap", nullptr);
  return std::make_unique<NcclCommunicator>(comm, bootstrap.rank(), bootstrap.size(), "world", cuda_device,
                                            static_cast<cudaStream_t>(stream), timeout_s);
}

#else  // no NCCL in this build

std::unique_ptr<Communicator> make_nccl_communicator(Communicator&, int, void*, double) {
  DT_FAIL("this build has no NCCL, so GPU tensors cannot be communicated: build with CUDA and NCCL "
          "(NCCL comes with the CUDA toolkit image, or set NCCL_HOME to its install and reconfigure)");
}

#endif

}  // namespace dt
