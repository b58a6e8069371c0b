// The state passes with wgmma (sm_90a): forward (GdnCudaDims::wgmma bit 2), then reverse (bit 4);
// options, slower than the mma.sync and column-warp passes (docs/gdn_kernels.md, "The kernels").
// The forward state pass. Same results as
// gdn_tc_forward.cu's gdn_tc_state_forward_kernel (V' and the entering S per chunk, bf16; S_out),
// other summation order. Per (64 columns of S, value head, batch), two warpgroups: a producer
// that copies chunk after chunk's W, K, U, G tiles into a ring of kStages (cp.async; named
// barriers full / empty per stage), and a consumer that runs the chain. The consumer keeps the
// state transposed, S^T (64 x D, fp32), as wgmma accumulators, so that both products of a chunk
// take their A operand straight from registers and the chain passes nothing through shared memory:
//   V'^T = U^T - S^T W^T        A = S^T (bf16, negated)   B = W  (K-major: W[i][d], d along k)
//   S^T <- e^{G_n} S^T + Vd^T K   A = Vd^T (bf16)           B = K  (MN-major: K[i][d], d along n)
// with Vd = D o V' (D_i = exp(G_n - G_i)). The mma.sync version loads every B fragment once per
// warp (4-8 times per CTA), passes S and D o V' through shared memory between the products, with
// three barriers a chunk, and issues its own copies. The saved S (entering chunk c) and V' go out
// through shared memory, transposed by stmatrix, in 16-byte stores that overlap the products.
// 64 columns per CTA (wgmma's M): grid (D / 64, Hv, B).
#include "kernels/cuda/gdn_tc_state.cuh"

