// The chunked gated delta rule on tensor cores, backward (docs/model.md; docs/gdn_kernels.md; the
// plain fp32 version is kernels/cuda/gdn_chunk.cu). After the forward's prep and state pass have
// been rerun (W, U, G, the entering states S and V' in the workspace):
//   dv_local   (chunk, h, b):  dvl = M^T dO, M = lower(Q K^T o Gam), and dOg = dO o e^G (bf16 both);
//              with dvl_fused (head dim 128: long sequences, many heads), four more warps of the
//              reverse pass make them instead, from the M that the forward's output kernel saved
//              (dvl_producer)
//   state      (column tile, h, b), last chunk first, dS' (gradient of the state leaving the chunk)
//              in fp32 registers:  dV' = dvl + D o (K dS')
//                                  dS  = e^{G_n} dS' + (Q o e^G)^T dO - W^T dV'
//              saving dS' and dV' per chunk; dS0 is what leaves the first chunk.
// Then, in gdn_tc_grad.cu:
//   grad_qk    (chunk, h, b):  P = dO S^T, R = V' dS'^T, dM = lower(dO V'^T), dW = -dV' S^T
//              dq = P o e^G + (dM o Gam) K,   dk_part = R o D + (dM o Gam)^T Q,
//              dG_part = e^G (P.Q) - D (R.K) + rowsum(X) - colsum(X) (+ the G_n terms),  X = dM o Gam o Q K^T
//   grad_wy    (chunk, h, b):  T from prep;   dT = dW Kb^T + dV' Vb^T,  dA = -strict_lower(T^T dT T^T),
//              dKb = T^T dW, dVb = T^T dV';  dk = dk_part + (P' + P'^T) K + diag(beta e^G) dKb,
//              dv = diag(beta) dVb, dbeta, dG, and dg = reverse_cumsum(dG)
//   sum_heads  when Hv > Hk: dq, dk summed over the value heads of each key head, fixed order.
// grad_qk chases the reverse state pass where the plan says so (TcArgs::ready, GdnPlan::chase_grad_qk:
// started while the state pass runs, each CTA waiting for its chunk's dS' and dV').
// No atomics in the sums: same inputs, same bits (the chase's counts only say when a chunk is ready).
#include "kernels/cuda/gdn_tc.cuh"

