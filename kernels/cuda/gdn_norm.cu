// Gated RMSNorm of the GDN output on the GPU (reference: kernels/cpu/gdn_norm.h), per value head of
// d features, o, z, y bf16, w fp32:
//   r = 1 / sqrt(mean(o^2) + eps)    n = o r    y = n w silu(z)
// torch: (o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + eps)) * w * F.silu(z)
// Backward, dn = dy w silu(z):
//   d_o = r (dn - n mean(dn n))    dz = dy n w silu'(z)    dw += sum over rows and heads of dy n silu(z)
// One warp per (row, head); lane l holds the features f = l + 32 i < d (d a multiple of 8 up to 256:
// 16 and 48 are real GDN head dims, e.g. the golden Qwen3.5 files).
// dw is reduced without atomics in two passes: each CTA of the first pass sums its fixed range of
// (row, head) items in a fixed order into its own partial row, the second pass adds the partial
// rows in block order. Same inputs, same bits.
#include <algorithm>

#include "kernels/cuda/gdn_chunk.cuh"
#include "kernels/cuda/gdn_pointwise.cuh"

namespace dt {

using namespace gdn_cuda;

namespace {

constexpr int kNormWarps = 8;            // warps per CTA
constexpr int kNormMaxPer = 8;           // d <= 32 * 8
constexpr int kNormDimStep = 8;
constexpr int kNormMaxBlocks = 1024;     // partial rows of dw

__device__ __forceinline__ float silu_f(float x) { return x * sigmoid_f(x); }
__device__ __forceinline__ float silu_grad_f(float x) {
  const float s = sigmoid_f(x);
  return s * (1.f + x * (1.f - s));
}

__global__ void __launch_bounds__(kNormWarps * 32) gdn_norm_forward_kernel(GdnCudaNormParams p) {
  const int lane = threadIdx.x % 32;
  const int64_t items = p.rows * p.H;
  for (int64_t item = blockIdx.x * static_cast<int64_t>(kNormWarps) + threadIdx.x / 32; item < items;
       item += static_cast<int64_t>(gridDim.x) * kNormWarps) {
    const int64_t base = item * p.d + lane;
    float ov[kNormMaxPer], ss = 0.f;
#pragma unroll
    for (int i = 0; i < kNormMaxPer; ++i)
      if (lane + 32 * i < p.d) ov[i] = ld_bf16(p.o + base + 32 * i), ss += ov[i] * ov[i];
    const float r = rsqrtf(warp_sum(ss) / static_cast<float>(p.d) + p.eps);
#pragma unroll
    for (int i = 0; i < kNormMaxPer; ++i)
      if (lane + 32 * i < p.d)
        st_bf16(p.y + base + 32 * i, ov[i] * r * p.w[lane + 32 * i] * silu_f(ld_bf16(p.z + base + 32 * i)));
  }
}

// Pass 1: d_o, dz, and partial[blockIdx.x][:] = this CTA's share of dw.
__global__ void __launch_bounds__(kNormWarps * 32) gdn_norm_backward_kernel(GdnCudaNormParams p, float* partial,
                                                                            int64_t items_per_block) {
  __shared__ float red[kNormWarps][32 * kNormMaxPer];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t items = p.rows * p.H, first = blockIdx.x * items_per_block;
  const int64_t last = first + items_per_block < items ? first + items_per_block : items;
  float dw[kNormMaxPer] = {};
  for (int64_t item = first + warp; item < last; item += kNormWarps) {
    const int64_t base = item * p.d + lane;
    float ov[kNormMaxPer], zv[kNormMaxPer], dyv[kNormMaxPer], ss = 0.f;
#pragma unroll
    for (int i = 0; i < kNormMaxPer; ++i)
      if (lane + 32 * i < p.d) {
        const int64_t e = base + 32 * i;
        ov[i] = ld_bf16(p.o + e), zv[i] = ld_bf16(p.z + e), dyv[i] = ld_bf16(p.dy + e);
        ss += ov[i] * ov[i];
      }
    const float r = rsqrtf(warp_sum(ss) / static_cast<float>(p.d) + p.eps);
    float dot = 0.f;  // sum dn n
#pragma unroll
    for (int i = 0; i < kNormMaxPer; ++i)
      if (lane + 32 * i < p.d) dot += dyv[i] * p.w[lane + 32 * i] * silu_f(zv[i]) * ov[i] * r;
    const float mean_dn_n = warp_sum(dot) / static_cast<float>(p.d);
#pragma unroll
    for (int i = 0; i < kNormMaxPer; ++i)
      if (lane + 32 * i < p.d) {
        const float w = p.w[lane + 32 * i], n = ov[i] * r, gate = silu_f(zv[i]);
        st_bf16(p.d_o + base + 32 * i, r * (dyv[i] * w * gate - n * mean_dn_n));
        st_bf16(p.dz + base + 32 * i, dyv[i] * n * w * silu_grad_f(zv[i]));
        dw[i] += dyv[i] * n * gate;
      }
  }
#pragma unroll
  for (int i = 0; i < kNormMaxPer; ++i)
    if (lane + 32 * i < p.d) red[warp][lane + 32 * i] = dw[i];
  __syncthreads();
  for (int64_t f = threadIdx.x; f < p.d; f += blockDim.x) {
    float s = 0.f;
    for (int w = 0; w < kNormWarps; ++w) s += red[w][f];
    partial[blockIdx.x * p.d + f] = s;
  }
}

// Pass 2: dw[f] += sum over blocks of partial[b][f], in block order.
__global__ void gdn_norm_dw_kernel(const float* partial, int blocks, int64_t d, float* dw) {
  for (int64_t f = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; f < d;
       f += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float s = 0.f;
    for (int b = 0; b < blocks; ++b) s += partial[b * d + f];
    dw[f] += s;
  }
}

void check_norm(const GdnCudaNormParams& p, const char* op) {
  DT_CHECK(p.d >= kNormDimStep && p.d % kNormDimStep == 0 && p.d <= 32 * kNormMaxPer,
           "{}: head dim {} must be a multiple of {} up to {} on the GPU", op, p.d, kNormDimStep, 32 * kNormMaxPer);
  DT_CHECK(p.rows >= 0 && p.H >= 1, "{}: bad sizes rows={} H={}", op, p.rows, p.H);
  DT_CHECK(p.eps > 0.f, "{}: eps must be positive, got {}", op, p.eps);
}

}  // namespace

void gdn_norm_forward_cuda(const GdnCudaNormParams& p, void* stream) {
  const char* op = "gdn_norm_forward_cuda";
  check_norm(p, op);
  DT_CHECK(p.o && p.z && p.w && p.y, "{}: null tensor pointer (o, z, w, y)", op);
  const int64_t items = p.rows * p.H;
  if (items == 0) return;
  const int64_t blocks = std::min<int64_t>((items + kNormWarps - 1) / kNormWarps, 65535);
  gdn_norm_forward_kernel<<<static_cast<unsigned>(blocks), kNormWarps * 32, 0, static_cast<cudaStream_t>(stream)>>>(p);
  DT_GDN_CUDA_CHECK(cudaGetLastError(), op);
}

void gdn_norm_backward_cuda(const GdnCudaNormParams& p, void* stream) {
  const char* op = "gdn_norm_backward_cuda";
  check_norm(p, op);
  DT_CHECK(p.o && p.z && p.w && p.dy && p.d_o && p.dz && p.dw, "{}: null tensor pointer (o, z, w, dy, d_o, dz, dw)",
           op);
  const int64_t items = p.rows * p.H;
  if (items == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  // The split depends on the sizes only, so the summation order (and the bits) are fixed.
  const int64_t want = (items + 4 * kNormWarps - 1) / (4 * kNormWarps);
  const int blocks = static_cast<int>(std::min<int64_t>(want, kNormMaxBlocks));
  const int64_t per_block = (items + blocks - 1) / blocks;
  void* partial = nullptr;
  DT_GDN_CUDA_CHECK(cudaMallocAsync(&partial, static_cast<size_t>(blocks) * p.d * sizeof(float), s), op);
  gdn_norm_backward_kernel<<<static_cast<unsigned>(blocks), kNormWarps * 32, 0, s>>>(p, static_cast<float*>(partial),
                                                                                     per_block);
  DT_GDN_CUDA_CHECK(cudaGetLastError(), op);
  gdn_norm_dw_kernel<<<static_cast<unsigned>((p.d + 127) / 128), 128, 0, s>>>(static_cast<const float*>(partial), blocks,
                                                                           p.d, p.dw);
  DT_GDN_CUDA_CHECK(cudaGetLastError(), op);
  DT_GDN_CUDA_CHECK(cudaFreeAsync(partial, s), op);
}

}  // namespace dt