namespace dt {

using namespace gdn_cuda;

namespace {

template <int D, int kStages>
struct StateWgLayout {
  static constexpr uint32_t kGroup = (D / 8) * 128;  // bytes between 8-row (K-major) or 8-k (MN-major) groups
  static constexpr int kLdU = 64 + 8, kLdO = 64 + 8;  // U rows; staged S and V' rows (all bf16)
  // stage 0 offsets (stage s is stage 0 + s * stage), then two buffers each of staged S and V'
  size_t W = 0, K = 0, U = 0, G = 0, stage = 0, S = 0, V = 0, bytes = 0;
  __host__ __device__ constexpr StateWgLayout() {
    SmemPlan p;
    W = p.take(kC * D * 2), K = p.take(kC * D * 2), U = p.take(kC * kLdU * 2), G = p.take(kC * 4);
    stage = p.bytes;
    p.take(stage * (kStages - 1));
    S = p.take(2 * D * kLdO * 2), V = p.take(2 * kC * kLdO * 2);
    bytes = p.bytes;
  }
};

template <int D, int kStages>
__global__ void __launch_bounds__(256, D == 64 ? 2 : 1) gdn_tc_state_forward_wg_kernel(TcArgs a) {
  TcTimelineScope tl_scope(a.tl, kTlStateForwardWg);
  constexpr StateWgLayout<D, kStages> L{};
  constexpr uint32_t kG = L.kGroup;
  constexpr int kLdU = L.kLdU, kLdO = L.kLdO;
  unsigned char* sm = dynamic_smem();
  uint16_t* sSo = reinterpret_cast<uint16_t*>(sm + L.S);
  uint16_t* sVo = reinterpret_cast<uint16_t*>(sm + L.V);
  const int y0 = blockIdx.x * 64;
  const int64_t h = blockIdx.y, b = blockIdx.z, bh = b * a.Hv + h, kh = h / (a.Hv / a.Hk);
  grid_launch_dependents();  // the chasing output kernel may start once every CTA here runs

  using Ring = TileRing<kStages, 256>;
  if (threadIdx.x < 128) {  // producer: chunk c's tiles into stage c % kStages
    Ring::produce(a.NC, [&](int64_t c, int s) {
      unsigned char* st = sm + s * L.stage;
      const TcChunk ck = tc_chunk(a, c, h, b);
      const int64_t ch = ck.ch, r0 = ck.r0;
      const int n = ck.n;
      load_tile_at<kC, D, 128>(KMajorAt<kG>{st + L.W}, a.W + ch * kC * D, D, kC, true);
      load_tile_at<kC, D, 128>(MnMajorAt<kG>{st + L.K}, a.k + r0 * a.ld_k + kh * D, a.ld_k, n, a.vec_in);
      load_tile<kC, 64, 128>(reinterpret_cast<uint16_t*>(st + L.U), kLdU, a.U + ch * kC * D + y0, D, kC, true);
      load_tile_f32<1, kC, 128>(reinterpret_cast<float*>(st + L.G), kC, a.G + ch * kC, kC);
    });
    return;
  }

  // consumer (the second warpgroup): the chain
  const int tid = threadIdx.x - 128, lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
  float S[D / 2];  // S^T
  load_state_t<D>(S, a.S0, bh, y0, warp, lane);
  for (int64_t c = 0; c < a.NC; ++c) {
    const int s = static_cast<int>(c % kStages);
    const unsigned char* st = sm + s * L.stage;
    const uint16_t* sU = reinterpret_cast<const uint16_t*>(st + L.U);
    const float* sG = reinterpret_cast<const float*>(st + L.G);
    const int64_t ch = bh * a.NC + c;
    uint16_t* sSc = sSo + (c & 1) * D * kLdO;
    uint16_t* sVc = sVo + (c & 1) * kC * kLdO;
    // S^T as bf16 A fragments (negated by the products); also S as saved, transposed, to sSc
    uint32_t ah[D / 16][4];
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; e += 2) ah[j / 2][ra_reg(j, e)] = bf16x2_bits(S[4 * j + e], S[4 * j + e + 1]);
#pragma unroll
    for (int k = 0; k < D / 16; ++k) stage_transposed(sSc, kLdO, k, ah[k], warp, lane);
    Ring::acquire(c);  // chunk c's tiles landed; every consumer thread has staged S
    // chunk c - 2 is out: its S left in chunk c - 2, its V' in chunk c - 1, both before this barrier
    if (c >= 2) chunk_ready_signal(a, ch - 2, tid == 0);
    // V'^T = U^T - S^T W^T
    float V[32];
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) V[4 * j + e] = bf16_val(sU[(8 * j + 2 * t + e % 2) * kLdU + 16 * warp + g + 8 * (e / 2)]);
    const unsigned char* sW = st + L.W;
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < D / 16; ++k) {
      const uint64_t wd = wgmma_desc_k(sW + wgmma_kmajor_offset(0, 16 * k, 128, kG), 128, kG);
      wgmma_bf16_ra<64, 0, true>(V, ah[k], wd, 1);
    }
    wgmma_commit();
    // meanwhile: S entering chunk c and V' of chunk c - 1 out
    store_tile<D, 64>(a.S + ch * D * D + y0, D, sSc, kLdO, tid, 128);
    if (c > 0) store_tile<kC, 64>(a.Vn + (ch - 1) * kC * D + y0, D, sVo + ((c - 1) & 1) * kC * kLdO, kLdO, tid, 128);
    wgmma_wait<0>();
    wgmma_fence_operand(V);
    // V' (bf16, transposed to sVc) and Vd = D o V' as bf16 A fragments
    const float gl = sG[kC - 1];
    uint32_t vs[4][4], vd[4][4];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float d0 = __expf(gl - sG[8 * j + 2 * t]), d1 = __expf(gl - sG[8 * j + 2 * t + 1]);
#pragma unroll
      for (int e = 0; e < 4; e += 2) {
        const float v0 = V[4 * j + e], v1 = V[4 * j + e + 1];
        vs[j / 2][ra_reg(j, e)] = bf16x2_bits(v0, v1);
        vd[j / 2][ra_reg(j, e)] = bf16x2_bits(v0 * d0, v1 * d1);
      }
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) stage_transposed(sVc, kLdO, k, vs[k], warp, lane);
    // S^T = e^{G_n} S^T + Vd^T K
    const float eg = __expf(gl);
