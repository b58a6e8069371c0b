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
// rows in a fixed order (common.cuh's column sum: 32 lanes per column, then the lanes in order).
// Same inputs, same bits.
//
// The backward takes one sigmoid per element, s = sigmoid(z), with the math arranged so that no
// more values stay live across the two group sums than needed (o, c, b, w):
//   c = dy silu(z) = dy z s     b = dy w silu'(z) = dy w s (1 + z (1 - s))
//   r = 1 / sqrt(mean(o^2) + eps)     m = mean(dn n) = r mean(c w o)
//   d_o = r (c w - n m)    dz = b n    dw += c n        (n = o r)
// w is loaded once per lane. The sigmoid is the fast one: e^-|z| by __expf (ex2.approx) and
// 1 / (1 + e) by __fdividef (rcp.approx). Error bounds (CUDA guide): __expf 2 + floor(1.173 |z|)
// ulp, __fdividef 2 ulp, so s is within 2e-6 relative for |z| < 10; beyond, e's error weighs in s
// by e / (1 + e) < 5e-5 (z > 10), or s < 5e-5 itself (z < -10). Against the bf16 rounding of d_o
// and dz (2^-9 relative) that is noise. On the 16-byte path the kernel is software-pipelined: the
// next item's o, z, dy (raw bf16 vectors) load while this item's math runs, and the grid is one
// wave (at most kNormBwdWaveCtas CTAs, each a whole number of warp steps).
#include <algorithm>

#include "kernels/cuda/gdn_chunk.cuh"
#include "kernels/cuda/gdn_pointwise.cuh"

namespace dt::cuda {

namespace {

constexpr int kNormWarps = 8;            // warps per CTA
constexpr int kNormMaxElems = 8;         // features per lane: NV vectors of V
constexpr int kNormDimStep = 8;
constexpr int kNormMaxDim = 256;
constexpr int kNormMaxBlocks = 1024;     // partial rows of dw
// The pipelined backward's grid: 3 CTAs of 256 threads on each of the 132 SMs of an H100 / H200 (its
// __launch_bounds__ asks for 3). A constant, not the device's count, so that the split and dw's
// bits depend on the sizes only.
constexpr int kNormBwdWaveCtas = 132 * 3;

__device__ __forceinline__ float silu_f(float x) { return x * sigmoid_stable_f32(x); }

// sigmoid(x) without a branch and without e^|x|: e = e^-|x| in (0, 1], 1 / (1 + e) for x >= 0,
// e / (1 + e) below; ex2.approx and rcp.approx (__expf, __fdividef; see the top of the file).
__device__ __forceinline__ float sigmoid_nb(float x) {
  const float e = __expf(-fabsf(x));
  const float q = __fdividef(1.f, 1.f + e);
  return x >= 0.f ? q : e * q;
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
      if (on) load_bf16<V>(p.o + item * p.d + vec * V, ov[i]), load_bf16<V>(p.z + item * p.d + vec * V, zv[i]);
#pragma unroll
      for (int k = 0; k < V; ++k) ss += ov[i][k] * ov[i][k];
    }
    const float r = rsqrtf(group_sum(ss, l.G) / static_cast<float>(p.d) + p.eps);
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      const int vec = l.g + l.G * i;
      if (item >= items || vec >= l.nvec) continue;
      float wv[V], out[V];
      load_f32<V, false>(p.w + vec * V, wv);
#pragma unroll
      for (int k = 0; k < V; ++k) out[k] = ov[i][k] * r * wv[k] * silu_f(zv[i][k]);
      store_bf16<V>(p.y + item * p.d + vec * V, out);
    }
  }
}

