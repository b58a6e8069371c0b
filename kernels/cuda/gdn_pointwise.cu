// GDN pointwise ops on the GPU: per-head q/k l2norm and the gates, forward and backward.
// Math as the CPU references kernels/cpu/gdn_l2norm.h and kernels/cpu/gdn_gates.h:
//   l2norm:  y = s x r,  r = 1/sqrt(sum x^2 + 1e-6);   dx = s r (dy - x^ (x^ . dy)),  x^ = x r
//            (or x^ = y / s with r saved by the forward: the chunk's backward runs it so)
//   gates:   g = -exp(A_log) softplus(a + dt_bias),  beta = sigmoid(b)
//            da = -dg exp(A_log) sigmoid(a + dt_bias),  db = dbeta beta (1 - beta)
//            dA_log += sum dg g,  ddt_bias += sum da       (per head, fixed order)
#include <algorithm>

#include "kernels/cuda/gdn_chunk.cuh"
#include "kernels/cuda/gdn_mma.cuh"
#include "kernels/cuda/gdn_pointwise.cuh"

namespace dt::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;

// A group of G lanes per (row, head) item, grid-stride (gdn_pointwise.cuh): with 16-byte aligned
// rows each lane holds 8 consecutive features (one 16-byte access per tensor; d = 64: 8 lanes, 4
// heads per warp), else features g, g + G, ... one at a time (any d, a multiple of 8 up to 128).
// The group sums keep a fixed order (deterministic).
template <int V, int NV>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) gdn_l2norm_kernel(GdnCudaL2NormParams p, bool backward) {
  const int nvec = static_cast<int>(p.d / V), G = head_group_size(nvec), per_warp = 32 / G;
  const int lane = threadIdx.x % 32, slot = lane / G, g = lane % G;
  const int64_t items = p.rows * p.H, step = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock * per_warp;
  for (int64_t base = (blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / 32) * per_warp; base < items;
       base += step) {  // uniform over the warp: every lane reaches the group sums
    const int64_t item = base + slot, r = item / p.H, h = item % p.H;
    const int64_t x0 = r * p.ld_x + h * p.d, y0 = r * p.ld_y + h * p.d, dy0 = r * p.ld_dy + h * p.d;
    float xv[NV][V], dyv[NV][V], ss = 0.f;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      const int vec = g + G * i;
      const bool on = item < items && vec < nvec;
#pragma unroll
      for (int k = 0; k < V; ++k) xv[i][k] = 0.f, dyv[i][k] = 0.f;
      if (on) {
        load_bf16<V>(p.x + x0 + vec * V, xv[i]);
        if (backward) load_bf16<V>(p.dy + dy0 + vec * V, dyv[i]);
      }
#pragma unroll
      for (int k = 0; k < V; ++k) ss += xv[i][k] * xv[i][k];
    }
    // from_y (backward with r given): x holds y = scale x^, and x^ = y / scale
    const bool from_y = backward && p.rnorm;
    const float inv = from_y ? (item < items ? p.rnorm[item] : 0.f) : rsqrtf(group_sum(ss, G) + 1e-6f);
    const float xs = from_y ? 1.f / p.scale : inv;  // x^ = x xs
    if (!backward && p.rnorm && g == 0 && item < items) p.rnorm[item] = inv;
    float dot = 0.f;  // backward: x^ . dy
    if (backward) {
#pragma unroll
      for (int i = 0; i < NV; ++i)
#pragma unroll
        for (int k = 0; k < V; ++k) dot += xv[i][k] * xs * dyv[i][k];
      dot = group_sum(dot, G);
    }
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      const int vec = g + G * i;
      if (item >= items || vec >= nvec) continue;
      float out[V];
#pragma unroll
      for (int k = 0; k < V; ++k)
        out[k] = backward ? p.scale * inv * (dyv[i][k] - xv[i][k] * xs * dot) : p.scale * xv[i][k] * inv;
      store_bf16<V>(p.y + y0 + vec * V, out);
    }
  }
}

__global__ void gdn_gates_forward_kernel(GdnCudaGatesParams p) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < p.rows * p.H;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t h = i % p.H;
    p.g[i] = -expf(p.A_log[h]) * softplus_f32(p.a[i] + p.dt_bias[h]);
    p.beta[i] = sigmoid_stable_f32(p.b[i]);
  }
}