#pragma unroll
    for (int i = 0; i < D / 2; ++i) S[i] *= eg;
    const unsigned char* sK = st + L.K;
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint64_t kd = wgmma_desc_mn(sK + wgmma_mnmajor_offset(0, 16 * k, kG, 128), kG, 128);
      wgmma_bf16_ra<D, 1>(S, vd[k], kd, 1);
    }
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operand(S);
    Ring::release(c, a.NC);
  }
  named_barrier(Ring::kConsumers, 128);  // the last chunk's V' staged
  if (a.NC >= 2) chunk_ready_signal(a, bh * a.NC + a.NC - 2, tid == 0);
  store_tile<kC, 64>(a.Vn + (bh * a.NC + a.NC - 1) * kC * D + y0, D, sVo + ((a.NC - 1) & 1) * kC * kLdO, kLdO, tid, 128);
  if (a.ready) {
    named_barrier(Ring::kConsumers, 128);  // every consumer thread's part of the last V' written
    chunk_ready_signal(a, bh * a.NC + a.NC - 1, tid == 0);
  }
  store_state_t<D>(S, a.S_out, bh, y0, warp, lane);
}

// ---------------------------------------------------------------------------------------------
// The reverse state pass with wgmma (GdnCudaDims::wgmma bit 4). Same results as gdn_tc_backward.cu's
// gdn_tc_state_backward_kernel (dS' and dV' per chunk, bf16; dS0), other summation order. Last chunk
// first, the consumer keeps dS'^T (64 x D, fp32) as accumulators:
//   dV'^T = dvl^T + (dS'^T K^T) o D    A = dS'^T (bf16, as the mma.sync pass)   B = K (K-major)
//   dS^T  = e^{G_n} dS'^T + dOg^T Q - dV'^T W
//           A = dOg^T (ldmatrix.trans from the [i][y] tile), dV'^T (bf16, negated by the products)
//           B = Q, W (MN-major)
// D_i = exp(G_n - G_i); dOg = dO o e^G and dvl = M^T dO from dv_local.
template <int D, int kStages>
struct StateBwdWgLayout {
  static constexpr uint32_t kGroup = (D / 8) * 128;
  static constexpr int kLdV = 64 + 8;  // dOg, dvl tiles ([i][y]); staged dS' and dV' rows
  size_t K = 0, Q = 0, W = 0, dOg = 0, dvl = 0, G = 0, stage = 0, S = 0, V = 0, bytes = 0;
  __host__ __device__ constexpr StateBwdWgLayout() {
    SmemPlan p;
    K = p.take(kC * D * 2), Q = p.take(kC * D * 2), W = p.take(kC * D * 2);
    dOg = p.take(kC * kLdV * 2), dvl = p.take(kC * kLdV * 2), G = p.take(kC * 4);
    stage = p.bytes;
    p.take(stage * (kStages - 1));
    S = p.take(2 * D * kLdV * 2), V = p.take(2 * kC * kLdV * 2);
    bytes = p.bytes;
  }
};

