// Causal depthwise conv1d + SiLU on the GPU, forward and backward (math: kernels/cpu/gdn_conv.h):
//   u[b,t,c] = sum_{i<K} w[c,i] x[b, t-K+1+i, c]     y = silu(u)
//   du = dy silu'(u)      dx[b,s,c] = sum_i w[c,i] du[b, s+K-1-i, c]
//   dw[c,i] += sum_{b,t} du[b,t,c] x[b, t-K+1+i, c]
// Memory-bound: every kernel streams its tensors once. A warp owns one segment of R consecutive
// rows t of one sequence b and 32 V adjacent channels (V = 2: one 4-byte bf16x2 access per lane
// and row, coalesced along c; V = 1 when C is odd or a pointer is not 4-byte aligned). Each lane
// walks its segment in order, keeping the last K inputs (and in the backward the last K du's) in
// registers (K a template parameter, 1..8), so the forward costs 1 load + 1 store per element and
// the backward 2 loads + 1 store, plus K-1 rows of halo per segment (mostly L2 hits).
// The backward is one pass: du is computed once per (b, t, c) -- for the segment's own rows and the
// K-1 rows of look-ahead its dx needs -- and the dw sums of the segment's own rows stay in
// registers. dw is reduced without atomics: the 8 warps of a CTA take 8 consecutive segments of the
// same channels and add their sums in warp order into partial[group][c][i]; a second kernel adds
// the groups in order. The split depends on the sizes only: same inputs, same bits.
// dx must not alias x or dy (a lane reads the next segment's x and dy rows).
#include <algorithm>
#include <type_traits>

#include "kernels/cuda/gdn_chunk.cuh"
#include "kernels/cuda/gdn_pointwise.cuh"

