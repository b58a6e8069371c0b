// The chunked gated delta rule on tensor cores, forward (docs/model.md; docs/gdn_kernels.md; the
// plain fp32 version is kernels/cuda/gdn_chunk.cu, the reference kernels/cpu/gdn_chunk.h). Per
// (batch b, value head h), chunk of 64 rows, S the state entering the chunk:
//   G = cumsum(g)   Gam_ij = exp(G_i - G_j) (i >= j only)   A = strict_lower(diag(beta) K K^T o Gam)
//   T = (I + A)^-1   W = T diag(beta) (K o e^G)   U = T diag(beta) V
//   V' = U - W S     O = (Q o e^G) S + lower(Q K^T o Gam) V'     S' = e^{G_n} S + (K o D)^T V'
// Three kernels:
//   prep    (chunk, h, b) in parallel: G, K K^T, T (fp32; bf16 copy for the backward), W and U
//           (bf16)                                                                -> workspace
//           (or beside the state pass, launched after it, which waits for each chunk: TcArgs::fed,
//           GdnPlan::prep_beside)
//   state   (column tile of S, h, b), sequential over chunks: S kept in fp32 registers (mma
//           accumulators); per chunk V' = U - W S and S' = e^{G_n} S + K^T (D o V'), saving the
//           entering S and V' (both bf16) per chunk; the next chunks' tiles are prefetched (cp.async)
//           meanwhile.
//   output  (chunk x h x b, chunk-major) in parallel: M = lower(Q K^T o Gam), O = (Q o e^G) S + M V';
//           it chases the state pass (TcArgs::ready, GdnPlan::chase_output: started while the
//           state pass runs, each CTA waiting for its chunk's S and V').
// The sequential pass does only the state chain; everything it does not need runs in the
// parallel kernels (O inside the state pass would take its shared memory and lengthen the chain).
// The saved S and V' also serve the backward (gdn_tc_launch.cu), which then skips prep and the
// state pass.
// All products are mma.sync m16n8k16 with bf16 operands and fp32 accumulation; G, the decays, T
// and the state S stay fp32. T's factors in W and U, and the output's M, go in as high + low bf16
// parts (bf16x2_split, two products). The state pass multiplies S and D o V' in plain bf16, as fla
// does (a split would double the products on the chain), and U is saved in bf16. The output kernel
// takes V' and S as saved, in plain bf16 (docs/gdn_kernels.md, "Precision").
// No atomics in the sums: same inputs, same bits (the chase's counts only say when a chunk is ready).
#include "kernels/cuda/gdn_tc.cuh"

