// Shared pieces of the tensor-core GDN chunk kernels (kernels/cuda/gdn_tc_forward.cu,
// gdn_tc_backward.cu): warp-level bf16 matmuls on shared-memory tiles, tile copies, the parameter
// struct with the workspace layout, and the small per-chunk steps (cumsum, the unit-triangular
// inverse).
//
// Conventions. A chunk is C = 64 rows; a CTA is 4 warps; warp w owns rows [16w, 16w + 16) of every
// 64-row product. Shared-memory bf16 matrices are row-major with a row stride of cols + 8 elements
// (16 bytes of padding: the 8 row addresses of an ldmatrix then fall in 8 different bank groups).
// fp32 matrices of 64 x 64 use a row stride of 65. An operand "A (M x K)" is stored either
// row-major, element (m, k) at p[m * ld + k], or transposed, at p[k * ld + m]; an operand "B (K x N)"
// either as [n][k] (p[n * ld + k], e.g. K in Q K^T) or as [k][n] (p[k * ld + n], e.g. S in W S).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/gdn_chunk.cuh"
#include "kernels/cuda/gdn_mma.cuh"

namespace dt {
namespace gdn_cuda {

inline constexpr int kC = 64;          // chunk rows
inline constexpr int kTcWarps = 4;
inline constexpr int kTcThreads = 32 * kTcWarps;
// fp32 64 x 64 matrices (prep's A and T): 72 = 8 mod 32 banks, so that a warp's 8-byte accesses to
// the mma fragment layout (rows g, columns 2t, 2t + 1) are free of bank conflicts (65 gives 2-3-way)
inline constexpr int kLdF = kC + 8;
inline constexpr int kLdC = kC + 8;    // bf16 64 x 64 matrices

// ---- bf16 helpers (raw uint16_t bits) ----
__device__ __forceinline__ uint16_t bf16_bits(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
__device__ __forceinline__ float bf16_val(uint16_t b) { return __bfloat162float(__ushort_as_bfloat16(b)); }
// Two adjacent bf16 values (element 2u and 2u + 1 of a row) as one 32-bit word: loads and stores
// (st_bf16x2 with vec) of accumulator pairs (columns 2t, 2t + 1), p 4-byte aligned.
__device__ __forceinline__ uint32_t bf16x2_bits(float a, float b) {
#ifdef __CUDA_ARCH__
  uint32_t r;  // one instruction, same rounding (to nearest even) as bf16_bits
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(b), "f"(a));
  return r;
#else
  return static_cast<uint32_t>(bf16_bits(a)) | (static_cast<uint32_t>(bf16_bits(b)) << 16);
#endif
}
// x = hi + lo to about 16 significant bits: hi = bf16(x), lo = bf16(x - hi). A product with an
// exact bf16 operand (q, k, v) then costs two mma instead of one and loses nothing to rounding.
// Split a pair at a time, packed as one mma operand word each: hi = (bf16 a, bf16 b), lo =
// (bf16(a - hi_a), bf16(b - hi_b)), in two conversions.
__device__ __forceinline__ void bf16x2_split(float a, float b, uint32_t& hi, uint32_t& lo) {
  hi = bf16x2_bits(a, b);
  lo = bf16x2_bits(a - __uint_as_float(hi << 16), b - __uint_as_float(hi & 0xffff0000u));
}
__device__ __forceinline__ float2 lds_bf16x2(const uint16_t* p) {
  const uint32_t w = *reinterpret_cast<const uint32_t*>(p);
  return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
}

// ---- warp-level matmul on shared-memory tiles ----

template <bool kTransA>
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const uint16_t* p, int ld, int m0, int k0, int lane) {
  const int j = lane >> 3, r = lane & 7;
  if (!kTransA) ldsm_x4(a, p + (m0 + r + 8 * (j & 1)) * ld + k0 + 8 * (j >> 1));
  else ldsm_x4_trans(a, p + (k0 + r + 8 * (j >> 1)) * ld + m0 + 8 * (j & 1));
}

// The B fragments of two adjacent n-tiles, [n0, n0 + 8) -> b[0] and [n0 + 8, n0 + 16) -> b[1].
template <bool kKN>
__device__ __forceinline__ void load_b2(uint32_t (&b)[2][2], const uint16_t* p, int ld, int k0, int n0, int lane) {
  const int j = lane >> 3, r = lane & 7;
  uint32_t t[4];
  if (!kKN) ldsm_x4(t, p + (n0 + r + 8 * (j >> 1)) * ld + k0 + 8 * (j & 1));
  else ldsm_x4_trans(t, p + (k0 + r + 8 * (j & 1)) * ld + n0 + 8 * (j >> 1));
  b[0][0] = t[0], b[0][1] = t[1], b[1][0] = t[2], b[1][1] = t[3];
}

// Triangular products (docs/gdn_kernels.md, "Determinism and tests"): the parts of a product that a
// causal mask zeroes, or whose operand is zero there, need not be formed. Whole 16-column n-tile pairs or 16-deep k-steps
// are skipped where every one of the warp's rows lies on the zero side (warp-uniform branches): the
// accumulators keep the bits they had, as a product with a zero operand would leave them.
//   kNone    the whole product
//   kLowerN  the result is lower-triangular (column > row masked after): n-tile pairs with every
//            column above every row skipped (their accumulators stay as they were, zero)
//   kUpperN  the result is upper-triangular (column < row masked after)
//   kLowerK  A is lower-triangular (A[m][k] = 0 for k > m): k-steps past the last row skipped
//   kUpperK  A is upper-triangular (A[m][k] = 0 for k < m): k-steps before the first row skipped
enum class Tri { kNone, kLowerN, kUpperN, kLowerK, kUpperK };

// Whether k-step [k0, k0 + 16) is all zero in A's rows [m0, m0 + rows) (kLowerK, kUpperK)
template <Tri kTri>
__device__ __forceinline__ bool tri_skip_k(int k0, int m0, int rows) {
  if constexpr (kTri == Tri::kLowerK) return k0 > m0 + rows - 1;
  else if constexpr (kTri == Tri::kUpperK) return k0 + 15 < m0;
  else return false;
}
// Whether columns [n0, n0 + 16) of rows [m0, m0 + rows) are all masked (kLowerN, kUpperN)
template <Tri kTri>
__device__ __forceinline__ bool tri_skip_n(int n0, int m0, int rows) {
  if constexpr (kTri == Tri::kLowerN) return n0 > m0 + rows - 1;
  else if constexpr (kTri == Tri::kUpperN) return n0 + 15 < m0;
  else return false;
}

// The row block (of 4, 16 rows each) of warp w in a CTA of kWarps warps laid out as 4 row blocks x
// kWarps / 4 column parts, part w / 4. Row block r has r + 1 sixteen-column blocks on or below the
// diagonal (Tri), so the warps of each SM sub-partition (w % 4) should mix heavy and light ones: with
// more than one part, odd parts take the row blocks in reverse (w and 3 - w); with 4 warps the CTA's
// rotation rot (tc_cta_rotation) turns them, so that CTAs sharing an SM differ. Which warp forms which
// rows changes no bits.
template <int kWarps>
__device__ __forceinline__ int tc_row_block(int w, int rot = 0) {
  if constexpr (kWarps == 4) return (w + rot) & 3;
  else return (w / 4) % 2 == 0 ? w % 4 : 3 - w % 4;
}

// acc[mi][ni] += A[m0 + 16 mi + (0..15), 0..K) B[0..K), n0 + 8 ni + (0..7)]   (K a multiple of 16)
// kTransA: A stored transposed; kKN: B stored [k][n]. K is a compile-time constant so that the
// k-loop unrolls and the fragment loads of step k + 16 can be issued before the mma of step k.
// kTri: the parts of a triangular product left out (above).
template <int MT, int NT, int K, bool kTransA, bool kKN, Tri kTri = Tri::kNone>
__device__ __forceinline__ void warp_mma(float (&acc)[MT][NT][4], const uint16_t* A, int lda, int m0,
                                         const uint16_t* B, int ldb, int n0, int lane) {
  static_assert(NT % 2 == 0 && K % 16 == 0, "n-tiles come in pairs, K in steps of 16");
#pragma unroll
  for (int k0 = 0; k0 < K; k0 += 16) {
    if (tri_skip_k<kTri>(k0, m0, 16 * MT)) continue;
    // All of this step's fragments first (the loads are issued back to back and their latencies
    // overlap), then the products.
    uint32_t a[MT][4], b[NT / 2][2][2];
#pragma unroll
    for (int mi = 0; mi < MT; ++mi) load_a<kTransA>(a[mi], A, lda, m0 + 16 * mi, k0, lane);
#pragma unroll
    for (int nj = 0; nj < NT; nj += 2)
      if (!tri_skip_n<kTri>(n0 + 8 * nj, m0, 16 * MT)) load_b2<kKN>(b[nj / 2], B, ldb, k0, n0 + 8 * nj, lane);
#pragma unroll
    for (int nj = 0; nj < NT; nj += 2) {
      if (tri_skip_n<kTri>(n0 + 8 * nj, m0, 16 * MT)) continue;
#pragma unroll
      for (int mi = 0; mi < MT; ++mi) {
        mma_bf16_16816(acc[mi][nj], a[mi], b[nj / 2][0]);
        mma_bf16_16816(acc[mi][nj + 1], a[mi], b[nj / 2][1]);
      }
    }
  }
}

// As warp_mma<1, NT, K, false, false, kTri>, for the n-tile pairs p (16 columns, [n0 + 16 p, + 16)) with
// p % 2 == parity only (the others' accumulators are left as they are).
template <int NT, int K, Tri kTri>
__device__ __forceinline__ void warp_mma_pairs(float (&acc)[1][NT][4], const uint16_t* A, int lda, int m0,
                                               const uint16_t* B, int ldb, int n0, int parity, int lane) {
  static_assert(NT % 4 == 0 && K % 16 == 0, "n-tile pairs in twos, K in steps of 16");
#pragma unroll
  for (int k0 = 0; k0 < K; k0 += 16) {
    uint32_t a[4], b[NT / 4][2][2];
    load_a<false>(a, A, lda, m0, k0, lane);
#pragma unroll
    for (int q = 0; q < NT / 4; ++q) {
      const int nj = 4 * q + 2 * parity;
      if (!tri_skip_n<kTri>(n0 + 8 * nj, m0, 16)) load_b2<false>(b[q], B, ldb, k0, n0 + 8 * nj, lane);
    }
#pragma unroll
    for (int q = 0; q < NT / 4; ++q) {
      const int nj = 4 * q + 2 * parity;
      if (tri_skip_n<kTri>(n0 + 8 * nj, m0, 16)) continue;
      // (parity is warp-uniform; the accumulators are picked by it, both pairs' code present)
      if (parity == 0) {
        mma_bf16_16816(acc[0][4 * q], a, b[q][0]);
        mma_bf16_16816(acc[0][4 * q + 1], a, b[q][1]);
      } else {
        mma_bf16_16816(acc[0][4 * q + 2], a, b[q][0]);
        mma_bf16_16816(acc[0][4 * q + 3], a, b[q][1]);
      }
    }
  }
}

// acc1 += A1 B1 and acc2 += A2 B2 (one 16-row block each, A row-major, B stored [n][k], B1 and B2
// with the same ld) in one k-loop; also dot += <B1, B2> over the positions whose fragments this warp
// loads in the k-steps with (k0 / 16) % kDotWarps == dot_phase: kDotWarps warps that load the same B
// fragments (other row blocks) split the dot between them, each position counted once.
template <int NT, int K, int kDotWarps>
__device__ __forceinline__ void warp_mma2_dot(float (&acc1)[1][NT][4], const uint16_t* A1, float (&acc2)[1][NT][4],
                                              const uint16_t* A2, int lda, int m0, const uint16_t* B1,
                                              const uint16_t* B2, int ldb, int n0, int dot_phase, float& dot,
                                              int lane) {
  static_assert(NT % 2 == 0 && K % 16 == 0, "n-tiles come in pairs, K in steps of 16");
#pragma unroll
  for (int k0 = 0; k0 < K; k0 += 16) {
    uint32_t a1[4], a2[4], b1[NT / 2][2][2], b2[NT / 2][2][2];
    load_a<false>(a1, A1, lda, m0, k0, lane);
    load_a<false>(a2, A2, lda, m0, k0, lane);
#pragma unroll
    for (int nj = 0; nj < NT; nj += 2) {
      load_b2<false>(b1[nj / 2], B1, ldb, k0, n0 + 8 * nj, lane);
      load_b2<false>(b2[nj / 2], B2, ldb, k0, n0 + 8 * nj, lane);
    }
#pragma unroll
    for (int nj = 0; nj < NT; nj += 2) {
      mma_bf16_16816(acc1[0][nj], a1, b1[nj / 2][0]);
      mma_bf16_16816(acc1[0][nj + 1], a1, b1[nj / 2][1]);
      mma_bf16_16816(acc2[0][nj], a2, b2[nj / 2][0]);
      mma_bf16_16816(acc2[0][nj + 1], a2, b2[nj / 2][1]);
    }
    if ((k0 / 16) % kDotWarps == dot_phase) {
#pragma unroll
      for (int nj = 0; nj < NT / 2; ++nj)
#pragma unroll
        for (int f = 0; f < 4; ++f) {  // a bf16 pair: the low half is one element, the high one the next
          const uint32_t x = b1[nj][f >> 1][f & 1], y = b2[nj][f >> 1][f & 1];
          dot = fmaf(__uint_as_float(x << 16), __uint_as_float(y << 16), dot);
          dot = fmaf(__uint_as_float(x & 0xffff0000u), __uint_as_float(y & 0xffff0000u), dot);
        }
    }
  }
}

template <int MT, int NT>
__device__ __forceinline__ void zero_acc(float (&acc)[MT][NT][4]) {
#pragma unroll
  for (int mi = 0; mi < MT; ++mi)
#pragma unroll
    for (int ni = 0; ni < NT; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.f;
}

template <int MT, int NT>
__device__ __forceinline__ void scale_acc(float (&acc)[MT][NT][4], float s) {
#pragma unroll
  for (int mi = 0; mi < MT; ++mi)
#pragma unroll
    for (int ni = 0; ni < NT; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi][ni][e] *= s;
}

// Row and column of accumulator element e of tile (mi, ni), relative to the warp tile's origin.
__device__ __forceinline__ int acc_row(int mi, int e, int lane) { return 16 * mi + (lane >> 2) + 8 * (e >> 1); }
__device__ __forceinline__ int acc_col(int ni, int e, int lane) { return 8 * ni + 2 * (lane & 3) + (e & 1); }

// Sum over the 4 lanes of a quad (the lanes holding one accumulator row), fixed butterfly order.
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  v += __shfl_xor_sync(0xffffffffu, v, 2);
  return v;
}

// Sum over the warp, fixed butterfly order (every lane gets the sum).
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// For a warp's 16 x 8NT accumulator tile X (rows m0..m0+15): its row sums into rows[m0 + r] and
// its column sums over these 16 rows into cols(j) (a float&), j relative to the tile (the caller
// maps it into a [4 row blocks][64] partial array and adds the four in order). Fixed shuffle orders:
// deterministic. Replaces a 16 KB fp32 copy of X when only sum_j X_ij - X_ji is wanted.
template <int NT, class Cols>
__device__ __forceinline__ void row_col_sums(const float (&x)[1][NT][4], int m0, float* rows, Cols cols, int lane) {
  float r[2] = {0.f, 0.f};
#pragma unroll
  for (int ni = 0; ni < NT; ++ni)
#pragma unroll
    for (int e = 0; e < 4; ++e) r[e >> 1] += x[0][ni][e];
  r[0] = quad_sum(r[0]);
  r[1] = quad_sum(r[1]);
  if ((lane & 3) == 0) rows[m0 + (lane >> 2)] = r[0], rows[m0 + (lane >> 2) + 8] = r[1];
#pragma unroll
  for (int ni = 0; ni < NT; ++ni)
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      float c = x[0][ni][u] + x[0][ni][u + 2];  // rows g and g + 8
      c += __shfl_xor_sync(0xffffffffu, c, 4);
      c += __shfl_xor_sync(0xffffffffu, c, 8);
      c += __shfl_xor_sync(0xffffffffu, c, 16);
      if ((lane >> 2) == 0) cols(acc_col(ni, u, lane)) = c;
    }
}

