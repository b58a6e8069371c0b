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
#include "kernels/cuda/dense_elem.cuh"
#include "kernels/cuda/gdn_pointwise.cuh"

namespace dt::decode_cuda {

using dense_cuda::bf16_bits_to_f32;
using dense_cuda::f32_to_bf16_bits;
using dense_cuda::sigmoid_f32;
using dense_cuda::warp_sum;
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
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // RMSNorm's 1 / rms of each row, as rmsnorm_forward_kernel sums it: warp n takes row n, each lane
  // 8 features at a time, then the warp's butterfly.
  __shared__ float rstd[kGemvMaxRows];
  static_assert(kGemvWarps >= kGemvMaxRows, "a warp per row");
  if (p.in == GemvInput::kRmsNorm) {
    if (warp < p.N) {
      const uint16_t* xr = p.x + warp * p.ldx;
      float ss = 0.f;
      for (int64_t v = lane; v < p.C / 8; v += 32) {
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          const float f = bf16_bits_to_f32(xr[v * 8 + k]);
          ss += f * f;
        }
      }
      ss = warp_sum(ss);
      if (lane == 0) rstd[warp] = 1.f / sqrtf(ss / static_cast<float>(p.C) + p.eps);
    }
    __syncthreads();
  }
  const int64_t NC = p.N * p.C;
  const float one = p.zero_centered ? 1.f : 0.f;
  for (int64_t i = threadIdx.x; i < NC; i += kGemvThreads) {
    const int64_t n = i / p.C, c = i % p.C;
    const uint16_t xb = p.x[n * p.ldx + c];
    switch (p.in) {
      case GemvInput::kPlain: xs[i] = xb; break;
      case GemvInput::kSwiGLU: {  // bf16(silu(gate) up), as swiglu_forward rounds it
        const float g = bf16_bits_to_f32(xb), u = bf16_bits_to_f32(p.x2[n * p.ldx + c]);
        xs[i] = f32_to_bf16_bits(g * sigmoid_f32(g) * u);
        break;
      }
      case GemvInput::kGate:  // bf16(x sigmoid(g)), as sigmoid_gate_forward
        xs[i] = f32_to_bf16_bits(bf16_bits_to_f32(xb) * sigmoid_f32(bf16_bits_to_f32(p.x2[n * p.ldx + c])));
        break;
      case GemvInput::kRmsNorm:
        xs[i] = f32_to_bf16_bits(bf16_bits_to_f32(xb) * rstd[n] * (one + p.norm_w[c]));
        break;
    }
  }
  __syncthreads();
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
#pragma unroll 4
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

// ---- GDN token: one CTA per (value head, sequence); gdn_step_kernel's thread j owns column j of
// the head's state, gdn_step_split_kernel splits each column over a few threads ----

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

// The same token with the state's column split over R = dk / kPer threads, each holding kPer rows
// of it in registers: R times the loads in flight of gdn_step_kernel, and the state read once.
// Thread t takes column t / R and rows (t % R) kPer ..; u and o are summed over the R threads of a
// column by shuffles (R a power of two up to 32, so a column's threads are lanes of one warp).
template <int kPer>
__global__ void __launch_bounds__(1024) gdn_step_split_kernel(const __grid_constant__ GdnStepParams p) {
  __shared__ float sq[kGdnMaxDim], sk[kGdnMaxDim], red[32];
  const int64_t h = blockIdx.x, n = blockIdx.y;
  const int R = static_cast<int>(p.dk / kPer), tid = threadIdx.x, j = tid / R, r = tid % R;
  const int64_t kh = h / (p.Hv / p.Hk);
  const uint16_t* row = p.qkv + n * p.ld_qkv;
  float qq = 0.f, kk = 0.f;
  for (int64_t i = tid; i < p.dk; i += blockDim.x) {
    const float q = bf16_bits_to_f32(row[kh * p.dk + i]), k = bf16_bits_to_f32(row[p.Hk * p.dk + kh * p.dk + i]);
    sq[i] = q, sk[i] = k, qq += q * q, kk += k * k;
  }
  const float rq = rsqrtf(block_sum(qq, red) + 1e-6f) * p.q_scale, rk = rsqrtf(block_sum(kk, red) + 1e-6f);
  for (int64_t i = tid; i < p.dk; i += blockDim.x)
    sq[i] = bf16_bits_to_f32(f32_to_bf16_bits(sq[i] * rq)), sk[i] = bf16_bits_to_f32(f32_to_bf16_bits(sk[i] * rk));
  __syncthreads();
  const int64_t gi = n * p.Hv + h;
  const float decay = expf(-expf(p.A_log[h]) * softplus_f(p.a[gi] + p.dt_bias[h]));
  const float beta = sigmoid_f(p.b[gi]);
  const bool col = j < p.dv;
  float* S = p.state + gi * p.dk * p.dv + static_cast<int64_t>(r) * kPer * p.dv + j;
  const float* kr = sk + r * kPer;
  const float* qr = sq + r * kPer;
  float st[kPer];
  float u = 0.f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    st[i] = col ? S[i * p.dv] : 0.f;
    u += decay * st[i] * kr[i];
  }
  for (int off = R / 2; off > 0; off >>= 1) u += __shfl_xor_sync(0xffffffffu, u, off);
  const float v = col ? bf16_bits_to_f32(row[2 * p.Hk * p.dk + h * p.dv + j]) : 0.f;
  const float d = beta * (v - u);
  float o = 0.f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const float sv = decay * st[i] + kr[i] * d;
    if (col) S[i * p.dv] = sv;
    o += sv * qr[i];
  }
  for (int off = R / 2; off > 0; off >>= 1) o += __shfl_xor_sync(0xffffffffu, o, off);
  o = bf16_bits_to_f32(f32_to_bf16_bits(o));  // the recurrent kernel's bf16 output
  const bool out = col && r == 0;
  const float ms = block_sum(out ? o * o : 0.f, red) / static_cast<float>(p.dv);
  if (out) {
    const float rs = rsqrtf(ms + p.eps);
    const float z = bf16_bits_to_f32(p.z[n * p.ld_z + h * p.dv + j]);
    p.y[n * p.ld_y + h * p.dv + j] = f32_to_bf16_bits(o * rs * p.norm_w[j] * (z * sigmoid_f(z)));
  }
}

}  // namespace

