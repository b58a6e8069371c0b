// The small GPU decode kernels of infer/cuda/decode_cuda.h: the conv step, RoPE at the decode
// position, the attention layer's token before the attention (norms, RoPE, cache writes in one
// kernel), the cache write, greedy argmax and the position counter's advance. CPU references:
// infer/cpu/decode_ref.h (the cache write is a copy). bf16 as raw bits, fp32 math.
#include <cmath>

#include "infer/cuda/argmax.cuh"
#include "infer/cuda/decode_cuda.h"
#include "kernels/cuda/common.cuh"

namespace dt::cuda {

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

// ---- conv step: one thread per (sequence, channel); it owns that channel's tail column ----

__global__ void conv_step_kernel(uint16_t* __restrict__ y, uint16_t* __restrict__ tail,
                                 const uint16_t* __restrict__ x, const float* __restrict__ w, int64_t N, int64_t C,
                                 int64_t K) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= N * C) return;
  const int64_t n = i / C, c = i % C;
  const float xv = bf16_bits_to_f32(x[i]);
  uint16_t* tl = tail ? tail + n * (K - 1) * C + c : nullptr;
  // Oldest input first, as gdn_conv_forward (the same order of terms).
  float u = 0.f;
  for (int64_t j = 0; j + 1 < K; ++j) u += w[c * K + j] * bf16_bits_to_f32(tl[j * C]);
  u += w[c * K + K - 1] * xv;
  y[i] = f32_to_bf16_bits(u / (1.f + __expf(-u)));
  if (tl) {
    for (int64_t j = 0; j + 2 < K; ++j) tl[j * C] = tl[(j + 1) * C];
    tl[(K - 2) * C] = x[i];
  }
}

// ---- RoPE: one CTA per (sequence, head) row; the rotary part is read whole before any write ----

struct RopeParams {
  uint16_t* x;
  int64_t rows, D, pos;
  const int32_t* pos_dev;
  int rot, half;
  bool interleaved;
  double inv_freq[kMaxRotaryDim / 2];
};

__global__ void rope_kernel(const __grid_constant__ RopeParams p) {
  __shared__ float in[kMaxRotaryDim];
  uint16_t* xr = p.x + blockIdx.x * p.D;
  for (int d = threadIdx.x; d < p.rot; d += blockDim.x) in[d] = bf16_bits_to_f32(xr[d]);
  __syncthreads();
  const double t = static_cast<double>(p.pos_dev ? *p.pos_dev : p.pos);
  for (int i = threadIdx.x; i < p.half; i += blockDim.x) {
    const float x1 = p.interleaved ? in[2 * i] : in[i];
    const float x2 = p.interleaved ? in[2 * i + 1] : in[p.half + i];
    float s, c;
    rope_sincos(t, p.inv_freq[i], &s, &c);
    xr[i] = f32_to_bf16_bits(x1 * c - x2 * s);
    xr[p.half + i] = f32_to_bf16_bits(x2 * c + x1 * s);
  }
}

// ---- attention prep: one warp per (sequence, head): query heads 0..H, then key (and value) heads ----

struct AttnPrepKernelParams {
  AttnPrepParams a;
  int64_t qw;
  int half;
  double inv_freq[kMaxRotaryDim / 2];
};

// One head of hd features from src into dst: RMS-normed with w when given (rmsnorm_forward_kernel<V>'s
// sums and rounding), then RoPE on the first rot features (rope_kernel's), rounded to bf16.
template <int V>
__device__ void prep_head(uint16_t* dst, const uint16_t* src, const float* w, const AttnPrepKernelParams& p,
                          double t, float* buf) {
  const int lane = threadIdx.x;
  const int64_t hd = p.a.hd;
  if (w) {
    float ss = 0.f;
    for (int64_t v = lane; v < hd / V; v += 32) {
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float f = bf16_bits_to_f32(src[v * V + k]);
        ss += f * f;
      }
    }
    ss = warp_sum(ss);
    const float rs = 1.f / sqrtf(ss / static_cast<float>(hd) + p.a.eps);
    const float one = p.a.zero_centered ? 1.f : 0.f;
    for (int64_t d = lane; d < hd; d += 32)
      buf[d] = bf16_bits_to_f32(f32_to_bf16_bits(bf16_bits_to_f32(src[d]) * rs * (one + w[d])));
  } else {
    for (int64_t d = lane; d < hd; d += 32) buf[d] = bf16_bits_to_f32(src[d]);
  }
  __syncwarp();
  for (int i = lane; i < p.half; i += 32) {
    const float x1 = p.a.interleaved ? buf[2 * i] : buf[i];
    const float x2 = p.a.interleaved ? buf[2 * i + 1] : buf[p.half + i];
    float s, c;
    rope_sincos(t, p.inv_freq[i], &s, &c);
    dst[i] = f32_to_bf16_bits(x1 * c - x2 * s);
    dst[p.half + i] = f32_to_bf16_bits(x2 * c + x1 * s);
  }
  for (int64_t d = 2 * p.half + lane; d < hd; d += 32) dst[d] = f32_to_bf16_bits(buf[d]);
}

