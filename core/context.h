// Context: everything an op or layer needs besides its tensors (docs/architecture.md, "Conventions").
// Nothing global: the device, the stream and library handles, the process grid and
// a workspace are passed in.
#pragma once

#include "core/tensor.h"

namespace dt {

class Arena;
class ProcessGrid;   // parallel/process_grid.h
class Communicator;  // parallel/communicator.h

struct Context {
  Device device = Device::kCPU;
  int device_index = 0;
  void* stream = nullptr;        // cudaStream_t on the GPU
  void* cublaslt = nullptr;      // cublasLtHandle_t
  void* cudnn = nullptr;         // cudnnHandle_t
  void* cuda_state = nullptr;    // the GEMM/attention caches and workspaces (kernels/cuda_context.h)
  const ProcessGrid* grid = nullptr;  // nullptr: a single process
  // This rank's tensor- and data-parallel groups (parallel/process_groups.h); nullptr: tp = 1 / dp = 1.
  Communicator* tp = nullptr;
  Communicator* dp = nullptr;
  Arena* workspace = nullptr;
};

}  // namespace dt
