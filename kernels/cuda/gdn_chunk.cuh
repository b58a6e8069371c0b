// Device-side pieces shared by the GDN chunk kernels (kernels/cuda/gdn_chunk.cu): bf16 loads
// and stores and the fp32 workspace layout. The device toolbox (bf16 conversions, reductions,
// programmatic dependent launch, scratch) is common.cuh; the launch check is DT_CUDA_OK
// (core/cuda_check.h, through common.cuh).
#pragma once

#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/gdn_cuda.h"

namespace dt::cuda {

// Tile sizes, at the top of the file (docs/architecture.md). These kernels are simple on purpose:
// one CTA of kThreads per (batch, head, chunk) for the per-chunk parts, one CTA per (batch, head,
// simt_state_cols(dv) columns of S) for the sequential state passes. The fast kernels for chunk 64
// and head dims 64 and 128 are gdn_tc_*.cu (docs/gdn_kernels.md).
// Head dims: any multiple of kDimStep up to kMaxDim, dk != dv allowed (HF's linear_key_head_dim
// and linear_value_head_dim are independent; the golden Qwen3.5 files use 16).
inline constexpr int kThreads = 256;
inline constexpr int kMaxChunk = 64;
inline constexpr int kMaxDim = 128;
inline constexpr int kDimStep = 8;
inline constexpr int kStateCols = 32;  // most columns of S per state-pass CTA (shared arrays sized for it)

// Columns of S per state-pass (and recurrent) CTA: the widest of 32, 16, 8 that divides dv, so
// the CTAs tile dv exactly (dv % kDimStep == 0).
__host__ __device__ __forceinline__ int simt_state_cols(int64_t dv) {
  return dv % 32 == 0 ? 32 : (dv % 16 == 0 ? 16 : 8);
}

__device__ __forceinline__ float ld_bf16(const uint16_t* p) { return bf16_bits_to_f32(*p); }
__device__ __forceinline__ void st_bf16(uint16_t* p, float x) { *p = f32_to_bf16_bits(x); }

// The SIMT state passes' slice of one head's dk x dv fp32 state: columns [col0, col0 + cols) of
// the state at `state` + state_off, held as S[x * cols + y] (shared memory), strided over the CTA.
// Loaded as zeros where src is null.
__device__ __forceinline__ void load_state_cols(float* S, const float* src, int64_t state_off, int64_t dk, int64_t dv,
                                                int64_t cols, int64_t col0) {
  for (int64_t e = threadIdx.x; e < dk * cols; e += blockDim.x)
    S[e] = src ? src[state_off + (e / cols) * dv + col0 + e % cols] : 0.f;
}
__device__ __forceinline__ void store_state_cols(float* dst, const float* S, int64_t state_off, int64_t dk, int64_t dv,
                                                 int64_t cols, int64_t col0) {
  for (int64_t e = threadIdx.x; e < dk * cols; e += blockDim.x)
    dst[state_off + (e / cols) * dv + col0 + e % cols] = S[e];
}

// Per-(batch, value head, chunk) fp32 workspace, each block sized for a full chunk C (rows past
// the chunk's n are never read). `ch` = (b*Hv + h)*NC + c.
struct Workspace {
  int64_t C = 0, dk = 0, dv = 0, n_ch = 0;
  // forward (prep kernel)
  float *G = nullptr;   // [C]        cumsum of g within the chunk
  float *W = nullptr;   // [C, dk]    T Kb
  float *U = nullptr;   // [C, dv]    T Vb
  float *M = nullptr;   // [C, C]     lower(Q K^T o Gam)
  float *Tm = nullptr;  // [C, C]     (I + A)^-1
  // backward
  float *Sent = nullptr;  // [dk, dv] state entering the chunk
  float *dSl = nullptr;   // [dk, dv] gradient of the state leaving the chunk
  float *Vp = nullptr;    // [C, dv]  V' = U - W S
  float *dVp = nullptr;   // [C, dv]
  float *KK = nullptr, *dT = nullptr, *TdT = nullptr, *Z = nullptr, *Pp = nullptr, *dMG = nullptr,
        *X = nullptr;                                   // [C, C]
  float *dW = nullptr, *PQ = nullptr, *RK = nullptr, *dKb = nullptr;  // [C, dk]
  float *dVb = nullptr;                                 // [C, dv]
  float *dq_vh = nullptr, *dk_vh = nullptr;             // [B*T, Hv, dk] per value head

  __device__ __host__ float* at(float* base, int64_t ch, int64_t per) const { return base + ch * per; }
};

// The plain fp32 chunked kernels (gdn_chunk.cu) and the parameter checks both paths share.
void check_forward_params(const GdnCudaForwardParams& p, const char* op);
void check_backward_params(const GdnCudaBackwardParams& p, const char* op);
void chunk_forward_simt(const GdnCudaForwardParams& p, cudaStream_t s);
void chunk_backward_simt(const GdnCudaBackwardParams& p, cudaStream_t s);
int64_t chunk_workspace_bytes_simt(const GdnCudaDims& d, bool backward);
// dst[r, kh] = bf16(sum over the value heads h of key head kh of src[r, h]) (fp32 [rows, Hv, dk]
// in, in a fixed order): dq and dk when Hv > Hk, for both paths' backward.
void sum_value_heads(const float* src, uint16_t* dst, int64_t ld_dst, int64_t rows, int64_t Hk, int64_t Hv,
                     int64_t dk, cudaStream_t s, const char* op);

}  // namespace dt::cuda