// ---- the state passes' warps ----

// Warps per CTA of the state passes: 8 at D = 128 (rows [16 w, + 16) of the D x BV state tile per
// warp; the 64-row products split over k between warps w and w + 4, see swap_k_halves), else 4.
template <int D>
inline constexpr int kStateWarps = D == 128 ? 8 : 4;

// Warps w and w ^ 4 hold partial sums of one 16 x 8NT tile over the two halves of k (the half is
// w / 4). Each ends with the full sum, the k < K/2 half added first, in the NT / 2 n-tiles it keeps
// ([p NT/2, (p + 1) NT/2) for half p); its other n-tiles are left partial. xch: [8 warps][NT / 2][4]
// [32 lanes] fp32 of shared memory. The two warps meet at barrier 1 + w % 4 (named_barrier), not the
// CTA's: every warp of the CTA calls it.
template <int NT>
__device__ __forceinline__ void swap_k_halves(float (&P)[1][NT][4], float* xch, int warp, int lane) {
  constexpr int kKeep = NT / 2;
  const int part = warp / 4, other = warp ^ 4;
#pragma unroll
  for (int ni = 0; ni < NT; ++ni)
    if (ni / kKeep != part)
#pragma unroll
      for (int e = 0; e < 4; ++e) xch[((warp * kKeep + ni % kKeep) * 4 + e) * 32 + lane] = P[0][ni][e];
  named_barrier(1 + (warp & 3), 64);
#pragma unroll
  for (int ni = 0; ni < NT; ++ni)
    if (ni / kKeep == part)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float q = xch[((other * kKeep + ni % kKeep) * 4 + e) * 32 + lane];
        P[0][ni][e] = part == 0 ? P[0][ni][e] + q : q + P[0][ni][e];
      }
}
// The state passes' epilogue inputs, read before their product so that the loads are off its path:
// this thread's two accumulator rows' decays dec[h] = e^{G_n - G_i} (gl = G_n) and, for the n-tiles
// its part keeps (ni / kKeep == part), x[ni][h] = at(i, column) for the accumulator pair of row h.
template <int NT, int kKeep, class At>
__device__ __forceinline__ void state_epilogue_inputs(float (&dec)[2], float2 (&x)[NT][2], const float* sG, float gl,
                                                      int m0, int part, int lane, At at) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = m0 + acc_row(0, 2 * h, lane);
    dec[h] = __expf(gl - sG[i]);
