// The chunked gated delta rule on the GPU, forward and backward: the WY-form math written out in
// the CPU reference kernels/cpu/gdn_chunk.h, step for step as there
// (gdn_chunk_forward_ref / gdn_chunk_backward_ref), per (batch b, value head h), chunk of n <= C
// rows, S the state entering the chunk:
//   G = cumsum(g)   Gam_ij = exp(G_i - G_j) (i >= j only)   A = strict_lower(diag(beta) K K^T o Gam)
//   Tm = (I + A)^-1   W = Tm diag(beta) (K o e^G)   U = Tm diag(beta) V   M = lower(Q K^T o Gam)
//   V' = U - W S      O = (Q o e^G) S + M V'      S' = e^{G_n} S + (K o D)^T V',  D_i = exp(G_n - G_i)
//
// This is the plainly correct version (fp32 CUDA cores, global-memory scratch, no tensor
// cores), a second GPU reference and the kernels for everything the tensor-core kernels
// (kernels/cuda/gdn_tc_*.cu, dk = dv in {64, 128}, chunk 64) do not take: chunks other than 64,
// head dims that are any multiple of 8 up to 128, dk != dv (GdnCudaImpl::kSimt).
// Its structure (the tensor-core kernels keep it; docs/gdn_kernels.md):
//   prep        (b, h, chunk) in parallel: G, M, Tm, W, U                       -> workspace
//   state pass  (b, h, 32, 16 or 8 columns of S) in parallel, sequential over chunks:
//               V', O, S' (the columns of S are independent: V'[:, y] needs only S[:, y])
//   backward:   prep again, the state pass again (saving S entering each chunk and V'), then the
//               reverse state pass (dV', dS per chunk, dS0), then the per-chunk gradients
//               (b, h, chunk) in parallel, then a fixed-order sum of dq, dk over the value heads
//               that read each key head. No atomics anywhere: same inputs, same bits.
#include "kernels/cuda/gdn_chunk.cuh"

#include <algorithm>
#include <initializer_list>

namespace dt::cuda {

namespace {

// The inputs both directions read.
struct Inputs {
  GdnCudaDims d;
  int64_t NC = 0;  // chunks per sequence
  const uint16_t *q = nullptr, *k = nullptr, *v = nullptr;
  int64_t ld_q = 0, ld_k = 0, ld_v = 0;
  const float *g = nullptr, *beta = nullptr;