template <int D, int kStages>
__global__ void __launch_bounds__(256) gdn_tc_state_backward_wg_kernel(TcArgs a) {
  TcTimelineScope tl_scope(a.tl, kTlStateBackwardWg);
  constexpr StateBwdWgLayout<D, kStages> L{};
  constexpr uint32_t kG = L.kGroup;
  constexpr int kLdV = L.kLdV;
  unsigned char* sm = dynamic_smem();
  uint16_t* sSo = reinterpret_cast<uint16_t*>(sm + L.S);
  uint16_t* sVo = reinterpret_cast<uint16_t*>(sm + L.V);
  const int y0 = blockIdx.x * 64;
  const int64_t h = blockIdx.y, b = blockIdx.z, bh = b * a.Hv + h, kh = h / (a.Hv / a.Hk);

  using Ring = TileRing<kStages, 256>;
  if (threadIdx.x < 128) {  // producer: the j-th chunk visited (c = NC - 1 - j) into stage j % kStages
    Ring::produce(a.NC, [&](int64_t j, int s) {
      unsigned char* st = sm + s * L.stage;
      const TcChunk ck = tc_chunk(a, a.NC - 1 - j, h, b);  // the j-th chunk visited
      const int64_t ch = ck.ch, r0 = ck.r0;
      const int n = ck.n;
      load_tile_at<kC, D, 128>(KMajorAt<kG>{st + L.K}, a.k + r0 * a.ld_k + kh * D, a.ld_k, n, a.vec_in);
      load_tile_at<kC, D, 128>(MnMajorAt<kG>{st + L.Q}, a.q + r0 * a.ld_q + kh * D, a.ld_q, n, a.vec_in);
      load_tile_at<kC, D, 128>(MnMajorAt<kG>{st + L.W}, a.W + ch * kC * D, D, kC, true);
      load_tile<kC, 64, 128>(reinterpret_cast<uint16_t*>(st + L.dOg), kLdV, a.dOg + ch * kC * D + y0, D, kC, true);
      load_tile<kC, 64, 128>(reinterpret_cast<uint16_t*>(st + L.dvl), kLdV, a.dvl + ch * kC * D + y0, D, kC, true);
      load_tile_f32<1, kC, 128>(reinterpret_cast<float*>(st + L.G), kC, a.G + ch * kC, kC);
    });
    return;
  }

  const int tid = threadIdx.x - 128, lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
  float dS[D / 2];  // dS'^T
  load_state_t<D>(dS, a.dS_out, bh, y0, warp, lane);
  for (int64_t j = 0; j < a.NC; ++j) {
    const int s = static_cast<int>(j % kStages);
    const unsigned char* st = sm + s * L.stage;
    const int64_t c = a.NC - 1 - j, ch = bh * a.NC + c;
    uint16_t* sSc = sSo + (j & 1) * D * kLdV;
    uint16_t* sVc = sVo + (j & 1) * kC * kLdV;
    // dS'^T in bf16 as A fragments, and transposed to sSc (dS' as saved)
    uint32_t ad[D / 16][4];
#pragma unroll
    for (int jj = 0; jj < D / 8; ++jj)
#pragma unroll
      for (int e = 0; e < 4; e += 2) ad[jj / 2][ra_reg(jj, e)] = bf16x2_bits(dS[4 * jj + e], dS[4 * jj + e + 1]);
#pragma unroll
    for (int k = 0; k < D / 16; ++k) stage_transposed(sSc, kLdV, k, ad[k], warp, lane);
    Ring::acquire(j);  // this chunk's tiles landed; every consumer thread has staged dS'
    // P = dS'^T K^T
    float P[32];
    const unsigned char* sK = st + L.K;
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < D / 16; ++k)
      wgmma_bf16_ra<64>(P, ad[k], wgmma_desc_k(sK + wgmma_kmajor_offset(0, 16 * k, 128, kG), 128, kG), k > 0);
    wgmma_commit();
    // meanwhile: dOg^T's A fragments, dS' of this chunk and dV' of the one before out
    const uint16_t* sdOg = reinterpret_cast<const uint16_t*>(st + L.dOg);
    const uint16_t* sdvl = reinterpret_cast<const uint16_t*>(st + L.dvl);
    const float* sG = reinterpret_cast<const float*>(st + L.G);
    uint32_t ao[4][4];
#pragma unroll
    for (int k = 0; k < 4; ++k) load_a<true>(ao[k], sdOg, kLdV, 16 * warp, 16 * k, lane);
    store_tile<D, 64>(a.dS + ch * D * D + y0, D, sSc, kLdV, tid, 128);
    if (j > 0) store_tile<kC, 64>(a.dVn + (ch + 1) * kC * D + y0, D, sVo + ((j - 1) & 1) * kC * kLdV, kLdV, tid, 128);
    wgmma_wait<0>();
    wgmma_fence_operand(P);
    // dV'^T = dvl^T + P o D (bf16: staged transposed, and the A fragments of - dV'^T W)
    const float gl = sG[kC - 1];
    uint32_t av[4][4];
#pragma unroll
    for (int jj = 0; jj < 8; ++jj) {
      const int i = 8 * jj + 2 * t;
      const float d0 = __expf(gl - sG[i]), d1 = __expf(gl - sG[i + 1]);
#pragma unroll
      for (int e = 0; e < 4; e += 2) {
        const int y = 16 * warp + g + 8 * (e / 2);
        const float v0 = bf16_val(sdvl[i * kLdV + y]) + d0 * P[4 * jj + e];
        const float v1 = bf16_val(sdvl[(i + 1) * kLdV + y]) + d1 * P[4 * jj + e + 1];
        av[jj / 2][ra_reg(jj, e)] = bf16x2_bits(v0, v1);
      }
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) stage_transposed(sVc, kLdV, k, av[k], warp, lane);
    // dS^T = e^{G_n} dS'^T + dOg^T Q - dV'^T W
    const float eg = __expf(gl);
#pragma unroll
    for (int i = 0; i < D / 2; ++i) dS[i] *= eg;
    const unsigned char *sQ = st + L.Q, *sW = st + L.W;
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < 4; ++k)
      wgmma_bf16_ra<D, 1>(dS, ao[k], wgmma_desc_mn(sQ + wgmma_mnmajor_offset(0, 16 * k, kG, 128), kG, 128), 1);