namespace dt::cuda {

namespace {

// ---------------------------------------------------------------------------------------------
// prep: grid (NC, Hv, B). 37 KB of shared memory at D = 64 (6 CTAs per SM): A is inverted in
// place, and the T products take their operand fragments straight from fp32 T.
template <int D>
struct PrepLayout {
  static constexpr int kLd = D + 8;
  size_t K = 0, V = 0, AT = 0, G = 0, B = 0, BE = 0, bytes = 0;
  __host__ __device__ constexpr PrepLayout() {
    SmemPlan p;
    K = p.take(kC * kLd * 2), V = p.take(kC * kLd * 2);
    AT = p.take(kC * kLdF * 4), G = p.take(kC * 4), B = p.take(kC * 4), BE = p.take(kC * 4);
    bytes = p.bytes;
  }
};

// acc[0][n] += (T diag(s)) [m0 + (0..15), :] X[:, 8n + (0..7)] with s_m = beta_m e^{G_m} or
// beta_m, X (64 x NT*8 bf16, stored [k][n]): per k-step the warp builds T diag(s)'s mma fragments
// from fp32 T in registers, split into high and low bf16 parts (bf16x2_split), and multiplies both
// with the same X fragments.
template <int NT>
__device__ __forceinline__ void prep_t_times(float (&acc)[1][NT][4], const float* sT, const float* s,
                                             const uint16_t* X, int ldx, int m0, int lane) {
  const int g = lane >> 2, t2 = 2 * (lane & 3);
#pragma unroll 1
  for (int ks = 0; ks <= m0 / 16; ++ks) {  // T is lower-triangular: its k-steps past the rows are zero
    uint32_t hi[4], lo[4];
#pragma unroll
    for (int f = 0; f < 4; ++f) {
      // fragment register f: row g (+8 when f is odd), columns c, c + 1 (+8 when f >= 2)
      const int r = m0 + g + 8 * (f & 1), c = 16 * ks + t2 + 8 * (f >> 1);
      // c is even; s and sT 16-byte aligned, kLdF even
      const float2 sc = *reinterpret_cast<const float2*>(s + c), t = *reinterpret_cast<const float2*>(sT + r * kLdF + c);
      bf16x2_split(t.x * sc.x, t.y * sc.y, hi[f], lo[f]);
    }
#pragma unroll
    for (int nj = 0; nj < NT; nj += 2) {
      uint32_t b[2][2];
      load_b2<true>(b, X, ldx, 16 * ks, 8 * nj, lane);
      mma_bf16_16816(acc[0][nj], hi, b[0]);
      mma_bf16_16816(acc[0][nj + 1], hi, b[1]);
      mma_bf16_16816(acc[0][nj], lo, b[0]);
      mma_bf16_16816(acc[0][nj + 1], lo, b[1]);
    }
  }
}

// prep's work on one chunk (gdn_tc_prep_kernel, gdn_tc_prep_fed_kernel).
template <int D>
__device__ __forceinline__ void prep_chunk(const TcArgs& a, const TcChunk& ck, unsigned char* sm) {
  constexpr PrepLayout<D> L{};
  constexpr int kLd = L.kLd;
  uint16_t *sK = reinterpret_cast<uint16_t*>(sm + L.K), *sV = reinterpret_cast<uint16_t*>(sm + L.V);
  float* sAT = reinterpret_cast<float*>(sm + L.AT);
  float *sG = reinterpret_cast<float*>(sm + L.G), *sB = reinterpret_cast<float*>(sm + L.B);
  float* sBE = reinterpret_cast<float*>(sm + L.BE);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, m0 = 16 * tc_row_block<4>(warp, tc_cta_rotation(a));
  const int64_t base = ck.ch * kC * D;

  // V (wanted only for U, last) in a second group of copies, landing during A, its inverse and W
  load_tile<kC, D>(sK, kLd, a.k + ck.r0 * a.ld_k + ck.kh * D, a.ld_k, ck.n, a.vec_in);
  cp_async_commit();
  load_tile<kC, D>(sV, kLd, a.v + ck.r0 * a.ld_v + ck.h * D, a.ld_v, ck.n, a.vec_in);
  cp_async_commit();
  if (warp == 0) {
    chunk_gates(a, ck, sG, sB, lane);
    __syncwarp();
    a.G[ck.ch * kC + lane] = sG[lane];
    a.G[ck.ch * kC + lane + 32] = sG[lane + 32];
    sBE[lane] = sB[lane] * __expf(sG[lane]);
    sBE[lane + 32] = sB[lane + 32] * __expf(sG[lane + 32]);
  }
  cp_async_wait<1>();
  __syncthreads();
  if (a.k_hat) {  // K's l2norm taken here (the forward's k_hat and k_r)
    l2norm_tile_rows<D, kTcThreads>(sK, kLd, ck.n, a.k_scale, a.k_hat + ck.r0 * a.ld_hat + ck.kh * D, a.ld_hat,
                                    a.k_r + ck.r0 * a.Hk + ck.kh, a.Hk, a.vec_hat);
    __syncthreads();
  }

  {  // A = strict_lower(diag(beta) K K^T o Gam), zeros on and above the diagonal
    float acc[1][8][4];
    zero_acc(acc);
    warp_mma<1, 8, D, false, false, Tri::kLowerN>(acc, sK, kLd, m0, sK, kLd, 0, lane);
#pragma unroll
    for (int ni = 0; ni < 8; ++ni) {
      const bool zero = above_diagonal(8 * ni, m0);
#pragma unroll
      for (int e = 0; e < 4; e += 2) {  // columns j, j + 1 in one 8-byte store
        const int i = m0 + acc_row(0, e, lane), j = acc_col(ni, e, lane);
        float v[2];
#pragma unroll
        for (int u = 0; u < 2; ++u)
          v[u] = !zero && j + u < i ? sB[i] * acc[0][ni][e + u] * __expf(sG[i] - sG[j + u]) : 0.f;
        *reinterpret_cast<float2*>(sAT + i * kLdF + j) = make_float2(v[0], v[1]);
      }
    }
  }
  __syncthreads();
  invert_unit_lower(sAT);
  // T for the backward's grad_wy (bf16, as it multiplies there): 16 threads a row, 4 columns each
  // (a 16-byte shared-memory load, an 8-byte store), a row step of 8 (no index division in the loop).
  {
    const int m = 4 * (threadIdx.x % 16);
    uint16_t* dst = a.Tb + ck.ch * kC * kC + m;
#pragma unroll 4
    for (int i = threadIdx.x / 16; i < kC; i += kTcThreads / 16) {
      const float4 t = *reinterpret_cast<const float4*>(sAT + i * kLdF + m);
      *reinterpret_cast<uint2*>(dst + i * kC) = make_uint2(pack_bf16x2(t.x, t.y), pack_bf16x2(t.z, t.w));
    }
  }
  // W = Tk K with Tk = T diag(beta e^G), then U = Tv V with Tv = T diag(beta), both saved in bf16.
  // K, V are exact bf16 inputs; the T factors go in high and low parts.
  // Each leaves through the tile it was made from, in whole rows (store_tile_cta).
  {
    float acc[1][D / 8][4];
    zero_acc(acc);
    prep_t_times<D / 8>(acc, sAT, sBE, sK, kLd, m0, lane);
    cp_async_wait<0>();
    __syncthreads();  // every warp is done with K; V has landed
    store_acc_bf16(sK, kLd, m0, acc, lane);
  }
  {
    float acc[1][D / 8][4];
    zero_acc(acc);
    prep_t_times<D / 8>(acc, sAT, sB, sV, kLd, m0, lane);
    __syncthreads();  // every warp is done with V; W is complete
    store_acc_bf16(sV, kLd, m0, acc, lane);
  }
  store_tile_cta<kC, D>(a.W + base, D, sK, kLd);
  __syncthreads();
  store_tile_cta<kC, D>(a.U + base, D, sV, kLd);
}

template <int D>
__global__ void __launch_bounds__(kTcThreads) gdn_tc_prep_kernel(TcArgs a) {
  TcTimelineScope tl_scope(a.tl, kTlPrep);
  prep_chunk<D>(a, tc_chunk(a, blockIdx.x, blockIdx.y, blockIdx.z), dynamic_smem());
}

// prep feeding the forward state pass launched before it (TcArgs::fed; GdnPlan::prep_beside):
// a 1-D grid, chunk-major (the order in which the state pass takes the chunks),
// each CTA counting its chunk once written. The output kernel after it (programmatic dependent
// launch) starts once every CTA here has; its CTAs wait for the state pass, which waits only for
// chunks of CTAs here, all begun by then.
template <int D>
__global__ void __launch_bounds__(kTcThreads) gdn_tc_prep_fed_kernel(TcArgs a) {
  TcTimelineScope tl_scope(a.tl, kTlPrepFed);
  grid_launch_dependents();
  const TcChunk ck = tc_chunk_major(a, blockIdx.x);
  prep_chunk<D>(a, ck, dynamic_smem());
  chunk_fed_signal(a, ck.ch);
  // The last chunks' CTAs end only after the state pass has (S_out): so does this kernel, and so the
  // output kernel, which waits for this one at its end.
  if (ck.c == a.NC - 1) grid_dependency_wait();
}

// ---------------------------------------------------------------------------------------------
// State pass: grid (D / BV, Hv, B); columns [y0, y0 + BV) of S, kStateWarps(D) warps. Warp w holds
// rows [w D / warps, + D / warps) of the S tile as fp32 accumulators, and rows [16 (w % 4), + 16) of
// every 64-row product; with 8 warps (D = 128) the 64-row product W S is split over k between
// warps w and w + 4 (swap_k_halves) and each finishes V' for BV / 2 of the columns. Saves S
// entering each chunk and V' (bf16, as the products here use them).
// kStages chunks' tiles in a ring (cp.async): chunk c's copies are issued kStages - 1 chunks ahead.
template <int D, int BV, int kStages>
struct StateFwdLayout {
  static constexpr int kLd = D + 8, kLdV = BV + 8, kLdU = BV + 8;
  // stage 0 offsets; stage s is stage 0 + s * stage
  size_t W = 0, K = 0, U = 0, G = 0, stage = 0;
  size_t S = 0, Vd = 0, xch = 0, bytes = 0;
  __host__ __device__ constexpr StateFwdLayout() {
    SmemPlan p;
    W = p.take(kC * kLd * 2), K = p.take(kC * kLd * 2), U = p.take(kC * kLdU * 2), G = p.take(kC * 4);
    stage = p.bytes;
    p.take(stage * (kStages - 1));
    S = p.take(D * kLdV * 2), Vd = p.take(kC * kLdV * 2);
    xch = p.take(kSwapBytes<D, BV>);
    bytes = p.bytes;
  }
};

template <int D, int BV, int kStages>
__global__ void __launch_bounds__(kStateWarps<D> * 32) gdn_tc_state_forward_kernel(TcArgs a) {
  TcTimelineScope tl_scope(a.tl, kTlStateForward);
  constexpr StateFwdLayout<D, BV, kStages> L{};
  constexpr int kLd = L.kLd, kLdV = L.kLdV, kLdU = L.kLdU, NT = BV / 8;
  constexpr int kWarps = kStateWarps<D>, kThreads = kWarps * 32, kParts = kWarps / 4, MT = D / kWarps / 16;
  constexpr int kK = D / kParts, kKeep = NT / kParts;  // k per part of W S; n-tiles each part finishes
  static_assert(MT >= 1 && NT % kParts == 0, "tile split");
  unsigned char* sm = dynamic_smem();
  uint16_t* sS = reinterpret_cast<uint16_t*>(sm + L.S);
  uint16_t* sVd = reinterpret_cast<uint16_t*>(sm + L.Vd);
  float* sxch = reinterpret_cast<float*>(sm + L.xch);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, part = warp / 4, m0 = 16 * (warp % 4);
  const int y0 = blockIdx.x * BV, xw = warp * (D / kWarps);
  const int64_t h = blockIdx.y, b = blockIdx.z, bh = b * a.Hv + h, kh = h / (a.Hv / a.Hk);
  grid_launch_dependents();  // the chasing output kernel may start once every CTA here runs

  auto prefetch = [&](int64_t c, int s) {
    unsigned char* st = sm + s * L.stage;
    const int64_t ch = bh * a.NC + c, r0 = b * a.T + c * kC;
    const int n = static_cast<int>(a.T - c * kC < kC ? a.T - c * kC : kC);
    load_w_k_tiles<D, kThreads>(st + L.W, st + L.K, kLd, a, ch, r0, kh, n);
    load_tile<kC, BV, kThreads>(reinterpret_cast<uint16_t*>(st + L.U), kLdU, a.U + ch * kC * D + y0, D, kC, true);
    load_tile_f32<1, kC, kThreads>(reinterpret_cast<float*>(st + L.G), kC, a.G + ch * kC, kC);
  };

  float S[MT][NT][4];
  load_state_acc<D>(S, a.S0, bh, xw, y0, lane);
  // Fed by prep beside it (TcArgs::fed): thread 0 waits for a chunk's tiles before the barrier after
  // which they are copied.
  const int* fed = a.fed ? a.fed + bh * a.NC : nullptr;
  int64_t fed_until = 0;
  if (fed) {
    if (threadIdx.x == 0)
      for (int j = 0; j < kStages - 1 && j < a.NC; ++j) chunk_fed_wait(fed, j, a.NC, fed_until);
    __syncthreads();
  }
  for (int j = 0; j < kStages - 1; ++j) {  // one commit group per chunk, empty past the end
    if (j < a.NC) prefetch(j, j);
    cp_async_commit();
  }
  for (int64_t c = 0; c < a.NC; ++c) {
    unsigned char* st = sm + (c % kStages) * L.stage;
    const uint16_t* sW = reinterpret_cast<const uint16_t*>(st + L.W);
    const uint16_t* sK = reinterpret_cast<const uint16_t*>(st + L.K);
    // U's tile then takes V' (each thread over the elements of U it read), which leaves in whole rows
    uint16_t* sU = reinterpret_cast<uint16_t*>(st + L.U);
    const float* sG = reinterpret_cast<const float*>(st + L.G);
    const int64_t ch = bh * a.NC + c;
#pragma unroll
    for (int mi = 0; mi < MT; ++mi)
#pragma unroll
      for (int ni = 0; ni < NT; ++ni)
#pragma unroll
        for (int e = 0; e < 4; e += 2) {
          const int at = (xw + acc_row(mi, e, lane)) * kLdV + acc_col(ni, e, lane);
          st_bf16x2(sS + at, S[mi][ni][e], S[mi][ni][e + 1], true);
        }
    if (fed && threadIdx.x == 0 && c + kStages - 1 < a.NC) chunk_fed_wait(fed, c + kStages - 1, a.NC, fed_until);
    cp_async_wait<kStages - 2>();  // chunk c's group done; chunks c + 1 .. c + kStages - 2 may fly
    __syncthreads();  // chunk c's tiles and sS are complete; every warp is done with chunk c - 1
    // chunks c - kSignalEvery .. c - 1: their S and V' were written before this barrier (the last
    // one's V' after chunk c - 1's second barrier)
    if (c > 0 && c % kSignalEvery == 0) chunks_ready_signal(a, ch - kSignalEvery, kSignalEvery, threadIdx.x == 0);
    if (c + kStages - 1 < a.NC) prefetch(c + kStages - 1, static_cast<int>((c + kStages - 1) % kStages));
    cp_async_commit();
    const float gl = sG[kC - 1];
    {  // V' = U - W S (saved); Vd = D o V' (D_i = exp(G_n - G_i)) for the state update
      float dec[2];
      float2 u[NT][2];
      state_epilogue_inputs<NT, kKeep>(dec, u, sG, gl, m0, part, lane, [&](int i, int y) {
        return lds_bf16x2(sU + i * kLdU + y);
      });
      float P[1][NT][4];
      zero_acc(P);
      warp_mma<1, NT, kK, false, true>(P, sW + part * kK, kLd, m0, sS + part * kK * kLdV, kLdV, 0, lane);
      // S entering chunk c out while the products run (sS is next written after the barrier below)
      store_tile_cta<D, BV, kThreads>(a.S + ch * D * D + y0, D, sS, kLdV);
      if constexpr (kParts == 2) swap_k_halves(P, sxch, warp, lane);
#pragma unroll
      for (int ni = 0; ni < NT; ++ni)
        if (ni / kKeep == part)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int e = 2 * h, i = m0 + acc_row(0, e, lane), y = acc_col(ni, e, lane);
            const float v0 = u[ni][h].x - P[0][ni][e], v1 = u[ni][h].y - P[0][ni][e + 1];
            st_bf16x2(sU + i * kLdU + y, v0, v1, true);
            st_bf16x2(sVd + i * kLdV + y, v0 * dec[h], v1 * dec[h], true);
          }
    }
    __syncthreads();  // sVd and V' complete; every warp is done reading sS
    // S' = e^{G_n} S + K^T Vd; V' out while that product runs (U's stage is next written by the
    // copies issued after the next chunk's first barrier)
    scale_acc(S, __expf(gl));
    warp_mma<MT, NT, kC, true, true>(S, sK, kLd, xw, sVd, kLdV, 0, lane);
    store_tile_cta<kC, BV, kThreads>(a.Vn + ch * kC * D + y0, D, sU, kLdU);
  }
  __syncthreads();  // the last chunk's V' was written after the last barrier: every thread's store before the count
  {  // the chunks not yet counted
    const int64_t first = (a.NC - 1) / kSignalEvery * kSignalEvery;
    chunks_ready_signal(a, bh * a.NC + first, a.NC - first, threadIdx.x == 0);
  }
  if (a.S_out) store_state_acc<D>(a.S_out, S, bh, xw, y0, lane);
}

// ---------------------------------------------------------------------------------------------
// Output: a 1-D grid over the chunks, chunk-major; all columns of O (BO = D) for one chunk:
//   M = lower(Q K^T o Gam)    O = (Q o e^G) S + M V'
// M as high + low bf16 parts (M V' as two products); S and V' as saved, in plain bf16 (as fla saves
// its states; docs/gdn_kernels.md, "Precision").
template <int D, int BO>
struct OutputLayout {
  static constexpr int kLd = D + 8, kLdO = BO + 8;
  // 8 warps (two a row block): each forms half of its row block's M and takes the other half from
  // the other warp's A fragments, 4 row blocks x 4 k-steps x (high, low) x 32 lanes x 4 words
  static constexpr bool kSplitM = D == 128 && BO == 128;
  size_t Q = 0, K = 0, S = 0, Vp = 0, G = 0, Mx = 0, bytes = 0;
  __host__ __device__ constexpr OutputLayout() {
    SmemPlan p;
    Q = p.take(kC * kLd * 2), K = p.take(kC * kLd * 2), S = p.take(D * kLdO * 2);
    Vp = p.take(kC * kLdO * 2);
    G = p.take(kC * 4);
    Mx = kSplitM ? p.take(4 * (kC / 16) * 2 * 32 * 4 * 4) : 0;
    bytes = p.bytes;
  }
};

// The output kernel's CTA: 8 warps at D = 128 (one CTA a chunk: Q and K loaded once, not per half).
template <int D>
inline constexpr int kOutWarps = D == 128 ? 8 : 4;

// kWarps 4, or 8 (D = 128, BO = 128): warp w takes the rows of row block tc_row_block(w) and half of
// the BO columns (w / 4); both warps of a row block form the same rows of M (as two CTAs of 64 columns
// did), and the chunk's Q and K tiles are loaded once. M's blocks above the diagonal are not formed, nor
// multiplied by V' (Tri). With 8 warps the two warps of a row block form alternate 16-column
// blocks of its M (k-steps of M V': part 0 the even ones) and trade them through shared memory.
// kSaveM (TcArgs::dvl_fused): M's bf16 saved for the reverse state pass as well; o may be null then
// (M alone).
// With prep beside the state pass (TcArgs::fed), K and G (prep's) are loaded only once the state pass
// has counted the chunk.
template <int D, int BO, int kWarps, bool kSaveM>
__global__ void __launch_bounds__(kWarps * 32) gdn_tc_output_kernel(TcArgs a) {
  TcTimelineScope tl_scope(a.tl, kTlOutput);
  constexpr OutputLayout<D, BO> L{};
  constexpr int kLd = L.kLd, kLdO = L.kLdO, kThreads = kWarps * 32, NT = BO / 8 / (kWarps / 4);
  unsigned char* sm = dynamic_smem();
  uint16_t *sQ = reinterpret_cast<uint16_t*>(sm + L.Q), *sK = reinterpret_cast<uint16_t*>(sm + L.K);
  uint16_t* sS = reinterpret_cast<uint16_t*>(sm + L.S);
  uint16_t* sVp = reinterpret_cast<uint16_t*>(sm + L.Vp);
  float* sG = reinterpret_cast<float*>(sm + L.G);
  // 1-D grid, chunk-major (chunk c of every sequence and head, then c + 1: the order in which the
  // state pass finishes them when this kernel chases it)
  const TcChunk ck = tc_chunk_major(a, blockIdx.x);
  const bool after_state = a.fed != nullptr;
  constexpr int y0 = 0;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, m0 = 16 * tc_row_block<kWarps>(warp, tc_cta_rotation(a)),
            n0 = (warp / 4) * NT * 8;
  auto load_k_g = [&] {
    load_tile<kC, D, kThreads>(sK, kLd, a.k + ck.r0 * a.ld_k + ck.kh * D, a.ld_k, ck.n, a.vec_in);
    load_tile_f32<1, kC, kThreads>(sG, kC, a.G + ck.ch * kC, kC);
  };
  // Two groups of copies: what M needs (Q, K, G), then what O needs besides (S, V'), which land
  // during Q's l2norm and M's product
  load_tile<kC, D, kThreads>(sQ, kLd, a.q + ck.r0 * a.ld_q + ck.kh * D, a.ld_q, ck.n, a.vec_in);
  if (!after_state) load_k_g();
  chunk_ready_wait(a, ck.ch);  // S and V' of this chunk written (when chasing the state pass)
  if (after_state) load_k_g();
  cp_async_commit();
  const bool with_o = !kSaveM || a.o != nullptr;  // (else M alone: the backward's recomputation)
  if (with_o) {
    load_tile<D, BO, kThreads>(sS, kLdO, a.S + ck.ch * D * D + y0, D, D, true);
    load_tile<kC, BO, kThreads>(sVp, kLdO, a.Vn + ck.ch * kC * D + y0, D, kC, true);
  }
  cp_async_commit();
  cp_async_wait<1>();
  __syncthreads();
  if (a.q_hat) {  // Q's l2norm taken here (the forward's q_hat and q_r; one CTA per chunk)
    l2norm_tile_rows<D, kThreads>(sQ, kLd, ck.n, a.q_scale, a.q_hat + ck.r0 * a.ld_hat + ck.kh * D, a.ld_hat,
                                  a.q_r + ck.r0 * a.Hk + ck.kh, a.Hk, a.vec_hat);
    __syncthreads();
  }
  // This warp's rows of M = lower(Q K^T o Gam), high and low bf16 parts, straight from the
  // accumulators into the A fragments of M V'.
  uint32_t mh[kC / 16][4], ml[kC / 16][4];
  if constexpr (L.kSplitM) {
    const int part = warp / 4, rb = m0 / 16;
    float acc[1][8][4];
    zero_acc(acc);
    warp_mma_pairs<8, D, Tri::kLowerN>(acc, sQ, kLd, m0, sK, kLd, 0, part, lane);
    causal_decay_fragments(mh, ml, [&](int j, int e) { return acc[0][j][e]; }, sG, m0, lane, part);
    // this warp's k-steps out, the other warp's in: word (row block, k-step, high / low, f, lane)
    uint32_t* mx = reinterpret_cast<uint32_t*>(sm + L.Mx) + rb * (kC / 16) * 2 * 128;
#pragma unroll
    for (int ks = 0; ks < kC / 16; ++ks)
      if ((ks & 1) == part && !above_diagonal(16 * ks, m0))
#pragma unroll
        for (int f = 0; f < 4; ++f) {
          mx[(2 * ks) * 128 + f * 32 + lane] = mh[ks][f];
          mx[(2 * ks + 1) * 128 + f * 32 + lane] = ml[ks][f];
        }
    named_barrier(1 + rb, 64);  // the row block's two warps
#pragma unroll
    for (int ks = 0; ks < kC / 16; ++ks)
      if ((ks & 1) != part && !above_diagonal(16 * ks, m0))
#pragma unroll
        for (int f = 0; f < 4; ++f) {
          mh[ks][f] = mx[(2 * ks) * 128 + f * 32 + lane];
          ml[ks][f] = mx[(2 * ks + 1) * 128 + f * 32 + lane];
        }
  } else {
    float acc[1][8][4];
    zero_acc(acc);
    warp_mma<1, 8, D, false, false, Tri::kLowerN>(acc, sQ, kLd, m0, sK, kLd, 0, lane);
    causal_decay_fragments(mh, ml, [&](int j, int e) { return acc[0][j][e]; }, sG, m0, lane);
  }
  if constexpr (kSaveM) {  // M's bf16 (its high parts) for the reverse state pass, once a row block
    if (warp < 4) {
      uint16_t* M = a.Mb + ck.ch * kC * kC;
#pragma unroll
      for (int ks = 0; ks < kC / 16; ++ks)
#pragma unroll
        for (int f = 0; f < 4; ++f)  // the A fragment's registers: rows g, g + 8; columns 2t, 2t + 8
          *reinterpret_cast<uint32_t*>(M + (m0 + (lane >> 2) + 8 * (f & 1)) * kC + 16 * ks + 8 * (f >> 1) +
                                       2 * (lane & 3)) = mh[ks][f];
    }
    if (!with_o) return;  // M alone (no copies in flight: the second group is empty)
  }
  cp_async_wait<0>();
  __syncthreads();  // S and V' have landed
  float O[1][NT][4];
  zero_acc(O);
  warp_mma<1, NT, D, false, true>(O, sQ, kLd, m0, sS, kLdO, n0, lane);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float eg = __expf(sG[m0 + acc_row(0, e, lane)]);
#pragma unroll
    for (int ni = 0; ni < NT; ++ni) O[0][ni][e] *= eg;
  }
#pragma unroll
  for (int ks = 0; ks < kC / 16; ++ks) {
    if (tri_skip_k<Tri::kLowerK>(16 * ks, m0, 16)) continue;  // M's zeros above the diagonal
#pragma unroll
    for (int nj = 0; nj < NT; nj += 2) {
      uint32_t b[2][2];
      load_b2<true>(b, sVp, kLdO, 16 * ks, n0 + 8 * nj, lane);
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        mma_bf16_16816(O[0][nj + u], mh[ks], b[u]);
        mma_bf16_16816(O[0][nj + u], ml[ks], b[u]);
      }
    }
  }
  if (a.vec16_o) {  // o in whole rows through Q's tile
    __syncthreads();
    store_acc_bf16(sQ + n0, kLd, m0, O, lane);
    __syncthreads();
    store_tile_cta<kC, D, kThreads>(a.o + ck.r0 * a.ld_o + ck.h * D, a.ld_o, sQ, kLd, ck.n);
  } else {
#pragma unroll
    for (int ni = 0; ni < NT; ++ni)
#pragma unroll
      for (int e = 0; e < 4; e += 2) {
        const int i = m0 + acc_row(0, e, lane), y = n0 + acc_col(ni, e, lane);
        if (i < ck.n)
          st_bf16x2(a.o + (ck.r0 + i) * a.ld_o + ck.h * D + y0 + y, O[0][ni][e], O[0][ni][e + 1], a.vec_out);
      }
  }
  // When chasing, the last chunks' CTAs end only after the state pass has (S_out): so does this kernel
  if (a.ready && ck.c == a.NC - 1) grid_dependency_wait();
}

