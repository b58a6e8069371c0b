// Causal depthwise conv1d + SiLU on the GPU, forward and backward (math: kernels/cpu/gdn_conv.h):
//   u[b,t,c] = sum_{i<K} w[c,i] x[b, t-K+1+i, c]     y = silu(u)
//   du = dy silu'(u)      dx[b,s,c] = sum_i w[c,i] du[b, s+K-1-i, c]
//   dw[c,i] += sum_{b,t} du[b,t,c] x[b, t-K+1+i, c]
// One thread per output element (coalesced along c); du is recomputed where it is needed; dw in
// two fixed-order passes over segments of 64 rows (the first version's one thread per channel over
// all B*T rows took ~25 ms per layer at the 124M shape).
#include <algorithm>

#include "kernels/cuda/gdn_chunk.cuh"
#include "kernels/cuda/gdn_pointwise.cuh"

namespace dt {

using namespace gdn_cuda;

namespace {

constexpr int kMaxK = 8;

__device__ float conv_pre(const GdnCudaConvParams& p, int64_t b, int64_t t, int64_t c) {
  float u = 0.f;
  for (int64_t i = 0; i < p.K; ++i) {
    const int64_t s = t - p.K + 1 + i;
    if (s >= 0) u += p.w[c * p.K + i] * ld_bf16(p.x + (b * p.T + s) * p.C + c);
  }
  return u;
}

__device__ float conv_du(const GdnCudaConvParams& p, int64_t b, int64_t t, int64_t c) {
  const float u = conv_pre(p, b, t, c), s = sigmoid_f(u);
  return ld_bf16(p.dy + (b * p.T + t) * p.C + c) * s * (1.f + u * (1.f - s));
}

__global__ void gdn_conv_forward_kernel(GdnCudaConvParams p) {
  const int64_t n = p.B * p.T * p.C;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = e % p.C, t = (e / p.C) % p.T, b = e / (p.C * p.T);
    const float u = conv_pre(p, b, t, c);
    st_bf16(p.y + e, u * sigmoid_f(u));
  }
}

__global__ void gdn_conv_dx_kernel(GdnCudaConvParams p) {
  const int64_t n = p.B * p.T * p.C;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = e % p.C, s = (e / p.C) % p.T, b = e / (p.C * p.T);
    float acc = 0.f;
    for (int64_t i = 0; i < p.K; ++i) {
      const int64_t t = s + p.K - 1 - i;
      if (t < p.T) acc += p.w[c * p.K + i] * conv_du(p, b, t, c);
    }
    st_bf16(p.dx + e, acc);
  }
}

// One thread per channel c: all K taps at once, so du is computed once per (b, t).
// dw in two fixed-order passes (no atomics): partial[seg][c][i] sums kRowsPerSeg rows (b, t) of
// one segment per thread (threads of a block take adjacent channels: coalesced), then one thread
// per (c, i) adds the segments in order.
constexpr int64_t kRowsPerSeg = 64;

__global__ void gdn_conv_dw_partial_kernel(GdnCudaConvParams p, float* partial) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= p.C) return;
  const int64_t seg = blockIdx.y, rows = p.B * p.T;
  float acc[kMaxK] = {};
  const int64_t end = (seg + 1) * kRowsPerSeg < rows ? (seg + 1) * kRowsPerSeg : rows;
  for (int64_t r = seg * kRowsPerSeg; r < end; ++r) {
    const int64_t b = r / p.T, t = r % p.T;
    const float du = conv_du(p, b, t, c);
    for (int64_t i = 0; i < p.K; ++i) {
      const int64_t s = t - p.K + 1 + i;
      if (s >= 0) acc[i] += du * ld_bf16(p.x + (b * p.T + s) * p.C + c);
    }
  }
  for (int64_t i = 0; i < p.K; ++i) partial[(seg * p.C + c) * p.K + i] = acc[i];
}

__global__ void gdn_conv_dw_sum_kernel(GdnCudaConvParams p, const float* partial, int64_t segs) {
  const int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;  // c * K + i
  if (e >= p.C * p.K) return;
  float acc = 0.f;
  for (int64_t seg = 0; seg < segs; ++seg) acc += partial[seg * p.C * p.K + e];
  p.dw[e] += acc;
}

void check(const GdnCudaConvParams& p, const char* op) {
  DT_CHECK(p.K >= 1 && p.K <= kMaxK, "{}: kernel size {} must be in [1, {}] on the GPU", op, p.K, kMaxK);
  DT_CHECK(p.x && p.w, "{}: null x or w", op);
}

int blocks_for(int64_t n) { return static_cast<int>(std::min<int64_t>((n + 255) / 256, 65535)); }

}  // namespace

void gdn_conv_forward_cuda(const GdnCudaConvParams& p, void* stream) {
  const char* op = "gdn_conv_forward_cuda";
  check(p, op);
  DT_CHECK(p.y, "{}: null y", op);
  const int64_t n = p.B * p.T * p.C;
  if (n == 0) return;
  gdn_conv_forward_kernel<<<blocks_for(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(p);
  DT_GDN_CUDA_CHECK(cudaGetLastError(), op);
}

void gdn_conv_backward_cuda(const GdnCudaConvParams& p, void* stream) {
  const char* op = "gdn_conv_backward_cuda";
  check(p, op);
  DT_CHECK(p.dy && p.dx && p.dw, "{}: null dy, dx or dw", op);
  const int64_t n = p.B * p.T * p.C;
  if (n == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  gdn_conv_dx_kernel<<<blocks_for(n), 256, 0, s>>>(p);
  DT_GDN_CUDA_CHECK(cudaGetLastError(), op);
  const int64_t segs = (p.B * p.T + kRowsPerSeg - 1) / kRowsPerSeg;
  DT_CHECK(segs <= 65535, "{}: B*T = {} tokens is more than this kernel's grid takes ({})", op, p.B * p.T,
           65535 * kRowsPerSeg);
  float* partial = nullptr;
  DT_GDN_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&partial), segs * p.C * p.K * sizeof(float), s), op);
  gdn_conv_dw_partial_kernel<<<dim3(static_cast<unsigned>((p.C + 127) / 128), static_cast<unsigned>(segs)), 128, 0,
                               s>>>(p, partial);
  DT_GDN_CUDA_CHECK(cudaGetLastError(), op);
  gdn_conv_dw_sum_kernel<<<static_cast<unsigned>((p.C * p.K + 255) / 256), 256, 0, s>>>(p, partial, segs);
  DT_GDN_CUDA_CHECK(cudaGetLastError(), op);
  DT_GDN_CUDA_CHECK(cudaFreeAsync(partial, s), op);
}

}  // namespace dt
