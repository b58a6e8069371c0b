// Pieces of the state pass that keeps the state transposed in registers (S^T: columns of S as the
// rows of mma accumulators, so that both products of a chunk take their A operand from
// registers): the column-warp pass (gdn_tc_state_cw.cu); the ring of tile stages between a
// producer and the consumers.
#pragma once

#include "kernels/cuda/gdn_tc.cuh"

namespace dt::cuda {

// Accumulator pairs (columns 8 j + 2t, + 1 of rows g and g + 8) of an m16nN product as the A
// fragments of k-steps j / 2: register (j & 1) * 2 + e / 2 of k-step j / 2 (e = 0: row g, 2: row g + 8).
__device__ __forceinline__ int ra_reg(int j, int e) { return (j & 1) * 2 + e / 2; }

// The 8 x 8 blocks of k-step s (accumulator blocks 2 s, 2 s + 1; rows g and g + 8 of this warp)
// stored transposed: element (row y, column x) of the accumulators lands at dst[x * ld + y], for
// the warp's 16 rows y. Lane l gives the row address of block l / 8 (block j = 2 s + (l / 8) / 2,
// row half (l / 8) % 2), row l % 8 of the transposed block.
__device__ __forceinline__ void stage_transposed(uint16_t* dst, int ld, int s, const uint32_t (&r)[4], int warp, int lane) {
  const int m = lane / 8;
  stsm_x4_trans(dst + (8 * (2 * s + m / 2) + lane % 8) * ld + 16 * warp + 8 * (m % 2), r);
}

// The ring of kStages stages between the producer threads (the CTA's first warp) and the
// consumers (the rest): named barriers
// kFull + s (the producer's copies into stage s have landed) and kEmpty + s (the consumers are done
// with stage s), kThreads threads each (the CTA); kConsumers is free for the consumers' own use.
template <int kStages, int kThreads>
struct TileRing {
  static constexpr int kFull = 1, kEmpty = 1 + kStages, kConsumers = 1 + 2 * kStages;
  // Producer: load(j, s) issues item j's copies into stage s (cp.async); item j's full barrier is
  // signalled one item later, once this thread's copies of it have landed. n >= 1.
  template <class Load>
  __device__ static void produce(int64_t n, Load load) {
    for (int64_t j = 0; j < n; ++j) {
      const int s = static_cast<int>(j % kStages);
      if (j >= kStages) named_barrier(kEmpty + s, kThreads);
      load(j, s);
      cp_async_commit();
      if (j > 0) {
        cp_async_wait<1>();
        fence_proxy_async();
        named_arrive(kFull + static_cast<int>((j - 1) % kStages), kThreads);
      }
    }
    cp_async_wait<0>();
    fence_proxy_async();
    named_arrive(kFull + static_cast<int>((n - 1) % kStages), kThreads);
  }
  // Consumer: wait for item j's stage; give it back (only where the producer will wait for it).
  __device__ static void acquire(int64_t j) { named_barrier(kFull + static_cast<int>(j % kStages), kThreads); }
  __device__ static void release(int64_t j, int64_t n) {
    if (j + kStages < n) named_arrive(kEmpty + static_cast<int>(j % kStages), kThreads);
  }
};

// Columns [y0 + 16 warp, + 16) of head bh's D x D fp32 state X in [bh][D][D], transposed, as warp
// `warp`'s accumulators (16 x D: a column warp's tiles):
// x[4 j + e] = X^T[16 warp + g + 8 (e / 2)][8 j + 2 t + e % 2], lane = 4 g + t.
template <int D>
__device__ __forceinline__ int64_t state_t_at(int64_t bh, int j, int e, int y0, int warp, int lane) {
  return (bh * D + 8 * j + 2 * (lane % 4) + e % 2) * D + y0 + 16 * warp + lane / 4 + 8 * (e / 2);
}
template <int D>
__device__ __forceinline__ void load_state_t(float (&x)[D / 2], const float* X, int64_t bh, int y0, int warp, int lane) {
#pragma unroll
  for (int j = 0; j < D / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) x[4 * j + e] = X ? X[state_t_at<D>(bh, j, e, y0, warp, lane)] : 0.f;
}
template <int D>
__device__ __forceinline__ void store_state_t(const float (&x)[D / 2], float* X, int64_t bh, int y0, int warp, int lane) {
  if (X)
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) X[state_t_at<D>(bh, j, e, y0, warp, lane)] = x[4 * j + e];
}

}  // namespace dt::cuda