namespace dt::cuda {

namespace {

constexpr int kMaxK = 8;
constexpr int kConvWarps = 8;          // segments per CTA (one per warp), consecutive in t
constexpr int64_t kForwardRows = 32;   // R of the forward: more, shorter segments fill the GPU
constexpr int64_t kBackwardRows = 64;  // R of the backward: fewer dw partials
// Rows whose loads are issued together before their math (memory parallelism per lane).
constexpr int kForwardUnroll = 8;
constexpr int kBackwardUnroll = 4;

// V adjacent bf16 values travel as one raw word (4 bytes for V = 2, 2 for V = 1), unpacked to fp32
// only when used, so a row in flight costs one register.
template <int V>
__device__ __forceinline__ uint32_t load_raw(const uint16_t* __restrict__ p) {
  if constexpr (V == 2) return *reinterpret_cast<const uint32_t*>(p);
  else return *p;
}
template <int V>
__device__ __forceinline__ float unpack(uint32_t raw, int v) {
  return bf16_bits_to_f32(static_cast<uint16_t>(v == 0 ? raw & 0xffffu : raw >> 16));
}
template <int V>
__device__ __forceinline__ void store_vec(uint16_t* __restrict__ p, const float (&f)[V]) {
  if constexpr (V == 2) {
    *reinterpret_cast<uint32_t*>(p) =
        static_cast<uint32_t>(f32_to_bf16_bits(f[0])) | (static_cast<uint32_t>(f32_to_bf16_bits(f[1])) << 16);
  } else {
    st_bf16(p, f[0]);
  }
}

// sigmoid without a branch: e^-u overflowing to inf gives 1/inf = 0, as it should. __expf's few-ulp
// error is far below the bf16 rounding of the outputs.
__device__ __forceinline__ float conv_sigmoid(float u) { return 1.f / (1.f + __expf(-u)); }

// Where a lane works: sequence b, rows [t0, t0 + n) (n <= 0: none), channels c .. c+V-1 (c >= C:
// none). CTA (blockIdx.x = b * groups + g, blockIdx.y = channel block); warp w takes segment
// g * kConvWarps + w of sequence b.
struct ConvLane {
  int64_t b, t0, c;
  int n;
  bool active;
};
template <int V>
__device__ __forceinline__ ConvLane conv_lane(const GdnCudaConvParams& p, int64_t rows_per_seg) {
  const int64_t segs = (p.T + rows_per_seg - 1) / rows_per_seg;
  const int64_t groups = (segs + kConvWarps - 1) / kConvWarps;
  ConvLane l;
  l.b = blockIdx.x / groups;
  const int64_t seg = (blockIdx.x % groups) * kConvWarps + threadIdx.x / 32;
  l.t0 = seg * rows_per_seg;
  l.n = static_cast<int>(l.t0 + rows_per_seg < p.T ? rows_per_seg : p.T - l.t0);
  l.c = (static_cast<int64_t>(blockIdx.y) * 32 + threadIdx.x % 32) * V;
  l.active = l.n > 0 && l.c < p.C;
  return l;
}

// The K-1 inputs before row t0 (zero before t = 0) into xw[1 .. K-1].
template <int K, int V>
__device__ __forceinline__ void load_halo(const uint16_t* __restrict__ x, int64_t t0, int64_t C, float (&xw)[K][V]) {
#pragma unroll
  for (int i = 1; i < K; ++i) {
    const int64_t s = t0 - K + i;
    const uint32_t raw = s >= 0 ? load_raw<V>(x + s * C) : 0u;  // +0.0 bf16 bits
#pragma unroll
    for (int v = 0; v < V; ++v) xw[i][v] = unpack<V>(raw, v);
  }
}

// One forward row: slide the window by the new input, y = silu(sum_i w[i] xw[i]).
template <int K, int V>
__device__ __forceinline__ void forward_row(const float (&w)[K][V], float (&xw)[K][V], uint32_t raw,
                                            uint16_t* __restrict__ y) {
  float out[V];
#pragma unroll
  for (int v = 0; v < V; ++v) {
#pragma unroll
    for (int i = 0; i + 1 < K; ++i) xw[i][v] = xw[i + 1][v];
    xw[K - 1][v] = unpack<V>(raw, v);
    float u = 0.f;
#pragma unroll
    for (int i = 0; i < K; ++i) u += w[i][v] * xw[i][v];
    out[v] = u * conv_sigmoid(u);
  }
  store_vec<V>(y, out);
}

template <int K, int V>
__global__ void __launch_bounds__(kConvWarps * 32) gdn_conv_forward_kernel(GdnCudaConvParams p) {
  const ConvLane l = conv_lane<V>(p, kForwardRows);
  if (!l.active) return;
  const int64_t C = p.C;
  const uint16_t* __restrict__ x = p.x + (l.b * p.T + l.t0) * C + l.c;  // row t0
  uint16_t* __restrict__ y = p.y + (l.b * p.T + l.t0) * C + l.c;
  float w[K][V], xw[K][V];  // xw[i] = x[t-K+1+i] once row t is in
#pragma unroll
  for (int v = 0; v < V; ++v)
#pragma unroll
    for (int i = 0; i < K; ++i) w[i][v] = p.w[(l.c + v) * K + i];
  load_halo<K, V>(p.x + l.b * p.T * C + l.c, l.t0, C, xw);
  const int ldc = static_cast<int>(C);  // offsets within a segment fit 32 bits (launcher checks)
  int r = 0;
  for (; r + kForwardUnroll <= l.n; r += kForwardUnroll) {  // whole groups: all loads first
    uint32_t raw[kForwardUnroll];
#pragma unroll
    for (int j = 0; j < kForwardUnroll; ++j) raw[j] = load_raw<V>(x + (r + j) * ldc);
#pragma unroll
    for (int j = 0; j < kForwardUnroll; ++j) forward_row<K, V>(w, xw, raw[j], y + (r + j) * ldc);
  }
  for (; r < l.n; ++r) forward_row<K, V>(w, xw, load_raw<V>(x + r * ldc), y + r * ldc);
}

// One backward step at row t = t0 + r of the walk over [t0, t0 + n + K - 1):
//   du(t) from the x window (0 when t >= T: no row), dw += du(t) x[t-K+1+i] for the own rows r < n,
//   dx(t - K + 1) = sum_i w[i] du(t - i) once t - K + 1 >= t0.
template <int K, int V>
__device__ __forceinline__ void backward_row(const float (&w)[K][V], float (&xw)[K][V], float (&duw)[K][V],
                                             float (&dw)[K][V], uint32_t x_raw, uint32_t dy_raw, bool has_row,
                                             bool own, bool emit, uint16_t* __restrict__ dx) {
  float out[V];
#pragma unroll
  for (int v = 0; v < V; ++v) {
#pragma unroll
    for (int i = 0; i + 1 < K; ++i) xw[i][v] = xw[i + 1][v], duw[i][v] = duw[i + 1][v];
    xw[K - 1][v] = unpack<V>(x_raw, v);
    float u = 0.f;
#pragma unroll
    for (int i = 0; i < K; ++i) u += w[i][v] * xw[i][v];
    const float sg = conv_sigmoid(u);
    const float du = has_row ? unpack<V>(dy_raw, v) * sg * (1.f + u * (1.f - sg)) : 0.f;
    duw[K - 1][v] = du;
    if (own) {
#pragma unroll
      for (int i = 0; i < K; ++i) dw[i][v] += du * xw[i][v];
    }
    float acc = 0.f;
#pragma unroll
    for (int i = 0; i < K; ++i) acc += w[i][v] * duw[K - 1 - i][v];
    out[v] = acc;
  }
  if (emit) store_vec<V>(dx, out);
}

template <int K, int V>
__global__ void __launch_bounds__(kConvWarps * 32, K <= 4 ? 4 : 2) gdn_conv_backward_kernel(GdnCudaConvParams p, float* partial) {
  __shared__ float red[kConvWarps][32 * V * K];
  const ConvLane l = conv_lane<V>(p, kBackwardRows);
  float dw[K][V];
#pragma unroll
  for (int i = 0; i < K; ++i)
#pragma unroll
    for (int v = 0; v < V; ++v) dw[i][v] = 0.f;
  if (l.active) {
    const int64_t C = p.C, row0 = (l.b * p.T + l.t0) * C + l.c;  // row t0
    const uint16_t* __restrict__ x = p.x + row0;
    const uint16_t* __restrict__ dy = p.dy + row0;
    uint16_t* __restrict__ dx = p.dx + row0;  // walk step r writes dx of row t0 + r - (K - 1)
    float w[K][V], xw[K][V], duw[K][V];  // duw[j] = du[t-K+1+j] after step t (0 before t0: unused)
#pragma unroll
    for (int v = 0; v < V; ++v)
#pragma unroll
      for (int i = 0; i < K; ++i) w[i][v] = p.w[(l.c + v) * K + i], duw[i][v] = 0.f;
    load_halo<K, V>(p.x + l.b * p.T * C + l.c, l.t0, C, xw);
    const int walk = l.n + K - 1;
    const int have = static_cast<int>(p.T - l.t0 < walk ? p.T - l.t0 : walk);  // steps with a row
    const int ldc = static_cast<int>(C);  // offsets within a segment fit 32 bits (launcher checks)
    int r = 0;
    for (; r + kBackwardUnroll <= have; r += kBackwardUnroll) {  // whole groups of rows: loads first
      uint32_t xr[kBackwardUnroll], dyr[kBackwardUnroll];
#pragma unroll
      for (int j = 0; j < kBackwardUnroll; ++j)
        xr[j] = load_raw<V>(x + (r + j) * ldc), dyr[j] = load_raw<V>(dy + (r + j) * ldc);
#pragma unroll
      for (int j = 0; j < kBackwardUnroll; ++j)
        backward_row<K, V>(w, xw, duw, dw, xr[j], dyr[j], true, r + j < l.n, r + j >= K - 1,
                           dx + (r + j - (K - 1)) * ldc);
    }
    for (; r < walk; ++r) {
      const bool has_row = r < have;
      const uint32_t xr = has_row ? load_raw<V>(x + r * ldc) : 0u, dyr = has_row ? load_raw<V>(dy + r * ldc) : 0u;
      backward_row<K, V>(w, xw, duw, dw, xr, dyr, has_row, r < l.n, r >= K - 1, dx + (r - (K - 1)) * ldc);
    }
  }
  // This CTA's dw: the warps' sums added in warp order; red[w][(lane V + v) K + i].
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int v = 0; v < V; ++v)
#pragma unroll
    for (int i = 0; i < K; ++i) red[warp][(lane * V + v) * K + i] = dw[i][v];
  __syncthreads();
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * 32 * V;
  for (int e = threadIdx.x; e < 32 * V * K; e += blockDim.x) {
    if (c0 + e / K >= p.C) break;
    float s = 0.f;
    for (int w = 0; w < kConvWarps; ++w) s += red[w][e];
    partial[static_cast<int64_t>(blockIdx.x) * p.C * K + c0 * K + e] = s;
  }
}

// dw[c, i] += sum over groups 0, 1, ... of partial[group][c][i].
__global__ void gdn_conv_dw_sum_kernel(GdnCudaConvParams p, const float* partial, int64_t groups) {
  const int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;  // c * K + i
  if (e >= p.C * p.K) return;
  const int64_t stride = p.C * p.K;
  float acc = 0.f;
  int64_t g = 0;
  for (; g + 4 <= groups; g += 4) {  // four loads in flight, the adds in order
    const float a = partial[g * stride + e], b = partial[(g + 1) * stride + e];
    const float c = partial[(g + 2) * stride + e], d = partial[(g + 3) * stride + e];
    acc += a, acc += b, acc += c, acc += d;
  }
  for (; g < groups; ++g) acc += partial[g * stride + e];
  p.dw[e] += acc;
}

void check(const GdnCudaConvParams& p, const char* op) {
  DT_CHECK(p.K >= 1 && p.K <= kMaxK, "{}: kernel size {} must be in [1, {}] on the GPU", op, p.K, kMaxK);
  DT_CHECK(p.B >= 0 && p.T >= 0 && p.C >= 0, "{}: bad sizes B={} T={} C={}", op, p.B, p.T, p.C);
  DT_CHECK((kBackwardRows + kMaxK) * p.C < (int64_t{1} << 31), "{}: {} channels are more than the kernels take ({})",
           op, p.C, (int64_t{1} << 31) / (kBackwardRows + kMaxK));
  DT_CHECK(p.x && p.w, "{}: null x or w", op);
}

bool aligned4(const void* q) { return reinterpret_cast<uintptr_t>(q) % 4 == 0; }

// CTAs: x = (b, group of kConvWarps segments), y = block of 32 V channels.
dim3 conv_grid(const GdnCudaConvParams& p, int64_t rows_per_seg, int V, const char* op) {
  const int64_t segs = (p.T + rows_per_seg - 1) / rows_per_seg;
  const int64_t groups = p.B * ((segs + kConvWarps - 1) / kConvWarps);
  const int64_t cblocks = (p.C + 32 * V - 1) / (32 * V);
  DT_CHECK(groups <= 0x7fffffff && cblocks <= 65535, "{}: B={} T={} C={} exceed the kernel's grid", op, p.B, p.T,
           p.C);
  return dim3(static_cast<unsigned>(groups), static_cast<unsigned>(cblocks));
}

// Runtime K (1..8) and V (1, 2) -> template arguments, in one place.
template <template <int, int> class F, class... A>
void dispatch(int64_t K, bool vec, A&&... a) {
  auto go = [&](auto k) {
    if (vec) F<decltype(k)::value, 2>::run(a...);
    else F<decltype(k)::value, 1>::run(a...);
  };
  switch (K) {
    case 1: go(std::integral_constant<int, 1>{}); break;
    case 2: go(std::integral_constant<int, 2>{}); break;
    case 3: go(std::integral_constant<int, 3>{}); break;
    case 4: go(std::integral_constant<int, 4>{}); break;
    case 5: go(std::integral_constant<int, 5>{}); break;
    case 6: go(std::integral_constant<int, 6>{}); break;
    case 7: go(std::integral_constant<int, 7>{}); break;
    default: go(std::integral_constant<int, 8>{}); break;
  }
}

template <int K, int V>
struct ForwardLaunch {
  static void run(const GdnCudaConvParams& p, dim3 grid, cudaStream_t s) {
    gdn_conv_forward_kernel<K, V><<<grid, kConvWarps * 32, 0, s>>>(p);
  }
};
template <int K, int V>
struct BackwardLaunch {
  static void run(const GdnCudaConvParams& p, dim3 grid, cudaStream_t s, float* partial) {
    gdn_conv_backward_kernel<K, V><<<grid, kConvWarps * 32, 0, s>>>(p, partial);
  }
};

}  // namespace

}  // namespace dt::cuda

