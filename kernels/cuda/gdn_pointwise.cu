// GDN pointwise ops on the GPU: per-head q/k l2norm and the gates, forward and backward.
// Math as the CPU references kernels/cpu/gdn_l2norm.h and kernels/cpu/gdn_gates.h:
//   l2norm:  y = s x r,  r = 1/sqrt(sum x^2 + 1e-6);   dx = s r (dy - x^ (x^ . dy)),  x^ = x r
//   gates:   g = -exp(A_log) softplus(a + dt_bias),  beta = sigmoid(b)
//            da = -dg exp(A_log) sigmoid(a + dt_bias),  db = dbeta beta (1 - beta)
//            dA_log += sum dg g,  ddt_bias += sum da       (per head, fixed order)
#include <algorithm>

#include "kernels/cuda/gdn_chunk.cuh"
#include "kernels/cuda/gdn_pointwise.cuh"

namespace dt {

using namespace gdn_cuda;

namespace {

constexpr int kWarpsPerBlock = 8;

// One warp per (row, head); lane l holds elements l, l + 32, ... (d / 32 of them, d <= 128).
__global__ void gdn_l2norm_kernel(GdnCudaL2NormParams p, bool backward) {
  const int64_t item = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / 32;
  if (item >= p.rows * p.H) return;
  const int lane = threadIdx.x % 32;
  const int64_t r = item / p.H, h = item % p.H;
  const int per = static_cast<int>(p.d / 32);
  const uint16_t* x = p.x + r * p.ld_x + h * p.d;
  float xv[4], ss = 0.f;
  for (int i = 0; i < per; ++i) xv[i] = ld_bf16(x + lane + 32 * i), ss += xv[i] * xv[i];
  const float inv = rsqrtf(warp_sum(ss) + 1e-6f);
  uint16_t* y = p.y + r * p.ld_y + h * p.d;
  if (!backward) {
    for (int i = 0; i < per; ++i) st_bf16(y + lane + 32 * i, p.scale * xv[i] * inv);
    return;
  }
  const uint16_t* dy = p.dy + r * p.ld_dy + h * p.d;
  float dyv[4], dot = 0.f;
  for (int i = 0; i < per; ++i) dyv[i] = ld_bf16(dy + lane + 32 * i), dot += xv[i] * inv * dyv[i];
  dot = warp_sum(dot);
  for (int i = 0; i < per; ++i) st_bf16(y + lane + 32 * i, p.scale * inv * (dyv[i] - xv[i] * inv * dot));
}

__global__ void gdn_gates_forward_kernel(GdnCudaGatesParams p) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < p.rows * p.H;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t h = i % p.H;
    p.g[i] = -expf(p.A_log[h]) * softplus_f(p.a[i] + p.dt_bias[h]);
    p.beta[i] = sigmoid_f(p.b[i]);
  }
}

// One CTA per head: da, db elementwise; the two parameter sums in a fixed order.
__global__ void gdn_gates_backward_kernel(GdnCudaGatesParams p) {
  constexpr int kT = 256;
  __shared__ float red_a[kT], red_A[kT];
  const int64_t h = blockIdx.x;
  const float rate = expf(p.A_log[h]);
  float sum_da = 0.f, sum_dA = 0.f;
  for (int64_t r = threadIdx.x; r < p.rows; r += kT) {
    const int64_t i = r * p.H + h;
    const float x = p.a[i] + p.dt_bias[h];
    const float da = -p.dg[i] * rate * sigmoid_f(x);
    p.da[i] = da;
    sum_da += da;
    sum_dA += p.dg[i] * (-rate * softplus_f(x));
    const float s = sigmoid_f(p.b[i]);
    p.db[i] = p.dbeta[i] * s * (1.f - s);
  }
  red_a[threadIdx.x] = sum_da, red_A[threadIdx.x] = sum_dA;
  __syncthreads();
  for (int s = kT / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red_a[threadIdx.x] += red_a[threadIdx.x + s], red_A[threadIdx.x] += red_A[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) p.ddt_bias[h] += red_a[0], p.dA_log[h] += red_A[0];
}

void check_l2norm(const GdnCudaL2NormParams& p, bool backward, const char* op) {
  DT_CHECK(p.d == 64 || p.d == 128, "{}: head dim {} must be 64 or 128 on the GPU", op, p.d);
  DT_CHECK(p.x && p.y && (!backward || p.dy), "{}: null tensor pointer", op);
  DT_CHECK(p.ld_x >= p.H * p.d && p.ld_y >= p.H * p.d && (!backward || p.ld_dy >= p.H * p.d),
           "{}: a row stride is smaller than a row ({})", op, p.H * p.d);
}

void run_l2norm(const GdnCudaL2NormParams& p, void* stream, bool backward, const char* op) {
  check_l2norm(p, backward, op);
  const int64_t items = p.rows * p.H;
  if (items == 0) return;
  const int64_t blocks = (items + kWarpsPerBlock - 1) / kWarpsPerBlock;
  gdn_l2norm_kernel<<<static_cast<unsigned>(blocks), kWarpsPerBlock * 32, 0, static_cast<cudaStream_t>(stream)>>>(
      p, backward);
  DT_GDN_CUDA_CHECK(cudaGetLastError(), op);
}

}  // namespace

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
  DT_GDN_CUDA_CHECK(cudaGetLastError(), op);
}

void gdn_gates_backward_cuda(const GdnCudaGatesParams& p, void* stream) {
  const char* op = "gdn_gates_backward_cuda";
  DT_CHECK(p.a && p.b && p.A_log && p.dt_bias && p.dg && p.dbeta && p.da && p.db && p.dA_log && p.ddt_bias,
           "{}: null tensor pointer", op);
  if (p.H == 0) return;
  gdn_gates_backward_kernel<<<static_cast<unsigned>(p.H), 256, 0, static_cast<cudaStream_t>(stream)>>>(p);
  DT_GDN_CUDA_CHECK(cudaGetLastError(), op);
}

}  // namespace dt
