// Emulation of kernels/cuda/gdn_mma.cuh (same functions, same fragment layouts, on the CPU).
#pragma once
#include <cuda_runtime.h>
#include <cstdint>
namespace dt {
namespace gdn_cuda {
void mma_bf16_16816(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]);
void ldsm_x4(uint32_t (&r)[4], const void* p);
void ldsm_x4_trans(uint32_t (&r)[4], const void* p);
void stsm_x4_trans(void* p, const uint32_t (&r)[4]);
void cp_async_16(void* smem, const void* gmem, int src_bytes);
inline void grid_launch_dependents() {}  // blocks and kernels run one after another here
inline void grid_dependency_wait() {}
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
// wgmma: each thread's product is deferred to its wait, reading shared memory then, and its D
// registers are NaN in between (the GPU leaves them undefined); descriptors hold offsets from the
// dynamic shared memory's base.
inline uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(static_cast<const unsigned char*>(p) - emu::dyn_smem()); }
constexpr uint32_t wgmma_kmajor_offset(int r, int k, uint32_t lbo, uint32_t sbo) {
  return (r / 8) * sbo + (k / 8) * lbo + (r % 8) * 16 + (k % 8) * 2;
}
constexpr uint32_t wgmma_mnmajor_offset(int r, int k, uint32_t lbo, uint32_t sbo) {
  return (r / 8) * sbo + (k / 8) * lbo + (k % 8) * 16 + (r % 8) * 2;
}
inline uint64_t wgmma_desc(const void* p, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((smem_u32(p) & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32);
}
inline uint64_t wgmma_desc_k(const void* p, uint32_t k_group, uint32_t mn_group) { return wgmma_desc(p, k_group, mn_group); }
inline uint64_t wgmma_desc_mn(const void* p, uint32_t k_group, uint32_t mn_group) { return wgmma_desc(p, k_group, mn_group); }
inline void fence_proxy_async() {}
void wgmma_fence();
void wgmma_commit();
void wgmma_wait_n(int n);
template <int N> inline void wgmma_wait() { wgmma_wait_n(N); }
template <int R> inline void wgmma_fence_operand(float (&)[R]) {}
void wgmma_issue(float* d, int n, uint64_t desc_a, uint64_t desc_b, int accumulate, bool trans_b);
void wgmma_issue_ra(float* d, int n, const uint32_t (&a)[4], uint64_t desc_b, int accumulate, bool trans_b, bool neg_a);
template <int N, int kTransB = 0, bool kNegA = false>
inline void wgmma_bf16_ra(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b, int accumulate) {
  static_assert(N == 16 || N == 32 || N == 64 || N == 128, "wgmma n: 16, 32, 64 or 128 here");
  wgmma_issue_ra(d, N, a, desc_b, accumulate, kTransB != 0, kNegA);
}
template <int N, int kTransB = 0>
inline void wgmma_bf16(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  static_assert(N == 16 || N == 32 || N == 64 || N == 128, "wgmma n: 16, 32, 64 or 128 here");
  wgmma_issue(d, N, desc_a, desc_b, accumulate, kTransB != 0);
}
inline unsigned char* dynamic_smem() { return emu::dyn_smem(); }
}  // namespace gdn_cuda
}  // namespace dt