// Raw bf16 vectors of one item's o, z, dy for one lane (zeros where the lane has nothing): what the
// pipelined kernel holds in flight, 3 x NV x 2V bytes.
template <int V, int NV>
struct NormRaw {
  typename Bf16Word<V>::type o[NV], z[NV], dy[NV];
};
template <int V, int NV>
__device__ __forceinline__ void norm_load_raw(NormRaw<V, NV>& x, const GdnCudaNormParams& p, const NormLane& l,
                                              int64_t item, int64_t last) {
  using Raw = typename Bf16Word<V>::type;
#pragma unroll
  for (int i = 0; i < NV; ++i) {
    const int vec = l.g + l.G * i;
    x.o[i] = Raw{}, x.z[i] = Raw{}, x.dy[i] = Raw{};
    if (item < last && vec < l.nvec) {
      const int64_t e = item * p.d + vec * V;
      x.o[i] = *reinterpret_cast<const Raw*>(p.o + e);
      x.z[i] = *reinterpret_cast<const Raw*>(p.z + e);
      x.dy[i] = *reinterpret_cast<const Raw*>(p.dy + e);
    }
  }
}
template <int V>
__device__ __forceinline__ void bf16_unpack(const typename Bf16Word<V>::type& raw, float (&f)[V]) {
  union {
    typename Bf16Word<V>::type raw;
    uint16_t h[V];
  } u;
  u.raw = raw;
#pragma unroll
  for (int k = 0; k < V; ++k) f[k] = bf16_bits_to_f32(u.h[k]);
}

// Pass 1: d_o, dz over the CTA's items [first, first + per_block), and partial[blockIdx.x][:] =
// their share of dw, summed per lane in item order, then over (warp, slot) in order. One sigmoid
// per element (see the top of the file). kPrefetch: the next item's loads in flight during this
// one's math.
template <int V, int NV, bool kPrefetch>
__global__ void __launch_bounds__(kNormWarps * 32, kPrefetch ? 3 : 1)
    gdn_norm_backward_one_sigmoid_kernel(GdnCudaNormParams p, float* partial, int64_t per_block) {
  __shared__ float red[kNormWarps][32][kNormMaxElems];
  const NormLane l = norm_lane<V>(p.d);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t items = p.rows * p.H, first = blockIdx.x * per_block;
  const int64_t last = first + per_block < items ? first + per_block : items;
  const int64_t stride = static_cast<int64_t>(kNormWarps) * l.per_warp;
  const float inv_d = 1.f / static_cast<float>(p.d);
  float wv[NV][V], dw[NV][V];
#pragma unroll
  for (int i = 0; i < NV; ++i) {
    const int vec = l.g + l.G * i;
#pragma unroll
    for (int k = 0; k < V; ++k) wv[i][k] = 0.f, dw[i][k] = 0.f;
    if (vec < l.nvec) load_f32<V, false>(p.w + vec * V, wv[i]);
  }
  int64_t base = first + warp * l.per_warp;
  NormRaw<V, NV> cur, next;
  if constexpr (kPrefetch) norm_load_raw(cur, p, l, base + l.slot, last);
  for (; base < last; base += stride) {
    const int64_t item = base + l.slot;
    if constexpr (kPrefetch)
      norm_load_raw(next, p, l, item + stride, last);
    else
      norm_load_raw(cur, p, l, item, last);
    float ov[NV][V], cv[NV][V], bv[NV][V], ss = 0.f, dot = 0.f;  // dot = sum c w o
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      float zv[V], dyv[V];
      bf16_unpack<V>(cur.o[i], ov[i]), bf16_unpack<V>(cur.z[i], zv), bf16_unpack<V>(cur.dy[i], dyv);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float z = zv[k], s = sigmoid_nb(z);
        cv[i][k] = dyv[k] * z * s;
        bv[i][k] = dyv[k] * wv[i][k] * (s * (1.f + z * (1.f - s)));
        ss += ov[i][k] * ov[i][k];
        dot += cv[i][k] * wv[i][k] * ov[i][k];
      }
    }
    const float r = rsqrtf(group_sum(ss, l.G) * inv_d + p.eps);
    const float m = r * (group_sum(dot, l.G) * inv_d);  // mean(dn n)
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      const int vec = l.g + l.G * i;
      if (item >= last || vec >= l.nvec) continue;
      float d_o[V], dz[V];
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float n = ov[i][k] * r;
        d_o[k] = r * (cv[i][k] * wv[i][k] - n * m);
        dz[k] = bv[i][k] * n;
        dw[i][k] += cv[i][k] * n;
      }
      const int64_t e = item * p.d + vec * V;
      store_bf16<V>(p.d_o + e, d_o), store_bf16<V>(p.dz + e, dz);
    }
    if constexpr (kPrefetch) cur = next;
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

