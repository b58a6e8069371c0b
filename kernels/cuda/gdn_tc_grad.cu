// The chunked gated delta rule on tensor cores, backward, the chunk-parallel gradients after the
// reverse state pass (gdn_tc_backward.cu says what each kernel computes):
//   grad_qk    (chunk, h, b):  dq, dk's first part, dW, dG's first part, from dO, S, V', dS', dV'
//   grad_wy    (chunk, h, b):  dk, dv, dbeta, dg through T, W and U
//   sum_heads  when Hv > Hk: dq, dk summed over the value heads of each key head, fixed order
//              (sum_value_heads, gdn_chunk.cu, shared with the fp32 path).
// grad_qk chases the reverse state pass where the plan says so (TcArgs::ready, GdnPlan::chase_grad_qk).
// No atomics in the sums: same inputs, same bits.
#include "kernels/cuda/gdn_tc.cuh"

namespace dt::cuda {

namespace {

// ---------------------------------------------------------------------------------------------
// grad_qk: grid (NC, Hv, B), kGradWarps(D) warps (grad_wy too). Warp w takes rows [16 (w % 4), + 16)
// and, with 8 warps, half of each product's columns (w / 4); the partial row sums of the two
// halves are added in a fixed order. Tiles arrive in three cp.async groups in the order the products use them (Q, K,
// dO, V' first; then S; then dS', dV'), so the later loads overlap the first products.

template <int D>
struct GradQkLayout {
  static constexpr int kLd = D + 8, kParts = kGradWarps<D> / 4;
  size_t Q = 0, K = 0, dO = 0, Vn = 0, dVn = 0, S = 0, dS = 0, dMG = 0, xr = 0, xc = 0, pq = 0, rk = 0, G = 0,
         red = 0, nd = 0, Q2 = 0, K2 = 0, dO2 = 0, tk = 0, bytes = 0, persist_bytes = 0;
  __host__ __device__ constexpr GradQkLayout() {
    SmemPlan p;
    Q = p.take(kC * kLd * 2), K = p.take(kC * kLd * 2), dO = p.take(kC * kLd * 2), Vn = p.take(kC * kLd * 2);
    dVn = p.take(kC * kLd * 2), S = p.take(D * kLd * 2), dS = p.take(D * kLd * 2), dMG = p.take(kC * kLdC * 2);
    xr = p.take(kParts * kC * 4), xc = p.take(4 * kC * 4), pq = p.take(kParts * kC * 4), rk = p.take(kParts * kC * 4);
    G = p.take(kC * 4), red = p.take(kGradWarps<D> * 32 * 4), nd = p.take(kParts * kC * 4);
    bytes = p.bytes;
    // the persistent kernel (kPersist): the next chunk's Q, K, dO, and the tickets
    Q2 = p.take(kC * kLd * 2), K2 = p.take(kC * kLd * 2), dO2 = p.take(kC * kLd * 2), tk = p.take(16);
    persist_bytes = p.bytes;
  }
};

// Row sums of acc o M (M bf16 in shared memory; acc holds columns [n0, n0 + 8 NT)) over this
// warp's 16 rows, written to out[row].
template <int NT>
__device__ __forceinline__ void row_dot(const float (&acc)[1][NT][4], const uint16_t* M, int ld, int m0, float* out,
                                        int lane, int n0 = 0) {
  float part[2] = {0.f, 0.f};
#pragma unroll
  for (int ni = 0; ni < NT; ++ni)
#pragma unroll
    for (int e = 0; e < 4; e += 2) {
      const float2 m = lds_bf16x2(M + (m0 + acc_row(0, e, lane)) * ld + n0 + acc_col(ni, e, lane));
      part[e >> 1] += acc[0][ni][e] * m.x;
      part[e >> 1] += acc[0][ni][e + 1] * m.y;
    }
  part[0] = quad_sum(part[0]);
  part[1] = quad_sum(part[1]);
  if ((lane & 3) == 0) out[m0 + (lane >> 2)] = part[0], out[m0 + (lane >> 2) + 8] = part[1];
}

// dq or dk of rows i < n, columns [n0, n0 + 8 NT) of D: bf16 into the caller's tensor when
// Hv == Hk, else fp32 per value head.
template <int D, int NT>
__device__ __forceinline__ void store_qk_grad(const TcArgs& a, const TcChunk& ck, const float (&acc)[1][NT][4], int m0,
                                              uint16_t* out, int64_t ld, float* per_vh, int lane, int n0 = 0) {
#pragma unroll
  for (int ni = 0; ni < NT; ++ni)
#pragma unroll
    for (int e = 0; e < 4; e += 2) {
      const int i = m0 + acc_row(0, e, lane), x = n0 + acc_col(ni, e, lane);
      if (i >= ck.n) continue;
      if (a.Hv == a.Hk) {
        st_bf16x2(out + (ck.r0 + i) * ld + ck.kh * D + x, acc[0][ni][e], acc[0][ni][e + 1], a.vec_out);
      } else {
        *reinterpret_cast<float2*>(per_vh + ((ck.r0 + i) * a.Hv + ck.h) * D + x) =
            make_float2(acc[0][ni][e], acc[0][ni][e + 1]);
      }
    }
}

// This thread's two rows' rnorm for l2norm_grad_rows (zero past the sequence's end or without one).
__device__ __forceinline__ void rnorm_rows(float (&r)[2], const TcArgs& a, const TcChunk& ck, const float* rnorm,
                                           int m0, int lane) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = m0 + (lane >> 2) + 8 * h;
    r[h] = rnorm && i < ck.n ? rnorm[(ck.r0 + i) * a.Hk + ck.kh] : 0.f;
  }
}

