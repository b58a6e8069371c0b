// Elementwise bf16 ops on the GPU (math: kernels/cpu/swiglu.h, kernels/cpu/attention.h's
// head_concat_ref / head_split_ref), fp32 math, one pass:
//   swiglu:        h = silu(g) u;       dg = dh u s (1 + g (1 - s)),  du = dh g s,   s = sigmoid(g)
//   sigmoid gate:  y = x s;             dx = dy s,  dg = dy x s (1 - s),            s = sigmoid(g)
//   residual add:  y = a + b
//   cast:          f32 <-> bf16 (round to nearest even)
//   head concat:   x[r, h] = [a[r, h] | b[r, h or 0]];  backward: da, db = split(dx), db summed over
//                  heads (h = 0, 1, ... in fp32) when b is shared
// Each thread handles V = 8 consecutive elements (16-byte bf16 accesses) when every pointer is
// 16-byte aligned, V = 1 otherwise; each element is read before it is written by the same thread,
// so outputs may alias inputs.
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/dense_elem.h"

namespace dt::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 16;  // grid-stride beyond this

bool aligned(const void* p, int64_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

int grid_for(int64_t work) {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>((work + kThreads - 1) / kThreads, kMaxBlocks)));
}

// ---- the ops, each a functor applied to V consecutive elements starting at i ----

struct SwigluForward {
  uint16_t* h;
  const uint16_t *gate, *up;
  template <int V>
  __device__ void apply(int64_t i) const {
    float g[V], u[V], o[V];
    load_bf16<V>(gate + i, g), load_bf16<V>(up + i, u);
#pragma unroll
    for (int k = 0; k < V; ++k) o[k] = g[k] * sigmoid_f32(g[k]) * u[k];
    store_bf16<V>(h + i, o);
  }
};

struct SwigluBackward {
  uint16_t *dgate, *dup;
  const uint16_t *dh, *gate, *up;
  template <int V>
  __device__ void apply(int64_t i) const {
    float d[V], g[V], u[V], og[V], ou[V];
    load_bf16<V>(dh + i, d), load_bf16<V>(gate + i, g), load_bf16<V>(up + i, u);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float s = sigmoid_f32(g[k]);
      og[k] = d[k] * u[k] * s * (1.f + g[k] * (1.f - s));
      ou[k] = d[k] * g[k] * s;
    }
    store_bf16<V>(dgate + i, og), store_bf16<V>(dup + i, ou);
  }
};

struct GateForward {
  uint16_t* y;
  const uint16_t *x, *g;
  template <int V>
  __device__ void apply(int64_t i) const {
    float xv[V], gv[V], o[V];
    load_bf16<V>(x + i, xv), load_bf16<V>(g + i, gv);
#pragma unroll
    for (int k = 0; k < V; ++k) o[k] = xv[k] * sigmoid_f32(gv[k]);
    store_bf16<V>(y + i, o);
  }
};

struct GateBackward {
  uint16_t *dx, *dg;
  const uint16_t *dy, *x, *g;
  template <int V>
  __device__ void apply(int64_t i) const {
    float d[V], xv[V], gv[V], ox[V], og[V];
    load_bf16<V>(dy + i, d), load_bf16<V>(x + i, xv), load_bf16<V>(g + i, gv);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float s = sigmoid_f32(gv[k]);
      ox[k] = d[k] * s;
      og[k] = d[k] * xv[k] * s * (1.f - s);
    }
    store_bf16<V>(dx + i, ox), store_bf16<V>(dg + i, og);
  }
};

struct ResidualAdd {
  uint16_t* y;
  const uint16_t *a, *b;
  template <int V>
  __device__ void apply(int64_t i) const {
    float av[V], bv[V], o[V];
    load_bf16<V>(a + i, av), load_bf16<V>(b + i, bv);
#pragma unroll
    for (int k = 0; k < V; ++k) o[k] = av[k] + bv[k];
    store_bf16<V>(y + i, o);
  }
};

struct CastToBf16 {
  uint16_t* y;
  const float* x;
  template <int V>
  __device__ void apply(int64_t i) const {
    float f[V];
    load_f32<V>(x + i, f);
    store_bf16<V>(y + i, f);
  }
};

struct CastToF32 {
  float* y;
  const uint16_t* x;
  template <int V>
  __device__ void apply(int64_t i) const {
    float f[V];
    load_bf16<V>(x + i, f);
    store_f32<V>(y + i, f);
  }
};

// n / V vectors grid-stride, then the n % V tail elements one by one in block 0.
template <int V, class F>
__global__ void elementwise_kernel(F f, int64_t n) {
  const int64_t n_vec = n / V;
  for (int64_t v = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; v < n_vec;
       v += static_cast<int64_t>(gridDim.x) * blockDim.x)
    f.template apply<V>(v * V);
  if (V > 1 && blockIdx.x == 0)
    for (int64_t i = n_vec * V + threadIdx.x; i < n; i += blockDim.x) f.template apply<1>(i);
}

