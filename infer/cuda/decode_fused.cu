// The fused GPU decode kernels of infer/cuda/decode_cuda.h for a few sequences (N <= kGemvMaxRows):
// the GEMV that replaces cuBLAS's GEMMs at one token a sequence (several weights sharing an input
// in one launch, SwiGLU taken on the input, a residual added to the output) and the whole GDN
// token after the conv (gates, q/k l2norm, the delta rule on the state, the gated norm) in one
// kernel. At one token the step is a chain of small kernels whose count, not their bytes, sets its
// time (docs/inference.md, "Decode speed"). CPU references: infer/cpu/decode_ref.h
// (decode_gemv_ref, gdn_decode_step_ref). bf16 as raw bits, fp32 math.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "infer/cuda/decode_cuda.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gdn_pointwise.cuh"

namespace dt::cuda {

using gdn_cuda::sigmoid_f;  // the GDN gates' own, so the fused token computes them as the unfused kernels do
using gdn_cuda::softplus_f;

namespace {

// ---- GEMV: one warp per output row for all N sequences; the input rows in shared memory (bf16),
// each lane reads 8 weights (16 bytes) at a time ----

constexpr int kGemvWarps = 8;
constexpr int kGemvThreads = kGemvWarps * 32;

__global__ void __launch_bounds__(kGemvThreads) gemv_kernel(const __grid_constant__ GemvParams p) {
  extern __shared__ uint4 smem_x[];  // [N, C] bf16, 16-byte aligned
  auto* xs = reinterpret_cast<uint16_t*>(smem_x);
  const int64_t NC = p.N * p.C;
  for (int64_t i = threadIdx.x; i < NC; i += kGemvThreads) {
    const int64_t n = i / p.C, c = i % p.C;
    if (p.x2) {  // SwiGLU: x = bf16(silu(gate) up), as swiglu_forward rounds it
      const float g = bf16_bits_to_f32(p.x[n * p.ldx + c]), u = bf16_bits_to_f32(p.x2[n * p.ldx + c]);
      xs[i] = f32_to_bf16_bits(g * sigmoid_f32(g) * u);
    } else {
      xs[i] = p.x[n * p.ldx + c];
    }
  }
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kGemvWarps + warp;
  int s = 0;
  while (s < p.n_seg && r >= p.seg[s].row_end) ++s;
  if (s >= p.n_seg) return;
  const GemvSegment& g = p.seg[s];
  const int64_t row = r - (s == 0 ? 0 : p.seg[s - 1].row_end);
  const int64_t rows = g.row_end - (s == 0 ? 0 : p.seg[s - 1].row_end);
  const uint4* w = reinterpret_cast<const uint4*>(g.w + row * p.C);
  float acc[kGemvMaxRows];
#pragma unroll
  for (int n = 0; n < kGemvMaxRows; ++n) acc[n] = 0.f;
  const int64_t chunks = p.C / 8;
  for (int64_t c = lane; c < chunks; c += 32) {
    const uint4 wv = w[c];
    const uint16_t* wh = reinterpret_cast<const uint16_t*>(&wv);
    float wf[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) wf[k] = bf16_bits_to_f32(wh[k]);
#pragma unroll
    for (int n = 0; n < kGemvMaxRows; ++n) {
      if (n >= p.N) break;
      const uint4 xv = smem_x[(n * p.C) / 8 + c];
      const uint16_t* xh = reinterpret_cast<const uint16_t*>(&xv);
#pragma unroll
      for (int k = 0; k < 8; ++k) acc[n] += wf[k] * bf16_bits_to_f32(xh[k]);
    }
  }
#pragma unroll
  for (int n = 0; n < kGemvMaxRows; ++n) {
    if (n >= p.N) break;
    const float v = warp_sum(acc[n]);
    if (lane == 0) {
      const int64_t o = n * rows + row;
      if (g.y_f32) {
        static_cast<float*>(g.y)[o] = v;
      } else {
        const float res = g.residual ? bf16_bits_to_f32(g.residual[o]) : 0.f;
        static_cast<uint16_t*>(g.y)[o] = f32_to_bf16_bits(v + res);
      }
    }
  }
}

// ---- GDN token: one CTA per (value head, sequence), thread j owns column j of the head's state ----

constexpr int kGdnMaxDim = 128;


// The sum over the CTA of v (every thread's), returned to all threads; red holds a float per warp.
__device__ __forceinline__ float block_sum(float v, float* red) {
  v = warp_sum(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();  // red's last use is over
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float t = 0.f;
  for (int w = 0; w < warps; ++w) t += red[w];
  return t;
}

__global__ void __launch_bounds__(kGdnMaxDim) gdn_step_kernel(const __grid_constant__ GdnStepParams p) {
  __shared__ float sq[kGdnMaxDim], sk[kGdnMaxDim], red[kGdnMaxDim / 32];
  const int64_t h = blockIdx.x, n = blockIdx.y, j = threadIdx.x;
  const int64_t kh = h / (p.Hv / p.Hk);
  const uint16_t* row = p.qkv + n * p.ld_qkv;
  // l2norms of q and k (rounded to bf16, as gdn_l2norm_forward writes them)
  float qq = 0.f, kk = 0.f;
  for (int64_t i = j; i < p.dk; i += blockDim.x) {
    const float q = bf16_bits_to_f32(row[kh * p.dk + i]), k = bf16_bits_to_f32(row[p.Hk * p.dk + kh * p.dk + i]);
    sq[i] = q, sk[i] = k, qq += q * q, kk += k * k;
  }
  const float rq = rsqrtf(block_sum(qq, red) + 1e-6f) * p.q_scale, rk = rsqrtf(block_sum(kk, red) + 1e-6f);
  for (int64_t i = j; i < p.dk; i += blockDim.x)
    sq[i] = bf16_bits_to_f32(f32_to_bf16_bits(sq[i] * rq)), sk[i] = bf16_bits_to_f32(f32_to_bf16_bits(sk[i] * rk));
  __syncthreads();
  // gates
  const int64_t gi = n * p.Hv + h;
  const float decay = expf(-expf(p.A_log[h]) * softplus_f(p.a[gi] + p.dt_bias[h]));
  const float beta = sigmoid_f(p.b[gi]);
  // the delta rule on column j: S~ = decay S, u = S~^T k, d = beta (v - u), S = S~ + k d^T, o = S^T q
  float o = 0.f;
  if (j < p.dv) {
    float* S = p.state + gi * p.dk * p.dv + j;
    float u = 0.f;
    for (int64_t i = 0; i < p.dk; ++i) u += decay * S[i * p.dv] * sk[i];
    const float v = bf16_bits_to_f32(row[2 * p.Hk * p.dk + h * p.dv + j]);
    const float d = beta * (v - u);
    for (int64_t i = 0; i < p.dk; ++i) {
      const float s = decay * S[i * p.dv] + sk[i] * d;
      S[i * p.dv] = s;
      o += s * sq[i];
    }
    o = bf16_bits_to_f32(f32_to_bf16_bits(o));  // the recurrent kernel's bf16 output
  }
  // gated RMSNorm over the head's dv outputs: y = o rsqrt(mean o^2 + eps) w silu(z)
  const float ms = block_sum(j < p.dv ? o * o : 0.f, red) / static_cast<float>(p.dv);
  if (j < p.dv) {
    const float r = rsqrtf(ms + p.eps);
    const float z = bf16_bits_to_f32(p.z[n * p.ld_z + h * p.dv + j]);
    p.y[n * p.ld_y + h * p.dv + j] = f32_to_bf16_bits(o * r * p.norm_w[j] * (z * sigmoid_f(z)));
  }
}

}  // namespace

void gemv(const GemvParams& p, void* stream) {
  const char* op = "decode_gemv (GPU)";
  DT_CHECK(p.x && p.N >= 1 && p.N <= kGemvMaxRows && p.C >= 8 && p.C % 8 == 0 && p.ldx >= p.C,
           "{}: bad input: N {} (1 to {}), C {} (a multiple of 8), ldx {}", op, p.N, kGemvMaxRows, p.C, p.ldx);
  DT_CHECK(p.n_seg >= 1 && p.n_seg <= kGemvMaxSegments, "{}: {} weights (1 to {})", op, p.n_seg, kGemvMaxSegments);
  int64_t prev = 0;
  for (int s = 0; s < p.n_seg; ++s) {
    const GemvSegment& g = p.seg[s];
    DT_CHECK(g.w && g.y && g.row_end > prev, "{}: weight {}: null pointer or no rows", op, s);
    DT_CHECK(reinterpret_cast<uintptr_t>(g.w) % 16 == 0, "{}: weight {} is not 16-byte aligned", op, s);
    DT_CHECK(!(g.y_f32 && g.residual), "{}: weight {}: a residual needs a bf16 output", op, s);
    prev = g.row_end;
  }
  const size_t smem = static_cast<size_t>(p.N * p.C) * 2;
  DT_CHECK(smem <= kGemvMaxInputBytes, "{}: the input ({} bytes) exceeds {} bytes of shared memory", op, smem,
           kGemvMaxInputBytes);
  if (smem > 48 * 1024)
    DT_CUDA_OK(cudaFuncSetAttribute(gemv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)),
               op);
  const auto blocks = static_cast<unsigned>((prev + kGemvWarps - 1) / kGemvWarps);
  gemv_kernel<<<blocks, kGemvThreads, smem, static_cast<cudaStream_t>(stream)>>>(p);
  DT_CUDA_OK(cudaGetLastError(), op);
}

void gdn_step(const GdnStepParams& p, void* stream) {
  const char* op = "gdn_decode_step (GPU)";
  DT_CHECK(p.qkv && p.z && p.a && p.b && p.A_log && p.dt_bias && p.norm_w && p.state && p.y, "{}: null pointer", op);
  DT_CHECK(p.N >= 1 && p.Hk >= 1 && p.Hv % p.Hk == 0 && p.dk >= 1 && p.dk <= kGdnMaxDim && p.dv >= 1 &&
               p.dv <= kGdnMaxDim,
           "{}: bad sizes N {}, Hk {}, Hv {}, dk {}, dv {} (head dims 1 to {}, Hv a multiple of Hk)", op, p.N, p.Hk,
           p.Hv, p.dk, p.dv, kGdnMaxDim);
  const int threads = static_cast<int>(std::max<int64_t>(32, (std::max(p.dk, p.dv) + 31) / 32 * 32));
  gdn_step_kernel<<<dim3(static_cast<unsigned>(p.Hv), static_cast<unsigned>(p.N)), threads, 0,
                    static_cast<cudaStream_t>(stream)>>>(p);
  DT_CUDA_OK(cudaGetLastError(), op);
}

}  // namespace dt::cuda