#pragma unroll
    for (int ni = 0; ni < NT; ++ni)
      if (ni / kKeep == part) x[ni][h] = at(i, acc_col(ni, 2 * h, lane));
  }
}
// Shared memory swap_k_halves takes for BV columns (0 with 4 warps).
template <int D, int BV>
inline constexpr int kSwapBytes = kStateWarps<D> == 8 ? 8 * (BV / 16) * 4 * 32 * 4 : 0;

// This warp's rows [m0, m0 + 16) of M = lower(X o Gam), Gam_ic = exp(G_i - G_c), as the high and low
// bf16 A fragments of a product M V (kC / 16 k-steps). X comes from 8 accumulator blocks of 8 columns
// (the m16n8 C layout; x(j, e) is element e of block j): block j holds columns [8 j, + 8), so k-step
// s takes blocks 2 s and 2 s + 1, block j's rows g / g + 8 going to register (j & 1) * 2 + e / 2.
// Whether the 8 columns [n0, n0 + 8) lie above the diagonal for every one of the 16 rows [m0, m0 + 16)
// (warp-uniform): a causal mask zeroes that whole accumulator block, so its values need not be formed.
__device__ __forceinline__ bool above_diagonal(int n0, int m0) { return n0 > m0 + 15; }

// parity (0 or 1): of the k-steps s on or below the diagonal, only those with s % 2 == parity are formed
// (the others are left as they are; OutputLayout::kSplitM); -1: all.
template <class X>
__device__ __forceinline__ void causal_decay_fragments(uint32_t (&mh)[kC / 16][4], uint32_t (&ml)[kC / 16][4], X x,
                                                       const float* sG, int m0, int lane, int parity = -1) {
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; e += 2) {
      const int i = m0 + acc_row(0, e, lane), c = acc_col(j, e, lane), f = (j & 1) * 2 + e / 2;
      if (above_diagonal(8 * j, m0)) {
        mh[j / 2][f] = ml[j / 2][f] = 0u;
        continue;
      }
      if (parity >= 0 && (j / 2) % 2 != parity) continue;
      float v[2];
#pragma unroll
      for (int u = 0; u < 2; ++u) v[u] = c + u <= i ? x(j, e + u) * __expf(sG[i] - sG[c + u]) : 0.f;
      bf16x2_split(v[0], v[1], mh[j / 2][f], ml[j / 2][f]);
    }
}

