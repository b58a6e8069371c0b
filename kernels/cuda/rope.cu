// RoPE on the GPU (math: kernels/cpu/rope.h), bf16 x, y [B, T, H, D], position of (b, t) = t.
// With half = rotary_dim / 2, inv_freq_i = theta^(-2i / rotary_dim), c, s = cos, sin(t inv_freq_i):
//   rotate-half:  y[i] = x[i] c - x[half+i] s,     y[half+i] = x[half+i] c + x[i] s
//   interleaved:  y[i] = x[2i] c - x[2i+1] s,      y[half+i] = x[2i+1] c + x[2i] s   (output de-interleaved)
//   backward:     the inverse rotation, written back to the input positions
// dims >= rotary_dim pass through.
//
// inv_freq is computed on the host in double exactly as the double reference does, and the angle
// t inv_freq is formed and reduced mod 2 pi in double; only the reduced angle (|r| <= pi) goes to
// fp32 sincosf. So cos/sin carry ~1e-7 absolute error at any position (an fp32 angle would carry
// t * 6e-8).
//
// A group of G lanes per (token, head) item, 32 / G items per warp (G = the smallest power of two
// >= min(half / V, 32): rotary_dim 64 with V = 4 is 8 lanes, 4 heads per warp, so every lane
// works). Lane g of a group handles the groups g, g + G, ... of V consecutive pairs (V = 4: 8-byte
// accesses, 16 for the interleaved side; V = 1 when sizes or alignment do not allow it). The warp
// loads its heads' rotary parts into registers, __syncwarp, then stores, so y may alias x even
// though the interleaved form reads and writes different positions (a head never spans warps).
#include <cmath>
#include <vector>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/dense_elem.h"