// The l2norm's backward on this warp's 16 rows x 8 NT columns of dy (acc, the gradient with
// respect to y = s x r, whose bf16 rows are Y in shared memory): dx = s r dy - (r / s) y (y . dy),
// r[h] = rnorm of row m0 + lane / 4 + 8 h (GdnCudaBackwardParams::q_rnorm; rnorm_rows loads them
// when the kernel starts, so that their latency is not on the way). The row dots add the column
// parts' partial sums (dots: kParts x 64 floats) in a fixed order; the warps of a row block
// (m0 / 16) meet at a warp-pair barrier.
template <int kParts, int NT>
__device__ __forceinline__ void l2norm_grad_rows(float (&acc)[1][NT][4], const uint16_t* Y, int ld, int m0, int n0,
                                                 const float (&r)[2], float s, float* dots, int warp, int lane) {
  row_dot(acc, Y, ld, m0, dots + (warp / 4) * kC, lane, n0);
  if constexpr (kParts == 2) named_barrier(1 + m0 / 16, 64);
  else __syncwarp();
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = m0 + (lane >> 2) + 8 * h;
    float dot = dots[i];
#pragma unroll
    for (int p = 1; p < kParts; ++p) dot += dots[p * kC + i];
    const float sr = s * r[h], rs = r[h] / s;
#pragma unroll
    for (int ni = 0; ni < NT; ++ni) {
      const float2 y = lds_bf16x2(Y + i * ld + n0 + acc_col(ni, 2 * h, lane));
      acc[0][ni][2 * h] = sr * acc[0][ni][2 * h] - rs * dot * y.x;
      acc[0][ni][2 * h + 1] = sr * acc[0][ni][2 * h + 1] - rs * dot * y.y;
    }
  }
}