// ---- tile copies ----

// The copies below give each thread a fixed 16-byte column and a row step of NTHREADS / (COLS / V)
// rows (V elements per 16 bytes) when that divides the tile: one pointer add per copy, unrolled,
// where a flat index loop spends a division, a 64-bit multiply and a select on each.
template <int ROWS, int COLS, int V, int NTHREADS>
inline constexpr bool kTileStriped =
    COLS % V == 0 && NTHREADS % (COLS / V) == 0 && ROWS % (NTHREADS / (COLS / V)) == 0;

// ROWS x COLS bf16 from global rows (ldg elements apart) into shared memory (lds); rows >= valid
// are zero. vec: 16-byte cp.async (call cp_async_commit / cp_async_wait after), else plain loads.
// NTHREADS threads take part (threadIdx.x < NTHREADS, or tid: this thread's index among them).
template <int ROWS, int COLS, int NTHREADS = kTcThreads>
__device__ __forceinline__ void load_tile(uint16_t* s, int lds, const uint16_t* g, int64_t ldg, int valid, bool vec,
                                          int tid = -1) {
  constexpr int kPerRow = COLS / 8;
  const unsigned t = tid >= 0 ? static_cast<unsigned>(tid) : threadIdx.x;  // unsigned: divisions by shifts
  if constexpr (kTileStriped<ROWS, COLS, 8, NTHREADS>) {
    if (vec) {
      constexpr int kStep = NTHREADS / kPerRow;
      const int r0 = t / kPerRow, c = (t % kPerRow) * 8;
      const uint16_t* src = g + r0 * ldg + c;
      uint16_t* dst = s + r0 * lds + c;
#pragma unroll
      for (int i = 0; i < ROWS / kStep; ++i) {
        const bool on = r0 + i * kStep < valid;
        cp_async_16(dst + i * kStep * lds, on ? src : g, on ? 16 : 0);
        src += kStep * ldg;
      }
      return;
    }
  }
  for (int idx = t; idx < ROWS * kPerRow; idx += NTHREADS) {
    const int r = idx / kPerRow, c = (idx % kPerRow) * 8;
    uint16_t* dst = s + r * lds + c;
    if (vec) {
      cp_async_16(dst, r < valid ? g + r * ldg + c : g, r < valid ? 16 : 0);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) dst[e] = r < valid ? g[r * ldg + c + e] : uint16_t(0);
    }
  }
}