namespace dt::cuda {

namespace {

constexpr int kWarps = 8;  // (token, head) items per CTA
constexpr int kMaxHalf = static_cast<int>(kRopeMaxRotaryDim / 2);

struct RopeKernelParams {
  uint16_t* y;
  const uint16_t* x;
  int64_t items, T, H, D;
  int rot, half;
  double inv_freq[kMaxHalf];
};

bool aligned(const void* p, int64_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

template <int V, bool kInterleaved, bool kBackward>
__global__ void __launch_bounds__(kWarps * 32) rope_kernel(const __grid_constant__ RopeKernelParams p) {
  constexpr int kGroups = (kMaxHalf + 32 * V - 1) / (32 * V);  // groups of V pairs per lane, at most
  __shared__ double inv_freq[kMaxHalf];
  for (int i = threadIdx.x; i < p.half; i += blockDim.x) inv_freq[i] = p.inv_freq[i];
  __syncthreads();
  int G = 1;  // lanes per item
  while (G < p.half / V && G < 32) G <<= 1;
  const int per_warp = 32 / G, lane = threadIdx.x % 32 % G;
  const int64_t item = (blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / 32) * per_warp + threadIdx.x % 32 / G;
  // No early return: every lane of the warp must reach the __syncwarp below.
  const bool on = item < p.items;
  const double t = on ? static_cast<double>((item / p.H) % p.T) : 0.0;
  const uint16_t* in = p.x + (on ? item : 0) * p.D;
  uint16_t* out = p.y + (on ? item : 0) * p.D;

  if (on && out != in) {
    for (int64_t d = p.rot + static_cast<int64_t>(lane) * V; d < p.D; d += static_cast<int64_t>(G) * V) {
      float f[V];
      load_bf16<V>(in + d, f);
      store_bf16<V>(out + d, f);
    }
  }

  // u1[k][j], u2[k][j]: the pair i = (lane + G k) V + j, as read from the input.
  float u1[kGroups][V], u2[kGroups][V];
#pragma unroll
  for (int k = 0; k < kGroups; ++k) {
    const int i0 = (lane + G * k) * V;
    if (!on || i0 >= p.half) continue;
    if constexpr (kInterleaved && !kBackward) {
      if constexpr (V == 1) {
        float a[1], b[1];
        load_bf16<1>(in + 2 * i0, a), load_bf16<1>(in + 2 * i0 + 1, b);
        u1[k][0] = a[0], u2[k][0] = b[0];
      } else {
        float f[2 * V];
        load_bf16<2 * V>(in + 2 * i0, f);
#pragma unroll
        for (int j = 0; j < V; ++j) u1[k][j] = f[2 * j], u2[k][j] = f[2 * j + 1];
      }
    } else {
      load_bf16<V>(in + i0, u1[k]);
      load_bf16<V>(in + p.half + i0, u2[k]);
    }
  }
  __syncwarp();  // every read of this head is done before any write (in place)

#pragma unroll
  for (int k = 0; k < kGroups; ++k) {
    const int i0 = (lane + G * k) * V;
    if (!on || i0 >= p.half) continue;
    float o1[V], o2[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      float s, c;
      rope_sincos(t, inv_freq[i0 + j], &s, &c);
      if constexpr (!kBackward) {
        o1[j] = u1[k][j] * c - u2[k][j] * s;
        o2[j] = u2[k][j] * c + u1[k][j] * s;
      } else {
        o1[j] = u1[k][j] * c + u2[k][j] * s;   // d/dx1
        o2[j] = -u1[k][j] * s + u2[k][j] * c;  // d/dx2
      }
    }
    if constexpr (kInterleaved && kBackward) {
      if constexpr (V == 1) {
        store_bf16<1>(out + 2 * i0, o1), store_bf16<1>(out + 2 * i0 + 1, o2);
      } else {
        float f[2 * V];
#pragma unroll
        for (int j = 0; j < V; ++j) f[2 * j] = o1[j], f[2 * j + 1] = o2[j];
        store_bf16<2 * V>(out + 2 * i0, f);
      }
    } else {
      store_bf16<V>(out + i0, o1);
      store_bf16<V>(out + p.half + i0, o2);
    }
  }
}

template <bool kInterleaved, bool kBackward>
void launch_rope(const RopeKernelParams& kp, bool vec, cudaStream_t s) {
  int G = 1;  // lanes per item, as in the kernel
  while (G < kp.half / (vec ? 4 : 1) && G < 32) G <<= 1;
  const int64_t per_cta = static_cast<int64_t>(kWarps) * (32 / G);
  const unsigned grid = static_cast<unsigned>((kp.items + per_cta - 1) / per_cta);
  if (vec)
    rope_kernel<4, kInterleaved, kBackward><<<grid, kWarps * 32, 0, s>>>(kp);
  else
    rope_kernel<1, kInterleaved, kBackward><<<grid, kWarps * 32, 0, s>>>(kp);
}

void run_rope(uint16_t* y, const uint16_t* x, const RopeParams& p, bool backward, void* stream, const char* op) {
  DT_CHECK(y && x, "{}: null tensor pointer", op);
  DT_CHECK(p.B >= 0 && p.T >= 0 && p.H >= 0 && p.D >= 1, "{}: bad sizes B {}, T {}, H {}, D {}", op, p.B, p.T, p.H,
           p.D);
  DT_CHECK(p.rotary_dim >= 0 && p.rotary_dim % 2 == 0 && p.rotary_dim <= p.D,
           "{}: rotary_dim {} must be even and at most the head dim {}", op, p.rotary_dim, p.D);
  DT_CHECK(p.rotary_dim <= kRopeMaxRotaryDim, "{}: rotary_dim {} exceeds the GPU kernel's limit {}", op, p.rotary_dim,
           kRopeMaxRotaryDim);
  DT_CHECK(p.theta > 0, "{}: rope theta must be positive, got {}", op, p.theta);
  RopeKernelParams kp{};
  kp.y = y, kp.x = x;
  kp.items = p.B * p.T * p.H, kp.T = p.T, kp.H = p.H, kp.D = p.D;
  kp.rot = static_cast<int>(p.rotary_dim), kp.half = kp.rot / 2;
  if (kp.items == 0) return;
  // The double reference's inv_freq (kernels/cpu/rope.h with T = double).
  for (int i = 0; i < kp.half; ++i) kp.inv_freq[i] = 1.0 / std::pow(p.theta, static_cast<double>(2 * i) / kp.rot);
  const bool vec = kp.half % 4 == 0 && p.D % 8 == 0 && aligned(x, 16) && aligned(y, 16);
  auto s = static_cast<cudaStream_t>(stream);
  if (p.interleaved)
    backward ? launch_rope<true, true>(kp, vec, s) : launch_rope<true, false>(kp, vec, s);
  else
    backward ? launch_rope<false, true>(kp, vec, s) : launch_rope<false, false>(kp, vec, s);
  DT_CUDA_OK(cudaGetLastError(), op);
}

}  // namespace

void rope_forward_launch(uint16_t* y, const uint16_t* x, const RopeParams& p, void* stream) {
  run_rope(y, x, p, false, stream, "rope_forward");
}

void rope_backward_launch(uint16_t* dx, const uint16_t* dy, const RopeParams& p, void* stream) {
  run_rope(dx, dy, p, true, stream, "rope_backward");
}

}  // namespace dt::cuda
