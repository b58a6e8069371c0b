// Emulation of kernels/cuda/gdn_mma.cuh (same functions, same fragment layouts, on the CPU).
#pragma once
#include <cuda_runtime.h>
#include <cstdint>
namespace dt::cuda {
void mma_bf16_16816(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]);
void ldsm_x4(uint32_t (&r)[4], const void* p);
void ldsm_x4_trans(uint32_t (&r)[4], const void* p);
void stsm_x4_trans(void* p, const uint32_t (&r)[4]);
void cp_async_16(void* smem, const void* gmem, int src_bytes);
inline void flag_fence() {}
void flag_add_fenced(int* p, int v);           // atomic; the waits find their counts reached
void flag_wait_at_least(const int* p, int n);  // (aborts if not: a wait on a later kernel)
int flag_peek(const int* p);
int flag_fetch_add(int* p, int v);
void cp_async_commit();
void cp_async_wait_n(int n);
void named_barrier(int id, int n_threads);
void named_arrive(int id, int n_threads);
template <int N> inline void cp_async_wait() { cp_async_wait_n(N); }
// Shared-memory addresses as offsets from the dynamic shared memory's base.
inline uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(static_cast<const unsigned char*>(p) - emu::dyn_smem()); }
inline void fence_proxy_async() {}  // cp.async lands at its wait here
inline unsigned char* dynamic_smem() { return emu::dyn_smem(); }
}  // namespace dt::cuda