template <int D>
void prep_d(const TcArgs& a, cudaStream_t s, const char* op) {
  constexpr PrepLayout<D> L{};
  tc_set_smem(gdn_tc_prep_kernel<D>, L.bytes, op);
  gdn_tc_prep_kernel<D><<<tc_chunk_grid(a), kTcThreads, L.bytes, s>>>(a);
  DT_CUDA_OK(cudaGetLastError(), op);
}

template <int D, int BV, int kStages = 2>
void state_forward_d(const TcArgs& a, cudaStream_t s, const char* op) {
  constexpr StateFwdLayout<D, BV, kStages> L{};
  tc_set_smem(gdn_tc_state_forward_kernel<D, BV, kStages>, L.bytes, op);
  const dim3 grid(D / BV, static_cast<unsigned>(a.Hv), static_cast<unsigned>(a.B));
  gdn_tc_state_forward_kernel<D, BV, kStages><<<grid, kStateWarps<D> * 32, L.bytes, s>>>(a);
  DT_CUDA_OK(cudaGetLastError(), op);
}

// The mma.sync output kernel that `a` takes (M saved too where the reverse pass makes dvl).
// The plan fuses dv_local into the reverse state pass at head dim 128 (GdnPlan::dvl_fused) and
// nowhere else: M is saved there.
template <int D>
auto output_kernel(const TcArgs&) {
  return gdn_tc_output_kernel<D, D, kOutWarps<D>, D == 128>;
}