  __device__ int64_t key_head(int64_t h) const { return h / (d.Hv / d.Hk); }
  __device__ float Q(int64_t r, int64_t kh, int64_t x) const { return ld_bf16(q + r * ld_q + kh * d.dk + x); }
  __device__ float K(int64_t r, int64_t kh, int64_t x) const { return ld_bf16(k + r * ld_k + kh * d.dk + x); }
  __device__ float V(int64_t r, int64_t h, int64_t y) const { return ld_bf16(v + r * ld_v + h * d.dv + y); }
};

// Which chunk this CTA works on: blockIdx = (chunk, value head, batch).
struct ChunkIdx {
  int64_t b, h, kh, c, ch, t0, n, r0;
};
__device__ ChunkIdx chunk_idx(const Inputs& in, int64_t c) {
  ChunkIdx x;
  x.b = blockIdx.z, x.h = blockIdx.y, x.c = c;
  x.kh = in.key_head(x.h);
  x.ch = (x.b * in.d.Hv + x.h) * in.NC + c;
  x.t0 = c * in.d.chunk;
  x.n = in.d.T - x.t0 < in.d.chunk ? in.d.T - x.t0 : static_cast<int64_t>(in.d.chunk);
  x.r0 = x.b * in.d.T + x.t0;
  return x;
}

// ---------------------------------------------------------------------------------------------
// prep: G, M, Tm, W, U of one chunk. grid (NC, Hv, B).
__global__ void __launch_bounds__(kThreads) gdn_prep_kernel(Inputs in, Workspace w) {
  const ChunkIdx ci = chunk_idx(in, blockIdx.x);
  const int64_t n = ci.n, C = in.d.chunk, dk = in.d.dk, dv = in.d.dv, Hv = in.d.Hv;
  __shared__ float sG[kMaxChunk], sB[kMaxChunk], sRow[kMaxChunk];
  float* G = w.at(w.G, ci.ch, C);
  float* M = w.at(w.M, ci.ch, C * C);
  float* Tm = w.at(w.Tm, ci.ch, C * C);
  float* W = w.at(w.W, ci.ch, C * dk);
  float* U = w.at(w.U, ci.ch, C * dv);
  if (threadIdx.x == 0) {  // serial cumsum: n <= 64, and a fixed order keeps it deterministic
    float acc = 0.f;
    for (int64_t i = 0; i < n; ++i) {
      acc += in.g[(ci.r0 + i) * Hv + ci.h];
      sG[i] = acc;
      G[i] = acc;
    }
  }
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sB[i] = in.beta[(ci.r0 + i) * Hv + ci.h];
  __syncthreads();
  // M = lower(Q K^T o Gam); Tm starts as A (strict lower) with 1 on the diagonal.
  for (int64_t e = threadIdx.x; e < n * n; e += blockDim.x) {
    const int64_t i = e / n, j = e % n;
    if (j > i) {
      M[i * C + j] = 0.f;
      Tm[i * C + j] = 0.f;
      continue;
    }
    float qk = 0.f, kk = 0.f;
    for (int64_t x = 0; x < dk; ++x) {
      const float kj = in.K(ci.r0 + j, ci.kh, x);
      qk += in.Q(ci.r0 + i, ci.kh, x) * kj;
      kk += in.K(ci.r0 + i, ci.kh, x) * kj;
    }
    const float gam = expf(sG[i] - sG[j]);  // i >= j: exponent <= 0
    M[i * C + j] = qk * gam;
    Tm[i * C + j] = j < i ? sB[i] * kk * gam : 1.f;
  }
  __syncthreads();
  // Forward substitution in place, row by row: Tm[i, m] = delta_im - sum_{j=m}^{i-1} A_ij Tm[j, m].
  for (int64_t i = 1; i < n; ++i) {
    for (int64_t j = threadIdx.x; j < i; j += blockDim.x) sRow[j] = Tm[i * C + j];
    __syncthreads();
    for (int64_t m = threadIdx.x; m < i; m += blockDim.x) {
      float acc = 0.f;
      for (int64_t j = m; j < i; ++j) acc += sRow[j] * Tm[j * C + m];
      Tm[i * C + m] = -acc;
    }
    __syncthreads();
  }
  // W = Tm diag(beta) (K o e^G),  U = Tm diag(beta) V
  for (int64_t e = threadIdx.x; e < n * dk; e += blockDim.x) {
    const int64_t i = e / dk, x = e % dk;
    float acc = 0.f;
    for (int64_t m = 0; m <= i; ++m) acc += Tm[i * C + m] * sB[m] * expf(sG[m]) * in.K(ci.r0 + m, ci.kh, x);
    W[i * dk + x] = acc;
  }
  for (int64_t e = threadIdx.x; e < n * dv; e += blockDim.x) {
    const int64_t i = e / dv, y = e % dv;
    float acc = 0.f;
    for (int64_t m = 0; m <= i; ++m) acc += Tm[i * C + m] * sB[m] * in.V(ci.r0 + m, ci.h, y);
    U[i * dv + y] = acc;
  }
}

// ---------------------------------------------------------------------------------------------
// Forward state pass over the chunks of one (b, h), columns [col0, col0 + cols) of S,
// cols = simt_state_cols(dv). grid (dv / cols, Hv, B). Writes o (when o != null), S_out (when
// != null), and, for the backward, the state entering each chunk and V' (when save).
struct StatePassArgs {
  const float* S0;
  uint16_t* o;
  int64_t ld_o;
  float* S_out;
  bool save;
};

// S[e] = value(e, x, y) over the state slice (x = e / cols, y = e % cols), every value computed
// before any is written (other threads read S meanwhile): a thread's values wait in registers,
// and barriers stand on both sides of the write-back.
template <class Value>
__device__ __forceinline__ void update_state_cols(float* S, int64_t dk, int64_t cols, Value value) {
  constexpr int kPer = kMaxDim * kStateCols / kThreads;
  float next[kPer];
  {
    int slot = 0;
    for (int64_t e = threadIdx.x; e < dk * cols; e += blockDim.x, ++slot) next[slot] = value(e, e / cols, e % cols);
  }
  __syncthreads();
  {
    int slot = 0;
    for (int64_t e = threadIdx.x; e < dk * cols; e += blockDim.x, ++slot) S[e] = next[slot];
  }
  __syncthreads();
}

__global__ void __launch_bounds__(kThreads) gdn_state_forward_kernel(Inputs in, Workspace w, StatePassArgs a) {
  const int64_t dk = in.d.dk, dv = in.d.dv, C = in.d.chunk, cols = simt_state_cols(dv), col0 = blockIdx.x * cols;
  const int64_t b = blockIdx.z, h = blockIdx.y;
  __shared__ float S[kMaxDim * kStateCols];
  __shared__ float Vp[kMaxChunk * kStateCols];
  __shared__ float sG[kMaxChunk];
  const int64_t state_off = (b * in.d.Hv + h) * dk * dv;
  load_state_cols(S, a.S0, state_off, dk, dv, cols, col0);
  for (int64_t c = 0; c < in.NC; ++c) {
    const ChunkIdx ci = chunk_idx(in, c);
    const int64_t n = ci.n;
    const float* G = w.at(w.G, ci.ch, C);
    const float* Wc = w.at(w.W, ci.ch, C * dk);
    const float* Uc = w.at(w.U, ci.ch, C * dv);
    const float* M = w.at(w.M, ci.ch, C * C);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sG[i] = G[i];
    __syncthreads();
    if (a.save) {
      float* Se = w.at(w.Sent, ci.ch, dk * dv);
      for (int64_t e = threadIdx.x; e < dk * cols; e += blockDim.x)
        Se[(e / cols) * dv + col0 + e % cols] = S[e];
    }
    // V' = U - W S
    for (int64_t e = threadIdx.x; e < n * cols; e += blockDim.x) {
      const int64_t i = e / cols, yy = e % cols;
      float acc = Uc[i * dv + col0 + yy];
      for (int64_t x = 0; x < dk; ++x) acc -= Wc[i * dk + x] * S[x * cols + yy];
      Vp[e] = acc;
      if (a.save) w.at(w.Vp, ci.ch, C * dv)[i * dv + col0 + yy] = acc;
    }
    __syncthreads();
    // O = (Q o e^G) S + M V'
    if (a.o) {
      for (int64_t e = threadIdx.x; e < n * cols; e += blockDim.x) {
        const int64_t i = e / cols, yy = e % cols;
        float qs = 0.f;
        for (int64_t x = 0; x < dk; ++x) qs += in.Q(ci.r0 + i, ci.kh, x) * S[x * cols + yy];
        float acc = expf(sG[i]) * qs;
        for (int64_t j = 0; j <= i; ++j) acc += M[i * C + j] * Vp[j * cols + yy];
        st_bf16(a.o + (ci.r0 + i) * a.ld_o + h * dv + col0 + yy, acc);
      }
    }
    // S' = e^{G_n} S + (K o D)^T V'
    const float gn = sG[n - 1];
    update_state_cols(S, dk, cols, [&](int64_t e, int64_t x, int64_t yy) {
      float acc = expf(gn) * S[e];
      for (int64_t i = 0; i < n; ++i)
        acc += in.K(ci.r0 + i, ci.kh, x) * expf(gn - sG[i]) * Vp[i * cols + yy];
      return acc;
    });
  }
  if (a.S_out) store_state_cols(a.S_out, S, state_off, dk, dv, cols, col0);
}

// ---------------------------------------------------------------------------------------------
// Reverse state pass, columns [col0, col0 + cols) of dS. grid (dv / cols, Hv, B). Per chunk, last
// first, with dS the gradient of the state leaving it:
//   dV' = M^T dO + (K o D) dS          dS <- (Q o e^G)^T dO + e^{G_n} dS - W^T dV'
// Saves dS (leaving) and dV' per chunk; writes dS0 when wanted.
struct StateGradArgs {
  const uint16_t* d_o;
  int64_t ld_do;
  const float* dS_out;
  float* dS0;
};

__global__ void __launch_bounds__(kThreads) gdn_state_backward_kernel(Inputs in, Workspace w, StateGradArgs a) {
  const int64_t dk = in.d.dk, dv = in.d.dv, C = in.d.chunk, cols = simt_state_cols(dv), col0 = blockIdx.x * cols;
  const int64_t b = blockIdx.z, h = blockIdx.y;
  __shared__ float dS[kMaxDim * kStateCols];
  __shared__ float dVp[kMaxChunk * kStateCols];
  __shared__ float dO[kMaxChunk * kStateCols];
  __shared__ float sG[kMaxChunk];
  const int64_t state_off = (b * in.d.Hv + h) * dk * dv;
  load_state_cols(dS, a.dS_out, state_off, dk, dv, cols, col0);
  for (int64_t c = in.NC - 1; c >= 0; --c) {
    const ChunkIdx ci = chunk_idx(in, c);
    const int64_t n = ci.n;
    const float* G = w.at(w.G, ci.ch, C);
    const float* Wc = w.at(w.W, ci.ch, C * dk);
    const float* M = w.at(w.M, ci.ch, C * C);
    float* dSl = w.at(w.dSl, ci.ch, dk * dv);
    float* dVpg = w.at(w.dVp, ci.ch, C * dv);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sG[i] = G[i];
    for (int64_t e = threadIdx.x; e < n * cols; e += blockDim.x)
      dO[e] = ld_bf16(a.d_o + (ci.r0 + e / cols) * a.ld_do + h * dv + col0 + e % cols);
    for (int64_t e = threadIdx.x; e < dk * cols; e += blockDim.x)
      dSl[(e / cols) * dv + col0 + e % cols] = dS[e];
    __syncthreads();
    const float gn = sG[n - 1];
    for (int64_t e = threadIdx.x; e < n * cols; e += blockDim.x) {
      const int64_t j = e / cols, yy = e % cols;
      float acc = 0.f;
      for (int64_t i = j; i < n; ++i) acc += M[i * C + j] * dO[i * cols + yy];
      float ks = 0.f;
      for (int64_t x = 0; x < dk; ++x) ks += in.K(ci.r0 + j, ci.kh, x) * dS[x * cols + yy];
      acc += expf(gn - sG[j]) * ks;
      dVp[e] = acc;
      dVpg[j * dv + col0 + yy] = acc;
    }
    __syncthreads();
    update_state_cols(dS, dk, cols, [&](int64_t e, int64_t x, int64_t yy) {
      float acc = expf(gn) * dS[e];
      for (int64_t i = 0; i < n; ++i)
        acc += in.Q(ci.r0 + i, ci.kh, x) * expf(sG[i]) * dO[i * cols + yy] - Wc[i * dk + x] * dVp[i * cols + yy];
      return acc;
    });
  }
  if (a.dS0) store_state_cols(a.dS0, dS, state_off, dk, dv, cols, col0);
}

// ---------------------------------------------------------------------------------------------
// Per-chunk gradients (docs/model.md), in the order of gdn_chunk_backward_ref.
// grid (NC, Hv, B). dq, dk go to the per-value-head fp32 buffers; dv, dg, dbeta are final.
struct ChunkGradArgs {
  const uint16_t* d_o;
  int64_t ld_do;
  uint16_t* dv;
  int64_t ld_dv;
  float* dg;
  float* dbeta;
};

// The sum over the CTA (kThreads threads) by a fixed halving tree in red (kThreads floats): unlike
// common.cuh's block_sum (warp sums, then the warps in order), so its bits differ from it.
__device__ float block_sum_tree_f32(float v, float* red) {
  red[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  const float r = red[0];
  __syncthreads();
  return r;
}

__global__ void __launch_bounds__(kThreads) gdn_chunk_grad_kernel(Inputs in, Workspace w, ChunkGradArgs a) {
  const ChunkIdx ci = chunk_idx(in, blockIdx.x);
  const int64_t n = ci.n, C = in.d.chunk, dk = in.d.dk, dv = in.d.dv, Hv = in.d.Hv, h = ci.h, kh = ci.kh;
  const int64_t r0 = ci.r0, ch = ci.ch;
  __shared__ float sG[kMaxChunk], sB[kMaxChunk], s_eG[kMaxChunk], sD[kMaxChunk], sdG[kMaxChunk];
  __shared__ float red[kThreads];
  const float* G = w.at(w.G, ch, C);
  const float* M = w.at(w.M, ch, C * C);
  const float* Tm = w.at(w.Tm, ch, C * C);
  const float* Se = w.at(w.Sent, ch, dk * dv);
  const float* dSl = w.at(w.dSl, ch, dk * dv);
  const float* Vp = w.at(w.Vp, ch, C * dv);
  const float* dVp = w.at(w.dVp, ch, C * dv);
  float* KK = w.at(w.KK, ch, C * C);
  float* dT = w.at(w.dT, ch, C * C);
  float* TdT = w.at(w.TdT, ch, C * C);
  float* Z = w.at(w.Z, ch, C * C);
  float* Pp = w.at(w.Pp, ch, C * C);
  float* dMG = w.at(w.dMG, ch, C * C);
  float* X = w.at(w.X, ch, C * C);
  float* dW = w.at(w.dW, ch, C * dk);
  float* PQ = w.at(w.PQ, ch, C * dk);
  float* RK = w.at(w.RK, ch, C * dk);
  float* dKb = w.at(w.dKb, ch, C * dk);
  float* dVb = w.at(w.dVb, ch, C * dv);
  auto dO = [&](int64_t i, int64_t y) { return ld_bf16(a.d_o + (r0 + i) * a.ld_do + h * dv + y); };
  auto Q = [&](int64_t i, int64_t x) { return in.Q(r0 + i, kh, x); };
  auto K = [&](int64_t i, int64_t x) { return in.K(r0 + i, kh, x); };
  auto Vv = [&](int64_t i, int64_t y) { return in.V(r0 + i, h, y); };
  auto dq_vh = [&](int64_t i, int64_t x) -> float& { return w.dq_vh[((r0 + i) * Hv + h) * dk + x]; };
  auto dk_vh = [&](int64_t i, int64_t x) -> float& { return w.dk_vh[((r0 + i) * Hv + h) * dk + x]; };

  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    sG[i] = G[i];
    sB[i] = in.beta[(r0 + i) * Hv + h];
    s_eG[i] = expf(G[i]);
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sD[i] = expf(sG[n - 1] - sG[i]);
  // <dS', S> for dG_n (block reduction, fixed order)
  float part = 0.f;
  for (int64_t e = threadIdx.x; e < dk * dv; e += blockDim.x) part += dSl[e] * Se[e];
  const float dS_dot_S = block_sum_tree_f32(part, red);  // also syncs sD

  // A: P = dO S^T, R = V' dS'^T, dW = -dV' S^T  (n x dk)
  for (int64_t e = threadIdx.x; e < n * dk; e += blockDim.x) {
    const int64_t i = e / dk, x = e % dk;
    float P = 0.f, R = 0.f, mW = 0.f;
    for (int64_t y = 0; y < dv; ++y) {
      P += dO(i, y) * Se[x * dv + y];
      R += Vp[i * dv + y] * dSl[x * dv + y];
      mW -= dVp[i * dv + y] * Se[x * dv + y];
    }
    dq_vh(i, x) = P * s_eG[i];
    dk_vh(i, x) = R * sD[i];
    PQ[i * dk + x] = P * Q(i, x);
    RK[i * dk + x] = R * K(i, x);
    dW[i * dk + x] = mW;
  }
  // B: KK, dM o Gam, X = dM o M  (n x n)
  for (int64_t e = threadIdx.x; e < n * n; e += blockDim.x) {
    const int64_t i = e / n, j = e % n;
    float kk = 0.f;
    for (int64_t x = 0; x < dk; ++x) kk += K(i, x) * K(j, x);
    KK[i * C + j] = kk;
    float dM = 0.f;
    if (j <= i)
      for (int64_t y = 0; y < dv; ++y) dM += dO(i, y) * Vp[j * dv + y];
    const float gam = j <= i ? expf(sG[i] - sG[j]) : 0.f;
    dMG[i * C + j] = dM * gam;
    X[i * C + j] = dM * (j <= i ? M[i * C + j] : 0.f);
  }
  __syncthreads();
  // C: dT = dW Kb^T + dU Vb^T on the lower triangle (Tm is lower), Kb_m = beta_m k_m e^{G_m}, Vb_m = beta_m v_m
  for (int64_t e = threadIdx.x; e < n * n; e += blockDim.x) {
    const int64_t i = e / n, m = e % n;
    float acc = 0.f;
    if (m <= i) {
      float kw = 0.f, vu = 0.f;
      for (int64_t x = 0; x < dk; ++x) kw += dW[i * dk + x] * K(m, x);
      for (int64_t y = 0; y < dv; ++y) vu += dVp[i * dv + y] * Vv(m, y);
      acc = sB[m] * (s_eG[m] * kw + vu);
    }
    dT[i * C + m] = acc;
  }
  // dKb = Tm^T dW, dVb = Tm^T dU
  for (int64_t e = threadIdx.x; e < n * dk; e += blockDim.x) {
    const int64_t m = e / dk, x = e % dk;
    float acc = 0.f;
    for (int64_t i = m; i < n; ++i) acc += Tm[i * C + m] * dW[i * dk + x];
    dKb[m * dk + x] = acc;
  }
  for (int64_t e = threadIdx.x; e < n * dv; e += blockDim.x) {
    const int64_t m = e / dv, y = e % dv;
    float acc = 0.f;
    for (int64_t i = m; i < n; ++i) acc += Tm[i * C + m] * dVp[i * dv + y];
    dVb[m * dv + y] = acc;
  }
  __syncthreads();
  // D: TdT = Tm^T dT
  for (int64_t e = threadIdx.x; e < n * n; e += blockDim.x) {
    const int64_t i = e / n, m = e % n;
    float acc = 0.f;
    for (int64_t p = i > m ? i : m; p < n; ++p) acc += Tm[p * C + i] * dT[p * C + m];
    TdT[i * C + m] = acc;
  }
  __syncthreads();
  // E: dA = -strict_lower(TdT Tm^T);  Z = dA o KK o Gam (dbeta);  Pp = diag(beta) dA o Gam (dK, dG)
  for (int64_t e = threadIdx.x; e < n * n; e += blockDim.x) {
    const int64_t i = e / n, j = e % n;
    float z = 0.f, pp = 0.f;
    if (j < i) {
      float acc = 0.f;
      for (int64_t m = 0; m <= j; ++m) acc += TdT[i * C + m] * Tm[j * C + m];
      const float dA = -acc, gam = expf(sG[i] - sG[j]);
      z = dA * KK[i * C + j] * gam;
      pp = sB[i] * dA * gam;
    }
    Z[i * C + j] = z;
    Pp[i * C + j] = pp;
  }
  __syncthreads();
  // F: dQ += (dM o Gam) K;  dK += (dM o Gam)^T Q + (Pp + Pp^T) K + diag(beta e^G) dKb;  dv = diag(beta) dVb
  for (int64_t e = threadIdx.x; e < n * dk; e += blockDim.x) {
    const int64_t i = e / dk, x = e % dk;
    float dq = 0.f, dkk = 0.f;
    for (int64_t j = 0; j <= i; ++j) dq += dMG[i * C + j] * K(j, x);
    for (int64_t r = i; r < n; ++r) dkk += dMG[r * C + i] * Q(r, x);
    for (int64_t j = 0; j < n; ++j) dkk += (Pp[i * C + j] + Pp[j * C + i]) * K(j, x);
    dkk += sB[i] * s_eG[i] * dKb[i * dk + x];
    dq_vh(i, x) += dq;
    dk_vh(i, x) += dkk;
  }
  for (int64_t e = threadIdx.x; e < n * dv; e += blockDim.x) {
    const int64_t i = e / dv, y = e % dv;
    st_bf16(a.dv + (r0 + i) * a.ld_dv + h * dv + y, sB[i] * dVb[i * dv + y]);
  }
  // G: dG and dbeta, one thread per row
  float rk_total = 0.f;  // sum_i D_i sum_x RK[i, x], needed by row n-1
  {
    float part_rk = 0.f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      float s = 0.f;
      for (int64_t x = 0; x < dk; ++x) s += RK[i * dk + x];
      part_rk += sD[i] * s;
    }
    rk_total = block_sum_tree_f32(part_rk, red);
  }
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    float pq = 0.f, rk = 0.f, s = 0.f;
    for (int64_t x = 0; x < dk; ++x) {
      pq += PQ[i * dk + x];
      rk += RK[i * dk + x];
      s += dKb[i * dk + x] * K(i, x);
    }
    float sv = 0.f;
    for (int64_t y = 0; y < dv; ++y) sv += dVb[i * dv + y] * Vv(i, y);
    float xs = 0.f, zrow = 0.f, ys = 0.f;
    for (int64_t j = 0; j < n; ++j) {
      xs += X[i * C + j] - X[j * C + i];
      zrow += Z[i * C + j];
      ys += sB[i] * Z[i * C + j] - sB[j] * Z[j * C + i];
    }
    float dG = s_eG[i] * pq - sD[i] * rk + xs + ys + sB[i] * s_eG[i] * s;
    if (i == n - 1) dG += s_eG[n - 1] * dS_dot_S + rk_total;
    sdG[i] = dG;
    a.dbeta[(r0 + i) * Hv + h] = zrow + s * s_eG[i] + sv;
  }
  __syncthreads();
  if (threadIdx.x == 0) {  // dg = reverse_cumsum(dG), fixed order
    float acc = 0.f;
    for (int64_t i = n - 1; i >= 0; --i) {
      acc += sdG[i];
      a.dg[(r0 + i) * Hv + h] = acc;
    }
  }
}

// dq[r, kh] = sum over the value heads h of key head kh of dq_vh[r, h] (fixed order), to bf16.
__global__ void gdn_sum_heads_kernel(const float* src, uint16_t* dst, int64_t ld_dst, int64_t rows, int64_t Hk,
                                     int64_t Hv, int64_t dk) {
  const int64_t group = Hv / Hk, total = rows * Hk * dk;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / (Hk * dk), kh = (e / dk) % Hk, x = e % dk;
    float acc = 0.f;
    for (int64_t h = kh * group; h < (kh + 1) * group; ++h) acc += src[(r * Hv + h) * dk + x];
    st_bf16(dst + r * ld_dst + kh * dk + x, acc);
  }
}