// ROWS x COLS fp32, always 16-byte aligned (workspace).
template <int ROWS, int COLS, int NTHREADS = kTcThreads>
__device__ __forceinline__ void load_tile_f32(float* s, int lds, const float* g, int64_t ldg, int tid = -1) {
  constexpr int kPerRow = COLS / 4;
  const unsigned t = tid >= 0 ? static_cast<unsigned>(tid) : threadIdx.x;  // unsigned: divisions by shifts
  if constexpr (kTileStriped<ROWS, COLS, 4, NTHREADS>) {
    constexpr int kStep = NTHREADS / kPerRow;
    const int r0 = t / kPerRow, c = (t % kPerRow) * 4;
    const float* src = g + r0 * ldg + c;
#pragma unroll
    for (int i = 0; i < ROWS / kStep; ++i) cp_async_16(s + (r0 + i * kStep) * lds + c, src + i * kStep * ldg, 16);
  } else {
    for (int idx = t; idx < ROWS * kPerRow; idx += NTHREADS) {
      const int r = idx / kPerRow, c = (idx % kPerRow) * 4;
      cp_async_16(s + r * lds + c, g + r * ldg + c, 16);
    }
  }
}

// ROWS x COLS bf16 from shared memory to 16-byte aligned global rows (workspace), by the n_threads
// threads numbered tid = 0..n_threads-1 (a warp, or the CTA); rows >= valid are not stored.
template <int ROWS, int COLS>
__device__ __forceinline__ void store_tile(uint16_t* g, int64_t ldg, const uint16_t* s, int lds, int tid,
                                           int n_threads, int valid = ROWS) {
  constexpr int kPerRow = COLS / 8;
  for (int idx = tid; idx < ROWS * kPerRow; idx += n_threads) {
    const int r = idx / kPerRow, c = (idx % kPerRow) * 8;
    if (r < valid) *reinterpret_cast<uint4*>(g + r * ldg + c) = *reinterpret_cast<const uint4*>(s + r * lds + c);
  }
}