// 64 columns of O per CTA: 55 KB of shared memory at D = 64 (4 CTAs per SM), 91 KB at D = 128 (2);
// M stays in registers (its two bf16 parts in shared memory would cost 18 KB and a CTA per SM).
template <int D>
void output_d(const TcArgs& a, cudaStream_t s, const char* op) {
  constexpr OutputLayout<D, D> L{};
  const auto kernel = output_kernel<D>(a);
  tc_set_smem(kernel, L.bytes, op);
  tc_launch_chunks(kernel, a, kOutWarps<D> * 32, L.bytes, s, op);
}

template <int D>
void prep_fed_d(const TcArgs& a, cudaStream_t s, const char* op) {
  constexpr PrepLayout<D> L{};
  tc_set_smem(gdn_tc_prep_fed_kernel<D>, L.bytes, op);
  tc_launch_chunks(gdn_tc_prep_fed_kernel<D>, a, kTcThreads, L.bytes, s, op);
}

}  // namespace

void tc_prep(const TcArgs& a, int D, cudaStream_t s, const char* op) {
  D == 64 ? prep_d<64>(a, s, op) : prep_d<128>(a, s, op);
}

void tc_state_forward(const TcArgs& a, int D, cudaStream_t s, const char* op) {
  if (a.colwarp) return tc_state_forward_cw(a, D, s, op);
  // (D, columns, stages) as the plan (gdn_plan.h) chose them: 64 columns, 2 stages at head dim 64;
  // 16 or 32 columns, 3 stages at 128 (64 columns there take the column-warp pass).
  DT_CHECK(D == 64 || a.state_cols <= 32, "{}: 64 columns at head dim 128 take the column-warp pass", op);
  if (D == 64) state_forward_d<64, 64>(a, s, op);
  else if (a.state_cols == 16) state_forward_d<128, 16, 3>(a, s, op);
  else state_forward_d<128, 32, 3>(a, s, op);
}

void tc_output(const TcArgs& a, int D, cudaStream_t s, const char* op) {
  D == 64 ? output_d<64>(a, s, op) : output_d<128>(a, s, op);
}

void tc_prep_fed(const TcArgs& a, int D, cudaStream_t s, const char* op) {
  DT_CHECK(a.fed && a.ready, "{}: prep feeding the state pass needs its counts (fed) and a kernel chasing that pass",
           op);
  DT_CHECK(D == 128, "{}: prep beside the state pass runs at head dim 128, got {}", op, D);
  prep_fed_d<128>(a, s, op);
}

void tc_prep_fed_load(const TcArgs& a, int D, const char* op) {
  cudaFuncAttributes attr;
  auto load = [&](auto kernel) { DT_CUDA_OK(cudaFuncGetAttributes(&attr, kernel), op); };
  DT_CHECK(D == 128, "{}: prep beside the state pass runs at head dim 128, got {}", op, D);
  load(gdn_tc_prep_fed_kernel<128>);
  load(output_kernel<128>(a));
}

}  // namespace dt::cuda