// Gates backward, pass 1: da, db elementwise over this CTA's rows [r0, r1); the CTA has
// per_head * H threads, so thread t only ever sees head t % H; the per-thread sums of the two
// parameter gradients are reduced per head in thread order into partial[blockIdx.x][h][2].
__global__ void gdn_gates_backward_kernel(GdnCudaGatesParams p, int64_t rows_per_block, float* partial) {
  float* red = reinterpret_cast<float*>(dynamic_smem());  // [blockDim.x][2]
  const int64_t H = p.H, r0 = blockIdx.x * rows_per_block;
  const int64_t r1 = r0 + rows_per_block < p.rows ? r0 + rows_per_block : p.rows;
  const int64_t h = threadIdx.x % H;
  const float rate = expf(p.A_log[h]), bias = p.dt_bias[h];
  float sum_da = 0.f, sum_dA = 0.f;
  for (int64_t i = r0 * H + threadIdx.x; i < r1 * H; i += blockDim.x) {
    const float x = p.a[i] + bias;
    const float da = -p.dg[i] * rate * sigmoid_stable_f32(x);
    p.da[i] = da;
    sum_da += da;
    sum_dA += p.dg[i] * (-rate * softplus_f32(x));
    const float s = sigmoid_stable_f32(p.b[i]);
    p.db[i] = p.dbeta[i] * s * (1.f - s);
  }
  red[2 * threadIdx.x] = sum_da, red[2 * threadIdx.x + 1] = sum_dA;
  __syncthreads();
  for (int64_t hh = threadIdx.x; hh < H; hh += blockDim.x) {
    float a = 0.f, A = 0.f;
    for (int64_t t = hh; t < blockDim.x; t += H) a += red[2 * t], A += red[2 * t + 1];
    partial[(blockIdx.x * H + hh) * 2] = a;
    partial[(blockIdx.x * H + hh) * 2 + 1] = A;
  }
}

// Pass 2: ddt_bias[h] += sum over blocks of partial[b][h][0], dA_log[h] likewise; one CTA of
// kParamThreads per head, thread t adding blocks t, t + kParamThreads, ... in order, then each warp's
// lanes in a fixed butterfly, then the warps in order (one warp per head looping over 781 blocks took
// 5.3 us at 124M, a chain of dependent loads).
constexpr int kParamThreads = 256;
__global__ void __launch_bounds__(kParamThreads) gdn_gates_params_kernel(GdnCudaGatesParams p, const float* partial,
                                                                         int blocks) {
  __shared__ float red[kParamThreads / 32][2];
  const int64_t h = blockIdx.x;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float a = 0.f, A = 0.f;
  for (int b = threadIdx.x; b < blocks; b += kParamThreads) {
    a += partial[(b * p.H + h) * 2];
    A += partial[(b * p.H + h) * 2 + 1];
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    a += __shfl_xor_sync(0xffffffffu, a, o);
    A += __shfl_xor_sync(0xffffffffu, A, o);
  }
  if (lane == 0) red[warp][0] = a, red[warp][1] = A;
  __syncthreads();
  if (threadIdx.x == 0) {
    float sa = 0.f, sA = 0.f;
    for (int w = 0; w < kParamThreads / 32; ++w) sa += red[w][0], sA += red[w][1];
    p.ddt_bias[h] += sa;
    p.dA_log[h] += sA;
  }
}

void check_l2norm(const GdnCudaL2NormParams& p, bool backward, const char* op) {
  DT_CHECK(p.d >= kDimStep && p.d <= kMaxDim && p.d % kDimStep == 0,
           "{}: head dim {} must be a multiple of {} up to {} on the GPU", op, p.d, kDimStep, kMaxDim);
  DT_CHECK(p.x && p.y && (!backward || p.dy), "{}: null tensor pointer", op);
  DT_CHECK(p.ld_x >= p.H * p.d && p.ld_y >= p.H * p.d && (!backward || p.ld_dy >= p.H * p.d),
           "{}: a row stride is smaller than a row ({})", op, p.H * p.d);
}

