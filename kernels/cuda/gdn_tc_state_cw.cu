// The forward state pass with one warp per 16 columns of the state (GdnPlan::colwarp). Same
// results as the mma.sync tile pass (gdn_tc_forward.cu), other summation order. Each consumer warp
// keeps its columns of the state transposed, S^T (16 x D, fp32), as mma.sync accumulators, so that
// both products of a chunk take their A operand straight from registers (the accumulator pairs are
// the A fragments) and the chain passes nothing through shared memory and meets no barrier but the
// ring's:
//   V'^T = U^T - S^T W^T               A = S^T (negated)     B = W  ([i][d]: ldmatrix)
//   S^T <- e^{G_n} S^T + Vd^T K        A = Vd^T              B = K  ([i][d]: ldmatrix.trans)
// with Vd = D o V', D_i = exp(G_n - G_i). A CTA has NW consumer warps (16 NW columns) and one
// producer warp that copies the chunks' tiles into a ring (TileRing, cp.async). Each warp stages
// its saved outputs (S entering the chunk and V') transposed by stmatrix in its own columns of a
// shared tile and stores them in 16-byte pieces.
// Grid (D / (16 NW), Hv, B); 32 (NW + 1) threads: warp 0 produces, warps 1..NW consume.
// A chunk takes longer than in the mma.sync pass, as one warp per scheduler issues its ~600
// instructions; at 64 columns a CTA (head dim 128, many heads) it is the faster one, and the plan
// takes it there only (docs/gdn_kernels.md, "The plan").
#include "kernels/cuda/gdn_tc_state.cuh"

namespace dt::cuda {

namespace {

// This warp's A fragments (bf16) of its 16 x D accumulators X^T, k-steps of 16 along D.
template <int D>
__device__ __forceinline__ void acc_as_a(uint32_t (&a)[D / 16][4], const float (&x)[D / 8][4]) {
#pragma unroll
  for (int j = 0; j < D / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; e += 2) a[j / 2][ra_reg(j, e)] = pack_bf16x2(x[j][e], x[j][e + 1]);
}

// The A fragments negated (bf16 sign bits: exact), for a product that is subtracted.
template <int K>
__device__ __forceinline__ void negate_a(uint32_t (&a)[K][4]) {
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int r = 0; r < 4; ++r) a[k][r] ^= 0x80008000u;
}

// X^T (16 x 64: this warp's columns y0w + (0..15) of a chunk tile X [i][y] in shared memory) into
// fp32 accumulators: x[j][e] = X[8 j + 2 t + e % 2][y0w + g + 8 (e / 2)] (ldmatrix.trans: the
// transposed 8 x 8 blocks come in the accumulators' layout).
__device__ __forceinline__ void tile_t_as_acc(float (&x)[8][4], const uint16_t* s, int ld, int y0w, int lane) {
  const int m = lane / 8;
#pragma unroll
  for (int j = 0; j < 8; j += 2) {
    uint32_t r[4];
    ldsm_x4_trans(r, s + (8 * (j + m / 2) + lane % 8) * ld + y0w + 8 * (m % 2));
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      x[j + u][0] = __uint_as_float(r[2 * u] << 16), x[j + u][1] = __uint_as_float(r[2 * u] & 0xffff0000u);
      x[j + u][2] = __uint_as_float(r[2 * u + 1] << 16), x[j + u][3] = __uint_as_float(r[2 * u + 1] & 0xffff0000u);
    }
  }
}

// acc (16 x 8 NT) += A (16 x K, fragments a) B, B from shared memory: kKN B stored [k][n]
// (ldmatrix.trans), else [n][k].
template <int NT, int K, bool kKN>
__device__ __forceinline__ void warp_mma_ra(float (&acc)[NT][4], const uint32_t (&a)[K / 16][4], const uint16_t* B,
                                            int ldb, int lane) {
#pragma unroll
  for (int k = 0; k < K / 16; ++k) {
    uint32_t b[NT / 2][2][2];
#pragma unroll
    for (int n = 0; n < NT; n += 2) load_b2<kKN>(b[n / 2], B, ldb, 16 * k, 8 * n, lane);
#pragma unroll
    for (int n = 0; n < NT; n += 2) {
      mma_bf16_16816(acc[n], a[k], b[n / 2][0]);
      mma_bf16_16816(acc[n + 1], a[k], b[n / 2][1]);
    }
  }
}