__global__ void __launch_bounds__(32) attn_prep_kernel(const __grid_constant__ AttnPrepKernelParams p) {
  __shared__ float buf[kMaxRotaryDim];
  const AttnPrepParams& a = p.a;
  const int64_t n = blockIdx.y, head = blockIdx.x, hd = a.hd;
  grid_dependency_wait();  // qg, k and v come from the kernel before
  grid_launch_dependents();
  const int64_t at = a.pos_dev ? *a.pos_dev : a.pos;
  const double t = static_cast<double>(at);
  const bool vec = hd % 8 == 0;
  if (head < a.H) {
    const uint16_t* src = a.qg + n * a.H * p.qw + head * p.qw;
    uint16_t* dst = a.q + (n * a.H + head) * hd;
    vec ? prep_head<8>(dst, src, a.qn_w, p, t, buf) : prep_head<1>(dst, src, a.qn_w, p, t, buf);
    if (a.gate)
      for (int64_t d = threadIdx.x; d < hd; d += 32) a.gate[(n * a.H + head) * hd + d] = src[hd + d];
    return;
  }
  if (at < 0 || at >= a.cap) return;  // cache_write's rule: a position outside the cache writes nothing
  const int64_t kh = head - a.H, row = ((n * a.cap + at) * a.Hkv + kh) * hd;
  const uint16_t* src = a.k + (n * a.Hkv + kh) * hd;
  vec ? prep_head<8>(a.k_cache + row, src, a.kn_w, p, t, buf) : prep_head<1>(a.k_cache + row, src, a.kn_w, p, t, buf);
  for (int64_t d = threadIdx.x; d < hd; d += 32) a.v_cache[row + d] = a.v[(n * a.Hkv + kh) * hd + d];
}

// ---- cache write: 2-byte units; a device position outside the cache writes nothing ----

__global__ void cache_write_kernel(uint16_t* __restrict__ cache, const uint16_t* __restrict__ src, int64_t N,
                                   int64_t cap, int64_t row, int64_t pos, const int32_t* pos_dev) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= N * row) return;
  const int64_t at = pos_dev ? *pos_dev : pos;
  if (at < 0 || at >= cap) return;
  const int64_t n = i / row, e = i % row;
  cache[(n * cap + at) * row + e] = src[i];
}

__global__ void advance_kernel(int32_t* counter) {
  grid_dependency_wait();  // every kernel of the step has read the position
  *counter += 1;
}

// ---- argmax: one block per row; each thread the first largest of its strided indices, then a
// tree over (value, index) pairs that keeps the larger value and, on a tie, the smaller index ----

constexpr int kArgmaxThreads = 1024;
constexpr int kArgmaxLoads = 8;

__global__ void argmax_kernel(int32_t* __restrict__ out, const float* __restrict__ logits, int64_t V, int64_t ld,
                              int32_t* counter) {
  grid_dependency_wait();  // the logits come from the kernel before; every kernel before has ended
  grid_launch_dependents();
  if (counter && blockIdx.x == 0 && threadIdx.x == 0) *counter += 1;  // advance_kernel's work
  const float* row = logits + blockIdx.x * ld;
  float v = 0.f;
  int i = -1;  // none yet
  // The thread's indices j, j + kArgmaxThreads, ... in order, kArgmaxLoads loads in flight at a time.
  for (int64_t j0 = threadIdx.x; j0 < V; j0 += kArgmaxLoads * kArgmaxThreads) {
    float x[kArgmaxLoads];
#pragma unroll
    for (int k = 0; k < kArgmaxLoads; ++k) {
      const int64_t j = j0 + k * kArgmaxThreads;
      x[k] = j < V ? row[j] : NAN;
    }
#pragma unroll
    for (int k = 0; k < kArgmaxLoads; ++k)
      if (!isnan(x[k]) && (i < 0 || x[k] > v)) v = x[k], i = static_cast<int>(j0 + k * kArgmaxThreads);
  }
  warp_argmax(v, i);
  __shared__ float sv[kArgmaxThreads / 32];
  __shared__ int si[kArgmaxThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) sv[warp] = v, si[warp] = i;
  __syncthreads();
  if (warp == 0) {
    v = sv[lane], i = si[lane];
    warp_argmax(v, i);
    if (lane == 0) out[blockIdx.x] = i < 0 ? 0 : i;
  }
}

}  // namespace

void conv_step(uint16_t* y, uint16_t* tail, const uint16_t* x, const float* w, int64_t N, int64_t C, int64_t K,
               void* stream) {
  const char* op = "decode_conv_step (GPU)";
  DT_CHECK(y && x && w && (K == 1 || tail), "{}: null tensor pointer", op);
  DT_CHECK(N >= 1 && C >= 1 && K >= 1, "{}: bad sizes N {}, C {}, K {}", op, N, C, K);
  conv_step_kernel<<<blocks_for(N * C), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(y, K > 1 ? tail : nullptr,
                                                                                          x, w, N, C, K);
  DT_CUDA_OK(cudaGetLastError(), op);
}

