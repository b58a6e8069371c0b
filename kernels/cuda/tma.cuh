// Bulk copies from global into shared memory completed on an mbarrier (sm_90's cp.async.bulk, the
// one-dimensional form of the tensor memory accelerator): a CTA asks for many contiguous bytes with
// one instruction, no registers hold them in flight, and its threads wait on the barrier's phase.
// DT_HAVE_TMA is defined in device code built for sm_90 or later; kernels that use these guard on it.
#pragma once

#include <cstdint>

namespace dt::cuda {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define DT_HAVE_TMA 1
#endif

#ifdef DT_HAVE_TMA
// A barrier whose phase completes after `count` arrivals (and the bytes they announced); the
// initialising thread then calls mbar_init_fence before any copy may signal it.
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// Blocks until the barrier's phase of this parity has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  } while (!done);
}
// One arrival that announces `bytes` to come by bulk copies into this phase. The CTA's earlier
// generic reads of the destination (ordered by the caller's __syncthreads) come before the
// asynchronous writes.
__device__ __forceinline__ void mbar_expect_bytes(uint64_t* bar, uint32_t bytes) {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}
// dst (shared) = src (global), `bytes` a multiple of 16, both 16-byte aligned; completes on bar.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}
#endif

// Asks L2 for `bytes` (a multiple of 16) of global memory from p (16-byte aligned), without waiting
// or holding anything: for data a later kernel reads. A no-op before sm_90.
__device__ __forceinline__ void bulk_prefetch_l2(const void* p, uint32_t bytes) {
#ifdef DT_HAVE_TMA
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#else
  (void)p, (void)bytes;
#endif
}

}  // namespace dt::cuda