// The whole CTA (NTHREADS threads) storing ROWS x COLS bf16, striped as load_tile; rows >= valid
// are not stored. Kernels stage their bf16 outputs this way: written from the accumulators as
// 4-byte pieces, each 32-byte sector would take two stores, and the L2 as many requests.
template <int ROWS, int COLS, int NTHREADS = kTcThreads>
__device__ __forceinline__ void store_tile_cta(uint16_t* g, int64_t ldg, const uint16_t* s, int lds,
                                               int valid = ROWS) {
  constexpr int kPerRow = COLS / 8;
  if constexpr (kTileStriped<ROWS, COLS, 8, NTHREADS>) {
    constexpr int kStep = NTHREADS / kPerRow;
    const int r0 = threadIdx.x / kPerRow, c = (threadIdx.x % kPerRow) * 8;
    uint16_t* dst = g + r0 * ldg + c;
#pragma unroll
    for (int i = 0; i < ROWS / kStep; ++i)
      if (r0 + i * kStep < valid)
        *reinterpret_cast<uint4*>(dst + i * kStep * ldg) =
            *reinterpret_cast<const uint4*>(s + (r0 + i * kStep) * lds + c);
  } else {
    store_tile<ROWS, COLS>(g, ldg, s, lds, threadIdx.x, NTHREADS, valid);
  }
}