template <class F>
void launch_elementwise(const F& f, int64_t n, bool vec_ok, void* stream, const char* op) {
  if (n == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  if (vec_ok) {
    elementwise_kernel<8, F><<<grid_for(n / 8 + 1), kThreads, 0, s>>>(f, n);
  } else {
    elementwise_kernel<1, F><<<grid_for(n), kThreads, 0, s>>>(f, n);
  }
  DT_CUDA_OK(cudaGetLastError(), op);
}

// ---- head concat / split ----

// x[(rh), j*V ..] for rh = r*H + h: the a part (j*V < da) or the b part, one vector per thread.
template <int V>
__global__ void head_concat_kernel(uint16_t* x, const uint16_t* a, const uint16_t* b, HeadConcatParams p) {
  const int64_t width = p.da + p.db, per_row = width / V, total = p.rows * p.H * per_row;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t rh = e / per_row, c = (e % per_row) * V;
    float f[V];
    if (c < p.da) {
      load_bf16<V>(a + rh * p.da + c, f);
    } else {
      const int64_t rhb = p.Hb == p.H ? rh : rh / p.H;  // shared b: row r's single head
      load_bf16<V>(b + rhb * p.db + (c - p.da), f);
    }
    store_bf16<V>(x + rh * width + c, f);
  }
}

// da[rh, :] = dx[rh, :da]
template <int V>
__global__ void head_split_a_kernel(uint16_t* da, const uint16_t* dx, HeadConcatParams p) {
  const int64_t width = p.da + p.db, per_row = p.da / V, total = p.rows * p.H * per_row;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t rh = e / per_row, c = (e % per_row) * V;
    float f[V];
    load_bf16<V>(dx + rh * width + c, f);
    store_bf16<V>(da + rh * p.da + c, f);
  }
}

// db[r, hb, :] = dx[r, hb, da:] (Hb = H), or sum_{h = 0..H-1} dx[r, h, da:] in fp32, in order (Hb = 1).
template <int V>
__global__ void head_split_b_kernel(uint16_t* db, const uint16_t* dx, HeadConcatParams p) {
  const int64_t width = p.da + p.db, per_row = p.db / V, total = p.rows * p.Hb * per_row;
  const bool shared = p.Hb != p.H;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t rhb = e / per_row, c = (e % per_row) * V;
    float acc[V];
    if (!shared) {
      load_bf16<V>(dx + rhb * width + p.da + c, acc);
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] = 0.f;
      for (int64_t h = 0; h < p.H; ++h) {
        float f[V];
        load_bf16<V>(dx + (rhb * p.H + h) * width + p.da + c, f);
#pragma unroll
        for (int k = 0; k < V; ++k) acc[k] += f[k];
      }
    }
    store_bf16<V>(db + rhb * p.db + c, acc);
  }
}

// The widest vector (8, 4, 2 or 1 bf16) that divides both widths and to which every pointer is aligned.
int concat_vec(const HeadConcatParams& p, const void* x, const void* a, const void* b) {
  for (int v : {8, 4, 2}) {
    if (p.da % v == 0 && p.db % v == 0 && aligned(x, 2 * v) && aligned(a, 2 * v) && aligned(b, 2 * v)) return v;
  }
  return 1;
}

template <template <int> class Kernel, class... Args>
void launch_by_vec(int v, int64_t work, cudaStream_t s, Args... args) {
  switch (v) {
    case 8: Kernel<8>::launch(grid_for(work / 8 + 1), s, args...); break;
    case 4: Kernel<4>::launch(grid_for(work / 4 + 1), s, args...); break;
    case 2: Kernel<2>::launch(grid_for(work / 2 + 1), s, args...); break;
    default: Kernel<1>::launch(grid_for(work), s, args...); break;
  }
}

template <int V>
struct ConcatLaunch {
  static void launch(int grid, cudaStream_t s, uint16_t* x, const uint16_t* a, const uint16_t* b,
                     HeadConcatParams p) {
    head_concat_kernel<V><<<grid, kThreads, 0, s>>>(x, a, b, p);
  }
};
template <int V>
struct SplitALaunch {
  static void launch(int grid, cudaStream_t s, uint16_t* da, const uint16_t* dx, HeadConcatParams p) {
    head_split_a_kernel<V><<<grid, kThreads, 0, s>>>(da, dx, p);
  }
};
template <int V>
struct SplitBLaunch {
  static void launch(int grid, cudaStream_t s, uint16_t* db, const uint16_t* dx, HeadConcatParams p) {
    head_split_b_kernel<V><<<grid, kThreads, 0, s>>>(db, dx, p);
  }
};