bool aligned16(const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; }

void check_norm(const GdnCudaNormParams& p, const char* op) {
  DT_CHECK(p.d >= kNormDimStep && p.d % kNormDimStep == 0 && p.d <= kNormMaxDim,
           "{}: head dim {} must be a multiple of {} up to {} on the GPU", op, p.d, kNormDimStep, kNormMaxDim);
  DT_CHECK(p.rows >= 0 && p.H >= 1, "{}: bad sizes rows={} H={}", op, p.rows, p.H);
  DT_CHECK(p.eps > 0.f, "{}: eps must be positive, got {}", op, p.eps);
}

// Items per warp step for a head dim (as the kernels' norm_lane).
int64_t items_per_warp(int64_t d, int V) { return 32 / head_group_size(static_cast<int>(d / V)); }

// The 16-byte path pipelined (the next item's loads in flight, one wave of CTAs); the 1-feature
// fallback (misaligned tensors) spills when pipelined and is not.
template <int V, int NV>
void launch_norm_backward(unsigned blocks, const GdnCudaNormParams& p, float* partial, int64_t per_block,
                          cudaStream_t s) {
  gdn_norm_backward_one_sigmoid_kernel<V, NV, V != 1><<<blocks, kNormWarps * 32, 0, s>>>(p, partial, per_block);
}

}  // namespace

}  // namespace dt::cuda

namespace dt {

using namespace cuda;

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
  DT_CUDA_OK(cudaGetLastError(), op);
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
  // The split depends on the sizes only, so the summation order (and the bits) are fixed. The
  // 16-byte path: one wave of CTAs, each a whole number of warp steps (the last CTA fewer); the
  // 1-feature one: at least 4 warp steps per CTA, at most kNormMaxBlocks CTAs.
  const int64_t per_cta = kNormWarps * items_per_warp(p.d, vec ? 8 : 1);
  int64_t per_block = 0;
  if (vec) {
    const int64_t steps = (items + per_cta - 1) / per_cta;
    per_block = (steps + kNormBwdWaveCtas - 1) / kNormBwdWaveCtas * per_cta;
  } else {
    const int64_t want = std::min<int64_t>((items + 4 * per_cta - 1) / (4 * per_cta), kNormMaxBlocks);
    per_block = (items + want - 1) / want;
  }
  const int blocks = static_cast<int>((items + per_block - 1) / per_block);
  void* partial = nullptr;
  DT_CUDA_OK(scratch_malloc(&partial, static_cast<size_t>(blocks) * p.d * sizeof(float), p.pool, s), op);
  if (vec)
    launch_norm_backward<8, 1>(static_cast<unsigned>(blocks), p, static_cast<float*>(partial), per_block, s);
  else
    launch_norm_backward<1, kNormMaxElems>(static_cast<unsigned>(blocks), p, static_cast<float*>(partial), per_block,
                                           s);
  DT_CUDA_OK(cudaGetLastError(), op);
  // Pass 2: dw[f] += sum over the partial rows, common.cuh's column sum.
  const auto* partial_rows = static_cast<const float*>(partial);
  column_sum_add_kernel<int><<<column_sum_grid(p.d), kColumnSumThreads, 0, s>>>(p.dw, partial_rows, blocks, p.d);
  DT_CUDA_OK(cudaGetLastError(), op);
  DT_CUDA_OK(cudaFreeAsync(partial, s), op);
}

}  // namespace dt