// The l2norm of rows [0, n) of a D-column bf16 tile in shared memory (GdnCudaForwardParams::q_hat):
// each becomes y = scale x r, r = 1 / sqrt(sum x^2 + 1e-6) (fp32), also stored to y_g (rows ldy
// apart; vec: 16-byte stores) and r to r_g (rows ldr apart). Rows past n stay as they are (zero).
// kLanes lanes share a row; lane p of a row takes its 16-byte pieces p, p + kLanes, p + 2 kLanes, ...
// - kLanes 8 (row-major tiles, rows padded to D + 8 elements): a warp takes 4 rows; the 8 lanes of a
//   quarter-warp read 128 contiguous bytes of one row (conflict-free), and each row leaves as
//   128-byte runs.
// - kLanes 4 (the core-matrix layouts, where one row's pieces are 128 bytes apart): a warp takes 8
//   rows, lane 8 p + j having row j; a quarter-warp reads one piece of 8 consecutive rows, 128
//   contiguous bytes.
// On the padded tiles kLanes 8 is the faster at both head dims; the xor butterfly over a row's
// lanes gives them the same sum. The caller syncs before and after.
// at(i, c): the shared-memory address of row i's 8 features [c, c + 8) (16 bytes).
template <int D, int NTHREADS, int kLanes, class At>
__device__ __forceinline__ void l2norm_tile_rows_at(At at, int n, float scale, uint16_t* y_g, int64_t ldy,
                                                    float* r_g, int64_t ldr, bool vec) {
  static_assert(kLanes == 4 || kLanes == 8, "kLanes: 4 or 8");
  static_assert(D % (8 * kLanes) == 0, "D: a multiple of 8 kLanes");
  constexpr int kVec = D / 8 / kLanes, kRows = 32 / kLanes;
  const int lane = threadIdx.x % 32;
  const int j = kLanes == 8 ? lane / 8 : lane % 8, p = kLanes == 8 ? lane % 8 : lane / 8;
  for (int i0 = (threadIdx.x / 32) * kRows; i0 < n; i0 += NTHREADS / 32 * kRows) {  // uniform over the warp
    const int i = i0 + j;
    const bool on = i < n;
    uint4 x[kVec];
    float ss = 0.f;
#pragma unroll
    for (int u = 0; u < kVec; ++u) {
      x[u].x = x[u].y = x[u].z = x[u].w = 0u;
      if (on) x[u] = *reinterpret_cast<const uint4*>(at(i, 8 * (p + kLanes * u)));
      const uint32_t w[4] = {x[u].x, x[u].y, x[u].z, x[u].w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float lo = __uint_as_float(w[e] << 16), hi = __uint_as_float(w[e] & 0xffff0000u);
        ss += lo * lo + hi * hi;
      }
    }
    if constexpr (kLanes == 8) {
#pragma unroll
      for (int o = 1; o < 8; o <<= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    } else {
      ss += __shfl_xor_sync(0xffffffffu, ss, 8);
      ss += __shfl_xor_sync(0xffffffffu, ss, 16);
    }
    const float inv = rsqrtf(ss + 1e-6f);
    if (!on) continue;
#pragma unroll
    for (int u = 0; u < kVec; ++u) {
      uint32_t w[4] = {x[u].x, x[u].y, x[u].z, x[u].w};
#pragma unroll
      for (int e = 0; e < 4; ++e)
        w[e] = static_cast<uint32_t>(bf16_bits(scale * __uint_as_float(w[e] << 16) * inv)) |
               (static_cast<uint32_t>(bf16_bits(scale * __uint_as_float(w[e] & 0xffff0000u) * inv)) << 16);
      uint4 y;
      y.x = w[0], y.y = w[1], y.z = w[2], y.w = w[3];
      const int c = 8 * (p + kLanes * u);
      *reinterpret_cast<uint4*>(at(i, c)) = y;
      uint16_t* dst = y_g + i * ldy + c;
      if (vec) {
        *reinterpret_cast<uint4*>(dst) = y;
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e)
          dst[2 * e] = static_cast<uint16_t>(w[e]), dst[2 * e + 1] = static_cast<uint16_t>(w[e] >> 16);
      }
    }
    if (p == 0) r_g[i * ldr] = inv;
  }
}

