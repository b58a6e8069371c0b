// The building blocks of the tensor-core GDN chunk kernels (kernels/cuda/gdn_tc_*.cu; included by
// gdn_tc.cuh): the chunk constants, bf16 helpers (beside common.cuh's conversions), warp-level
// bf16 matmuls on shared-memory tiles, the state passes' warps, and the tile copies between global
// and shared memory.
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

namespace dt::cuda {

inline constexpr int kC = 64;          // chunk rows
inline constexpr int kTcWarps = 4;
inline constexpr int kTcThreads = 32 * kTcWarps;
// fp32 64 x 64 matrices (prep's A and T): 72 = 8 mod 32 banks, so that a warp's 8-byte accesses to
// the mma fragment layout (rows g, columns 2t, 2t + 1) are free of bank conflicts (65 gives 2-3-way)
inline constexpr int kLdF = kC + 8;
inline constexpr int kLdC = kC + 8;    // bf16 64 x 64 matrices

// ---- bf16 helpers (raw uint16_t bits; the conversions are common.cuh's) ----
// x = hi + lo to about 16 significant bits: hi = bf16(x), lo = bf16(x - hi). A product with an
// exact bf16 operand (q, k, v) then costs two mma instead of one and loses nothing to rounding.
// Split a pair at a time, packed as one mma operand word each: hi = (bf16 a, bf16 b), lo =
// (bf16(a - hi_a), bf16(b - hi_b)), in two conversions.
__device__ __forceinline__ void bf16x2_split(float a, float b, uint32_t& hi, uint32_t& lo) {
  hi = pack_bf16x2(a, b);
  lo = pack_bf16x2(a - __uint_as_float(hi << 16), b - __uint_as_float(hi & 0xffff0000u));
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

// A state pass's accumulator tiles of one head's D x D fp32 state (head bh of a [.., D, D] array):
// rows xw + acc_row(mi, ...), columns y0 + acc_col(ni, ...). Loaded as zeros where src is null.
template <int D, int MT, int NT>
__device__ __forceinline__ void load_state_acc(float (&x)[MT][NT][4], const float* src, int64_t bh, int xw, int y0,
                                               int lane) {
#pragma unroll
  for (int mi = 0; mi < MT; ++mi)
#pragma unroll
    for (int ni = 0; ni < NT; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = xw + acc_row(mi, e, lane), c = y0 + acc_col(ni, e, lane);
        x[mi][ni][e] = src ? src[(bh * D + r) * D + c] : 0.f;
      }
}
template <int D, int MT, int NT>
__device__ __forceinline__ void store_state_acc(float* dst, const float (&x)[MT][NT][4], int64_t bh, int xw, int y0,
                                                int lane) {
#pragma unroll
  for (int mi = 0; mi < MT; ++mi)
#pragma unroll
    for (int ni = 0; ni < NT; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = xw + acc_row(mi, e, lane), c = y0 + acc_col(ni, e, lane);
        dst[(bh * D + r) * D + c] = x[mi][ni][e];
      }
}

// Sum over the 4 lanes of a quad (the lanes holding one accumulator row), fixed butterfly order.
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  v += __shfl_xor_sync(0xffffffffu, v, 2);
  return v;
}

// Sum over the warp, fixed butterfly order over lane distances 1, 2, ..., 16 (every lane gets the
// sum): the reverse of common.cuh's warp_sum (16, 8, ..., 1), so the bits may differ from it.
__device__ __forceinline__ float warp_sum_ascending(float v) {
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
// Calls f(ni, e, i, j, zero) for element e of each block ni of a warp's row of NT m16n8 accumulator
// blocks (rows from m0, columns from n1): i and j its row and column, zero whether its whole block
// lies above the diagonal.
template <int NT, class F>
__device__ __forceinline__ void for_each_block_elem(int m0, int n1, int lane, F&& f) {
#pragma unroll
  for (int ni = 0; ni < NT; ++ni) {
    const bool zero = above_diagonal(n1 + 8 * ni, m0);
#pragma unroll
    for (int e = 0; e < 4; ++e) f(ni, e, m0 + acc_row(0, e, lane), n1 + acc_col(ni, e, lane), zero);
  }
}

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
        w[e] = static_cast<uint32_t>(f32_to_bf16_bits(scale * __uint_as_float(w[e] << 16) * inv)) |
               (static_cast<uint32_t>(f32_to_bf16_bits(scale * __uint_as_float(w[e] & 0xffff0000u) * inv)) << 16);
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
    *reinterpret_cast<uint32_t*>(p) = pack_bf16x2(a, b);
  } else {
    p[0] = f32_to_bf16_bits(a);
    p[1] = f32_to_bf16_bits(b);
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

}  // namespace dt::cuda
