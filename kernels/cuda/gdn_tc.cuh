// Shared pieces of the tensor-core GDN chunk kernels (kernels/cuda/gdn_tc_forward.cu,
// gdn_tc_backward.cu, gdn_tc_grad.cu, gdn_tc_state_cw.cu) beyond the tiles (gdn_tc_tile.cuh): the
// per-CTA timeline, the parameter struct with the workspace layout, the counts between kernels that
// run beside each other, the small per-chunk steps (cumsum, the unit-triangular inverse), and the
// launchers' declarations.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/gdn_tc_tile.cuh"

namespace dt::cuda {

// ---- the per-CTA timeline (a measuring tool: gdn_cuda_timeline, bench_gdn --timeline) ----

// Built with -DDELTATRON_GDN_TIMELINE=ON (DT_GDN_TIMELINE), thread 0 of each CTA of the tensor-core
// kernels writes, as it leaves, its kernel, its SM, its start and end times (the GPU's globaltimer, ns)
// and the SM's cycles between them, where TcTimeline::stamps is set; one atomic add a CTA picks the
// slot (the slots' order is the CTAs' order of leaving, not part of any result). Otherwise (the
// default, and the emulator) TcTimelineScope is empty and the kernels are as without it.
enum TcKernelId : uint32_t {
  kTlPrep, kTlPrepFed, kTlStateForward, kTlOutput, kTlDvLocal, kTlStateBackward, kTlGradQk, kTlGradWy,
  kTlStateForwardCw
};
struct TcTimeline {
  GdnCudaStamp* stamps = nullptr;  // device memory, cap slots
  unsigned* n = nullptr;      // device: slots taken (zeroed by the caller)
  unsigned cap = 0;
};
#ifdef DT_GDN_TIMELINE
__device__ __forceinline__ uint64_t tl_now() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ uint64_t tl_clock() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(t));
  return t;
}
__device__ __forceinline__ uint32_t tl_sm() {
  uint32_t s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}
// At the top of a kernel: TcTimelineScope tl_scope(a.tl, kTl...); it writes the stamp when thread 0
// leaves the kernel (any return).
struct TcTimelineScope {
  GdnCudaStamp* stamps;
  unsigned *n, cap;
  uint32_t kernel;
  uint64_t t0, c0;
  __device__ TcTimelineScope(const TcTimeline& tl, uint32_t k)
      : stamps(tl.stamps), n(tl.n), cap(tl.cap), kernel(k), t0(stamps ? tl_now() : 0),
        c0(stamps ? tl_clock() : 0) {}
  __device__ ~TcTimelineScope() {
    if (stamps && threadIdx.x == 0) {
      const unsigned i = atomicAdd(n, 1u);
      if (i < cap) {
        GdnCudaStamp st;
        st.kernel = kernel, st.sm = tl_sm(), st.t0 = t0, st.t1 = tl_now(), st.c0 = c0, st.c1 = tl_clock();
        stamps[i] = st;
      }
    }
  }
};
#else
struct TcTimelineScope {  // not built: nothing
  __host__ __device__ TcTimelineScope(const TcTimeline&, uint32_t) {}
};
#endif

// Warps per CTA of dv_local, grad_qk and grad_wy (gdn_tc_backward.cu, gdn_tc_grad.cu; see grad_qk).
template <int D>
inline constexpr int kGradWarps = D == 128 ? 8 : 4;

// ---- parameters and workspace ----