// ---------------------------------------------------------------------------------------------
// Host side.

void check_dims(const GdnCudaDims& d, const char* op) {
  DT_CHECK(d.B >= 1 && d.T >= 1, "{}: B ({}) and T ({}) must be >= 1", op, d.B, d.T);
  DT_CHECK(d.Hk >= 1 && d.Hv % d.Hk == 0, "{}: value heads ({}) must be a multiple of key heads ({})", op, d.Hv,
           d.Hk);
  DT_CHECK(d.dk >= kDimStep && d.dk <= kMaxDim && d.dk % kDimStep == 0 && d.dv >= kDimStep && d.dv <= kMaxDim &&
               d.dv % kDimStep == 0,
           "{}: head dims dk = {}, dv = {}: the CUDA kernels take multiples of {} up to {} (dk may differ from dv)",
           op, d.dk, d.dv, kDimStep, kMaxDim);
  DT_CHECK(d.chunk >= 1 && d.chunk <= kMaxChunk, "{}: chunk {} must be in [1, {}]", op, d.chunk, kMaxChunk);
  DT_CHECK(d.Hv <= 65535 && d.B <= 65535, "{}: Hv ({}) and B ({}) must be <= 65535 (grid y, z)", op, d.Hv, d.B);
}

int64_t n_chunks(const GdnCudaDims& d) { return (d.T + d.chunk - 1) / d.chunk; }