#pragma unroll
    for (int k = 0; k < 4; ++k)
      wgmma_bf16_ra<D, 1, true>(dS, av[k], wgmma_desc_mn(sW + wgmma_mnmajor_offset(0, 16 * k, kG, 128), kG, 128), 1);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operand(dS);
    Ring::release(j, a.NC);
  }
  named_barrier(Ring::kConsumers, 128);  // the first chunk's dV' staged
  store_tile<kC, 64>(a.dVn + bh * a.NC * kC * D + y0, D, sVo + ((a.NC - 1) & 1) * kC * kLdV, kLdV, tid, 128);
  store_state_t<D>(dS, a.dS0, bh, y0, warp, lane);
}

// One CTA (producer + consumer warpgroup) per (64 columns, value head, batch).
template <int D, class Kernel>
void launch_wg(Kernel kernel, size_t bytes, const TcArgs& a, cudaStream_t s, const char* op) {
  tc_set_smem(kernel, bytes, op);
  const dim3 grid(D / 64, static_cast<unsigned>(a.Hv), static_cast<unsigned>(a.B));
  kernel<<<grid, 256, bytes, s>>>(a);
  DT_GDN_CUDA_CHECK(cudaGetLastError(), op);
}

}  // namespace

namespace gdn_cuda {

// 3 stages at D = 128 (203 KB, one CTA per SM); 2 at D = 64 (103 KB, two per SM).
void tc_state_forward_wg(const TcArgs& a, int D, cudaStream_t s, const char* op) {
  if (D == 64) launch_wg<64>(gdn_tc_state_forward_wg_kernel<64, 2>, StateWgLayout<64, 2>{}.bytes, a, s, op);
  else launch_wg<128>(gdn_tc_state_forward_wg_kernel<128, 3>, StateWgLayout<128, 3>{}.bytes, a, s, op);
}

// 2 stages: 190 KB at D = 128, 122 KB at D = 64 (one CTA per SM).
void tc_state_backward_wg(const TcArgs& a, int D, cudaStream_t s, const char* op) {
  if (D == 64) launch_wg<64>(gdn_tc_state_backward_wg_kernel<64, 2>, StateBwdWgLayout<64, 2>{}.bytes, a, s, op);
  else launch_wg<128>(gdn_tc_state_backward_wg_kernel<128, 2>, StateBwdWgLayout<128, 2>{}.bytes, a, s, op);
}

}  // namespace gdn_cuda

}  // namespace dt
