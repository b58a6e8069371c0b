// Gated RMSNorm of the GDN output on the GPU (reference: kernels/cpu/gdn_norm.h), per value head of
// d features, o, z, y bf16, w fp32:
//   r = 1 / sqrt(mean(o^2) + eps)    n = o r    y = n w silu(z)
// torch: (o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + eps)) * w * F.silu(z)
// Backward, dn = dy w silu(z):
//   d_o = r (dn - n mean(dn n))    dz = dy n w silu'(z)    dw += sum over rows and heads of dy n silu(z)
// A group of G lanes per (row, head) item (gdn_pointwise.cuh): with 16-byte alignment each lane
// holds 8 consecutive features (one 16-byte access per tensor; d = 64: 8 lanes, 4 items per warp),
// else 1 feature at a time (features g, g + G, ...; d a multiple of 8 up to 256: 16 and 48 are real
// GDN head dims, e.g. the golden Qwen3.5 files).
// dw is reduced without atomics in two passes: each CTA of the first pass sums its fixed range of
// (row, head) items in a fixed order into its own partial row, the second pass adds the partial
// rows in a fixed order (32 lanes per column, then the lanes in order). Same inputs, same bits.
#include <algorithm>

#include "kernels/cuda/gdn_chunk.cuh"
#include "kernels/cuda/gdn_pointwise.cuh"

namespace dt {

using namespace gdn_cuda;

namespace {

constexpr int kNormWarps = 8;            // warps per CTA
constexpr int kNormMaxElems = 8;         // features per lane: NV vectors of V
constexpr int kNormDimStep = 8;
constexpr int kNormMaxDim = 256;
constexpr int kNormMaxBlocks = 1024;     // partial rows of dw

__device__ __forceinline__ float silu_f(float x) { return x * sigmoid_f(x); }
__device__ __forceinline__ float silu_grad_f(float x) {
  const float s = sigmoid_f(x);
  return s * (1.f + x * (1.f - s));
}

// Where a lane sits: its group of G lanes takes item (first item of the warp's step) + slot; the
// lane holds vectors g + G i (i < NV) of V features when they are < nvec.
struct NormLane {
  int nvec, G, per_warp, slot, g;
};
template <int V>
__device__ __forceinline__ NormLane norm_lane(int64_t d) {
  NormLane l;
  l.nvec = static_cast<int>(d / V);
  l.G = head_group_size(l.nvec);
  l.per_warp = 32 / l.G;
  const int lane = threadIdx.x % 32;
  l.slot = lane / l.G, l.g = lane % l.G;
  return l;
}

template <int V, int NV>
__global__ void __launch_bounds__(kNormWarps * 32) gdn_norm_forward_kernel(GdnCudaNormParams p) {
  const NormLane l = norm_lane<V>(p.d);
  const int64_t items = p.rows * p.H, step = static_cast<int64_t>(gridDim.x) * kNormWarps * l.per_warp;
  for (int64_t base = (blockIdx.x * static_cast<int64_t>(kNormWarps) + threadIdx.x / 32) * l.per_warp; base < items;
       base += step) {  // uniform over the warp: every lane reaches the group sums
    const int64_t item = base + l.slot;
    float ov[NV][V], zv[NV][V], ss = 0.f;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      const int vec = l.g + l.G * i;
      const bool on = item < items && vec < l.nvec;
#pragma unroll
      for (int k = 0; k < V; ++k) ov[i][k] = 0.f, zv[i][k] = 0.f;
      if (on) load_bf16v<V>(p.o + item * p.d + vec * V, ov[i]), load_bf16v<V>(p.z + item * p.d + vec * V, zv[i]);
#pragma unroll
      for (int k = 0; k < V; ++k) ss += ov[i][k] * ov[i][k];
    }
    const float r = rsqrtf(group_sum(ss, l.G) / static_cast<float>(p.d) + p.eps);
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      const int vec = l.g + l.G * i;
      if (item >= items || vec >= l.nvec) continue;
      float wv[V], out[V];
      load_f32v<V>(p.w + vec * V, wv);
#pragma unroll
      for (int k = 0; k < V; ++k) out[k] = ov[i][k] * r * wv[k] * silu_f(zv[i][k]);
      store_bf16v<V>(p.y + item * p.d + vec * V, out);
    }
  }
}