template <int D>
__device__ __forceinline__ void load_state_cw(float (&x)[D / 8][4], const float* X, int64_t bh, int y0, int w, int lane) {
#pragma unroll
  for (int j = 0; j < D / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) x[j][e] = X ? X[state_t_at<D>(bh, j, e, y0, w, lane)] : 0.f;
}
template <int D>
__device__ __forceinline__ void store_state_cw(const float (&x)[D / 8][4], float* X, int64_t bh, int y0, int w, int lane) {
  if (X)
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) X[state_t_at<D>(bh, j, e, y0, w, lane)] = x[j][e];
}

// ---------------------------------------------------------------------------------------------
// Forward: per stage W, K (64 x D, rows D + 8 apart), U (64 x 16 NW), G; then the staging tiles of
// S (D x 16 NW) and V' (64 x 16 NW), one region of columns per warp.
template <int D, int NW, int kStages>
struct StateCwLayout {
  static constexpr int kLd = D + 8, kLdY = 16 * NW + 8;
  size_t W = 0, K = 0, U = 0, G = 0, stage = 0, S = 0, V = 0, bytes = 0;
  __host__ __device__ constexpr StateCwLayout() {
    SmemPlan p;
    W = p.take(kC * kLd * 2), K = p.take(kC * kLd * 2), U = p.take(kC * kLdY * 2), G = p.take(kC * 4);
    stage = p.bytes;
    p.take(stage * (kStages - 1));
    S = p.take(D * kLdY * 2), V = p.take(kC * kLdY * 2);
    bytes = p.bytes;
  }
};

template <int D, int NW, int kStages>
__global__ void __launch_bounds__(32 * (NW + 1)) gdn_tc_state_forward_cw_kernel(TcArgs a) {
  TcTimelineScope tl_scope(a.tl, kTlStateForwardCw);
  constexpr StateCwLayout<D, NW, kStages> L{};
  constexpr int kLd = L.kLd, kLdY = L.kLdY, kCols = 16 * NW;
  using Ring = TileRing<kStages, 32 * (NW + 1)>;
  unsigned char* sm = dynamic_smem();
  const int y0 = blockIdx.x * kCols;
  const int64_t h = blockIdx.y, b = blockIdx.z, bh = b * a.Hv + h;
  grid_launch_dependents();  // the chasing output kernel may start once every CTA here runs

  if (threadIdx.x < 32) {  // producer: chunk c's tiles into stage c % kStages
    Ring::produce(a.NC, [&](int64_t c, int s) {
      unsigned char* st = sm + s * L.stage;
      const TcChunk ck = tc_chunk(a, c, h, b);
      load_w_k_tiles<D, 32>(st + L.W, st + L.K, kLd, a, ck.ch, ck.r0, ck.kh, ck.n);
      load_tile<kC, kCols, 32>(reinterpret_cast<uint16_t*>(st + L.U), kLdY, a.U + ck.ch * kC * D + y0, D, kC, true);
      load_tile_f32<1, kC, 32>(reinterpret_cast<float*>(st + L.G), kC, a.G + ck.ch * kC, kC);
    });
    return;
  }

  const int w = threadIdx.x / 32 - 1, lane = threadIdx.x % 32, t = lane % 4, yw = 16 * w;
  const bool leader = threadIdx.x == 32;  // the chase counts: after barriers of all consumers
  uint16_t* sSo = reinterpret_cast<uint16_t*>(sm + L.S);
  uint16_t* sVo = reinterpret_cast<uint16_t*>(sm + L.V);
  float S[D / 8][4];  // S^T, this warp's 16 columns
  load_state_cw<D>(S, a.S0, bh, y0, w, lane);
  for (int64_t c = 0; c < a.NC; ++c) {
    const unsigned char* st = sm + (c % kStages) * L.stage;
    const uint16_t* sW = reinterpret_cast<const uint16_t*>(st + L.W);
    const uint16_t* sK = reinterpret_cast<const uint16_t*>(st + L.K);
    const uint16_t* sU = reinterpret_cast<const uint16_t*>(st + L.U);
    const float* sG = reinterpret_cast<const float*>(st + L.G);
    const int64_t ch = bh * a.NC + c;
    // S (entering chunk c, as saved) staged in this warp's columns; -S^T as A fragments
    uint32_t as[D / 16][4];
    acc_as_a<D>(as, S);
    __syncwarp();  // this warp's stores of chunk c - 1 have read the staging tiles
#pragma unroll
    for (int k = 0; k < D / 16; ++k) stage_transposed(sSo, kLdY, k, as[k], w, lane);
    negate_a(as);
    Ring::acquire(c);  // chunk c's tiles landed
    // chunk c - 2's S and V' were stored before every consumer passed the barrier of chunk c - 1
    if (c >= 2) chunk_ready_signal(a, ch - 2, leader);
    // V'^T = U^T - S^T W^T
    float V[8][4];
    tile_t_as_acc(V, sU, kLdY, yw, lane);
    const float gl = sG[kC - 1];
    float dec[8][2];  // D_i for this thread's columns i = 8 j + 2 t + (0, 1)
#pragma unroll
    for (int j = 0; j < 8; ++j) dec[j][0] = __expf(gl - sG[8 * j + 2 * t]), dec[j][1] = __expf(gl - sG[8 * j + 2 * t + 1]);
    warp_mma_ra<8, D, false>(V, as, sW, kLd, lane);
    __syncwarp();  // the staged S is complete
    store_tile<D, 16>(a.S + ch * D * D + y0 + yw, D, sSo + yw, kLdY, lane, 32);
    // V' (bf16, staged) and Vd = D o V' as A fragments
    uint32_t vs[4][4], vd[4][4];
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; e += 2) {
        vs[j / 2][ra_reg(j, e)] = pack_bf16x2(V[j][e], V[j][e + 1]);
        vd[j / 2][ra_reg(j, e)] = pack_bf16x2(V[j][e] * dec[j][0], V[j][e + 1] * dec[j][1]);
      }
    // S^T = e^{G_n} S^T + Vd^T K
    const float eg = __expf(gl);
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) S[j][e] *= eg;
    warp_mma_ra<D / 8, kC, true>(S, vd, sK, kLd, lane);