void rope(uint16_t* x, int64_t rows, int64_t D, int64_t rot, double theta, bool interleaved, int64_t pos,
          const int32_t* pos_dev, void* stream) {
  const char* op = "decode_rope (GPU)";
  DT_CHECK(x, "{}: null tensor pointer", op);
  DT_CHECK(rot >= 0 && rot % 2 == 0 && rot <= D && rot <= kMaxRotaryDim,
           "{}: rotary_dim {} must be even, at most the head dim {} and at most {}", op, rot, D, kMaxRotaryDim);
  DT_CHECK(theta > 0, "{}: rope theta must be positive, got {}", op, theta);
  if (rows == 0 || rot == 0) return;
  RopeParams p{};
  p.x = x, p.rows = rows, p.D = D, p.pos = pos, p.pos_dev = pos_dev;
  p.rot = static_cast<int>(rot), p.half = p.rot / 2, p.interleaved = interleaved;
  // The double inv_freq of kernels/cuda/rope.cu (the prefill's RoPE): the same cached keys.
  for (int i = 0; i < p.half; ++i) p.inv_freq[i] = 1.0 / std::pow(theta, static_cast<double>(2 * i) / p.rot);
  rope_kernel<<<static_cast<unsigned>(rows), 64, 0, static_cast<cudaStream_t>(stream)>>>(p);
  DT_CUDA_OK(cudaGetLastError(), op);
}

void cache_write(void* cache, const void* src, int64_t N, int64_t cap, int64_t row_bytes, int64_t pos,
                 const int32_t* pos_dev, void* stream) {
  const char* op = "cache_write (GPU)";
  DT_CHECK(cache && src, "{}: null tensor pointer", op);
  DT_CHECK(row_bytes % 2 == 0 && N >= 1 && cap >= 1, "{}: bad sizes N {}, cap {}, row bytes {}", op, N, cap,
           row_bytes);
  const int64_t row = row_bytes / 2;
  if (row == 0) return;
  cache_write_kernel<<<blocks_for(N * row), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<uint16_t*>(cache), static_cast<const uint16_t*>(src), N, cap, row, pos, pos_dev);
  DT_CUDA_OK(cudaGetLastError(), op);
}

void attn_prep(const AttnPrepParams& a, void* stream) {
  const char* op = "decode_attn_prep (GPU)";
  DT_CHECK(a.qg && a.k && a.v && a.q && a.k_cache && a.v_cache, "{}: null tensor pointer", op);
  DT_CHECK(a.N >= 1 && a.H >= 1 && a.Hkv >= 1 && a.hd >= 1 && a.hd <= kMaxRotaryDim && a.cap >= 1,
           "{}: bad sizes N {}, H {}, Hkv {}, head dim {} (1 to {}), cap {}", op, a.N, a.H, a.Hkv, a.hd,
           kMaxRotaryDim, a.cap);
  DT_CHECK(a.rot >= 0 && a.rot % 2 == 0 && a.rot <= a.hd, "{}: rotary_dim {} must be even and at most the head dim {}",
           op, a.rot, a.hd);
  DT_CHECK(a.rot == 0 || a.theta > 0, "{}: rope theta must be positive, got {}", op, a.theta);
  AttnPrepKernelParams p{};
  p.a = a, p.qw = a.gate ? 2 * a.hd : a.hd, p.half = a.rot / 2;
  // rope()'s double inv_freq: the same rotation as the prefill's keys.
  for (int i = 0; i < p.half; ++i) p.inv_freq[i] = 1.0 / std::pow(a.theta, static_cast<double>(2 * i) / a.rot);
  DT_CUDA_OK(launch_dependent(attn_prep_kernel, dim3(static_cast<unsigned>(a.H + a.Hkv), static_cast<unsigned>(a.N)),
                              dim3(32), 0, static_cast<cudaStream_t>(stream), p),
             op);
}

void argmax_rows(int32_t* out, const float* logits, int64_t N, int64_t V, int64_t ld, int32_t* counter,
                 void* stream) {
  const char* op = "decode_argmax (GPU)";
  DT_CHECK(out && logits, "{}: null tensor pointer", op);
  DT_CHECK(N >= 1 && V >= 1 && V <= ld && V < (int64_t{1} << 31), "{}: bad sizes N {}, V {}, ld {}", op, N, V, ld);
  DT_CUDA_OK(launch_dependent(argmax_kernel, dim3(static_cast<unsigned>(N)), dim3(kArgmaxThreads), 0,
                              static_cast<cudaStream_t>(stream), out, logits, V, ld, counter),
             op);
}

void advance(int32_t* counter, void* stream) {
  DT_CHECK(counter, "decode advance (GPU): null counter");
  DT_CUDA_OK(launch_dependent(advance_kernel, dim3(1), dim3(1), 0, static_cast<cudaStream_t>(stream), counter),
             "decode advance (GPU)");
}

}  // namespace dt::cuda