// Pass 1: d_o, dz over the CTA's items [first, first + per_block), and partial[blockIdx.x][:] =
// their share of dw, summed per lane in item order, then over (warp, slot) in order.
template <int V, int NV>
__global__ void __launch_bounds__(kNormWarps * 32) gdn_norm_backward_kernel(GdnCudaNormParams p, float* partial,
                                                                            int64_t per_block) {
  __shared__ float red[kNormWarps][32][kNormMaxElems];
  const NormLane l = norm_lane<V>(p.d);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t items = p.rows * p.H, first = blockIdx.x * per_block;
  const int64_t last = first + per_block < items ? first + per_block : items;
  float dw[NV][V];
#pragma unroll
  for (int i = 0; i < NV; ++i)
#pragma unroll
    for (int k = 0; k < V; ++k) dw[i][k] = 0.f;
  for (int64_t base = first + warp * l.per_warp; base < last; base += kNormWarps * l.per_warp) {
    const int64_t item = base + l.slot;
    float ov[NV][V], zv[NV][V], dyv[NV][V], wv[NV][V], ss = 0.f;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      const int vec = l.g + l.G * i;
      const bool on = item < last && vec < l.nvec;
#pragma unroll
      for (int k = 0; k < V; ++k) ov[i][k] = 0.f, zv[i][k] = 0.f, dyv[i][k] = 0.f, wv[i][k] = 0.f;
      if (on) {
        const int64_t e = item * p.d + vec * V;
        load_bf16v<V>(p.o + e, ov[i]), load_bf16v<V>(p.z + e, zv[i]), load_bf16v<V>(p.dy + e, dyv[i]);
        load_f32v<V>(p.w + vec * V, wv[i]);
      }
#pragma unroll
      for (int k = 0; k < V; ++k) ss += ov[i][k] * ov[i][k];
    }
    const float r = rsqrtf(group_sum(ss, l.G) / static_cast<float>(p.d) + p.eps);
    float dot = 0.f;  // sum dn n, dn = dy w silu(z)
#pragma unroll
    for (int i = 0; i < NV; ++i)
#pragma unroll
      for (int k = 0; k < V; ++k) dot += dyv[i][k] * wv[i][k] * silu_f(zv[i][k]) * ov[i][k] * r;
    const float mean_dn_n = group_sum(dot, l.G) / static_cast<float>(p.d);
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      const int vec = l.g + l.G * i;
      if (item >= last || vec >= l.nvec) continue;
      float d_o[V], dz[V];
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float n = ov[i][k] * r, gate = silu_f(zv[i][k]);
        d_o[k] = r * (dyv[i][k] * wv[i][k] * gate - n * mean_dn_n);
        dz[k] = dyv[i][k] * n * wv[i][k] * silu_grad_f(zv[i][k]);
        dw[i][k] += dyv[i][k] * n * gate;
      }
      const int64_t e = item * p.d + vec * V;
      store_bf16v<V>(p.d_o + e, d_o), store_bf16v<V>(p.dz + e, dz);
    }
  }
#pragma unroll
  for (int i = 0; i < NV; ++i)
#pragma unroll
    for (int k = 0; k < V; ++k) red[warp][lane][i * V + k] = dw[i][k];
  __syncthreads();
  for (int64_t f = threadIdx.x; f < p.d; f += blockDim.x) {
    const int vec = static_cast<int>(f / V), k = static_cast<int>(f % V), g = vec % l.G, i = vec / l.G;
    float s = 0.f;
    for (int w = 0; w < kNormWarps; ++w)
      for (int slot = 0; slot < l.per_warp; ++slot) s += red[w][slot * l.G + g][i * V + k];
    partial[blockIdx.x * p.d + f] = s;
  }
}

