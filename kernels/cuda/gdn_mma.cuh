// The few Hopper/Ampere instructions the tensor-core GDN kernels are built from, each behind one
// small function, so that kernels/cuda/gdn_tc.cuh and the kernels never spell PTX themselves:
//   mma.sync.m16n8k16 (bf16 x bf16 -> fp32), ldmatrix (x4, plain and transposed), stmatrix,
//   cp.async (16 bytes, zero-filling), the fences and counters between CTAs, and the dynamic
//   shared-memory base. Programmatic dependent launch is common.cuh's.
// Fragment layout of mma.sync.m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16"), lane = 4 g + t:
//   A 16x16 row-major: a[0] = A[g][2t, 2t+1]  a[1] = A[g+8][2t, 2t+1]  a[2] = A[g][2t+8, 2t+9]  a[3] = A[g+8][2t+8, 2t+9]
//   B 16x8:            b[0] = B[2t, 2t+1][g]  b[1] = B[2t+8, 2t+9][g]
//   C 16x8 fp32:       c[0], c[1] = C[g][2t, 2t+1]   c[2], c[3] = C[g+8][2t, 2t+1]
// ldmatrix.x4: lanes 8j..8j+7 give the row addresses of 8x8 matrix j; register j of lane 4g + t gets
// row g, columns 2t, 2t+1 of matrix j (with .trans: rows 2t, 2t+1 of column g).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace dt::cuda {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// c += a b, bf16 operands, fp32 accumulate. Not volatile: a pure function of its registers, so
// the compiler may schedule it between the (volatile, ordered) fragment loads.
__device__ __forceinline__ void mma_bf16_16816(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p))
               : "memory");
}

__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p))
               : "memory");
}

// stmatrix.x4 with .trans (sm_90): lanes 8j..8j+7 give the row addresses of stored matrix j; register
// j of lane 4g + t holds elements [g][2t], [g][2t + 1] of an 8x8 matrix M_j (the mma.sync C / A
// fragment layout), which land transposed: M_j[g][2t + e] at row 2t + e, column g of matrix j.
__device__ __forceinline__ void stsm_x4_trans(void* p, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(smem_u32(p)),
               "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

// 16 bytes global -> shared, asynchronously; the first src_bytes (0 or 16) are copied, the rest
// zero-filled. Both addresses 16-byte aligned.
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem), "r"(src_bytes)
               : "memory");
}
// Counters between CTAs: flag_fence then flag_add_fenced publish, at GPU scope, everything this
// thread's CTA wrote before a barrier the thread passed (a release fence, then the adds: several
// counters may follow one fence); flag_wait_at_least spins (acquire loads) until a counter reaches
// n. Call each from one thread, next to a barrier.
__device__ __forceinline__ void flag_fence() { asm volatile("fence.acq_rel.gpu;\n" ::: "memory"); }
__device__ __forceinline__ void flag_add_fenced(int* p, int v) {
  asm volatile("red.relaxed.gpu.global.add.s32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
// A wait that lasts seconds means the kernel counting is not running beside this one (a profiler
// that serialises kernels, or, were the counting kernel launched later, its code not yet loaded):
// it stops the kernel (__trap: the host sees cudaErrorLaunchFailure, which core/cuda_check.h
// explains) rather than hang. It prints nothing: a kernel that can call printf makes the
// driver reserve 64 MiB for printf's buffer when its code is loaded.
__device__ __forceinline__ void flag_wait_at_least(const int* p, int n) {
  for (unsigned spins = 0;; ++spins) {
    int v;
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    if (v >= n) return;
    if (spins == (1u << 23)) __trap();
    __nanosleep(64);
  }
}
// A counter's value now (a relaxed load: no ordering; flag_fence after it, once such loads saw counts
// reached, orders this thread's later loads after the writes they count).
__device__ __forceinline__ int flag_peek(const int* p) {
  int v;
  asm volatile("ld.relaxed.gpu.global.s32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
// Adds v, returning the value before (a work counter: no ordering).
__device__ __forceinline__ int flag_fetch_add(int* p, int v) { return atomicAdd(p, v); }

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
// Orders this thread's earlier shared-memory writes (cp.async's included, once waited for) before
// later accesses through the async proxy; the column-warp pass's tile ring issues it before
// signalling a stage full.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Barrier `id` (1..15; 0 is __syncthreads') among n_threads threads (a multiple of 32): the warps
// that call it with the same id wait for each other only, and see each other's shared memory writes.
__device__ __forceinline__ void named_barrier(int id, int n_threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n_threads) : "memory");
}
// Arrives at barrier id without waiting (a producer's signal; the n_threads count both sides).
__device__ __forceinline__ void named_arrive(int id, int n_threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n_threads) : "memory");
}

// The kernel's dynamic shared memory (sized at launch).
__device__ __forceinline__ unsigned char* dynamic_smem() {
  extern __shared__ __align__(16) unsigned char gdn_dynamic_smem[];
  return gdn_dynamic_smem;
}

}  // namespace dt::cuda