// Everything the tensor-core kernels read and write. The workspace is chunk-blocked: chunk index
// ch = (b * Hv + h) * NC + c, every per-chunk block sized for a full chunk (rows past the end of
// the sequence are zero, which the math tolerates: g = 0, beta = 0 and zero q, k, v rows leave
// every sum unchanged and make G[63] = G[n - 1]).
struct TcArgs {
  int64_t B = 0, T = 0, Hk = 0, Hv = 0, NC = 0;
  // the plan's choices (kernels/cuda/gdn_plan.h, GdnPlan: the fields of the same names)
  int state_cols = 0;    // columns of S per CTA of the mma.sync state passes
  int state_stages = 2;  // chunks' tiles in flight in the mma.sync state passes
  bool colwarp = false;  // the forward state pass is the column-warp one (64 columns a CTA)
  int sms = 132;         // the SM count the kernels assume
  // A kernel chasing the state pass before it (GdnPlan::chase_output, chase_grad_qk: the forward's output kernel,
  // the backward's grad_qk): ready[ch] counts the state pass's CTAs (ready_count per head) that have
  // written chunk ch's states (S and V'; dS' and dV'). null: no chase.
  int* ready = nullptr;
  int ready_count = 0;
  // The forward state pass fed by prep beside it (GdnPlan::prep_beside, gdn_tc_prep_fed_kernel):
  // fed[ch] becomes 1 once chunk ch's G, W, U (and k_hat) are written, and the state pass waits for
  // it. null: prep runs first.
  int* fed = nullptr;
  // grad_qk persistent (GdnPlan::qk_persist): its next chunk's ticket, zeroed before the
  // reverse state pass
  bool qk_persist = false;
  int* qk_ticket = nullptr;
  const uint16_t *q = nullptr, *k = nullptr, *v = nullptr, *d_o = nullptr;
  int64_t ld_q = 0, ld_k = 0, ld_v = 0, ld_do = 0;
  bool vec_in = false;   // q, k, v, d_o rows 16-byte aligned
  bool vec_out = false;  // o, dq, dk, dv rows 4-byte aligned
  // o, dq, dk, dv rows 16-byte aligned: the kernels stage them in shared memory and store whole rows
  bool vec16_o = false, vec16_dq = false, vec16_dk = false, vec16_dv = false;
  const float *g = nullptr, *beta = nullptr, *S0 = nullptr, *dS_out = nullptr;
  uint16_t* o = nullptr;
  int64_t ld_o = 0;
  float* S_out = nullptr;
  uint16_t *dq = nullptr, *dk = nullptr, *dv = nullptr;
  int64_t ld_dq = 0, ld_dk = 0, ld_dv = 0;
  float *dg = nullptr, *dbeta = nullptr, *dS0 = nullptr;
  const float *q_rnorm = nullptr, *k_rnorm = nullptr;  // l2norm's r: its backward taken as dq, dk are stored
  float q_scale = 1.f, k_scale = 1.f;
  // Forward with the l2norms taken on load (GdnCudaForwardParams::q_hat): prep normalises K and
  // writes k_hat, k_r; the output kernel normalises Q and writes q_hat, q_r.
  uint16_t *q_hat = nullptr, *k_hat = nullptr;
  int64_t ld_hat = 0;
  float *q_r = nullptr, *k_r = nullptr;
  bool vec_hat = false;  // q_hat, k_hat rows 16-byte aligned
  // workspace
  float* G = nullptr;            // [ch][64]       cumsum of g in the chunk
  uint16_t* W = nullptr;         // [ch][64][D]    T diag(beta) (K o e^G), bf16
  uint16_t* U = nullptr;         // [ch][64][D]    T diag(beta) V, bf16
  uint16_t* Tb = nullptr;        // [ch][64][64]   T = (I + A)^-1, bf16 (prep writes it, grad_wy reads it)
  uint16_t* S = nullptr;         // [ch][D][D]     state entering the chunk, bf16
  uint16_t* Vn = nullptr;        // [ch][64][D]    V' = U - W S, bf16
  uint16_t* dvl = nullptr;       // [ch][64][D]    M^T dO (bf16)
  uint16_t* dOg = nullptr;       // [ch][64][D]    dO o e^G (bf16; rows past T are zero)
  uint16_t* dS = nullptr;        // [ch][D][D]     gradient of the state leaving the chunk
  uint16_t* dVn = nullptr;       // [ch][64][D]    dV'
  uint16_t* dW = nullptr;        // [ch][64][D]    -dV' S^T
  uint16_t* dk_part = nullptr;   // [ch][64][D]    (V' dS^T) o D + (dM o Gam)^T Q (bf16)
  float* dG_part = nullptr;      // [ch][64]
  float *dq_vh = nullptr, *dk_vh = nullptr;  // [B*T][Hv][D] fp32, only when Hv > Hk
  // dv_local's work in the reverse state pass (GdnPlan::dvl_fused, as tc_inputs decided it): M =
  // lower(Q K^T o Gam) in bf16, [ch][64][64], written by the output kernel, read by that pass
  bool dvl_fused = false;
  uint16_t* Mb = nullptr;
  TcTimeline tl;  // the per-CTA timeline (stamps null: off; only in a DT_GDN_TIMELINE build)
};

