// The few Hopper/Ampere instructions the tensor-core GDN kernels are built from, each behind one
// small function, so that kernels/cuda/gdn_tile.cuh and the kernels never spell PTX themselves:
//   mma.sync.m16n8k16 (bf16 x bf16 -> fp32), ldmatrix (x4, plain and transposed), cp.async
//   (16 bytes, zero-filling), wgmma (sm_90a, both operands in shared memory), and the dynamic
//   shared-memory base.
// Fragment layout of mma.sync.m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16"), lane = 4 g + t:
//   A 16x16 row-major: a[0] = A[g][2t, 2t+1]  a[1] = A[g+8][2t, 2t+1]  a[2] = A[g][2t+8, 2t+9]  a[3] = A[g+8][2t+8, 2t+9]
//   B 16x8:            b[0] = B[2t, 2t+1][g]  b[1] = B[2t+8, 2t+9][g]
//   C 16x8 fp32:       c[0], c[1] = C[g][2t, 2t+1]   c[2], c[3] = C[g+8][2t, 2t+1]
// ldmatrix.x4: lanes 8j..8j+7 give the row addresses of 8x8 matrix j; register j of lane 4g + t gets
// row g, columns 2t, 2t+1 of matrix j (with .trans: rows 2t, 2t+1 of column g).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace dt {
namespace gdn_cuda {

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
// Programmatic dependent launch (sm_90): the next kernel of the stream, when launched with
// cudaLaunchAttributeProgrammaticStreamSerialization, may start once every CTA of this one has
// called grid_launch_dependents (or exited); grid_dependency_wait waits until the kernel before
// this one has completed and its writes are visible. Both are no-ops without such a launch.
__device__ __forceinline__ void grid_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }
__device__ __forceinline__ void grid_dependency_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }

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
// it stops the kernel with a message rather than hang.
__device__ __forceinline__ void flag_wait_at_least(const int* p, int n) {
  for (unsigned spins = 0;; ++spins) {
    int v;
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    if (v >= n) return;
    if (spins == (1u << 23)) {
      printf("gdn kernels: a count stayed at %d, waiting for %d: the kernel that counts it does not run beside "
             "this one (kernels serialised, or its code not loaded?); stopping\n", v, n);
      __trap();
    }
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

// Barrier `id` (1..15; 0 is __syncthreads') among n_threads threads (a multiple of 32): the warps
// that call it with the same id wait for each other only, and see each other's shared memory writes.
__device__ __forceinline__ void named_barrier(int id, int n_threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n_threads) : "memory");
}
// Arrives at barrier id without waiting (a producer's signal; the n_threads count both sides).
__device__ __forceinline__ void named_arrive(int id, int n_threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n_threads) : "memory");
}

// ---- wgmma (sm_90a): warpgroup products with both operands in shared memory ----
// D (64 x N, fp32) += A (64 x 16) B (16 x N), bf16, issued by the 4 warps of a warpgroup together
// and completed asynchronously. Without swizzling; A K-major, B either. K-major: a tile is made of
// core matrices of 8 rows x 16 bytes (8 bf16 along k), each 128 contiguous bytes; element (r, k) of
// a tile sits at (r / 8) sbo + (k / 8) lbo + (r % 8) 16 + (k % 8) 2 bytes from its start
// (wgmma_kmajor_offset). D's registers: warp w of the group holds rows 16 w + (0..15), as
// mma.sync's m16n8 C fragments over the N / 8 column blocks: d[4 j + e] = D[16 w + g + 8 (e / 2)]
// [8 j + 2 t + (e % 2)], lane = 4 g + t.
// Order: shared-memory writes by the threads, fence_proxy_async(), a barrier, wgmma_fence(), the
// products, wgmma_commit(), wgmma_wait<n>() before D's registers or the operands' memory are touched.

__host__ __device__ constexpr uint32_t wgmma_kmajor_offset(int r, int k, uint32_t lbo, uint32_t sbo) {
  return (r / 8) * sbo + (k / 8) * lbo + (r % 8) * 16 + (k % 8) * 2;
}
// MN-major (the operand stored with its M or N index contiguous, e.g. B as [k][n]): core matrices of
// 8 k-rows x 16 bytes (8 bf16 along n); sbo between core matrices along m or n, lbo along k (the
// no-swizzle "interleave" layout).
__host__ __device__ constexpr uint32_t wgmma_mnmajor_offset(int r, int k, uint32_t lbo, uint32_t sbo) {
  return (r / 8) * sbo + (k / 8) * lbo + (k % 8) * 16 + (r % 8) * 2;
}

