// RMSNorm on the GPU (math: kernels/cpu/rmsnorm.h), x, y, dx, dy bf16; w, dw, rstd fp32:
//   rstd = 1 / sqrt(mean(x^2) + eps),   y = x rstd g,   g = w (plain) or 1 + w (zero-centred)
//   dx   = rstd (dy g - xhat mean(dy g xhat)),   xhat = x rstd
//   dx   = residual + rstd (...) when a residual gradient is given (summed in fp32, one bf16 rounding)
//   dw  += sum_rows dy xhat
// Forward and dx: one warp per row, lane l holding vectors l, l + 32, ... of V = 8 features (V = 1
// when the row is not a whole number of aligned 16-byte vectors); two passes over the row (the
// second one mostly hits L1). dw: deterministic, no atomics: CTA (column slice, row chunk) writes
// the fixed-order sum of its chunk's rows to a partial, then the partials are added to dw in a fixed
// order (common.cuh's column sum). The dw kernels run before dx, so dx may alias dy. In the dx kernel's
// second pass each lane reads dy and the residual at its own vector before writing dx there (the
// first pass only reads dy), so dx may alias dy and/or the residual.
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/dense_elem.h"

namespace dt::cuda {

namespace {

constexpr int kWarps = 8;                // rows per CTA of the row kernels
constexpr int kDwRowThreads = 8;         // dw partial CTA: 32 column lanes x 8 row lanes
constexpr int64_t kDwRowsPerChunk = 128; // rows summed into one partial (fixes the summation order)

bool aligned(const void* p, int64_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

template <int V>
__global__ void rmsnorm_forward_kernel(RmsNormParams p) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / 32;
  if (row >= p.rows) return;
  const int lane = threadIdx.x % 32;
  const int64_t n_vec = p.dim / V;
  const uint16_t* x = p.x + row * p.dim;
  float ss = 0.f;
  for (int64_t v = lane; v < n_vec; v += 32) {
    float f[V];
    load_bf16<V>(x + v * V, f);
#pragma unroll
    for (int k = 0; k < V; ++k) ss += f[k] * f[k];
  }
  ss = warp_sum(ss);
  const float rs = 1.f / sqrtf(ss / static_cast<float>(p.dim) + p.eps);
  if (lane == 0) p.rstd[row] = rs;
  const float one = p.zero_centered ? 1.f : 0.f;
  uint16_t* y = p.y + row * p.dim;
  for (int64_t v = lane; v < n_vec; v += 32) {
    float f[V], w[V], o[V];
    load_bf16<V>(x + v * V, f);
    load_f32<V>(p.w + v * V, w);
#pragma unroll
    for (int k = 0; k < V; ++k) o[k] = f[k] * rs * (one + w[k]);
    store_bf16<V>(y + v * V, o);
  }
}

template <int V>
__global__ void rmsnorm_dx_kernel(RmsNormParams p) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / 32;
  if (row >= p.rows) return;
  const int lane = threadIdx.x % 32;
  const int64_t n_vec = p.dim / V;
  const uint16_t* x = p.x + row * p.dim;
  const uint16_t* dy = p.dy + row * p.dim;
  const float rs = p.rstd[row], one = p.zero_centered ? 1.f : 0.f;
  float dot = 0.f;  // sum(dy g xhat)
  for (int64_t v = lane; v < n_vec; v += 32) {
    float f[V], d[V], w[V];
    load_bf16<V>(x + v * V, f), load_bf16<V>(dy + v * V, d), load_f32<V>(p.w + v * V, w);
#pragma unroll
    for (int k = 0; k < V; ++k) dot += d[k] * (one + w[k]) * (f[k] * rs);
  }
  const float mean_dot = warp_sum(dot) / static_cast<float>(p.dim);
  uint16_t* dx = p.dx + row * p.dim;
  const uint16_t* res = p.residual ? p.residual + row * p.dim : nullptr;
  for (int64_t v = lane; v < n_vec; v += 32) {
    float f[V], d[V], w[V], o[V];
    load_bf16<V>(x + v * V, f), load_bf16<V>(dy + v * V, d), load_f32<V>(p.w + v * V, w);
#pragma unroll
    for (int k = 0; k < V; ++k) o[k] = rs * (d[k] * (one + w[k]) - f[k] * rs * mean_dot);
    if (res) {  // read before the store below: dx may alias the residual
      float r[V];
      load_bf16<V>(res + v * V, r);
#pragma unroll
      for (int k = 0; k < V; ++k) o[k] += r[k];
    }
    store_bf16<V>(dx + v * V, o);
  }
}

// CTA (blockIdx.x: 32 V columns, blockIdx.y: a chunk of kDwRowsPerChunk rows), threads (32, 8):
// partial[chunk, c] = sum over the chunk's rows of dy xhat; row lane ty takes rows ty, ty + 8, ...,
// then the 8 row lanes are added in order 0..7.
template <int V>
__global__ void rmsnorm_dw_partial_kernel(RmsNormParams p, float* partial) {
  __shared__ float red[kDwRowThreads][32 * V];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t c = (blockIdx.x * 32 + tx) * static_cast<int64_t>(V);
  const int64_t r0 = blockIdx.y * kDwRowsPerChunk;
  const int64_t r1 = r0 + kDwRowsPerChunk < p.rows ? r0 + kDwRowsPerChunk : p.rows;
  float acc[V];
#pragma unroll
  for (int k = 0; k < V; ++k) acc[k] = 0.f;
  if (c < p.dim) {
    for (int64_t r = r0 + ty; r < r1; r += kDwRowThreads) {
      float f[V], d[V];
      load_bf16<V>(p.x + r * p.dim + c, f), load_bf16<V>(p.dy + r * p.dim + c, d);
      const float rs = p.rstd[r];
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] += d[k] * (f[k] * rs);
    }
  }
#pragma unroll
  for (int k = 0; k < V; ++k) red[ty][tx * V + k] = acc[k];
  __syncthreads();
  if (ty == 0 && c < p.dim) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      float s = red[0][tx * V + k];
      for (int j = 1; j < kDwRowThreads; ++j) s += red[j][tx * V + k];
      partial[blockIdx.y * p.dim + c + k] = s;
    }
  }
}