// The same on a row-major tile (rows lds elements apart, lds = D + 8).
template <int D, int NTHREADS>
__device__ __forceinline__ void l2norm_tile_rows(uint16_t* s, int lds, int n, float scale, uint16_t* y_g,
                                                 int64_t ldy, float* r_g, int64_t ldr, bool vec) {
  l2norm_tile_rows_at<D, NTHREADS, 8>([&](int i, int c) { return s + i * lds + c; }, n, scale, y_g, ldy, r_g, ldr,
                                      vec);
}

// Two adjacent bf16 outputs; vec: one 4-byte store (p 4-byte aligned).
__device__ __forceinline__ void st_bf16x2(uint16_t* p, float a, float b, bool vec) {
  if (vec) {
    *reinterpret_cast<uint32_t*>(p) = bf16x2_bits(a, b);
  } else {
    p[0] = bf16_bits(a);
    p[1] = bf16_bits(b);
  }
}

// A warp's accumulators (rows m0 + 16 mi + ..., columns 8 ni + ...) into a bf16 tile in shared memory.
template <int MT, int NT>
__device__ __forceinline__ void store_acc_bf16(uint16_t* s, int ld, int m0, const float (&acc)[MT][NT][4], int lane) {
#pragma unroll
  for (int mi = 0; mi < MT; ++mi)
#pragma unroll
    for (int ni = 0; ni < NT; ++ni)
#pragma unroll
      for (int e = 0; e < 4; e += 2)
        st_bf16x2(s + (m0 + acc_row(mi, e, lane)) * ld + acc_col(ni, e, lane), acc[mi][ni][e], acc[mi][ni][e + 1], true);
}

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
#if defined(DT_GDN_TIMELINE) && !defined(DT_GDN_EMULATED)
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
  DT_GDN_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, a), op);
  DT_GDN_CUDA_CHECK(cudaGetLastError(), op);
}

// Raises a kernel's dynamic shared-memory limit (needed above 48 KB) before its launch.
template <class Kernel>
void tc_set_smem(Kernel kernel, size_t bytes, const char* op) {
  DT_GDN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
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
void tc_sum_heads(const TcArgs& a, int D, cudaStream_t s, const char* op);      // dq, dk when Hv > Hk

}  // namespace gdn_cuda
}  // namespace dt