// Carves the workspace out of one allocation; with base == null only counts floats.
int64_t layout(Workspace& w, const GdnCudaDims& d, bool backward, float* base) {
  w.C = d.chunk, w.dk = d.dk, w.dv = d.dv, w.n_ch = d.B * d.Hv * n_chunks(d);
  const int64_t C = d.chunk, nch = w.n_ch;
  int64_t off = 0;
  auto take = [&](float*& p, int64_t per) {
    p = base ? base + off : nullptr;
    off += (per * nch + 63) / 64 * 64;  // 256-byte aligned pieces
  };
  take(w.G, C), take(w.W, C * d.dk), take(w.U, C * d.dv), take(w.M, C * C), take(w.Tm, C * C);
  if (backward) {
    take(w.Sent, d.dk * d.dv), take(w.dSl, d.dk * d.dv), take(w.Vp, C * d.dv), take(w.dVp, C * d.dv);
    for (float** p : {&w.KK, &w.dT, &w.TdT, &w.Z, &w.Pp, &w.dMG, &w.X}) take(*p, C * C);
    for (float** p : {&w.dW, &w.PQ, &w.RK, &w.dKb}) take(*p, C * d.dk);
    take(w.dVb, C * d.dv);
    // per value head dq, dk over all rows: B*T*Hv*dk each (not per chunk)
    const int64_t per_vh = (d.B * d.T * d.Hv * d.dk + 63) / 64 * 64;
    w.dq_vh = base ? base + off : nullptr;
    off += per_vh;
    w.dk_vh = base ? base + off : nullptr;
    off += per_vh;
  }
  return off;
}