// Which chunk a CTA of grid (NC, Hv, B) works on.
struct TcChunk {
  int64_t b, h, kh, c, ch, r0;
  int n;  // valid rows, 1..64
};
__device__ __forceinline__ TcChunk tc_chunk(const TcArgs& a, int64_t c, int64_t h, int64_t b) {
  TcChunk x;
  // 32-bit division (a 64-bit one is a long call on the GPU); heads and chunks fit in 31 bits
  x.b = b, x.h = h, x.c = c, x.kh = static_cast<int>(h) / (static_cast<int>(a.Hv) / static_cast<int>(a.Hk));
  x.ch = (b * a.Hv + h) * a.NC + c;
  x.r0 = b * a.T + c * kC;
  x.n = static_cast<int>(a.T - c * kC < kC ? a.T - c * kC : kC);
  return x;
}
// The W and K tiles that every state pass stages for chunk ch (its first row r0, n rows; key head
// kh), row stride ld, by kThreads threads.
template <int D, int kThreads>
__device__ __forceinline__ void load_w_k_tiles(unsigned char* w, unsigned char* k, int ld, const TcArgs& a, int64_t ch,
                                               int64_t r0, int64_t kh, int n) {
  load_tile<kC, D, kThreads>(reinterpret_cast<uint16_t*>(w), ld, a.W + ch * kC * D, D, kC, true);
  load_tile<kC, D, kThreads>(reinterpret_cast<uint16_t*>(k), ld, a.k + r0 * a.ld_k + kh * D, a.ld_k, n, a.vec_in);
}
// Chunk i of the chunk-major order in which the state passes finish them: chunk c of every sequence
// and head before any chunk c + 1 (kReverse: the last chunk first). The kernels that chase or feed
// a state pass take their chunks in it.
template <bool kReverse = false>
__device__ __forceinline__ TcChunk tc_chunk_major(const TcArgs& a, int64_t i) {
  const int64_t bhs = a.B * a.Hv, bh = i % bhs;
  return tc_chunk(a, kReverse ? a.NC - 1 - i / bhs : i / bhs, bh % a.Hv, bh / a.Hv);
}

// The rotation of a 4-warp CTA's row blocks (tc_row_block): CTAs are handed out in order of their linear
// index, about one an SM in turn, so CTAs i, i + sms, i + 2 sms, i + 3 sms tend to share an SM; they take
// rotations 0 to 3. (32-bit division: grids fit in 31 bits.)
__device__ __forceinline__ int tc_cta_rotation(const TcArgs& a) {
  const unsigned linear = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  return static_cast<int>((linear / static_cast<unsigned>(a.sms)) & 3u);
}

// ---- a kernel chasing a state pass (TcArgs::ready) ----
// The state pass's CTAs count chunk ch in ready[ch] once its columns are written (by its `leader`
// thread, after a barrier that every writing thread passed); the chasing kernel's CTA for chunk ch
// waits for all of them (ready_count) before it loads them.
// chunks_ready_signal counts chunks ch0 .. ch0 + n - 1 after one release fence. The mma.sync state
// passes count theirs kSignalEvery at a time (the column-warp one, one at a time): the
// fence holds the signalling warp for hundreds of cycles, and the chain's other warps wait for it at
// the next barrier (docs/gdn_kernels.md, "Running beside the chains"; 8 at a time gains nothing more).
inline constexpr int kSignalEvery = 4;
// counts_signal: the same on any per-chunk counts (TcArgs::ready, TcArgs::fed).
__device__ __forceinline__ void counts_signal(int* counts, int64_t ch0, int64_t n, bool leader) {
  if (!counts || !leader || n <= 0) return;
  flag_fence();
  for (int64_t i = 0; i < n; ++i) flag_add_fenced(counts + ch0 + i, 1);
}
__device__ __forceinline__ void chunks_ready_signal(const TcArgs& a, int64_t ch0, int64_t n, bool leader) {
  counts_signal(a.ready, ch0, n, leader);
}
__device__ __forceinline__ void chunk_ready_signal(const TcArgs& a, int64_t ch, bool leader) {
  chunks_ready_signal(a, ch, 1, leader);
}
__device__ __forceinline__ void chunk_ready_wait(const TcArgs& a, int64_t ch) {
  if (!a.ready) return;
  if (threadIdx.x == 0) flag_wait_at_least(a.ready + ch, a.ready_count);
  __syncthreads();
}

