// Emulation of kernels/cuda/cluster.cuh: the CTAs of a cluster run at once (emu::run_grid), the
// barrier is one std::barrier of all their threads, and a shared-memory address maps to the same
// offset in the other CTA's dynamic shared memory.
#pragma once
#include <cuda_runtime.h>

namespace dt::cuda {
inline unsigned cluster_rank() { return emu::cluster_rank(); }
inline void cluster_sync() { emu::cluster_sync(); }
template <class T>
inline const T* cluster_smem(const T* p, unsigned rank) {
  return static_cast<const T*>(emu::cluster_map(p, rank));
}
}  // namespace dt::cuda
