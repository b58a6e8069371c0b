// A check of the wgmma building blocks of kernels/cuda/gdn_mma.cuh on their own, for the GPU tests
// and the CPU emulation (kernels/cuda/gdn_emu): D = A B^T for one 64 x N tile.
#pragma once

#include <cstdint>

namespace dt {

// A: 64 x K row-major bf16 (raw bits) on the device; B: N x K row-major (D = A B^T, B K-major in
// shared memory) or, with b_kn, K x N row-major (D = A B, B MN-major); D: 64 x N row-major fp32.
// N in {16, 32, 64, 128}; K a positive multiple of 16, at most 256.
void gdn_wgmma_check_cuda(const uint16_t* A, const uint16_t* B, float* D, int N, int K, bool b_kn, void* stream);

}  // namespace dt