namespace dt::cuda {

namespace {


// ---------------------------------------------------------------------------------------------
// dv_local: grid (NC, Hv, B).
template <int D>
struct DvLocalLayout {
  static constexpr int kLd = D + 8;
  size_t Q = 0, K = 0, dO = 0, Mt = 0, G = 0, bytes = 0;
  __host__ __device__ constexpr DvLocalLayout() {
    SmemPlan p;
    Q = p.take(kC * kLd * 2), K = p.take(kC * kLd * 2), dO = p.take(kC * kLd * 2), Mt = p.take(kC * kLdC * 2);
    G = p.take(kC * 4);
    bytes = p.bytes;
  }
};

// kGradWarps(D) warps (8 at D = 128: each row block's M^T columns and dvl columns split in halves).
template <int D>
__global__ void __launch_bounds__(kGradWarps<D> * 32) gdn_tc_dv_local_kernel(TcArgs a) {
  TcTimelineScope tl_scope(a.tl, kTlDvLocal);
  constexpr DvLocalLayout<D> L{};
  constexpr int kLd = L.kLd, kThreads = kGradWarps<D> * 32, kParts = kGradWarps<D> / 4;
  constexpr int NT1 = 8 / kParts, NT2 = D / 8 / kParts;
  unsigned char* sm = dynamic_smem();
  uint16_t *sQ = reinterpret_cast<uint16_t*>(sm + L.Q), *sK = reinterpret_cast<uint16_t*>(sm + L.K);
  uint16_t *sdO = reinterpret_cast<uint16_t*>(sm + L.dO), *sMt = reinterpret_cast<uint16_t*>(sm + L.Mt);
  float* sG = reinterpret_cast<float*>(sm + L.G);
  const TcChunk ck = tc_chunk(a, blockIdx.x, blockIdx.y, blockIdx.z);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int rb = tc_row_block<kGradWarps<D>>(warp, tc_cta_rotation(a)), m0 = 16 * rb, n1 = (warp / 4) * NT1 * 8, n2 = (warp / 4) * NT2 * 8;
  load_tile<kC, D, kThreads>(sQ, kLd, a.q + ck.r0 * a.ld_q + ck.kh * D, a.ld_q, ck.n, a.vec_in);
  load_tile<kC, D, kThreads>(sK, kLd, a.k + ck.r0 * a.ld_k + ck.kh * D, a.ld_k, ck.n, a.vec_in);
  load_tile<kC, D, kThreads>(sdO, kLd, a.d_o + ck.r0 * a.ld_do + ck.h * D, a.ld_do, ck.n, a.vec_in);
  load_tile_f32<1, kC, kThreads>(sG, kC, a.G + ck.ch * kC, kC);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  {  // M^T = upper(K Q^T o Gam^T), this warp's rows j and columns [n1, n1 + 8 NT1)
    float acc[1][NT1][4];
    zero_acc(acc);
    warp_mma<1, NT1, D, false, false, Tri::kUpperN>(acc, sK, kLd, m0, sQ, kLd, n1, lane);
#pragma unroll
    for (int ni = 0; ni < NT1; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = m0 + acc_row(0, e, lane), i = n1 + acc_col(ni, e, lane);
        sMt[j * kLdC + i] = f32_to_bf16_bits(i >= j ? acc[0][ni][e] * __expf(sG[i] - sG[j]) : 0.f);
      }
  }
  // dOg = dO o e^G for the reverse state pass (its rows past n are the zeros load_tile left)
  for (int v = threadIdx.x; v < kC * D / 8; v += kThreads) {
    const int i = v / (D / 8), y = (v % (D / 8)) * 8;
    const float eg = __expf(sG[i]);
    const uint4 x = *reinterpret_cast<const uint4*>(sdO + i * kLd + y);
    const uint32_t xs[4] = {x.x, x.y, x.z, x.w};
    uint32_t o[4];
#pragma unroll
    for (int u = 0; u < 4; ++u)
      o[u] = static_cast<uint32_t>(f32_to_bf16_bits(__uint_as_float(xs[u] << 16) * eg)) |
             (static_cast<uint32_t>(f32_to_bf16_bits(__uint_as_float(xs[u] & 0xffff0000u) * eg)) << 16);
    uint4 w;
    w.x = o[0], w.y = o[1], w.z = o[2], w.w = o[3];
    *reinterpret_cast<uint4*>(a.dOg + (ck.ch * kC + i) * D + y) = w;
  }
  // This row block's M^T rows complete (its two warps' column halves)
  if constexpr (kParts == 2) named_barrier(1 + rb, 64);
  else __syncwarp();
  float acc[1][NT2][4];
  zero_acc(acc);
  warp_mma<1, NT2, kC, false, true, Tri::kUpperK>(acc, sMt, kLdC, m0, sdO, kLd, n2, lane);
  // dvl leaves in whole rows through K's rows of this row block (only its own warps read them, in
  // the first product, before the barrier above)
  store_acc_bf16(sK + n2, kLd, m0, acc, lane);
  __syncthreads();
  store_tile_cta<kC, D, kThreads>(a.dvl + ck.ch * kC * D, D, sK, kLd);
}

// ---------------------------------------------------------------------------------------------
// Reverse state pass: grid (D / BV, Hv, B), columns [y0, y0 + BV) of dS.
// kStages chunks' tiles in a ring, as the forward's state pass (gdn_tc_forward.cu).
// kStateWarps(D) warps: warp w holds rows [w D / warps, + D / warps) of dS. With 8 warps (D = 128)
// the 64-row product K dS' is split over k: warps w and w + 4 each take half of the 128 and swap
// half of their n-tiles (swap_k_halves), so each finishes dV' for BV / 2 of the columns.

// kFused (GdnPlan::dvl_fused): four more warps do dv_local's work a chunk ahead (dvl_producer);
// two buffers of M beside the ring.
template <int D, int BV, int kStages, bool kFused = false>
struct StateBwdLayout {
  static constexpr int kLd = D + 8, kLdV = BV + 8, kWarps = kStateWarps<D>;
  // stage 0 offsets; stage s is stage 0 + s * stage
  size_t W = 0, K = 0, Q = 0, dOg = 0, dvl = 0, G = 0, stage = 0, dS = 0, dVn = 0, xch = 0, M = 0, bytes = 0;
  __host__ __device__ constexpr StateBwdLayout() {
    SmemPlan p;
    W = p.take(kC * kLd * 2), K = p.take(kC * kLd * 2), Q = p.take(kC * kLd * 2);
    dOg = p.take(kC * kLdV * 2), dvl = p.take(kC * kLdV * 2), G = p.take(kC * 4);
    stage = p.bytes;
    p.take(stage * (kStages - 1));
    dS = p.take(D * kLdV * 2), dVn = p.take(kC * kLdV * 2);
    xch = p.take(kSwapBytes<D, BV>);
    if (kFused) M = p.take(2 * kC * kLdC * 2);
    bytes = p.bytes;
  }
};

// Named barriers of the fused reverse pass (1 .. 4: swap_k_halves): the state warps' own, and the
// producer's; the producer's warps (each kC / kDvlWarps rows of dvl).
inline constexpr int kStateWarpsBarrier = 5, kDvlBarrier = 6, kDvlWarps = 4;

// dv_local's work in the reverse state pass (GdnPlan::dvl_fused; docs/gdn_kernels.md, "Running
// beside the chains"), by warps kWarps .. kWarps + kDvlWarps - 1: per chunk they copy G, dO's
// columns [y0, y0 + BV) and M (the forward's, a.Mb), then leave dvl = M^T dO and dOg = dO o e^G in
// the chunk's stage, each rounded to bf16 as dv_local rounds them. Visit j (chunk NC - 1 - j) is made while the state warps work on visit j - 1, from
// copies issued kStages - 1 visits ahead into the stage that a visit's first barrier freed: during
// visit j - 2 with 3 stages, during visit j - 1 itself with 2 (64 columns, where a third stage does
// not fit). The producer meets the state warps only at that barrier, once a visit.
template <int D, int BV, int kStages, class Layout>
__device__ __forceinline__ void dvl_producer(const TcArgs& a, unsigned char* sm, const Layout& L, int64_t bh,
                                             int64_t b, int64_t h, int y0) {
  static_assert(kStages == 2 || kStages == 3, "the producer works a visit ahead: 2 or 3 stages");
  constexpr int kLdV = Layout::kLdV, NT = BV / 8, kP = kDvlWarps * 32, MT = kC / 16 / kDvlWarps;
  const int pt = static_cast<int>(threadIdx.x) - Layout::kWarps * 32, pw = pt / 32, lane = pt % 32;
  auto m_tile = [&](int64_t j) { return reinterpret_cast<uint16_t*>(sm + L.M + (j % 2) * kC * kLdC * 2); };
  auto load = [&](int64_t j) {  // visit j's copies (an empty group past the first chunk)
    const int64_t c = a.NC - 1 - j;
    if (c >= 0) {
      unsigned char* st = sm + (j % kStages) * L.stage;
      const int64_t ch = bh * a.NC + c, r0 = b * a.T + c * kC;
      const int n = static_cast<int>(a.T - c * kC < kC ? a.T - c * kC : kC);
      load_tile<kC, BV, kP>(reinterpret_cast<uint16_t*>(st + L.dOg), kLdV, a.d_o + r0 * a.ld_do + h * D + y0, a.ld_do,
                            n, a.vec_in, pt);
      load_tile_f32<1, kC, kP>(reinterpret_cast<float*>(st + L.G), kC, a.G + ch * kC, kC, pt);
      load_tile<kC, kC, kP>(m_tile(j), kLdC, a.Mb + ch * kC * kC, kC, kC, true, pt);
    }
    cp_async_commit();
  };
  auto make = [&](int64_t j) {  // visit j's dvl and dOg, its copies landed (the later visit's may not have)
    unsigned char* st = sm + (j % kStages) * L.stage;
    uint16_t* sdO = reinterpret_cast<uint16_t*>(st + L.dOg);
    uint16_t* sdvl = reinterpret_cast<uint16_t*>(st + L.dvl);
    const float* sG = reinterpret_cast<const float*>(st + L.G);
    cp_async_wait<kStages - 2>();
    named_barrier(kDvlBarrier, kP);
    float acc[MT][NT][4];  // dvl's rows [16 MT pw, + 16 MT): M^T (A, transposed from M's rows) times dO
    zero_acc(acc);
    warp_mma<MT, NT, kC, true, true, Tri::kUpperK>(acc, m_tile(j), kLdC, 16 * MT * pw, sdO, kLdV, 0, lane);
    store_acc_bf16(sdvl, kLdV, 16 * MT * pw, acc, lane);
    named_barrier(kDvlBarrier, kP);  // every producer warp is done with dO: scaled in place
    for (int v = pt; v < kC * BV / 8; v += kP) {
      const int i = v / (BV / 8), y = (v % (BV / 8)) * 8;
      const float eg = __expf(sG[i]);
      uint4 x = *reinterpret_cast<const uint4*>(sdO + i * kLdV + y);
      uint32_t* xs = reinterpret_cast<uint32_t*>(&x);
#pragma unroll
      for (int u = 0; u < 4; ++u)
        xs[u] = static_cast<uint32_t>(f32_to_bf16_bits(__uint_as_float(xs[u] << 16) * eg)) |
                (static_cast<uint32_t>(f32_to_bf16_bits(__uint_as_float(xs[u] & 0xffff0000u) * eg)) << 16);
      *reinterpret_cast<uint4*>(sdO + i * kLdV + y) = x;
    }
  };
  for (int j = 0; j < kStages - 1; ++j) load(j);
  make(0);
  for (int64_t j = 0; j < a.NC; ++j) {
    __syncthreads();  // the state warps' first barrier of visit j: visit j + kStages - 1's stage is free
    load(j + kStages - 1);
    if (j + 1 < a.NC) make(j + 1);
  }
}

template <int D, int BV, int kStages, bool kFused = false>
__global__ void __launch_bounds__((kStateWarps<D> + (kFused ? kDvlWarps : 0)) * 32)
    gdn_tc_state_backward_kernel(TcArgs a) {
  TcTimelineScope tl_scope(a.tl, kTlStateBackward);
  constexpr StateBwdLayout<D, BV, kStages, kFused> L{};
  constexpr int kLd = L.kLd, kLdV = L.kLdV, NT = BV / 8;
  constexpr int kWarps = L.kWarps, kThreads = kWarps * 32, kParts = kWarps / 4, MT = D / kWarps / 16;
  constexpr int kK = D / kParts, kKeep = NT / kParts;  // k per part of K dS'; n-tiles each part finishes
  static_assert(MT >= 1 && NT % kParts == 0, "tile split");
  unsigned char* sm = dynamic_smem();
  uint16_t* sdS = reinterpret_cast<uint16_t*>(sm + L.dS);
  uint16_t* sdVn = reinterpret_cast<uint16_t*>(sm + L.dVn);
  float* sxch = reinterpret_cast<float*>(sm + L.xch);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, part = warp / 4, m0 = 16 * (warp % 4);
  const int y0 = blockIdx.x * BV, xw = warp * (D / kWarps);
  const int64_t h = blockIdx.y, b = blockIdx.z, bh = b * a.Hv + h, kh = h / (a.Hv / a.Hk);
  grid_launch_dependents();  // the chasing grad_qk may start once every CTA here runs
  if constexpr (kFused) {
    if (warp >= kWarps) return dvl_producer<D, BV, kStages>(a, sm, L, bh, b, h, y0);
  }

  auto prefetch = [&](int64_t c, int s) {
    unsigned char* st = sm + s * L.stage;
    const int64_t ch = bh * a.NC + c, r0 = b * a.T + c * kC;
    const int n = static_cast<int>(a.T - c * kC < kC ? a.T - c * kC : kC);
    load_w_k_tiles<D, kThreads>(st + L.W, st + L.K, kLd, a, ch, r0, kh, n);
    load_tile<kC, D, kThreads>(reinterpret_cast<uint16_t*>(st + L.Q), kLd, a.q + r0 * a.ld_q + kh * D, a.ld_q, n,
                               a.vec_in);
    if constexpr (!kFused) {  // else the producer's
      load_tile<kC, BV, kThreads>(reinterpret_cast<uint16_t*>(st + L.dOg), kLdV, a.dOg + ch * kC * D + y0, D, kC, true);
      load_tile<kC, BV, kThreads>(reinterpret_cast<uint16_t*>(st + L.dvl), kLdV, a.dvl + ch * kC * D + y0, D, kC, true);
      load_tile_f32<1, kC, kThreads>(reinterpret_cast<float*>(st + L.G), kC, a.G + ch * kC, kC);
    }
  };

  float dS[MT][NT][4];
  load_state_acc<D>(dS, a.dS_out, bh, xw, y0, lane);
  // The j-th chunk visited (c = NC - 1 - j) goes to stage j % kStages, issued kStages - 1 ahead.
  for (int j = 0; j < kStages - 1; ++j) {  // one commit group per chunk, empty past the end
    if (a.NC - 1 - j >= 0) prefetch(a.NC - 1 - j, j);
    cp_async_commit();
  }
  for (int64_t c = a.NC - 1; c >= 0; --c) {
    const int64_t j = a.NC - 1 - c;
    const int s = static_cast<int>(j % kStages);
    unsigned char* st = sm + s * L.stage;
    const uint16_t* sW = reinterpret_cast<const uint16_t*>(st + L.W);
    const uint16_t* sK = reinterpret_cast<const uint16_t*>(st + L.K);
    const uint16_t* sQ = reinterpret_cast<const uint16_t*>(st + L.Q);
    const uint16_t* sdOg = reinterpret_cast<const uint16_t*>(st + L.dOg);
    // dvl's tile then takes dV' (each thread over the elements of dvl it read), which leaves in whole rows
    uint16_t* sdvl = reinterpret_cast<uint16_t*>(st + L.dvl);
    const float* sG = reinterpret_cast<const float*>(st + L.G);
    const int64_t ch = bh * a.NC + c;
    store_acc_bf16(sdS, kLdV, xw, dS, lane);
    cp_async_wait<kStages - 2>();
    __syncthreads();  // chunk c's tiles and sdS complete; every warp is done with chunk c + 1
    // the chunks visited kSignalEvery before, c + 1 .. c + kSignalEvery: their dS' and dV' were
    // written before this barrier (the last one's dV' after chunk c + 1's second barrier)
    if (j > 0 && j % kSignalEvery == 0) chunks_ready_signal(a, ch + 1, kSignalEvery, threadIdx.x == 0);
    if (c - (kStages - 1) >= 0) prefetch(c - (kStages - 1), static_cast<int>((j + kStages - 1) % kStages));
    cp_async_commit();
    const float gl = sG[kC - 1];
    {  // dV' = dvl + D o (K dS'); with two parts, this warp's half of k, then the halves swapped
      float dec[2];
      float2 l[NT][2];
      state_epilogue_inputs<NT, kKeep>(dec, l, sG, gl, m0, part, lane,
                                       [&](int i, int y) { return lds_bf16x2(sdvl + i * kLdV + y); });
      float P[1][NT][4];
      zero_acc(P);
      warp_mma<1, NT, kK, false, true>(P, sK + part * kK, kLd, m0, sdS + part * kK * kLdV, kLdV, 0, lane);
      // dS' entering chunk c out, and dS <- e^{G_n} dS' + Q^T dOg, while that product runs (neither
      // waits for it; sdS is next written after the barrier below)
      store_tile_cta<D, BV, kThreads>(a.dS + ch * D * D + y0, D, sdS, kLdV);
      scale_acc(dS, __expf(gl));
      warp_mma<MT, NT, kC, true, true>(dS, sQ, kLd, xw, sdOg, kLdV, 0, lane);
      if constexpr (kParts == 2) swap_k_halves(P, sxch, warp, lane);
#pragma unroll
      for (int ni = 0; ni < NT; ++ni)
        if (ni / kKeep == part)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int e = 2 * h, i = m0 + acc_row(0, e, lane), y = acc_col(ni, e, lane);
            const float v0 = l[ni][h].x + dec[h] * P[0][ni][e], v1 = l[ni][h].y + dec[h] * P[0][ni][e + 1];
            st_bf16x2(sdvl + i * kLdV + y, v0, v1, true);
            st_bf16x2(sdVn + i * kLdV + y, -v0, -v1, true);
          }
    }
    if constexpr (kFused) named_barrier(kStateWarpsBarrier, kThreads);  // sdVn and dV' complete
    else __syncthreads();
    warp_mma<MT, NT, kC, true, true>(dS, sW, kLd, xw, sdVn, kLdV, 0, lane);
    // dV' out while that product runs (the stage is next written after the next visit's first barrier)
    store_tile_cta<kC, BV, kThreads>(a.dVn + ch * kC * D + y0, D, sdvl, kLdV);
  }
  // chunk 0's dV' was written after the last barrier: every state thread's store before the count
  if constexpr (kFused) named_barrier(kStateWarpsBarrier, kThreads);
  else __syncthreads();
  {  // the chunks not yet counted, 0 ..
    const int64_t first = (a.NC - 1) / kSignalEvery * kSignalEvery;  // visits counted so far
    chunks_ready_signal(a, bh * a.NC, a.NC - first, threadIdx.x == 0);
  }
  if (a.dS0) store_state_acc<D>(a.dS0, dS, bh, xw, y0, lane);
}

template <int D>
void dv_local_d(const TcArgs& a, cudaStream_t s, const char* op) {
  constexpr DvLocalLayout<D> L{};
  tc_set_smem(gdn_tc_dv_local_kernel<D>, L.bytes, op);
  gdn_tc_dv_local_kernel<D><<<tc_chunk_grid(a), kGradWarps<D> * 32, L.bytes, s>>>(a);
  DT_CUDA_OK(cudaGetLastError(), op);
}

template <int D, int BV, int kStages = 2, bool kFused = false>
void state_backward_d(const TcArgs& a, cudaStream_t s, const char* op) {
  constexpr StateBwdLayout<D, BV, kStages, kFused> L{};
  tc_set_smem(gdn_tc_state_backward_kernel<D, BV, kStages, kFused>, L.bytes, op);
  const dim3 grid(D / BV, static_cast<unsigned>(a.Hv), static_cast<unsigned>(a.B));
  constexpr int kThreads = (kStateWarps<D> + (kFused ? kDvlWarps : 0)) * 32;
  gdn_tc_state_backward_kernel<D, BV, kStages, kFused><<<grid, kThreads, L.bytes, s>>>(a);
  DT_CUDA_OK(cudaGetLastError(), op);
}

}  // namespace

void tc_dv_local(const TcArgs& a, int D, cudaStream_t s, const char* op) {
  DT_CHECK(D == 64, "{}: dv_local runs at head dim 64 (at 128 the reverse state pass does its work), got {}", op, D);
  dv_local_d<64>(a, s, op);
}

void tc_state_backward(const TcArgs& a, int D, cudaStream_t s, const char* op) {
  // (D, columns, stages) as the plan (gdn_plan.h) chose them: 64 columns, 2 stages at head dim 64; at
  // 128 with dv_local's work (dvl_fused), 16 or 32 columns with 3 stages, 64 with 2 (the third would
  // not fit in shared memory).
  if (D == 64) return state_backward_d<64, 64>(a, s, op);
  DT_CHECK(a.dvl_fused, "{}: the reverse state pass at head dim 128 takes dv_local's work (dvl_fused)", op);
  a.state_cols == 16   ? state_backward_d<128, 16, 3, true>(a, s, op)
  : a.state_cols == 32 ? state_backward_d<128, 32, 3, true>(a, s, op)
                       : state_backward_d<128, 64, 2, true>(a, s, op);
}

}  // namespace dt::cuda