// kPersist (chasing only; GdnPlan::qk_persist): one CTA a SM, taking chunks
// by ticket (TcArgs::qk_ticket: the same order, set by arrival, not the sums) and copying the next
// chunk's Q, K, dO into a second set of tiles while this one's products run.
template <int D, bool kChase, bool kPersist>
__global__ void __launch_bounds__(kGradWarps<D> * 32) gdn_tc_grad_qk_kernel(TcArgs a) {
  TcTimelineScope tl_scope(a.tl, kTlGradQk);
  static_assert(kChase || !kPersist, "persistent only when chasing");
  constexpr GradQkLayout<D> L{};
  constexpr int kLd = L.kLd, kParts = L.kParts, kThreads = kGradWarps<D> * 32;
  constexpr int NT1 = 8 / kParts, NT2 = D / 8 / kParts;  // n-tiles per warp: 64-column and D-column products
  unsigned char* sm = dynamic_smem();
  const int64_t total = a.B * a.Hv * a.NC;
  int* stk = reinterpret_cast<int*>(sm + L.tk);
  auto chunk_of = [&](int64_t t) { return tc_chunk_major<true>(a, t); };  // of ticket t
  auto load_qkdo = [&](const TcChunk& c, int buf) {
    uint16_t* q = reinterpret_cast<uint16_t*>(sm + (buf ? L.Q2 : L.Q));
    uint16_t* k = reinterpret_cast<uint16_t*>(sm + (buf ? L.K2 : L.K));
    uint16_t* o = reinterpret_cast<uint16_t*>(sm + (buf ? L.dO2 : L.dO));
    load_tile<kC, D, kThreads>(q, kLd, a.q + c.r0 * a.ld_q + c.kh * D, a.ld_q, c.n, a.vec_in);
    load_tile<kC, D, kThreads>(k, kLd, a.k + c.r0 * a.ld_k + c.kh * D, a.ld_k, c.n, a.vec_in);
    load_tile<kC, D, kThreads>(o, kLd, a.d_o + c.r0 * a.ld_do + c.h * D, a.ld_do, c.n, a.vec_in);
  };
  // One chunk's work (ticket: its place in the chasing order; buf: which Q, K, dO tiles); returns
  // the next ticket (persistent) after copying that chunk's Q, K, dO into the other tiles.
  auto run = [&](int64_t ticket, int buf) -> int64_t {
    uint16_t* sQ = reinterpret_cast<uint16_t*>(sm + (buf ? L.Q2 : L.Q));
    uint16_t* sK = reinterpret_cast<uint16_t*>(sm + (buf ? L.K2 : L.K));
    uint16_t* sdO = reinterpret_cast<uint16_t*>(sm + (buf ? L.dO2 : L.dO));
    uint16_t* sVn = reinterpret_cast<uint16_t*>(sm + L.Vn);
    uint16_t *sdVn = reinterpret_cast<uint16_t*>(sm + L.dVn), *sS = reinterpret_cast<uint16_t*>(sm + L.S);
    uint16_t *sdS = reinterpret_cast<uint16_t*>(sm + L.dS), *sdMG = reinterpret_cast<uint16_t*>(sm + L.dMG);
    float *sxr = reinterpret_cast<float*>(sm + L.xr), *sxc = reinterpret_cast<float*>(sm + L.xc);
    float* spq = reinterpret_cast<float*>(sm + L.pq);
    float *srk = reinterpret_cast<float*>(sm + L.rk), *sG = reinterpret_cast<float*>(sm + L.G);
    float* red = reinterpret_cast<float*>(sm + L.red);
    // kChase (chasing the reverse state pass): a 1-D grid (or the tickets, persistent), reverse
    // chunk-major (the last chunk of every sequence and head first, the order in which the state pass
    // finishes them). Else grid (NC, Hv, B).
    TcChunk ck;
    if constexpr (kChase) {
      ck = chunk_of(ticket);
    } else {
      ck = tc_chunk(a, blockIdx.x, blockIdx.y, blockIdx.z);
    }
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, part = warp / 4;
    const int rb = tc_row_block<kGradWarps<D>>(warp, tc_cta_rotation(a)), m0 = 16 * rb;
    const int n1 = part * NT1 * 8, n2 = part * NT2 * 8;  // this warp's first column in the two widths
    const int64_t base = ck.ch * kC * D;

    if constexpr (!kPersist) load_qkdo(ck, 0);  // else copied during the previous chunk (or above)
    load_tile<kC, D, kThreads>(sVn, kLd, a.Vn + base, D, kC, true);
    load_tile_f32<1, kC, kThreads>(sG, kC, a.G + ck.ch * kC, kC);
    cp_async_commit();
    load_tile<D, D, kThreads>(sS, kLd, a.S + ck.ch * D * D, D, D, true);
    cp_async_commit();
    auto load_from_state_pass = [&] {  // dS', dV': the reverse state pass's
      load_tile<D, D, kThreads>(sdS, kLd, a.dS + ck.ch * D * D, D, D, true);
      load_tile<kC, D, kThreads>(sdVn, kLd, a.dVn + base, D, kC, true);
    };
    if constexpr (!kChase) {
      load_from_state_pass();  // else once the state pass has counted the chunk (below)
      cp_async_commit();
    }
    float q_r[2];
    rnorm_rows(q_r, a, ck, a.q_rnorm, m0, lane);
    cp_async_wait<kChase ? 1 : 2>();  // Q, K, dO, V', G
    __syncthreads();

    {  // dMG = lower(dO V'^T) o Gam (bf16), X = dMG o (Q K^T): only its row and column sums are kept
      float dm[1][NT1][4], qk[1][NT1][4];
      zero_acc(dm);
      zero_acc(qk);
      warp_mma<1, NT1, D, false, false, Tri::kLowerN>(dm, sdO, kLd, m0, sVn, kLd, n1, lane);
      warp_mma<1, NT1, D, false, false, Tri::kLowerN>(qk, sQ, kLd, m0, sK, kLd, n1, lane);
      for_each_block_elem<NT1>(m0, n1, lane, [&](int ni, int e, int i, int j, bool zero) {
        const float dmg = !zero && j <= i ? dm[0][ni][e] * __expf(sG[i] - sG[j]) : 0.f;
        sdMG[i * kLdC + j] = f32_to_bf16_bits(dmg);
        qk[0][ni][e] = zero ? 0.f : qk[0][ni][e] * dmg;
      });
      row_col_sums(qk, m0, sxr + part * kC, [&](int j) -> float& { return sxc[rb * kC + n1 + j]; }, lane);
    }
    if constexpr (kChase) {
      cp_async_wait<0>();
      if (threadIdx.x == 0) {
        if constexpr (kPersist) stk[1] = flag_fetch_add(a.qk_ticket, 1);  // the next chunk's ticket
        flag_wait_at_least(a.ready + ck.ch, a.ready_count);
      }
    } else {
      cp_async_wait<1>();
    }
    __syncthreads();  // sdMG complete; S has landed; (chasing) the state pass has written dS', dV'
    int64_t next = total;
    if constexpr (kChase) {
      load_from_state_pass();
      cp_async_commit();
    }
    if constexpr (kPersist) {  // the next chunk's Q, K, dO into the other set (free since the barrier above)
      next = stk[1];
      if (next < total) load_qkdo(chunk_of(next), buf ^ 1);
      cp_async_commit();
    }
    const float gl = sG[kC - 1];
    // dq leaves through shared memory with dk_part and dW where it is bf16 (16-byte aligned rows)
    const bool stage_dq = a.Hv == a.Hk && a.vec16_dq;
    float P[1][NT2][4];
    {  // dq = (dO S^T) o e^G + dMG K
      zero_acc(P);
      warp_mma<1, NT2, D, false, false>(P, sdO, kLd, m0, sS, kLd, n2, lane);
      row_dot(P, sQ, kLd, m0, spq + part * kC, lane, n2);
#pragma unroll
      for (int ni = 0; ni < NT2; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) P[0][ni][e] *= __expf(sG[m0 + acc_row(0, e, lane)]);
      warp_mma<1, NT2, kC, false, true, Tri::kLowerK>(P, sdMG, kLdC, m0, sK, kLd, n2, lane);
      if (a.q_rnorm)
        l2norm_grad_rows<kParts>(P, sQ, kLd, m0, n2, q_r, a.q_scale, reinterpret_cast<float*>(sm + L.nd), warp, lane);
      if (!stage_dq) store_qk_grad<D>(a, ck, P, m0, a.dq, a.ld_dq, a.dq_vh, lane, n2);
    }
    cp_async_wait<kPersist ? 1 : 0>();  // (the next chunk's Q, K, dO may fly)
    __syncthreads();  // dS', dV' have landed
    // dk_part and dW stay in registers until the tiles are free, then leave through shared memory in
    // whole rows (16-byte stores: the accumulators' 4-byte ones write each 32-byte sector in halves)
    float R[1][NT2][4], Wd[1][NT2][4];
    {  // R = V' dS'^T and dW = -dV' S^T in one k-loop, whose B fragments (dS' and S at the same
       // places) also give <dS', S>: each row block's warps take a quarter of the k-steps, and the
       // threads' partial sums are added in thread order below (no separate pass over both tiles)
      float dot = 0.f;
      zero_acc(R);
      zero_acc(Wd);
      warp_mma2_dot<NT2, D, 4>(R, sVn, Wd, sdVn, kLd, m0, sdS, sS, kLd, n2, warp % 4, dot, lane);
      red[threadIdx.x] = dot;
#pragma unroll
      for (int ni = 0; ni < NT2; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) Wd[0][ni][e] = -Wd[0][ni][e];
    }
    {  // dk_part = R o D + dMG^T Q
      row_dot(R, sK, kLd, m0, srk + part * kC, lane, n2);
#pragma unroll
      for (int ni = 0; ni < NT2; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) R[0][ni][e] *= __expf(gl - sG[m0 + acc_row(0, e, lane)]);
      warp_mma<1, NT2, kC, true, true, Tri::kUpperK>(R, sdMG, kLdC, m0, sQ, kLd, n2, lane);
    }
    __syncthreads();  // every product done: Q's and K's tiles take dk_part and dW
    store_acc_bf16(sQ + n2, kLd, m0, R, lane);
    store_acc_bf16(sK + n2, kLd, m0, Wd, lane);
    if (stage_dq) store_acc_bf16(sdO + n2, kLd, m0, P, lane);
    if (threadIdx.x < kC) {
      const int i = threadIdx.x;
      auto parts = [&](const float* v, int r) { return kParts == 1 ? v[r] : v[r] + v[kC + r]; };
      const float xs = parts(sxr, i) - (((sxc[i] + sxc[kC + i]) + sxc[2 * kC + i]) + sxc[3 * kC + i]);
      float dG = __expf(sG[i]) * parts(spq, i) - __expf(gl - sG[i]) * parts(srk, i) + xs;
      // The last row's G_n terms, e^{G_n} <dS', S> + sum_r D_r (R.K)_r, summed by its warp in a fixed
      // order (one thread's serial loops over 128 + 64 terms sat at every CTA's end).
      if (i >= kC - 32) {
        float dot = 0.f, rk = 0.f;
        for (int t = lane; t < kThreads; t += 32) dot += red[t];
        for (int r = lane; r < kC; r += 32) rk += __expf(gl - sG[r]) * parts(srk, r);
        dot = warp_sum_ascending(dot);
        rk = warp_sum_ascending(rk);
        if (i == kC - 1) dG += __expf(gl) * dot + rk;
      }
      a.dG_part[ck.ch * kC + i] = dG;
    }
    __syncthreads();
    store_tile_cta<kC, D, kThreads>(a.dk_part + base, D, sQ, kLd);
    store_tile_cta<kC, D, kThreads>(a.dW + base, D, sK, kLd);
    if (stage_dq) store_tile_cta<kC, D, kThreads>(a.dq + ck.r0 * a.ld_dq + ck.kh * D, a.ld_dq, sdO, kLd, ck.n);
    // When chasing, the first chunks' CTAs end only after the state pass has (dS0): so does this kernel
    if (kChase && !kPersist && ck.c == 0) grid_dependency_wait();
    return next;
  };
  if constexpr (kPersist) {
    if (threadIdx.x == 0) stk[0] = flag_fetch_add(a.qk_ticket, 1);
    __syncthreads();
    int64_t ticket = stk[0];
    if (ticket < total) load_qkdo(chunk_of(ticket), 0);
    cp_async_commit();
    for (int buf = 0; ticket < total; buf ^= 1) {
      ticket = run(ticket, buf);
      __syncthreads();  // every thread's stores from this chunk's tiles are read before they are reused
    }
    grid_dependency_wait();  // (dS0: the state pass's last chunk is counted before it ends)
  } else {
    run(blockIdx.x, 0);
  }
}