// ---- a state pass fed by the kernel beside it (TcArgs::fed) ----
// The feeding CTA for chunk ch counts it once every thread has written it; the state pass's thread 0
// waits for the chunks of its head (counts: the head's first chunk) before the barrier after which
// their tiles are copied. One round trip looks up to 8 chunks ahead with relaxed loads and one
// fence (flag_fence: acquire as well as release) covers the run of counted ones, so that when the
// feeding kernel is ahead the L2's latency is paid once per run; `until` keeps the first chunk not
// yet seen counted.
__device__ __forceinline__ void chunk_fed_signal(const TcArgs& a, int64_t ch) {
  __syncthreads();
  counts_signal(a.fed, ch, 1, threadIdx.x == 0);
}
__device__ __forceinline__ void chunk_fed_wait(const int* counts, int64_t c, int64_t nc, int64_t& until) {
  constexpr int kLook = 8;
  if (c < until) return;
  int v[kLook];
#pragma unroll
  for (int j = 0; j < kLook; ++j) v[j] = c + j < nc ? flag_peek(counts + c + j) : 0;
  if (v[0] < 1) flag_wait_at_least(counts + c, 1);
  int n = 1;
  bool run = true;
#pragma unroll
  for (int j = 1; j < kLook; ++j) run = run && v[j] >= 1, n += run;
  until = c + n;
  flag_fence();
}

// ---- per-chunk steps ----

// One warp: G = cumsum(g) over the chunk's 64 rows (rows >= n: g = 0, beta = 0) into sG, beta into
// sB; fixed order (pairs per lane, then a shuffle scan), so deterministic.
__device__ __forceinline__ void chunk_gates(const TcArgs& a, const TcChunk& ck, float* sG, float* sB, int lane) {
  const int i0 = 2 * lane, i1 = 2 * lane + 1;
  const float g0 = i0 < ck.n ? a.g[(ck.r0 + i0) * a.Hv + ck.h] : 0.f;
  const float g1 = i1 < ck.n ? a.g[(ck.r0 + i1) * a.Hv + ck.h] : 0.f;
  float x = g0 + g1;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const float t = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += t;
  }
  float excl = __shfl_up_sync(0xffffffffu, x, 1);
  if (lane == 0) excl = 0.f;
  sG[i0] = excl + g0;
  sG[i1] = (excl + g0) + g1;
  if (sB) {
    sB[i0] = i0 < ck.n ? a.beta[(ck.r0 + i0) * a.Hv + ck.h] : 0.f;
    sB[i1] = i1 < ck.n ? a.beta[(ck.r0 + i1) * a.Hv + ck.h] : 0.f;
  }
}

// mma operand fragments from fp32 matrices in shared memory, each value split into high and low
// bf16 parts (bf16x2_split): A (16 x 16 at rows r0, columns c0 of a row-major M), B (16 x 8 at rows
// k0, columns n0 of M stored [k][n]). Layouts of mma.m16n8k16: A register f holds row g (+8 when f
// is odd), columns 2t, 2t + 1 (+8 when f >= 2); B register f holds rows 2t, 2t + 1 (+8 when f = 1),
// column g; g = lane / 4, t = lane % 4, the lower column (row) in the low 16 bits.
__device__ __forceinline__ void frag_a_f32(uint32_t (&hi)[4], uint32_t (&lo)[4], const float* M, int ld, int r0, int c0,
                                           int lane) {
  const int g = lane >> 2, t2 = 2 * (lane & 3);
#pragma unroll
  for (int f = 0; f < 4; ++f) {
    const float2 p = *reinterpret_cast<const float2*>(M + (r0 + g + 8 * (f & 1)) * ld + c0 + t2 + 8 * (f >> 1));
    bf16x2_split(p.x, p.y, hi[f], lo[f]);
  }
}
__device__ __forceinline__ void frag_b_f32(uint32_t (&hi)[2], uint32_t (&lo)[2], const float* M, int ld, int k0, int n0,
                                           int lane) {
  const int g = lane >> 2, t2 = 2 * (lane & 3);
#pragma unroll
  for (int f = 0; f < 2; ++f) {
    const float* p = M + (k0 + t2 + 8 * f) * ld + n0 + g;
    bf16x2_split(p[0], p[ld], hi[f], lo[f]);
  }
}
// The A fragments of k-step s from a warp's 16 x 8n accumulators (tiles 2s and 2s + 1), split.
template <int NT>
__device__ __forceinline__ void frag_a_acc(uint32_t (&hi)[4], uint32_t (&lo)[4], const float (&acc)[NT][4], int s) {
#pragma unroll
  for (int f = 0; f < 4; ++f) {
    const float* x = acc[2 * s + (f >> 1)] + 2 * (f & 1);
    bf16x2_split(x[0], x[1], hi[f], lo[f]);
  }
}
// c += a b with both factors in high + low parts (the low x low term, ~2^-17 relative, dropped).
__device__ __forceinline__ void mma_split(float (&c)[4], const uint32_t (&ah)[4], const uint32_t (&al)[4],
                                          const uint32_t (&bh)[2], const uint32_t (&bl)[2]) {
  mma_bf16_16816(c, ah, bh);
  mma_bf16_16816(c, ah, bl);
  mma_bf16_16816(c, al, bh);
}