namespace dt {

using namespace cuda;

void gdn_conv_forward_cuda(const GdnCudaConvParams& p, void* stream) {
  const char* op = "gdn_conv_forward_cuda";
  check(p, op);
  DT_CHECK(p.y, "{}: null y", op);
  if (p.B * p.T * p.C == 0) return;
  const bool vec = p.C % 2 == 0 && aligned4(p.x) && aligned4(p.y);
  const dim3 grid = conv_grid(p, kForwardRows, vec ? 2 : 1, op);
  dispatch<ForwardLaunch>(p.K, vec, p, grid, static_cast<cudaStream_t>(stream));
  DT_CUDA_OK(cudaGetLastError(), op);
}

void gdn_conv_backward_cuda(const GdnCudaConvParams& p, void* stream) {
  const char* op = "gdn_conv_backward_cuda";
  check(p, op);
  DT_CHECK(p.dy && p.dx && p.dw, "{}: null dy, dx or dw", op);
  DT_CHECK(p.dx != p.dy && p.dx != p.x, "{}: dx must not alias dy or x (the kernel reads rows ahead)", op);
  if (p.B * p.T * p.C == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  const bool vec = p.C % 2 == 0 && aligned4(p.x) && aligned4(p.dy) && aligned4(p.dx);
  const dim3 grid = conv_grid(p, kBackwardRows, vec ? 2 : 1, op);
  const int64_t groups = grid.x;
  float* partial = nullptr;
  DT_CUDA_OK(scratch_malloc(reinterpret_cast<void**>(&partial), groups * p.C * p.K * sizeof(float), p.pool, s), op);
  dispatch<BackwardLaunch>(p.K, vec, p, grid, s, partial);
  DT_CUDA_OK(cudaGetLastError(), op);
  gdn_conv_dw_sum_kernel<<<static_cast<unsigned>((p.C * p.K + 255) / 256), 256, 0, s>>>(p, partial, groups);
  DT_CUDA_OK(cudaGetLastError(), op);
  DT_CUDA_OK(cudaFreeAsync(partial, s), op);
}

}  // namespace dt
