// D = A B^T for one 64 x N tile through wgmma (kernels/cuda/gdn_wgmma_check.h): the operands are
// copied (cp.async, 16 bytes at a time) into shared memory in the K-major core-matrix layout, the
// k-steps of 16 run in one commit group, D goes back from the accumulator registers. One CTA of one
// warpgroup. It exercises exactly what the tensor-core kernels will build on (descriptors, the
// layout, the fence / commit / wait order, D's register layout).
#include "kernels/cuda/gdn_wgmma_check.h"

#include "kernels/cuda/gdn_tc.cuh"

namespace dt {

using namespace gdn_cuda;

namespace {

template <int N, int kTransB>
__global__ void __launch_bounds__(128) gdn_wgmma_check_kernel(const uint16_t* A, const uint16_t* B, float* D, int K) {
  unsigned char* sm = dynamic_smem();
  unsigned char* sB = sm + 64 * K * 2;
  // A and K-major B: core matrices along k (lbo), then the next 8 rows (sbo). MN-major B: core
  // matrices along n (sbo), then the next 8 k (lbo).
  const uint32_t lbo = 128, sbo = (K / 8) * 128, b_lbo = kTransB ? (N / 8) * 128 : lbo, b_sbo = kTransB ? 128 : sbo;
  for (int p = threadIdx.x; p < 64 * K / 8; p += 128) {
    const int r = p / (K / 8), k = 8 * (p % (K / 8));
    cp_async_16(sm + wgmma_kmajor_offset(r, k, lbo, sbo), A + r * K + k, 16);
  }
  for (int p = threadIdx.x; p < N * K / 8; p += 128) {
    if (kTransB) {  // B as [k][n]: 8 consecutive n of one k per piece
      const int k = p / (N / 8), n = 8 * (p % (N / 8));
      cp_async_16(sB + wgmma_mnmajor_offset(n, k, b_lbo, b_sbo), B + k * N + n, 16);
    } else {
      const int r = p / (K / 8), k = 8 * (p % (K / 8));
      cp_async_16(sB + wgmma_kmajor_offset(r, k, lbo, sbo), B + r * K + k, 16);
    }
  }
  cp_async_commit();
  cp_async_wait<0>();
  fence_proxy_async();
  __syncthreads();
  float d[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) d[i] = 0.f;
  wgmma_fence_operand(d);
  wgmma_fence();
  for (int k0 = 0; k0 < K; k0 += 16) {
    const uint32_t at = wgmma_kmajor_offset(0, k0, lbo, sbo);
    const uint32_t bt = kTransB ? wgmma_mnmajor_offset(0, k0, b_lbo, b_sbo) : at;
    const uint64_t db = kTransB ? wgmma_desc_mn(sB + bt, b_lbo, b_sbo) : wgmma_desc_k(sB + bt, lbo, sbo);
    wgmma_bf16<N, kTransB>(d, wgmma_desc_k(sm + at, lbo, sbo), db, k0 > 0);
  }
  wgmma_commit();
  wgmma_wait<0>();
  wgmma_fence_operand(d);
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int j = 0; j < N / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) D[(16 * w + g + 8 * (e >> 1)) * N + 8 * j + 2 * t + (e & 1)] = d[4 * j + e];
}

template <int N>
void launch(const uint16_t* A, const uint16_t* B, float* D, int K, bool b_kn, cudaStream_t s) {
  const size_t bytes = static_cast<size_t>(64 + N) * K * 2;
  if (b_kn) {
    tc_set_smem(gdn_wgmma_check_kernel<N, 1>, bytes, "gdn_wgmma_check_cuda");
    gdn_wgmma_check_kernel<N, 1><<<1, 128, bytes, s>>>(A, B, D, K);
  } else {
    tc_set_smem(gdn_wgmma_check_kernel<N, 0>, bytes, "gdn_wgmma_check_cuda");
    gdn_wgmma_check_kernel<N, 0><<<1, 128, bytes, s>>>(A, B, D, K);
  }
  DT_GDN_CUDA_CHECK(cudaGetLastError(), "gdn_wgmma_check_cuda");
}

}  // namespace

void gdn_wgmma_check_cuda(const uint16_t* A, const uint16_t* B, float* D, int N, int K, bool b_kn, void* stream) {
  DT_CHECK(N == 16 || N == 32 || N == 64 || N == 128, "gdn_wgmma_check_cuda: N must be 16, 32, 64 or 128, got {}", N);
  DT_CHECK(K > 0 && K % 16 == 0 && K <= 256, "gdn_wgmma_check_cuda: K must be a multiple of 16 in [16, 256], got {}",
           K);
  DT_CHECK(reinterpret_cast<uintptr_t>(A) % 16 == 0 && reinterpret_cast<uintptr_t>(B) % 16 == 0,
           "gdn_wgmma_check_cuda: A and B must be 16-byte aligned");
  auto s = static_cast<cudaStream_t>(stream);
  if (N == 16) launch<16>(A, B, D, K, b_kn, s);
  else if (N == 32) launch<32>(A, B, D, K, b_kn, s);
  else if (N == 64) launch<64>(A, B, D, K, b_kn, s);
  else launch<128>(A, B, D, K, b_kn, s);
}

}  // namespace dt
