// Emulation of kernels/cuda/gdn_mma.cuh (same functions, same fragment layouts, on the CPU).
#pragma once
#include <cuda_runtime.h>
#include <cstdint>
namespace dt {
namespace gdn_cuda {
void mma_bf16_16816(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]);
void ldsm_x4(uint32_t (&r)[4], const void* p);
void ldsm_x4_trans(uint32_t (&r)[4], const void* p);
void cp_async_16(void* smem, const void* gmem, int src_bytes);
void cp_async_commit();
void cp_async_wait_n(int n);
void named_barrier(int id, int n_threads);
template <int N> inline void cp_async_wait() { cp_async_wait_n(N); }
inline unsigned char* dynamic_smem() { return emu::dyn_smem(); }
}  // namespace gdn_cuda
}  // namespace dt