void check_params(const RmsNormParams& p, bool backward, const char* op) {
  DT_CHECK(p.rows >= 0 && p.dim >= 1, "{}: bad sizes rows {}, dim {}", op, p.rows, p.dim);
  DT_CHECK(p.x && p.w && p.rstd, "{}: null tensor pointer", op);
  if (backward)
    DT_CHECK(p.dy && p.dx, "{}: null dy or dx", op);
  else
    DT_CHECK(p.y, "{}: null y", op);
}

// V = 8 when every row of every bf16 tensor starts 16-byte aligned and w is 16-byte aligned (a null
// residual counts as aligned).
bool row_vec_ok(const RmsNormParams& p, bool backward) {
  if (p.dim % 8 != 0 || !aligned(p.x, 16) || !aligned(p.w, 16)) return false;
  return backward ? aligned(p.dy, 16) && aligned(p.dx, 16) && aligned(p.residual, 16) : aligned(p.y, 16);
}

int64_t dw_chunks(int64_t rows) { return (rows + kDwRowsPerChunk - 1) / kDwRowsPerChunk; }

unsigned row_grid(int64_t rows) { return static_cast<unsigned>((rows + kWarps - 1) / kWarps); }

}  // namespace

void rmsnorm_forward_launch(const RmsNormParams& p, void* stream) {
  const char* op = "rmsnorm_forward";
  check_params(p, false, op);
  if (p.rows == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  if (row_vec_ok(p, false))
    rmsnorm_forward_kernel<8><<<row_grid(p.rows), kWarps * 32, 0, s>>>(p);
  else
    rmsnorm_forward_kernel<1><<<row_grid(p.rows), kWarps * 32, 0, s>>>(p);
  DT_CUDA_OK(cudaGetLastError(), op);
}

int64_t rmsnorm_backward_scratch_bytes(int64_t rows, int64_t dim) {
  return dw_chunks(rows) * dim * static_cast<int64_t>(sizeof(float));
}

void rmsnorm_backward_launch(const RmsNormParams& p, void* scratch, void* pool, void* stream) {
  const char* op = "rmsnorm_backward";
  check_params(p, true, op);
  if (p.rows == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  if (p.dw) {
    const int64_t n_chunks = dw_chunks(p.rows);
    DT_CHECK(n_chunks <= 65535, "{}: {} rows exceed the dw reduction's grid ({} rows at most)", op, p.rows,
             65535 * kDwRowsPerChunk);
    float* partial = static_cast<float*>(scratch);
    if (!partial)
      DT_CUDA_OK(scratch_malloc(reinterpret_cast<void**>(&partial),
                                static_cast<size_t>(rmsnorm_backward_scratch_bytes(p.rows, p.dim)), pool, s),
                 op);
    // 8-byte accesses (4 bf16) per column lane: x and dy rows start 8-byte aligned.
    const bool vec = p.dim % 4 == 0 && aligned(p.x, 8) && aligned(p.dy, 8);
    const int V = vec ? 4 : 1;
    const dim3 grid(static_cast<unsigned>((p.dim + 32 * V - 1) / (32 * V)), static_cast<unsigned>(n_chunks));
    const dim3 block(32, kDwRowThreads);
    if (vec)
      rmsnorm_dw_partial_kernel<4><<<grid, block, 0, s>>>(p, partial);
    else
      rmsnorm_dw_partial_kernel<1><<<grid, block, 0, s>>>(p, partial);
    DT_CUDA_OK(cudaGetLastError(), op);
    DT_CHECK((p.dim + 31) / 32 <= 0x7fffffff, "{}: dim {} too large for the dw reduction's grid", op, p.dim);
    column_sum_add_kernel<int64_t><<<column_sum_grid(p.dim), kColumnSumThreads, 0, s>>>(p.dw, partial, n_chunks,
                                                                                        p.dim);
    DT_CUDA_OK(cudaGetLastError(), op);
    if (!scratch) DT_CUDA_OK(cudaFreeAsync(partial, s), op);
  }
  if (row_vec_ok(p, true))
    rmsnorm_dx_kernel<8><<<row_grid(p.rows), kWarps * 32, 0, s>>>(p);
  else
    rmsnorm_dx_kernel<1><<<row_grid(p.rows), kWarps * 32, 0, s>>>(p);
  DT_CUDA_OK(cudaGetLastError(), op);
}

}  // namespace dt::cuda