// T = (I + A)^-1 in place: AT holds A strictly lower 64 x 64 (fp32, row stride kLdF, zeros on
// and above the diagonal) and receives T; all threads of the CTA (4 warps). Blocks of 16:
//   1. the four diagonal blocks T_ii by forward substitution (one thread per column, the column in
//      registers until every thread has read its block);
//   2. T_10 = -T_11 A_10 T_00 and T_32 = -T_33 A_32 T_22 (two warps each, 8 columns per warp);
//   3. T_[23][01] = -T_[23][23] A_[23][01] T_[01][01] (a warp per row block and 16 columns).
// Steps 2 and 3 are mma with both factors split into high and low bf16 parts (about 16 bits, the
// precision at which W and U use T anyway); each warp first forms Q = T_rr A_r. in registers, then
// the product with T_cc, and writes over A once every warp has read it. T's blocks above the
// diagonal are A's zeros. (Steps 2-3 as fp32 multiply-adds, row block by row block, would be about
// half of prep's instructions.) Ends synchronised.
__device__ __forceinline__ void invert_unit_lower(float* AT) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t2 = 2 * (lane & 3);
  {
    const int o = 16 * (tid >> 4), c = tid & 15;
    float col[16];
    if (tid < 64) {
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        float v = i == c ? 1.f : 0.f;
        if (i > c) {
          float acc = 0.f;
#pragma unroll
          for (int j = 0; j < i; ++j)
            if (j >= c) acc += AT[(o + i) * kLdF + o + j] * col[j];
          v = -acc;
        }
        col[i] = v;
      }
    }
    __syncthreads();  // every diagonal block read before any is overwritten
    if (tid < 64) {
#pragma unroll
      for (int i = 0; i < 16; ++i) AT[(o + i) * kLdF + o + c] = col[i];
    }
    __syncthreads();
  }
  {  // step 2: block (rb, cb) = (1, 0) for warps 0-1, (3, 2) for warps 2-3; columns n0 of the block
    const int rb = 2 * (warp >> 1) + 1, cb = rb - 1, n0 = 8 * (warp & 1);
    float q[2][4] = {};
    uint32_t ah[4], al[4], bh[2], bl[2];
    frag_a_f32(ah, al, AT, kLdF, 16 * rb, 16 * rb, lane);  // T_rr
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      frag_b_f32(bh, bl, AT, kLdF, 16 * rb, 16 * cb + 8 * nt, lane);  // A_rc
      mma_split(q[nt], ah, al, bh, bl);
    }
    float r[4] = {};
    frag_a_acc<2>(ah, al, q, 0);
    frag_b_f32(bh, bl, AT, kLdF, 16 * cb, 16 * cb + n0, lane);  // T_cc, this warp's columns
    mma_split(r, ah, al, bh, bl);
    __syncthreads();  // both warps of the block have read A_rc
#pragma unroll
    for (int e = 0; e < 4; e += 2)
      *reinterpret_cast<float2*>(AT + (16 * rb + g + 8 * (e >> 1)) * kLdF + 16 * cb + n0 + t2) =
          make_float2(-r[e], -r[e + 1]);
    __syncthreads();
  }
  {  // step 3: row block rb = 2 (warps 0-1) or 3 (warps 2-3), columns n0 .. n0 + 15 of 0..31
    const int rb = 2 + (warp >> 1), n0 = 16 * (warp & 1);
    float q[4][4] = {};
    uint32_t ah[4], al[4], bh[2], bl[2];
    for (int kb = 2; kb <= rb; ++kb) {  // Q = sum over kb of T_{rb,kb} A_{kb,[01]}
      frag_a_f32(ah, al, AT, kLdF, 16 * rb, 16 * kb, lane);
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        frag_b_f32(bh, bl, AT, kLdF, 16 * kb, 8 * nt, lane);
        mma_split(q[nt], ah, al, bh, bl);
      }
    }
    float r[2][4] = {};