// Pass 2: dw[f] += sum over blocks of partial[b][f]. CTA of 32 columns x 32 row lanes: lane j sums
// rows j, j + 32, ... in order, then the 32 lane sums are added in order (fixed for given sizes).
constexpr int kDwLanes = 32;
__global__ void __launch_bounds__(32 * kDwLanes) gdn_norm_dw_kernel(const float* partial, int blocks, int64_t d,
                                                                    float* dw) {
  __shared__ float red[kDwLanes][33];
  const int col = threadIdx.x % 32, j = threadIdx.x / 32;
  const int64_t f = blockIdx.x * 32 + col;
  float s = 0.f;
  if (f < d)
    for (int b = j; b < blocks; b += kDwLanes) s += partial[b * d + f];
  red[j][col] = s;
  __syncthreads();
  if (j == 0 && f < d) {
    float t = 0.f;
    for (int jj = 0; jj < kDwLanes; ++jj) t += red[jj][col];
    dw[f] += t;
  }
}

bool aligned16(const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; }

void check_norm(const GdnCudaNormParams& p, const char* op) {
  DT_CHECK(p.d >= kNormDimStep && p.d % kNormDimStep == 0 && p.d <= kNormMaxDim,
           "{}: head dim {} must be a multiple of {} up to {} on the GPU", op, p.d, kNormDimStep, kNormMaxDim);
  DT_CHECK(p.rows >= 0 && p.H >= 1, "{}: bad sizes rows={} H={}", op, p.rows, p.H);
  DT_CHECK(p.eps > 0.f, "{}: eps must be positive, got {}", op, p.eps);
}

// Items per warp step for a head dim (as the kernels' norm_lane).
int64_t items_per_warp(int64_t d, int V) { return 32 / head_group_size(static_cast<int>(d / V)); }

}  // namespace

void gdn_norm_forward_cuda(const GdnCudaNormParams& p, void* stream) {
  const char* op = "gdn_norm_forward_cuda";
  check_norm(p, op);
  DT_CHECK(p.o && p.z && p.w && p.y, "{}: null tensor pointer (o, z, w, y)", op);
  const int64_t items = p.rows * p.H;
  if (items == 0) return;
  const bool vec = aligned16(p.o) && aligned16(p.z) && aligned16(p.y) && aligned16(p.w);
  const int64_t per_cta = kNormWarps * items_per_warp(p.d, vec ? 8 : 1);
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((items + per_cta - 1) / per_cta, 132 * 64));
  auto s = static_cast<cudaStream_t>(stream);
  if (vec)
    gdn_norm_forward_kernel<8, 1><<<blocks, kNormWarps * 32, 0, s>>>(p);
  else
    gdn_norm_forward_kernel<1, kNormMaxElems><<<blocks, kNormWarps * 32, 0, s>>>(p);
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
  const bool vec = aligned16(p.o) && aligned16(p.z) && aligned16(p.w) && aligned16(p.dy) && aligned16(p.d_o) &&
                   aligned16(p.dz);
  // The split depends on the sizes only, so the summation order (and the bits) are fixed.
  const int64_t per_cta = kNormWarps * items_per_warp(p.d, vec ? 8 : 1);
  const int64_t want = (items + 4 * per_cta - 1) / (4 * per_cta);
  const int blocks = static_cast<int>(std::min<int64_t>(want, kNormMaxBlocks));
  const int64_t per_block = (items + blocks - 1) / blocks;
  void* partial = nullptr;
  DT_GDN_CUDA_CHECK(cudaMallocAsync(&partial, static_cast<size_t>(blocks) * p.d * sizeof(float), s), op);
  if (vec)
    gdn_norm_backward_kernel<8, 1><<<static_cast<unsigned>(blocks), kNormWarps * 32, 0, s>>>(
        p, static_cast<float*>(partial), per_block);
  else
    gdn_norm_backward_kernel<1, kNormMaxElems><<<static_cast<unsigned>(blocks), kNormWarps * 32, 0, s>>>(
        p, static_cast<float*>(partial), per_block);
  DT_GDN_CUDA_CHECK(cudaGetLastError(), op);
  gdn_norm_dw_kernel<<<static_cast<unsigned>((p.d + 31) / 32), 32 * kDwLanes, 0, s>>>(static_cast<const float*>(partial),
                                                                                    blocks, p.d, p.dw);
  DT_GDN_CUDA_CHECK(cudaGetLastError(), op);
  DT_GDN_CUDA_CHECK(cudaFreeAsync(partial, s), op);
}

}  // namespace dt