Inputs make_inputs(const GdnCudaDims& d, const uint16_t* q, const uint16_t* k, const uint16_t* v, int64_t ld_q,
                   int64_t ld_k, int64_t ld_v, const float* g, const float* beta) {
  Inputs in;
  in.d = d, in.NC = n_chunks(d);
  in.q = q, in.k = k, in.v = v, in.ld_q = ld_q, in.ld_k = ld_k, in.ld_v = ld_v, in.g = g, in.beta = beta;
  return in;
}

void check_rows(int64_t ld, int64_t width, const void* p, const char* op, const char* name) {
  DT_CHECK(p != nullptr, "{}: {} is null", op, name);
  DT_CHECK(ld >= width, "{}: {} row stride {} is smaller than a row ({})", op, name, ld, width);
}

float* alloc_workspace(int64_t floats, void* pool, cudaStream_t s, const char* op) {
  void* p = nullptr;
  DT_CUDA_OK(scratch_malloc(&p, static_cast<size_t>(floats) * sizeof(float), pool, s), op);
  return static_cast<float*>(p);
}

void launch_check(const char* op, const char* kernel) {
  cudaError_t err = cudaGetLastError();
  DT_CHECK(err == cudaSuccess, "{}: launch of {} failed: {}", op, kernel, cudaGetErrorString(err));
}

}  // namespace