#pragma unroll
    for (int s = 0; s < 2; ++s) {  // R = Q T_[01][01][:, n0..]
      frag_a_acc<4>(ah, al, q, s);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        frag_b_f32(bh, bl, AT, kLdF, 16 * s, n0 + 8 * nt, lane);
        mma_split(r[nt], ah, al, bh, bl);
      }
    }
    __syncthreads();  // every warp of the row block has read A_{rb,[01]}
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; e += 2)
        *reinterpret_cast<float2*>(AT + (16 * rb + g + 8 * (e >> 1)) * kLdF + n0 + 8 * nt + t2) =
            make_float2(-r[nt][e], -r[nt][e + 1]);
    __syncthreads();
  }
}

// Bump allocator over the dynamic shared memory; the host computes the same total with
// SmemPlan (no pointers), so the two cannot disagree.
struct SmemPlan {
  size_t bytes = 0;
  __host__ __device__ constexpr size_t take(size_t n) {
    const size_t off = bytes;
    bytes += (n + 15) / 16 * 16;
    return off;
  }
};

// ---- host side: the kernels' launchers (gdn_tc_forward.cu, gdn_tc_backward.cu), called in this
// order by gdn_chunk_forward_cuda / gdn_chunk_backward_cuda (gdn_tc_launch.cu). D is 64 or 128.
inline dim3 tc_chunk_grid(const TcArgs& a) {
  return dim3(static_cast<unsigned>(a.NC), static_cast<unsigned>(a.Hv), static_cast<unsigned>(a.B));
}
// A kernel with a 1-D grid over the chunks (the output kernel, grad_qk); when it chases the state
// pass before it (a.ready), by programmatic dependent launch: it may start as soon as every CTA of
// the state pass runs.
template <class Kernel>
void tc_launch_chunks(Kernel kernel, const TcArgs& a, int threads, size_t smem, cudaStream_t s, const char* op,
                      int64_t max_ctas = 0) {
  int64_t n_chunks = a.NC * a.Hv * a.B;
  DT_CHECK(n_chunks < (int64_t{1} << 31), "{}: {} chunks are more than one grid takes", op, n_chunks);
  if (max_ctas > 0 && n_chunks > max_ctas) n_chunks = max_ctas;  // a persistent kernel's CTAs
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  // {gridDim, blockDim, dynamicSmemBytes, stream, attrs, numAttrs}: the attribute only when chasing
  const cudaLaunchConfig_t cfg = {dim3(static_cast<unsigned>(n_chunks)), dim3(threads), smem, s, attr,
                                  a.ready ? 1u : 0u};
  DT_CUDA_OK(cudaLaunchKernelEx(&cfg, kernel, a), op);
  DT_CUDA_OK(cudaGetLastError(), op);
}

// Raises a kernel's dynamic shared-memory limit (needed above 48 KB) before its launch.
template <class Kernel>
void tc_set_smem(Kernel kernel, size_t bytes, const char* op) {
  DT_CUDA_OK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
                    op);
}

// prep: G, W, U. state_forward: the entering states S and V' per chunk (bf16), and S_out. output: o from Q, K, G, S and V' (chunks in parallel).
void tc_prep(const TcArgs& a, int D, cudaStream_t s, const char* op);
void tc_state_forward(const TcArgs& a, int D, cudaStream_t s, const char* op);
void tc_state_forward_cw(const TcArgs& a, int D, cudaStream_t s, const char* op);   // gdn_tc_state_cw.cu
void tc_output(const TcArgs& a, int D, cudaStream_t s, const char* op);
// prep feeding the mma.sync forward state pass launched before it (TcArgs::fed; GdnPlan::prep_beside):
// a 1-D grid, chunk-major, by programmatic dependent launch; the output kernel after it. Their code
// is loaded by tc_prep_fed_load before the state pass is launched (a kernel loaded on its first
// launch waits for the kernels running: the state pass, waiting for it).
void tc_prep_fed(const TcArgs& a, int D, cudaStream_t s, const char* op);
void tc_prep_fed_load(const TcArgs& a, int D, const char* op);
void tc_dv_local(const TcArgs& a, int D, cudaStream_t s, const char* op);       // dvl = M^T dO
void tc_state_backward(const TcArgs& a, int D, cudaStream_t s, const char* op); // dS per chunk, dV', dS0
void tc_grad_qk(const TcArgs& a, int D, cudaStream_t s, const char* op);        // dq, dk_part, dW, dG_part
void tc_grad_wy(const TcArgs& a, int D, cudaStream_t s, const char* op);        // dk, dv, dbeta, dg

}  // namespace dt::cuda