// ---------------------------------------------------------------------------------------------
// grad_wy: grid (NC, Hv, B), kGradWarps(D) warps split as grad_qk's (Z1 = T^T dT, 16 x 64 per row
// block, is computed by both warps of a row block: it is the next product's k).
template <int D>
struct GradWyLayout {
  static constexpr int kLd = D + 8, kParts = kGradWarps<D> / 4;
  // CTAs per SM that the registers must allow: four at D = 64 (128 a thread; the shared memory below
  // is 55.75 KB, so four fit there too), at D = 128 no minimum (0; two CTAs by the shared memory).
  static constexpr int kMinBlocks = D == 64 ? 4 : 0;
  // grad_qk's dk_part: at D = 128 a tile of its own, copied with the others (two CTAs a SM either way);
  // at D = 64 into dW's space once T^T dW is done (four CTAs a SM need its 8 KB).
  static constexpr bool kEarlyDkp = D == 128;
  // Ps (P' + P'^T) reuses dT's space once Z1 = T^T dT is done (Z1 stays in registers); of E only
  // its row sums (er) and per-row-block column sums (ec) are kept, ec in the padding columns of Tb's
  // rows (ec_at). zr, s, sv, er: one per part. dkp: grad_qk's dk_part (bf16, padded as dW; dW's
  // own space unless kEarlyDkp); nd (the l2norm's row dots) and dG share their space (the one is done before the
  // other starts).
  size_t K = 0, V = 0, dW = 0, dU = 0, Tb = 0, dT = 0, G = 0, B = 0, s = 0, sv = 0, zr = 0, dG = 0, er = 0,
         nd = 0, dkp = 0, bytes = 0;
  __host__ __device__ constexpr GradWyLayout() {
    SmemPlan p;
    K = p.take(kC * kLd * 2), V = p.take(kC * kLd * 2), dW = p.take(kC * kLd * 2), dU = p.take(kC * kLd * 2);
    Tb = p.take(kC * kLdC * 2), dT = p.take(kC * kLdC * 2);
    G = p.take(kC * 4), B = p.take(kC * 4), s = p.take(kParts * kC * 4), sv = p.take(kParts * kC * 4);
    zr = p.take(kParts * kC * 4), er = p.take(kParts * kC * 4);
    nd = dG = p.take((kParts > 1 ? kParts : 1) * kC * 4);
    dkp = kEarlyDkp ? p.take(kC * kLd * 2) : dW;
    bytes = p.bytes;
  }
};
// ec[k], k = row block * 64 + column (4 x 64 floats): the 16 bytes past column 63 of Tb's row k / 4,
// which no product reads (kLdC - kC = 8 bf16 = 4 floats a row, 64 rows).
__device__ __forceinline__ float& ec_at(uint16_t* sTb, int k) {
  static_assert((kLdC - kC) * 2 == 4 * sizeof(float), "four floats in each row's padding");
  return reinterpret_cast<float*>(sTb + (k / 4) * kLdC + kC)[k % 4];
}