void sum_value_heads(const float* src, uint16_t* dst, int64_t ld_dst, int64_t rows, int64_t Hk, int64_t Hv,
                     int64_t dk, cudaStream_t s, const char* op) {
  const int64_t total = rows * Hk * dk;
  const int blocks = static_cast<int>(std::min<int64_t>((total + 255) / 256, 65535));
  gdn_sum_heads_kernel<<<blocks, 256, 0, s>>>(src, dst, ld_dst, rows, Hk, Hv, dk);
  launch_check(op, "gdn_sum_heads_kernel");
}

// The sizes and the rows of q, k and v, which the forward and the backward take alike.
template <class Params>
const GdnCudaDims& check_inputs(const Params& p, const char* op) {
  const GdnCudaDims& d = p.dims;
  check_dims(d, op);
  check_rows(p.ld_q, d.Hk * d.dk, p.q, op, "q");
  check_rows(p.ld_k, d.Hk * d.dk, p.k, op, "k");
  check_rows(p.ld_v, d.Hv * d.dv, p.v, op, "v");
  return d;
}

void check_forward_params(const GdnCudaForwardParams& p, const char* op) {
  const GdnCudaDims& d = check_inputs(p, op);
  check_rows(p.ld_o, d.Hv * d.dv, p.o, op, "o");
  DT_CHECK(p.g && p.beta, "{}: g and beta must not be null", op);
}