void run_l2norm(const GdnCudaL2NormParams& p, void* stream, bool backward, const char* op) {
  check_l2norm(p, backward, op);
  const int64_t items = p.rows * p.H;
  if (items == 0) return;
  // 16-byte accesses when every row of every tensor starts 16-byte aligned (d is a multiple of 8).
  auto ok = [](const void* q, int64_t ld) { return reinterpret_cast<uintptr_t>(q) % 16 == 0 && (ld * 2) % 16 == 0; };
  const bool vec = ok(p.x, p.ld_x) && ok(p.y, p.ld_y) && (!backward || ok(p.dy, p.ld_dy));
  const int64_t per_cta = kWarpsPerBlock * (32 / head_group_size(static_cast<int>(vec ? p.d / 8 : p.d)));
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((items + per_cta - 1) / per_cta, 132 * 64));
  auto s = static_cast<cudaStream_t>(stream);
  if (vec)
    gdn_l2norm_kernel<8, 1><<<blocks, kWarpsPerBlock * 32, 0, s>>>(p, backward);
  else
    gdn_l2norm_kernel<1, kMaxDim / 32><<<blocks, kWarpsPerBlock * 32, 0, s>>>(p, backward);
  DT_CUDA_OK(cudaGetLastError(), op);
}

}  // namespace

}  // namespace dt::cuda

namespace dt {

using namespace cuda;

void gdn_l2norm_forward_cuda(const GdnCudaL2NormParams& p, void* stream) {
  run_l2norm(p, stream, false, "gdn_l2norm_forward_cuda");
}
void gdn_l2norm_backward_cuda(const GdnCudaL2NormParams& p, void* stream) {
  run_l2norm(p, stream, true, "gdn_l2norm_backward_cuda");
}

void gdn_gates_forward_cuda(const GdnCudaGatesParams& p, void* stream) {
  const char* op = "gdn_gates_forward_cuda";
  DT_CHECK(p.a && p.b && p.A_log && p.dt_bias && p.g && p.beta, "{}: null tensor pointer", op);
  const int64_t n = p.rows * p.H;
  if (n == 0) return;
  const int blocks = static_cast<int>(std::min<int64_t>((n + 255) / 256, 65535));
  gdn_gates_forward_kernel<<<blocks, 256, 0, static_cast<cudaStream_t>(stream)>>>(p);
  DT_CUDA_OK(cudaGetLastError(), op);
}

void gdn_gates_backward_cuda(const GdnCudaGatesParams& p, void* stream) {
  const char* op = "gdn_gates_backward_cuda";
  DT_CHECK(p.a && p.b && p.A_log && p.dt_bias && p.dg && p.dbeta && p.da && p.db && p.dA_log && p.ddt_bias,
           "{}: null tensor pointer", op);
  DT_CHECK(p.H >= 1 && p.H <= 1024, "{}: {} heads; the GPU kernel takes 1 to 1024", op, p.H);
  if (p.rows == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  // The split depends on the sizes only, so the summation order (and the bits) are fixed.
  // One element a thread where that takes at most 2048 CTAs (the loop is latency: at 64 rows a CTA,
  // 124M's 16384 rows x 12 heads took 8.5 us on the H200), more rows a CTA beyond.
  const int threads = static_cast<int>(std::max<int64_t>(1, 256 / p.H) * p.H);
  const int64_t rows_per_block = std::max<int64_t>(threads / p.H, (p.rows + 2047) / 2048);
  const int blocks = static_cast<int>((p.rows + rows_per_block - 1) / rows_per_block);
  void* partial = nullptr;
  DT_CUDA_OK(scratch_malloc(&partial, static_cast<size_t>(blocks) * p.H * 2 * sizeof(float), p.pool, s), op);
  gdn_gates_backward_kernel<<<static_cast<unsigned>(blocks), threads, threads * 2 * sizeof(float), s>>>(
      p, rows_per_block, static_cast<float*>(partial));
  DT_CUDA_OK(cudaGetLastError(), op);
  gdn_gates_params_kernel<<<static_cast<unsigned>(p.H), kParamThreads, 0, s>>>(p, static_cast<const float*>(partial),
                                                                             blocks);
  DT_CUDA_OK(cudaGetLastError(), op);
  DT_CUDA_OK(cudaFreeAsync(partial, s), op);
}

}  // namespace dt
