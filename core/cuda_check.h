// The one check of a CUDA runtime call (host code, g++ and nvcc alike). On failure it throws
// dt::Error naming the op, the CUDA error (number and text), the file and the line:
//   DT_CUDA_OK(cudaMemsetAsync(p, 0, n, stream), "cross_entropy_forward");
// A kernel launch is checked as DT_CUDA_OK(cudaGetLastError(), op). Library calls with their own
// status types keep their own checks: DT_CUBLAS_OK (kernels/cuda/dense_mm_state.h) and the cuDNN
// check of attention_cudnn.cpp.
#pragma once

#include <cuda_runtime.h>

#include "core/error.h"

namespace dt {
// What an error may mean beyond CUDA's own text. A kernel that stops itself (__trap) shows as
// cudaErrorLaunchFailure; the GDN kernels do so when a count they wait on stays short for seconds
// (kernels/cuda/gdn_mma.cuh, flag_wait_at_least).
inline const char* cuda_error_hint(cudaError_t err) {
  return err == cudaErrorLaunchFailure
             ? " (a kernel faulted or stopped itself; the GDN kernels stop when a kernel they wait on does not run "
               "beside them, as under a profiler that serialises kernels: docs/gdn_kernels.md)"
             : "";
}
}  // namespace dt

#define DT_CUDA_OK(call, op)                                                                              \
  do {                                                                                                    \
    cudaError_t err_ = (call);                                                                            \
    DT_CHECK(err_ == cudaSuccess, "{}: CUDA error {} ({}){} at {}:{}", op, static_cast<int>(err_),       \
             cudaGetErrorString(err_), ::dt::cuda_error_hint(err_), __FILE__, __LINE__);                 \
  } while (0)