#pragma unroll
    for (int k = 0; k < 4; ++k) stage_transposed(sVo, kLdY, k, vs[k], w, lane);
    __syncwarp();
    store_tile<kC, 16>(a.Vn + ch * kC * D + y0 + yw, D, sVo + yw, kLdY, lane, 32);
    Ring::release(c, a.NC);
  }
  if (a.ready) {
    named_barrier(Ring::kConsumers, 32 * NW);  // every consumer's stores issued
    for (int64_t c = a.NC >= 2 ? a.NC - 2 : 0; c < a.NC; ++c) chunk_ready_signal(a, bh * a.NC + c, leader);
  }
  store_state_cw<D>(S, a.S_out, bh, y0, w, lane);
}

template <int D, int NW, class Kernel>
void launch_cw(Kernel kernel, size_t bytes, const TcArgs& a, cudaStream_t s, const char* op) {
  tc_set_smem(kernel, bytes, op);
  const dim3 grid(D / (16 * NW), static_cast<unsigned>(a.Hv), static_cast<unsigned>(a.B));
  kernel<<<grid, 32 * (NW + 1), bytes, s>>>(a);
  DT_CUDA_OK(cudaGetLastError(), op);
}

template <int D, int NW>
void forward_cw(const TcArgs& a, cudaStream_t s, const char* op) {
  launch_cw<D, NW>(gdn_tc_state_forward_cw_kernel<D, NW, 3>, StateCwLayout<D, NW, 3>{}.bytes, a, s, op);
}

}  // namespace

// The plan takes it at head dim 128 with 64 columns a CTA (4 consumer warps), 3 stages.
void tc_state_forward_cw(const TcArgs& a, int D, cudaStream_t s, const char* op) {
  DT_CHECK(D == 128, "{}: the column-warp state pass is built for head dim 128, got {}", op, D);
  forward_cw<128, 4>(a, s, op);
}

}  // namespace dt::cuda