void check_concat(const HeadConcatParams& p, const char* op) {
  DT_CHECK(p.rows >= 0 && p.H >= 1 && (p.Hb == p.H || p.Hb == 1) && p.da >= 0 && p.db >= 0,
           "{}: bad sizes rows {}, H {}, Hb {}, da {}, db {} (Hb must be H or 1)", op, p.rows, p.H, p.Hb, p.da,
           p.db);
}

}  // namespace

void swiglu_forward_launch(uint16_t* h, const uint16_t* gate, const uint16_t* up, int64_t n, void* stream) {
  const bool vec = aligned(h, 16) && aligned(gate, 16) && aligned(up, 16);
  launch_elementwise(SwigluForward{h, gate, up}, n, vec, stream, "swiglu_forward");
}

void swiglu_backward_launch(uint16_t* dgate, uint16_t* dup, const uint16_t* dh, const uint16_t* gate,
                            const uint16_t* up, int64_t n, void* stream) {
  const bool vec = aligned(dgate, 16) && aligned(dup, 16) && aligned(dh, 16) && aligned(gate, 16) && aligned(up, 16);
  launch_elementwise(SwigluBackward{dgate, dup, dh, gate, up}, n, vec, stream, "swiglu_backward");
}

void sigmoid_gate_forward_launch(uint16_t* y, const uint16_t* x, const uint16_t* g, int64_t n, void* stream) {
  const bool vec = aligned(y, 16) && aligned(x, 16) && aligned(g, 16);
  launch_elementwise(GateForward{y, x, g}, n, vec, stream, "sigmoid_gate_forward");
}

void sigmoid_gate_backward_launch(uint16_t* dx, uint16_t* dg, const uint16_t* dy, const uint16_t* x,
                                  const uint16_t* g, int64_t n, void* stream) {
  const bool vec = aligned(dx, 16) && aligned(dg, 16) && aligned(dy, 16) && aligned(x, 16) && aligned(g, 16);
  launch_elementwise(GateBackward{dx, dg, dy, x, g}, n, vec, stream, "sigmoid_gate_backward");
}

void residual_add_launch(uint16_t* y, const uint16_t* a, const uint16_t* b, int64_t n, void* stream) {
  const bool vec = aligned(y, 16) && aligned(a, 16) && aligned(b, 16);
  launch_elementwise(ResidualAdd{y, a, b}, n, vec, stream, "residual_add");
}

void cast_launch(void* y, bool y_bf16, const void* x, bool x_bf16, int64_t n, void* stream) {
  if (n == 0) return;
  if (y_bf16 == x_bf16) {
    if (y == x) return;
    DT_CUDA_OK(cudaMemcpyAsync(y, x, static_cast<size_t>(n) * (y_bf16 ? 2 : 4), cudaMemcpyDeviceToDevice,
                               static_cast<cudaStream_t>(stream)),
               "cast");
    return;
  }
  // V = 8: 32-byte fp32 side (two float4), 16-byte bf16 side.
  const bool vec = aligned(y, 16) && aligned(x, 16);
  if (y_bf16)
    launch_elementwise(CastToBf16{static_cast<uint16_t*>(y), static_cast<const float*>(x)}, n, vec, stream, "cast");
  else
    launch_elementwise(CastToF32{static_cast<float*>(y), static_cast<const uint16_t*>(x)}, n, vec, stream, "cast");
}

void head_concat_forward_launch(uint16_t* x, const uint16_t* a, const uint16_t* b, const HeadConcatParams& p,
                                void* stream) {
  const char* op = "head_concat_forward";
  check_concat(p, op);
  const int64_t work = p.rows * p.H * (p.da + p.db);
  if (work == 0) return;
  launch_by_vec<ConcatLaunch>(concat_vec(p, x, a, b), work, static_cast<cudaStream_t>(stream), x, a, b, p);
  DT_CUDA_OK(cudaGetLastError(), op);
}

void head_concat_backward_launch(uint16_t* da, uint16_t* db, const uint16_t* dx, const HeadConcatParams& p,
                                 void* stream) {
  const char* op = "head_concat_backward";
  check_concat(p, op);
  const int v = concat_vec(p, dx, da, db);
  auto s = static_cast<cudaStream_t>(stream);
  if (p.rows * p.H * p.da > 0) {
    launch_by_vec<SplitALaunch>(v, p.rows * p.H * p.da, s, da, dx, p);
    DT_CUDA_OK(cudaGetLastError(), op);
  }
  if (p.rows * p.Hb * p.db > 0) {
    launch_by_vec<SplitBLaunch>(v, p.rows * p.Hb * p.db, s, db, dx, p);
    DT_CUDA_OK(cudaGetLastError(), op);
  }
}

}  // namespace dt::cuda