void check_backward_params(const GdnCudaBackwardParams& p, const char* op) {
  const GdnCudaDims& d = check_inputs(p, op);
  check_rows(p.ld_do, d.Hv * d.dv, p.d_o, op, "d_o");
  check_rows(p.ld_dq, d.Hk * d.dk, p.dq, op, "dq");
  check_rows(p.ld_dk, d.Hk * d.dk, p.dk, op, "dk");
  check_rows(p.ld_dv, d.Hv * d.dv, p.dv, op, "dv");
  DT_CHECK(p.g && p.beta && p.dg && p.dbeta, "{}: g, beta, dg and dbeta must not be null", op);
  DT_CHECK(!p.q_rnorm == !p.k_rnorm,
           "{}: q_rnorm and k_rnorm come together (the l2norm's backward is taken for both or neither)", op);
  DT_CHECK(!p.q_rnorm || (p.q_scale > 0.f && p.k_scale > 0.f), "{}: q_scale and k_scale must be > 0, got {} and {}",
           op, p.q_scale, p.k_scale);
}

int64_t chunk_workspace_bytes_simt(const GdnCudaDims& d, bool backward) {
  Workspace w;
  return layout(w, d, backward, nullptr) * 4;
}

// What the SIMT forward and backward start with: the workspace (from p.pool), the inputs, the
// grids of the per-chunk and the state-pass kernels, and prep launched.
struct SimtRun {
  Workspace w;
  float* base = nullptr;
  Inputs in;
  dim3 chunk_grid, state_grid;
};
template <class Params>
SimtRun start_simt(const Params& p, bool backward, cudaStream_t s, const char* op) {
  const GdnCudaDims& d = p.dims;
  SimtRun r;
  r.base = alloc_workspace(layout(r.w, d, backward, nullptr), p.pool, s, op);
  layout(r.w, d, backward, r.base);
  r.in = make_inputs(d, p.q, p.k, p.v, p.ld_q, p.ld_k, p.ld_v, p.g, p.beta);
  r.chunk_grid = dim3(static_cast<unsigned>(r.in.NC), static_cast<unsigned>(d.Hv), static_cast<unsigned>(d.B));
  r.state_grid = dim3(static_cast<unsigned>(d.dv / simt_state_cols(d.dv)), static_cast<unsigned>(d.Hv),
                      static_cast<unsigned>(d.B));
  gdn_prep_kernel<<<r.chunk_grid, kThreads, 0, s>>>(r.in, r.w);
  launch_check(op, "gdn_prep_kernel");
  return r;
}

