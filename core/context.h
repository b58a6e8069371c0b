// Context: everything an op or layer needs besides its tensors (STYLE section 10).
// Nothing global: the device, the stream and library handles, the process grid and
// a workspace are passed in.
#pragma once

#include "core/tensor.h"

namespace dt {

class Arena;
class ProcessGrid;  // parallel/process_grid.h

struct Context {
  Device device = Device::kCPU;
  int device_index = 0;
  void* stream = nullptr;        // cudaStream_t on the GPU
  void* cublaslt = nullptr;      // cublasLtHandle_t
  void* cudnn = nullptr;         // cudnnHandle_t
  void* cuda_state = nullptr;    // the GEMM/attention caches and workspaces (kernels/cuda_context.h)
  const ProcessGrid* grid = nullptr;  // nullptr: a single process
  Arena* workspace = nullptr;
};

}  // namespace dt
