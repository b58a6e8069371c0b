// The MLA fp8 latent cache's writes on the GPU (infer/cuda/decode_cuda.h latent_quantize): bf16
// latents quantised to e4m3 with one power-of-two fp32 scale per block of kFp8Block values, the
// format and the rule of core/fp8.h, so that the bytes equal the CPU's. The attention's reads are
// in decode_attention.cu.
#include <algorithm>
#include <cstdint>

#include "core/fp8.h"
#include "infer/cuda/decode_cuda.h"
#include "infer/cuda/fp8.cuh"
#include "kernels/cuda/common.cuh"

namespace dt::cuda {

namespace {

constexpr int kThreads = static_cast<int>(kFp8Block);  // a thread per value of a block
static_assert(kThreads % 32 == 0, "whole warps");

// CTA (r, b): row r's block b. The block's largest finite |x| (a warp max, then the warps'),
// its scale exponent from the bits (core/fp8.h), then each thread's value times 2^-e (exact) to
// e4m3; thread 0 writes the scale 2^e.
__global__ void __launch_bounds__(kThreads)
    latent_quantize_kernel(uint8_t* q, float* scales, const uint16_t* src, int64_t kvr, int64_t per, int64_t cap,
                           int64_t pos, const int32_t* pos_dev) {
  __shared__ float red[kThreads / 32];
  const int64_t r = blockIdx.x, b = blockIdx.y;
  const int tid = threadIdx.x;
  const float x = bf16_bits_to_f32(src[r * kvr + b * kFp8Block + tid]);
  const float a = fabsf(x);
  const float m = warp_max(isfinite(a) ? a : 0.f);
  if (tid % 32 == 0) red[tid / 32] = m;
  __syncthreads();
  float amax = red[0];
  for (int w = 1; w < kThreads / 32; ++w) amax = fmaxf(amax, red[w]);
  const int e = e4m3_scale_exponent(amax);
  int64_t p = pos_dev ? static_cast<int64_t>(*pos_dev) : pos;
  p = p < 0 ? 0 : (p > cap - per ? cap - per : p);
  const int64_t row = (r / per) * cap + p + r % per;
  q[row * kvr + b * kFp8Block + tid] = f32_to_e4m3_bits(x * fp8_exp2(-e));
  if (tid == 0) scales[row * (kvr / kFp8Block) + b] = fp8_exp2(e);
}

__global__ void e4m3_encode_kernel(uint8_t* out, const float* x, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = f32_to_e4m3_bits(x[i]);
}

}  // namespace

void latent_quantize(uint8_t* q, float* scales, const uint16_t* src, int64_t R, int64_t per, int64_t kvr, int64_t cap,
                     int64_t pos, const int32_t* pos_dev, void* stream) {
  const char* op = "latent_quantize (GPU)";
  DT_CHECK(q && scales && src, "{}: null tensor pointer", op);
  DT_CHECK(R >= 1 && per >= 1 && R % per == 0 && per <= cap && kvr >= kFp8Block && kvr % kFp8Block == 0 &&
               kvr / kFp8Block <= 65535 && R <= 0x7fffffff,
           "{}: bad sizes: {} rows ({} per sequence), width {} (a multiple of {}), capacity {}", op, R, per, kvr,
           kFp8Block, cap);
  const dim3 grid(static_cast<unsigned>(R), static_cast<unsigned>(kvr / kFp8Block));
  latent_quantize_kernel<<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(q, scales, src, kvr, per, cap, pos,
                                                                                   pos_dev);
  DT_CUDA_OK(cudaGetLastError(), op);
}

void e4m3_encode(uint8_t* out, const float* x, int64_t n, void* stream) {
  const char* op = "e4m3_encode (GPU)";
  DT_CHECK(out && x && n >= 0, "{}: null pointer or negative size", op);
  if (n == 0) return;
  const int threads = 256;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((n + threads - 1) / threads, 65535));
  e4m3_encode_kernel<<<blocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(out, x, n);
  DT_CUDA_OK(cudaGetLastError(), op);
}

}  // namespace dt::cuda