void chunk_forward_simt(const GdnCudaForwardParams& p, cudaStream_t s) {
  const char* op = "gdn_chunk_forward_cuda (simt)";
  check_forward_params(p, op);
  const SimtRun r = start_simt(p, false, s, op);
  gdn_state_forward_kernel<<<r.state_grid, kThreads, 0, s>>>(r.in, r.w,
                                                             StatePassArgs{p.S0, p.o, p.ld_o, p.S_out, false});
  launch_check(op, "gdn_state_forward_kernel");
  DT_CUDA_OK(cudaFreeAsync(r.base, s), op);
}

void chunk_backward_simt(const GdnCudaBackwardParams& p, cudaStream_t s) {
  const char* op = "gdn_chunk_backward_cuda (simt)";
  const GdnCudaDims& d = p.dims;
  check_backward_params(p, op);
  const SimtRun r = start_simt(p, true, s, op);
  const Inputs& in = r.in;
  const Workspace& w = r.w;
  const dim3 chunk_grid = r.chunk_grid, state_grid = r.state_grid;
  gdn_state_forward_kernel<<<state_grid, kThreads, 0, s>>>(in, w, StatePassArgs{p.S0, nullptr, 0, nullptr, true});
  launch_check(op, "gdn_state_forward_kernel");
  gdn_state_backward_kernel<<<state_grid, kThreads, 0, s>>>(in, w, StateGradArgs{p.d_o, p.ld_do, p.dS_out, p.dS0});
  launch_check(op, "gdn_state_backward_kernel");
  gdn_chunk_grad_kernel<<<chunk_grid, kThreads, 0, s>>>(in, w, ChunkGradArgs{p.d_o, p.ld_do, p.dv, p.ld_dv, p.dg, p.dbeta});
  launch_check(op, "gdn_chunk_grad_kernel");
  sum_value_heads(w.dq_vh, p.dq, p.ld_dq, d.B * d.T, d.Hk, d.Hv, d.dk, s, op);
  sum_value_heads(w.dk_vh, p.dk, p.ld_dk, d.B * d.T, d.Hk, d.Hv, d.dk, s, op);
  DT_CUDA_OK(cudaFreeAsync(r.base, s), op);
}

}  // namespace dt::cuda