// The 64-bit shared-memory matrix descriptor (no swizzling): start address, lbo, sbo in 16 bytes.
__device__ __forceinline__ uint64_t wgmma_desc(const void* p, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((smem_u32(p) & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32);
}

// The descriptor of a tile laid out by wgmma_kmajor_offset / wgmma_mnmajor_offset, given the bytes
// between core matrices along k and along m / n. Which descriptor field takes which stride is said
// here only: K-major, lbo = along k, sbo = along m / n (PTX ISA); MN-major without swizzling taken
// the same way (an assumption until GdnWgmma.TileProductMatchesReference has run on the GPU; if the
// hardware reads them the other way, swap the two arguments in wgmma_desc_mn).
__device__ __forceinline__ uint64_t wgmma_desc_k(const void* p, uint32_t k_group, uint32_t mn_group) {
  return wgmma_desc(p, k_group, mn_group);
}
__device__ __forceinline__ uint64_t wgmma_desc_mn(const void* p, uint32_t k_group, uint32_t mn_group) {
  return wgmma_desc(p, k_group, mn_group);
}

// Shared-memory writes of this thread (generic proxy) made visible to the wgmma reads (async proxy).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most N of this warpgroup's committed groups are pending.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Pins D's registers: the compiler may not move their reads or writes across this point (call it
// after the products are issued and after the wait, so no copy of a register in flight is used).
template <int R>
__device__ __forceinline__ void wgmma_fence_operand(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// d = (accumulate ? d : 0) + A B for one k-step of 16 (descriptors from wgmma_desc): A (64 x 16)
// K-major; B K-major (stored as N x 16, wgmma_kmajor_offset) or, with kTransB, MN-major (stored as
// 16 x N, wgmma_mnmajor_offset).
template <int kTransB>
__device__ __forceinline__ void wgmma_bf16_n16(float (&d)[8], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, 0, %11;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(kTransB));
}

template <int kTransB>
__device__ __forceinline__ void wgmma_bf16_n32(float (&d)[16], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, %19;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(kTransB));
}

template <int kTransB>
__device__ __forceinline__ void wgmma_bf16_n64(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, %35;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(kTransB));
}

template <int kTransB>
__device__ __forceinline__ void wgmma_bf16_n128(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, %67;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(kTransB));
}

template <int N, int kTransB = 0>
__device__ __forceinline__ void wgmma_bf16(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  static_assert(N == 16 || N == 32 || N == 64 || N == 128, "wgmma n: 16, 32, 64 or 128 here");
  if constexpr (N == 16) wgmma_bf16_n16<kTransB>(d, desc_a, desc_b, accumulate);
  else if constexpr (N == 32) wgmma_bf16_n32<kTransB>(d, desc_a, desc_b, accumulate);
  else if constexpr (N == 64) wgmma_bf16_n64<kTransB>(d, desc_a, desc_b, accumulate);
  else wgmma_bf16_n128<kTransB>(d, desc_a, desc_b, accumulate);
}

// As wgmma_bf16 with A (64 x 16) from registers: warp w of the group gives rows 16 w + (0..15) as
// mma.sync's m16n8k16 A fragment (a[0] = A[g][2t, 2t+1], a[1] = A[g+8][..], a[2] = A[g][2t+8, ..],
// a[3] = A[g+8][2t+8, ..]). Registers written by other instructions need wgmma_fence() first.
template <int kTransB, int kScaleA>
__device__ __forceinline__ void wgmma_bf16_ra_n16(float (&d)[8], const uint32_t (&a)[4], uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, p, %15, 1, %14;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate), "n"(kTransB), "n"(kScaleA));
}

template <int kTransB, int kScaleA>
__device__ __forceinline__ void wgmma_bf16_ra_n32(float (&d)[16], const uint32_t (&a)[4], uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, %19}, %20, p, %23, 1, %22;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate), "n"(kTransB), "n"(kScaleA));
}

template <int kTransB, int kScaleA>
__device__ __forceinline__ void wgmma_bf16_ra_n64(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, %39, 1, %38;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate), "n"(kTransB), "n"(kScaleA));
}

template <int kTransB, int kScaleA>
__device__ __forceinline__ void wgmma_bf16_ra_n128(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, %71, 1, %70;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate), "n"(kTransB), "n"(kScaleA));
}

// kNegA: d += (-A) B (the instruction's imm-scale-a = -1).
template <int N, int kTransB = 0, bool kNegA = false>
__device__ __forceinline__ void wgmma_bf16_ra(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b, int accumulate) {
  static_assert(N == 16 || N == 32 || N == 64 || N == 128, "wgmma n: 16, 32, 64 or 128 here");
  constexpr int kScaleA = kNegA ? -1 : 1;
  if constexpr (N == 16) wgmma_bf16_ra_n16<kTransB, kScaleA>(d, a, desc_b, accumulate);
  else if constexpr (N == 32) wgmma_bf16_ra_n32<kTransB, kScaleA>(d, a, desc_b, accumulate);
  else if constexpr (N == 64) wgmma_bf16_ra_n64<kTransB, kScaleA>(d, a, desc_b, accumulate);
  else wgmma_bf16_ra_n128<kTransB, kScaleA>(d, a, desc_b, accumulate);
}

// The kernel's dynamic shared memory (sized at launch).
__device__ __forceinline__ unsigned char* dynamic_smem() {
  extern __shared__ __align__(16) unsigned char gdn_dynamic_smem[];
  return gdn_dynamic_smem;
}

}  // namespace gdn_cuda
}  // namespace dt