template <int D>
__global__ void __launch_bounds__(kGradWarps<D> * 32, GradWyLayout<D>::kMinBlocks) gdn_tc_grad_wy_kernel(TcArgs a) {
  TcTimelineScope tl_scope(a.tl, kTlGradWy);
  constexpr GradWyLayout<D> L{};
  // the triangles' zero parts are left out at head dim 128 only: at 64 the skips' branches cost
  // registers (they make it spill) for less than they save
  constexpr bool kWyTri = D == 128;
  constexpr auto wy_tri = [](Tri t) { return kWyTri ? t : Tri::kNone; };
  constexpr int kLd = L.kLd, kParts = L.kParts, kThreads = kGradWarps<D> * 32;
  constexpr int NT1 = 8 / kParts, NT2 = D / 8 / kParts;  // n-tiles per warp: 64-column and D-column products
  const bool stage_dk = a.Hv == a.Hk && a.vec16_dk;      // dk (bf16) in whole rows, as dv where vec16_dv
  unsigned char* sm = dynamic_smem();
  uint16_t *sK = reinterpret_cast<uint16_t*>(sm + L.K), *sV = reinterpret_cast<uint16_t*>(sm + L.V);
  uint16_t *sdW = reinterpret_cast<uint16_t*>(sm + L.dW), *sdU = reinterpret_cast<uint16_t*>(sm + L.dU);
  uint16_t *sTb = reinterpret_cast<uint16_t*>(sm + L.Tb), *sdT = reinterpret_cast<uint16_t*>(sm + L.dT);
  uint16_t* sPs = reinterpret_cast<uint16_t*>(sm + L.dT);
  float* ser = reinterpret_cast<float*>(sm + L.er);
  float *sG = reinterpret_cast<float*>(sm + L.G), *sB = reinterpret_cast<float*>(sm + L.B);
  float *ss = reinterpret_cast<float*>(sm + L.s), *ssv = reinterpret_cast<float*>(sm + L.sv);
  float *szr = reinterpret_cast<float*>(sm + L.zr), *sdG = reinterpret_cast<float*>(sm + L.dG);
  const TcChunk ck = tc_chunk(a, blockIdx.x, blockIdx.y, blockIdx.z);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, part = warp / 4;
  // without the skips every row block is the same work: no rotation
  const int rb = kWyTri ? tc_row_block<kGradWarps<D>>(warp, tc_cta_rotation(a)) : warp % 4, m0 = 16 * rb;
  const int n1 = part * NT1 * 8, n2 = part * NT2 * 8;  // this warp's first column in the two widths
  const int64_t base = ck.ch * kC * D;

  load_tile<kC, D, kThreads>(sK, kLd, a.k + ck.r0 * a.ld_k + ck.kh * D, a.ld_k, ck.n, a.vec_in);
  load_tile<kC, D, kThreads>(sV, kLd, a.v + ck.r0 * a.ld_v + ck.h * D, a.ld_v, ck.n, a.vec_in);
  load_tile<kC, D, kThreads>(sdW, kLd, a.dW + base, D, kC, true);
  load_tile<kC, D, kThreads>(sdU, kLd, a.dVn + base, D, kC, true);
  load_tile<kC, kC, kThreads>(sTb, kLdC, a.Tb + ck.ch * kC * kC, kC, kC, true);  // T from prep
  load_tile_f32<1, kC, kThreads>(sG, kC, a.G + ck.ch * kC, kC);
  cp_async_commit();
  uint16_t* sdkp = reinterpret_cast<uint16_t*>(sm + L.dkp);
  if constexpr (L.kEarlyDkp) load_tile<kC, D, kThreads>(sdkp, kLd, a.dk_part + base, D, kC, true);
  cp_async_commit();  // (empty at D = 64)
  if (threadIdx.x < kC) sB[threadIdx.x] = threadIdx.x < ck.n ? a.beta[(ck.r0 + threadIdx.x) * a.Hv + ck.h] : 0.f;
  const float dG_part = threadIdx.x < kC ? a.dG_part[ck.ch * kC + threadIdx.x] : 0.f;
  float k_r[2];
  rnorm_rows(k_r, a, ck, a.k_rnorm, m0, lane);
  cp_async_wait<1>();
  __syncthreads();

  // KKG = strict_lower(K K^T o Gam), this warp's columns, stays in registers (the dA products below
  // have the same fragment layout).
  float kkg[1][NT1][4];
  zero_acc(kkg);
  warp_mma<1, NT1, D, false, false, wy_tri(Tri::kLowerN)>(kkg, sK, kLd, m0, sK, kLd, n1, lane);
  for_each_block_elem<NT1>(m0, n1, lane, [&](int ni, int e, int i, int j, bool zero) {
    kkg[0][ni][e] = !zero && j < i ? kkg[0][ni][e] * __expf(sG[i] - sG[j]) : 0.f;
  });
  {  // dT = dW Kb^T + dU Vb^T, strict lower: dT_im = beta_m (e^{G_m} (dW K^T)_im + (dU V^T)_im)
    float a1[1][NT1][4], a2[1][NT1][4];
    zero_acc(a1);
    zero_acc(a2);
    warp_mma<1, NT1, D, false, false, wy_tri(Tri::kLowerN)>(a1, sdW, kLd, m0, sK, kLd, n1, lane);
    warp_mma<1, NT1, D, false, false, wy_tri(Tri::kLowerN)>(a2, sdU, kLd, m0, sV, kLd, n1, lane);
#pragma unroll
    for (int ni = 0; ni < NT1; ++ni) {
      const bool zero = above_diagonal(n1 + 8 * ni, m0);
#pragma unroll
      for (int e = 0; e < 4; e += 2) {
        const int i = m0 + acc_row(0, e, lane), m = n1 + acc_col(ni, e, lane);
        float v[2];
#pragma unroll
        for (int u = 0; u < 2; ++u)
          v[u] = !zero && m + u < i ? sB[m + u] * (__expf(sG[m + u]) * a1[0][ni][e + u] + a2[0][ni][e + u]) : 0.f;
        *reinterpret_cast<uint32_t*>(sdT + i * kLdC + m) = pack_bf16x2(v[0], v[1]);
      }
    }
  }
  __syncthreads();  // sTb, sdT complete
  // Z1 = T^T dT (this row block's rows, bf16), kept as the A fragments of Z1 T^T (accumulator
  // tiles 2s and 2s + 1 are k-step s's fragment)
  uint32_t z1[kC / 16][4];
  {
    float acc[1][8][4];
    zero_acc(acc);
    warp_mma<1, 8, kC, true, true, wy_tri(Tri::kUpperK)>(acc, sTb, kLdC, m0, sdT, kLdC, 0, lane);
#pragma unroll
    for (int ni = 0; ni < 8; ++ni)
#pragma unroll
      for (int e = 0; e < 4; e += 2)
        z1[ni / 2][(ni & 1) * 2 + e / 2] = static_cast<uint32_t>(f32_to_bf16_bits(acc[0][ni][e])) |
                                           (static_cast<uint32_t>(f32_to_bf16_bits(acc[0][ni][e + 1])) << 16);
  }
  __syncthreads();  // every warp is done reading dT: Ps may overwrite it
  {  // dA = -strict_lower(Z1 T^T): Z = dA o KKG (dbeta), E = diag(beta) Z (dG: its row and column
     // sums), P' = diag(beta) dA o Gam, Ps = P' + P'^T (bf16, for dk).
    float acc[1][NT1][4];
    zero_acc(acc);
#pragma unroll
    for (int ks = 0; ks < kC / 16; ++ks)
#pragma unroll
      for (int nj = 0; nj < NT1; nj += 2) {
        // only the strict lower part is kept, and T^T's rows k > n are zero: at head dim 128 columns
        // above every row, and k-steps past the pair's last column, are left out (kWyTri)
        if (kWyTri && (above_diagonal(n1 + 8 * nj, m0) || 16 * ks > n1 + 8 * nj + 15)) continue;
        uint32_t b[2][2];
        load_b2<false>(b, sTb, kLdC, 16 * ks, n1 + 8 * nj, lane);
        mma_bf16_16816(acc[0][nj], z1[ks], b[0]);
        mma_bf16_16816(acc[0][nj + 1], z1[ks], b[1]);
      }
    float zpart[2] = {0.f, 0.f};
#pragma unroll
    for (int ni = 0; ni < NT1; ++ni) {
      if (above_diagonal(n1 + 8 * ni, m0)) {  // no j <= i there: E is zero, Ps written by the mirror
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[0][ni][e] = 0.f;
        continue;
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = m0 + acc_row(0, e, lane), j = n1 + acc_col(ni, e, lane);
        float ev = 0.f;
        if (j < i) {
          const float dA = -acc[0][ni][e], z = dA * kkg[0][ni][e];
          zpart[e >> 1] += z;
          ev = sB[i] * z;
          const uint16_t p = f32_to_bf16_bits(sB[i] * dA * __expf(sG[i] - sG[j]));
          sPs[i * kLdC + j] = p;
          sPs[j * kLdC + i] = p;
        } else if (j == i) {
          sPs[i * kLdC + i] = 0;
        }
        acc[0][ni][e] = ev;
      }
    }
    zpart[0] = quad_sum(zpart[0]);
    zpart[1] = quad_sum(zpart[1]);
    float* zr = szr + part * kC;
    if ((lane & 3) == 0) zr[m0 + (lane >> 2)] = zpart[0], zr[m0 + (lane >> 2) + 8] = zpart[1];
    row_col_sums(acc, m0, ser + part * kC, [&](int j) -> float& { return ec_at(sTb, rb * kC + n1 + j); },
                 lane);
  }
  __syncthreads();  // sPs, E complete
  {  // dk = dk_part + diag(beta e^G) T^T dW + Ps K
    float acc[1][NT2][4];
    zero_acc(acc);
    warp_mma<1, NT2, kC, true, true, wy_tri(Tri::kUpperK)>(acc, sTb, kLdC, m0, sdW, kLd, n2, lane);
    if constexpr (!L.kEarlyDkp) {
      __syncthreads();  // every warp is done with dW: grad_qk's dk_part lands in its place
      load_tile<kC, D, kThreads>(sdkp, kLd, a.dk_part + base, D, kC, true);
      cp_async_commit();
    }
    row_dot(acc, sK, kLd, m0, ss + part * kC, lane, n2);
#pragma unroll
    for (int ni = 0; ni < NT2; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = m0 + acc_row(0, e, lane);
        acc[0][ni][e] *= sB[i] * __expf(sG[i]);
      }
    warp_mma<1, NT2, kC, false, true>(acc, sPs, kLdC, m0, sK, kLd, n2, lane);
    cp_async_wait<0>();
    __syncthreads();  // dk_part has landed
#pragma unroll
    for (int ni = 0; ni < NT2; ++ni)
#pragma unroll
      for (int e = 0; e < 4; e += 2) {
        const int i = m0 + acc_row(0, e, lane), x = n2 + acc_col(ni, e, lane);
        const float2 p = lds_bf16x2(sdkp + i * kLd + x);
        acc[0][ni][e] += p.x;
        acc[0][ni][e + 1] += p.y;
      }
    if (a.k_rnorm)
      l2norm_grad_rows<kParts>(acc, sK, kLd, m0, n2, k_r, a.k_scale, reinterpret_cast<float*>(sm + L.nd), warp, lane);
    // dk in whole rows where it is bf16 (store_tile_cta below): into dk_part's tile, each thread over
    // the elements it read
    if (stage_dk) store_acc_bf16(sdkp + n2, kLd, m0, acc, lane);
    else store_qk_grad<D>(a, ck, acc, m0, a.dk, a.ld_dk, a.dk_vh, lane, n2);
  }
  float dv[1][NT2][4];
  {  // dv = diag(beta) T^T dU
    zero_acc(dv);
    warp_mma<1, NT2, kC, true, true, wy_tri(Tri::kUpperK)>(dv, sTb, kLdC, m0, sdU, kLd, n2, lane);
    row_dot(dv, sV, kLd, m0, ssv + part * kC, lane, n2);
#pragma unroll
    for (int ni = 0; ni < NT2; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) dv[0][ni][e] *= sB[m0 + acc_row(0, e, lane)];
    if (!a.vec16_dv)
#pragma unroll
      for (int ni = 0; ni < NT2; ++ni)
#pragma unroll
        for (int e = 0; e < 4; e += 2) {
          const int i = m0 + acc_row(0, e, lane), y = n2 + acc_col(ni, e, lane);
          if (i < ck.n)
            st_bf16x2(a.dv + (ck.r0 + i) * a.ld_dv + ck.h * D + y, dv[0][ni][e], dv[0][ni][e + 1], a.vec_out);
        }
  }
  __syncthreads();
  if (a.vec16_dv) store_acc_bf16(sdU + n2, kLd, m0, dv, lane);  // dv in whole rows too (below), through dU's tile
  if (threadIdx.x < kC) {
    const int i = threadIdx.x;
    auto parts = [&](const float* v) { return kParts == 1 ? v[i] : v[i] + v[kC + i]; };
    const float eg = __expf(sG[i]), s_i = parts(ss);
    if (i < ck.n) a.dbeta[(ck.r0 + i) * a.Hv + ck.h] = parts(szr) + eg * s_i + parts(ssv);
    const float es =
        parts(ser) - (((ec_at(sTb, i) + ec_at(sTb, kC + i)) + ec_at(sTb, 2 * kC + i)) + ec_at(sTb, 3 * kC + i));
    sdG[i] = dG_part + es + sB[i] * eg * s_i;
  }
  __syncthreads();
  if (warp == 0) {  // dg = reverse_cumsum(dG): pairs per lane, then a suffix shuffle scan
    const int i0 = 2 * lane, i1 = 2 * lane + 1;
    float x = sdG[i0] + sdG[i1];
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const float t = __shfl_down_sync(0xffffffffu, x, o);
      if (lane + o < 32) x += t;
    }
    float excl = __shfl_down_sync(0xffffffffu, x, 1);
    if (lane == 31) excl = 0.f;
    const float d1 = excl + sdG[i1], d0 = d1 + sdG[i0];
    if (i0 < ck.n) a.dg[(ck.r0 + i0) * a.Hv + ck.h] = d0;
    if (i1 < ck.n) a.dg[(ck.r0 + i1) * a.Hv + ck.h] = d1;
  }
  if (stage_dk) store_tile_cta<kC, D, kThreads>(a.dk + ck.r0 * a.ld_dk + ck.kh * D, a.ld_dk, sdkp, kLd, ck.n);
  if (a.vec16_dv) store_tile_cta<kC, D, kThreads>(a.dv + ck.r0 * a.ld_dv + ck.h * D, a.ld_dv, sdU, kLd, ck.n);
}

