// Communicator: collectives over a group of ranks (docs/parallel.md, "The Communicator").
// One interface, three backends:
//   single  one process (every collective is a copy or nothing);          parallel/comm_single.cpp
//   mpi     CPU tensors, the path CI runs under `mpirun`;                  parallel/comm_mpi.cpp
//   nccl    GPU tensors, bootstrapped by broadcasting its id over MPI;     parallel/comm_nccl.cpp
//
//   MpiRuntime mpi;                                         // parallel/mpi_runtime.h, first in main
//   auto world = make_communicator({.device = Device::kCPU});
//   world->all_reduce(grad, ReduceOp::kAvg);                // torch.distributed.all_reduce(g, op=AVG)
//   ProcessGroups g = make_process_groups(*world, grid);    // parallel/process_groups.h: g.tp, g.dp
//
// Rules every backend keeps:
//   - Every rank of the group calls the same collectives in the same order (MPI's rule). A rank that
//     does not come is found by the timeout: the waiting ranks abort the whole job with a message
//     naming the collective, the communicator and the rank (abort_job, parallel/mpi_runtime.h).
//   - all_reduce gives every rank the same bits. MPI: each rank reduces its 1/size chunk of the
//     tensor itself, over the ranks' contributions in rank order ((x_0 + x_1) + x_2 ..., bf16
//     summed in fp32 and rounded once), then the chunks are all-gathered (parallel/reduce_order.h);
//     so the result does not depend on MPI's algorithms either. NCCL: each element is reduced once
//     (ring reduce-scatter or tree reduce) and then copied to every rank.
//   - Tensors are contiguous, on device(), of dtype f32, f64, bf16 or i32. Any shape: collectives
//     see the flat elements.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/tensor.h"

namespace dt {

enum class ReduceOp : uint8_t {
  kSum,
  kMax,  // a NaN on any rank gives NaN (mpi, single); NCCL's max follows fmax and may drop NaN
  kAvg,  // sum / size; floating-point tensors only
};
std::string_view reduce_op_name(ReduceOp op);

enum class CommBackend : uint8_t {
  kAuto,    // one rank: single; several: mpi for CPU tensors, nccl for GPU tensors
  kSingle,
  kMpi,
  kNccl,
};
std::string_view comm_backend_name(CommBackend b);

struct CommOptions {
  CommBackend backend = CommBackend::kAuto;
  Device device = Device::kCPU;  // where the tensors live (mpi: CPU; nccl: CUDA)
  // A collective that waits longer than this for the other ranks aborts the whole job. Generous by
  // default: a first step (allocation, autotuning) may be slow on one rank. The trainer sets it
  // from parallel.timeout_s.
  double timeout_s = 600;
  int cuda_device = 0;     // nccl: this rank's GPU (usually MpiRuntime::local_rank())
  void* stream = nullptr;  // nccl: cudaStream_t the tensors are produced on; collectives wait for it
};

// A collective in flight. The tensors it was given must stay alive and untouched until it completes.
// Destroying a request that was never waited for waits for it first.
class CommRequest {
 public:
  virtual ~CommRequest() = default;
  // Moves it along without blocking; true once complete (its results are then in place).
  virtual bool test() = 0;
  // Orders what comes next after the collective.
  //   mpi, single: blocks the host until complete (past the communicator's timeout the job aborts).
  //   nccl: does not block the host: the compute stream (CommOptions::stream) waits for the
  //         collective's event (cudaStreamWaitEvent), so work queued on it afterwards, and host
  //         copies on the legacy stream when the compute stream is a blocking one, see the results.
  //         The timeout is applied by the next Communicator::synchronize() or blocking collective.
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& name() const { return name_; }  // "world", "tp", "dp": used in messages
  Device device() const { return device_; }
  double timeout_s() const { return timeout_s_; }
  virtual std::string_view backend() const = 0;      // "single", "mpi", "nccl"

  // The blocking forms (all_reduce, reduce_scatter, all_gather, broadcast, barrier) return once the
  // collective has completed, for the host too (NCCL included), under the timeout.
  //
  // t = reduce over the group of t, in place. t: [...], any shape.
  void all_reduce(const Tensor& t, ReduceOp op = ReduceOp::kSum) {
    all_reduce_async(t, op)->wait();
    synchronize();
  }
  std::unique_ptr<CommRequest> all_reduce_async(const Tensor& t, ReduceOp op = ReduceOp::kSum);
  // out = chunk `rank()` of reduce(in), where in holds size() equal chunks of out.numel() elements.
  // torch.distributed.reduce_scatter_tensor(out, in, op)
  void reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op = ReduceOp::kSum) {
    reduce_scatter_async(out, in, op)->wait();
    synchronize();
  }
  std::unique_ptr<CommRequest> reduce_scatter_async(const Tensor& out, const Tensor& in, ReduceOp op);
  // out = [in of rank 0, in of rank 1, ...] (flat); out.numel() = size() * in.numel(). `in` may be
  // out's own chunk (in place). torch.distributed.all_gather_into_tensor(out, in)
  void all_gather(const Tensor& out, const Tensor& in) {
    all_gather_async(out, in)->wait();
    synchronize();
  }
  std::unique_ptr<CommRequest> all_gather_async(const Tensor& out, const Tensor& in);
  // t = t of rank `root`, in place.
  void broadcast(const Tensor& t, int root);
  void barrier();
  // Blocks the host until every collective started so far on this communicator has completed;
  // past the timeout the whole job aborts. Only NCCL has anything to do (its wait() leaves the host
  // free); mpi and single complete in wait().
  virtual void synchronize() {}

  // Collective over this communicator: the ranks passing the same color form a new communicator,
  // ranked by key (ties by rank here). Same backend, device and timeout. MPI_Comm_split.
  std::unique_ptr<Communicator> split(int color, int key, std::string name);

 protected:
  Communicator(int rank, int size, std::string name, Device device, double timeout_s)
      : rank_(rank), size_(size), name_(std::move(name)), device_(device), timeout_s_(timeout_s) {}

  // Backends implement these; arguments are checked (device, dtype, contiguity, sizes, root)
  // before they are called, and empty tensors never reach them.
  virtual std::unique_ptr<CommRequest> do_all_reduce(const Tensor& t, ReduceOp op) = 0;
  virtual std::unique_ptr<CommRequest> do_reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op) = 0;
  virtual std::unique_ptr<CommRequest> do_all_gather(const Tensor& out, const Tensor& in) = 0;
  virtual void do_broadcast(const Tensor& t, int root) = 0;
  virtual void do_barrier() = 0;
  virtual std::unique_ptr<Communicator> do_split(int color, int key, std::string name) = 0;

  // "all_reduce of f32[3, 5] on communicator 'dp' (rank 1 of 2)": the start of error messages.
  std::string describe(std::string_view collective, const Tensor* t = nullptr) const;

 private:
  void check_tensor(std::string_view collective, const Tensor& t, const char* arg) const;

  int rank_, size_;
  std::string name_;
  Device device_;
  double timeout_s_;
};

// The world communicator of this process (all ranks mpirun started), per options.backend. kMpi and
// kNccl need an MpiRuntime alive when several ranks run; kNccl needs a build with NCCL.
std::unique_ptr<Communicator> make_communicator(const CommOptions& options);

// What this build has.
bool mpi_built();
bool nccl_built();

// A request that is already complete (single process, empty tensors).
std::unique_ptr<CommRequest> completed_request();

}  // namespace dt