void gemv(const GemvParams& p, void* stream) {
  const char* op = "decode_gemv (GPU)";
  DT_CHECK(p.x && p.N >= 1 && p.N <= kGemvMaxRows && p.C >= 8 && p.C % 8 == 0 && p.ldx >= p.C,
           "{}: bad input: N {} (1 to {}), C {} (a multiple of 8), ldx {}", op, p.N, kGemvMaxRows, p.C, p.ldx);
  DT_CHECK(p.n_seg >= 1 && p.n_seg <= kGemvMaxSegments, "{}: {} weights (1 to {})", op, p.n_seg, kGemvMaxSegments);
  DT_CHECK((p.in != GemvInput::kSwiGLU && p.in != GemvInput::kGate) || p.x2, "{}: the input's second operand is null", op);
  DT_CHECK(p.in != GemvInput::kRmsNorm || p.norm_w, "{}: the input norm's weight is null", op);
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
    DT_DENSE_CUDA_CHECK(cudaFuncSetAttribute(gemv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(smem)),
                        op);
  const auto blocks = static_cast<unsigned>((prev + kGemvWarps - 1) / kGemvWarps);
  gemv_kernel<<<blocks, kGemvThreads, smem, static_cast<cudaStream_t>(stream)>>>(p);
  DT_DENSE_CUDA_CHECK(cudaGetLastError(), op);
}

void gdn_step(const GdnStepParams& p, void* stream) {
  const char* op = "gdn_decode_step (GPU)";
  DT_CHECK(p.qkv && p.z && p.a && p.b && p.A_log && p.dt_bias && p.norm_w && p.state && p.y, "{}: null pointer", op);
  DT_CHECK(p.N >= 1 && p.Hk >= 1 && p.Hv % p.Hk == 0 && p.dk >= 1 && p.dk <= kGdnMaxDim && p.dv >= 1 &&
               p.dv <= kGdnMaxDim,
           "{}: bad sizes N {}, Hk {}, Hv {}, dk {}, dv {} (head dims 1 to {}, Hv a multiple of Hk)", op, p.N, p.Hk,
           p.Hv, p.dk, p.dv, kGdnMaxDim);
  const dim3 grid(static_cast<unsigned>(p.Hv), static_cast<unsigned>(p.N));
  const auto st = static_cast<cudaStream_t>(stream);
  // The split kernel where dk / kPer is a power of two (a column's threads in one warp) and the
  // block fits: kPer 16 up to dk 64, 32 above.
  const int64_t per = p.dk <= 64 ? 16 : 32, R = p.dk / per;
  if (p.dk % per == 0 && R >= 1 && R <= 32 && (R & (R - 1)) == 0 && p.dv * R <= 1024) {
    const int threads = static_cast<int>((p.dv * R + 31) / 32 * 32);
    if (per == 16)
      gdn_step_split_kernel<16><<<grid, threads, 0, st>>>(p);
    else
      gdn_step_split_kernel<32><<<grid, threads, 0, st>>>(p);
  } else {
    const int threads = static_cast<int>(std::max<int64_t>(32, (std::max(p.dk, p.dv) + 31) / 32 * 32));
    gdn_step_kernel<<<grid, threads, 0, st>>>(p);
  }
  DT_DENSE_CUDA_CHECK(cudaGetLastError(), op);
}

}  // namespace dt::decode_cuda