template <int D>
void grad_qk_d(const TcArgs& a, cudaStream_t s, const char* op) {
  constexpr GradQkLayout<D> L{};
  if (a.qk_persist) {  // one CTA a SM (its shared memory fills one), taking chunks by ticket
    DT_CHECK(D == 128 && a.ready, "{}: the persistent grad_qk takes head dim 128, chasing", op);
    if constexpr (D == 128) {
      tc_set_smem(gdn_tc_grad_qk_kernel<D, true, true>, L.persist_bytes, op);
      tc_launch_chunks(gdn_tc_grad_qk_kernel<D, true, true>, a, kGradWarps<D> * 32, L.persist_bytes, s, op, a.sms);
    }
  } else if (a.ready) {
    tc_set_smem(gdn_tc_grad_qk_kernel<D, true, false>, L.bytes, op);
    tc_launch_chunks(gdn_tc_grad_qk_kernel<D, true, false>, a, kGradWarps<D> * 32, L.bytes, s, op);
  } else {  // the plan always chases at head dim 64
    DT_CHECK(D == 128, "{}: grad_qk not chasing the reverse state pass takes head dim 128", op);
    if constexpr (D == 128) {
      tc_set_smem(gdn_tc_grad_qk_kernel<D, false, false>, L.bytes, op);
      gdn_tc_grad_qk_kernel<D, false, false><<<tc_chunk_grid(a), kGradWarps<D> * 32, L.bytes, s>>>(a);
      DT_CUDA_OK(cudaGetLastError(), op);
    }
  }
}

template <int D>
void grad_wy_d(const TcArgs& a, cudaStream_t s, const char* op) {
  constexpr GradWyLayout<D> L{};
  tc_set_smem(gdn_tc_grad_wy_kernel<D>, L.bytes, op);
  gdn_tc_grad_wy_kernel<D><<<tc_chunk_grid(a), kGradWarps<D> * 32, L.bytes, s>>>(a);
  DT_CUDA_OK(cudaGetLastError(), op);
}

}  // namespace

void tc_grad_qk(const TcArgs& a, int D, cudaStream_t s, const char* op) {
  if (D == 64) grad_qk_d<64>(a, s, op);
  else grad_qk_d<128>(a, s, op);
}

void tc_grad_wy(const TcArgs& a, int D, cudaStream_t s, const char* op) {
  if (D == 64) grad_wy_d<64>(a, s, op);
  else grad_wy_d<128>(a, s, op);
}

}  // namespace dt::cuda
