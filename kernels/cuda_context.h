// The CUDA side of a Context (core/context.h): one GPU's stream, library handles, workspaces and
// plan caches, owned by one object. g++-compatible: no CUDA types here.
//
//   auto gpu = dt::make_cuda_context(0);   // throws when there is no such GPU
//   dt::Context& ctx = gpu->context();     // device kCUDA, stream, cublaslt, cudnn, cuda_state set
//   dt::linear_forward(ctx, y, x, w);      // kernels/ops.h dispatches to kernels/cuda_ops.h
//
// What it holds (kernels/cuda/dense_mm_state.h):
//   - a blocking stream (cudaStreamCreate: it orders with the legacy default stream, so a plain
//     cudaMemcpy / device_copy after an op sees its results);
//   - the cuBLASLt handle, a 32 MiB GEMM workspace allocated once, and the GEMM plans (descriptors and
//     the heuristic's algorithm), one per shape, dtypes and pointer alignment, chosen once and kept:
//     the same shape always runs the same algorithm, so results are bitwise reproducible;
//   - the cuDNN handle (set on the stream; null when built without cuDNN), the SDPA graphs built once
//     per shape, scale and direction, and their workspace, grown at the first call of a larger graph;
//   - a device flag and a pinned host word for cross-entropy's target check;
//   - its own stream-ordered memory pool (cudaMemPoolCreate) for the ops' scratch, keeping what it
//     has grown to; the device's default pool and its settings are left alone.
// Destroying it waits for the stream, then releases all of it. One context per GPU per thread: the
// ops use its stream and caches without locks.
#pragma once

#include <memory>

#include "core/context.h"

namespace dt {

namespace cuda {
struct CudaState;  // kernels/cuda/dense_mm_state.h
}

class CudaContextOwner {
 public:
  explicit CudaContextOwner(int device_index);
  ~CudaContextOwner();
  CudaContextOwner(const CudaContextOwner&) = delete;
  CudaContextOwner& operator=(const CudaContextOwner&) = delete;

  Context& context() { return ctx_; }
  // Waits for everything queued on the context's stream.
  void synchronize();

 private:
  std::unique_ptr<cuda::CudaState> state_;
  Context ctx_;
};

// Creates the context of GPU `device_index` and makes that GPU current on this thread.
std::unique_ptr<CudaContextOwner> make_cuda_context(int device_index);

// The scratch pool (a cudaMemPool_t) of a context made by make_cuda_context: GPU launchers that need
// stream-ordered scratch allocate from it with cudaMallocFromPoolAsync on ctx.stream. Null for any
// other Context (a bare CUDA Context holding only a stream: its scratch comes from the device's
// current pool).
void* cuda_scratch_pool(const Context& ctx);

// The cuDNN version the library runs with (cudnnGetVersion(), e.g. 91900), 0 when built without cuDNN.
int cudnn_runtime_version();

}  // namespace dt
