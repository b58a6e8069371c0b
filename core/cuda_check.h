// The one check of a CUDA runtime call (host code, g++ and nvcc alike). On failure it throws
// dt::Error naming the op, the CUDA error (number and text), the file and the line:
//   DT_CUDA_OK(cudaMemsetAsync(p, 0, n, stream), "cross_entropy_forward");
// A kernel launch is checked as DT_CUDA_OK(cudaGetLastError(), op). Library calls with their own
// status types keep their own checks: DT_CUBLAS_OK (kernels/cuda/dense_mm_state.h) and the cuDNN
// check of attention_cudnn.cpp.
#pragma once

#include <cuda_runtime.h>

#include "core/error.h"

#define DT_CUDA_OK(call, op)                                                                              \
  do {                                                                                                    \
    cudaError_t err_ = (call);                                                                            \
    DT_CHECK(err_ == cudaSuccess, "{}: CUDA error {} ({}) at {}:{}", op, static_cast<int>(err_),         \
             cudaGetErrorString(err_), __FILE__, __LINE__);                                               \
  } while (0)
