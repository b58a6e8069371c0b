// Attention of one query per (sequence, head) over a cache on the GPU, flash-decoding style
// (CPU references: infer/cpu/decode_ref.h decode_attention_ref, mla_decode_attention_ref).
//
// The len = pos + 1 positions are cut in S equal ranges (S fixed by the capacity, so a captured
// launch fits every length; the range size follows the length read on the device): S =
// attention_splits(cap), about 64 positions each, or a tile of kTile for GQA's tiled kernel, at
// most kMaxSplits. Kernel 1, one CTA per (split, head, sequence), 4 warps: warp w takes positions
// t0 + w, t0 + w + 4, ... of its range; per position the warp forms the score (lanes over the
// key dims, a butterfly sum), then an online softmax (running max m, sum l, and Dv accumulators,
// VPL per lane). The CTA merges its warps and writes (m, l, acc[Dv]) to the fp32 workspace.
// Kernel 2, one CTA per (head, sequence), merges the S partials: o = sum_s acc_s e^{m_s - M} /
// sum_s l_s e^{m_s - M}. Nothing holds a whole score row, so any length up to the capacity runs.
// Where a row's S splits fit a thread block cluster (S <= 16, GQA's tiled kernel), its CTAs form
// one cluster, keep their partials in shared memory, and the cluster's first CTA merges them
// (distributed shared memory), with merge_kernel's code and bits: one kernel fewer a layer.
//
// A key is up to two segments, [k1 | k2], read against [q1 | q2]: GQA has k1 = the key (q1 bf16),
// MLA has k1 = the latent c_t against q_lat = W_kb^T q_nope (fp32, formed by mla_q_kernel) and
// k2 = the rotated shared key against q_pe; the value is v (GQA) or c_t (MLA), whose output
// o_lat goes through W_vb (mla_out_kernel). With the MLA fp8 cache (mla_attention_fp8) the split
// kernel reads c_t as e4m3 bytes times their block's fp32 scale (core/fp8.h), both as key and value.
#include <cmath>
#include <cstdint>

#include "infer/cuda/decode_cuda.h"
#include "infer/cuda/fp8.cuh"
#include "kernels/cuda/cluster.cuh"
#include "kernels/cuda/cluster_launch.h"
#include "kernels/cuda/common.cuh"

namespace dt::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int64_t kMaxSplits = 64;
constexpr int64_t kPositionsPerSplit = 64;  // below kMaxSplits splits: about this many positions each
constexpr int64_t kMaxClusterSplits = 16;   // gqa_split_kernel's clusters: a row's splits, at most

struct SplitParams {
  const void* q1;           // [N, H, D1]: fp32 (MLA's q_lat) or bf16 (GQA's q)
  const uint16_t* q2;       // [N, H, D2] bf16, or null (D2 = 0)
  const uint16_t *k1, *k2, *v;
  // Element strides of the caches: per sequence, per position, per KV head (0: shared by all heads).
  int64_t k1_seq, k1_pos, k1_head, k2_seq, k2_pos, v_seq, v_pos, v_head;
  int64_t N, H, Hkv, D1, D2, Dv, cap, S, pos;
  const int32_t* pos_dev;
  float scale;
  float* partial;  // [N, H, S, Dv + 2]
  uint16_t* o;     // [N, H, Dv] bf16: where gqa_split_kernel's clusters write the merged rows
  // MLA's fp8 latent (split_kernel's kFp8, in place of k1 and v): e4m3 [N, cap, D1] and fp32
  // scales [N, cap, D1 / kFp8Block], at the k1 strides.
  const uint8_t* c8;
  const float* c8_scale;
};

__device__ __forceinline__ int64_t decode_len(const int32_t* pos_dev, int64_t pos, int64_t cap) {
  const int64_t p = pos_dev ? static_cast<int64_t>(*pos_dev) : pos;
  return p + 1 < 1 ? 1 : (p + 1 > cap ? cap : p + 1);
}

// An fp8 latent value read back: e4m3 times its block's scale (exact).
__device__ __forceinline__ float fp8_latent(const uint8_t* q, const float* s, int64_t d) {
  return e4m3_bits_to_f32(q[d]) * s[d / kFp8Block];
}

// o[row] = the merge of the S partials of row, part(s) pointing at partial s (max, sum, Dv
// accumulators); bf16 (GQA) or fp32 (MLA's o_lat), by one CTA of kThreads threads, fac and sl
// kMax floats of its shared memory. Every load goes out at once: the splits' maxima and sums into
// shared memory, and each thread's first feature's S partials into registers; then each thread
// merges its features (s in order, as the CPU does).
template <bool kOutF32, int kMax, class Part>
__device__ __forceinline__ void merge_row(void* o, int64_t row, int64_t S, int64_t Dv, const Part& part, float* fac,
                                          float* sl) {
  const int64_t d0 = threadIdx.x;
  float v[kMax];
#pragma unroll
  for (int s = 0; s < kMax; ++s)
    if (s < S && d0 < Dv) v[s] = part(s)[2 + d0];
  for (int64_t s = threadIdx.x; s < S; s += kThreads) fac[s] = part(s)[0], sl[s] = part(s)[1];
  __syncthreads();
  float M = -INFINITY;
  for (int64_t s = 0; s < S; ++s) M = fmaxf(M, fac[s]);
  float L = 0.f;
  for (int64_t s = 0; s < S; ++s)
    if (fac[s] != -INFINITY) L += sl[s] * expf(fac[s] - M);
  __syncthreads();  // every thread has read the maxima
  for (int64_t s = threadIdx.x; s < S; s += kThreads) fac[s] = fac[s] == -INFINITY ? 0.f : expf(fac[s] - M);
  __syncthreads();
  for (int64_t d = d0; d < Dv; d += kThreads) {
    if (d != d0)
#pragma unroll
      for (int s = 0; s < kMax; ++s)
        if (s < S) v[s] = part(s)[2 + d];
    float a = 0.f;
#pragma unroll
    for (int s = 0; s < kMax; ++s)
      if (s < S) a += v[s] * fac[s];
    const float r = a / L;
    if constexpr (kOutF32)
      static_cast<float*>(o)[row * Dv + d] = r;
    else
      static_cast<uint16_t*>(o)[row * Dv + d] = f32_to_bf16_bits(r);
  }
}

template <int VPL, bool kQ1F32, bool kFp8 = false>
__global__ void __launch_bounds__(kThreads) split_kernel(const __grid_constant__ SplitParams p) {
  __shared__ float sq[kMaxKeyDim];
  __shared__ float wm[kWarps], wl[kWarps];
  __shared__ float wacc[kWarps][kMaxValueDim];
  const int64_t s = blockIdx.x, h = blockIdx.y, n = blockIdx.z, row = n * p.H + h;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t len = decode_len(p.pos_dev, p.pos, p.cap);
  const int64_t per = (len + p.S - 1) / p.S, t0 = s * per, t1 = t0 + per < len ? t0 + per : len;

  for (int64_t d = threadIdx.x; d < p.D1; d += kThreads)
    sq[d] = kQ1F32 ? static_cast<const float*>(p.q1)[row * p.D1 + d]
                   : bf16_bits_to_f32(static_cast<const uint16_t*>(p.q1)[row * p.D1 + d]);
  for (int64_t d = threadIdx.x; d < p.D2; d += kThreads) sq[p.D1 + d] = bf16_bits_to_f32(p.q2[row * p.D2 + d]);
  __syncthreads();

  const int64_t hk = h / (p.H / p.Hkv);
  const uint16_t* k1 = kFp8 ? nullptr : p.k1 + n * p.k1_seq + hk * p.k1_head;
  const uint16_t* k2 = p.k2 ? p.k2 + n * p.k2_seq : nullptr;
  const uint16_t* v = kFp8 ? nullptr : p.v + n * p.v_seq + hk * p.v_head;
  float m = -INFINITY, l = 0.f, acc[VPL];
#pragma unroll
  for (int j = 0; j < VPL; ++j) acc[j] = 0.f;
  for (int64_t t = t0 + warp; t < t1; t += kWarps) {
    float dot = 0.f;
    const uint8_t* cq = nullptr;  // kFp8: this position's latent and its scales
    const float* cs = nullptr;
    if constexpr (kFp8) {
      cq = p.c8 + n * p.k1_seq + t * p.k1_pos;
      cs = p.c8_scale + (n * p.cap + t) * (p.D1 / kFp8Block);
      for (int64_t d = lane; d < p.D1; d += 32) dot += sq[d] * fp8_latent(cq, cs, d);
    } else {
      const uint16_t* kr = k1 + t * p.k1_pos;
      for (int64_t d = lane; d < p.D1; d += 32) dot += sq[d] * bf16_bits_to_f32(kr[d]);
    }
    if (k2) {
      const uint16_t* kr2 = k2 + t * p.k2_pos;
      for (int64_t d = lane; d < p.D2; d += 32) dot += sq[p.D1 + d] * bf16_bits_to_f32(kr2[d]);
    }
    const float sc = __shfl_sync(0xffffffffu, warp_sum(dot), 0) * p.scale;
    const float mn = fmaxf(m, sc);
    const float corr = expf(m - mn);  // 0 at the first position (m = -inf)
    const float pr = expf(sc - mn);
    l = l * corr + pr;
    if constexpr (kFp8) {  // the value is the latent itself
#pragma unroll
      for (int j = 0; j < VPL; ++j) {
        const int64_t d = lane + 32 * j;
        if (d < p.Dv) acc[j] = acc[j] * corr + pr * fp8_latent(cq, cs, d);
      }
    } else {
      const uint16_t* vr = v + t * p.v_pos;
#pragma unroll
      for (int j = 0; j < VPL; ++j) {
        const int64_t d = lane + 32 * j;
        if (d < p.Dv) acc[j] = acc[j] * corr + pr * bf16_bits_to_f32(vr[d]);
      }
    }
    m = mn;
  }
  if (lane == 0) wm[warp] = m, wl[warp] = l;
#pragma unroll
  for (int j = 0; j < VPL; ++j) {
    const int64_t d = lane + 32 * j;
    if (d < p.Dv) wacc[warp][d] = acc[j];
  }
  __syncthreads();
  float M = -INFINITY;
  for (int w = 0; w < kWarps; ++w) M = fmaxf(M, wm[w]);
  float* out = p.partial + (row * p.S + s) * (p.Dv + 2);
  const bool empty = M == -INFINITY;  // no position in this range
  for (int64_t d = threadIdx.x; d < p.Dv; d += kThreads) {
    float a = 0.f;
    if (!empty)
      for (int w = 0; w < kWarps; ++w) a += wacc[w][d] * expf(wm[w] - M);
    out[2 + d] = a;
  }
  if (threadIdx.x == 0) {
    float L = 0.f;
    if (!empty)
      for (int w = 0; w < kWarps; ++w) L += wl[w] * expf(wm[w] - M);
    out[0] = M, out[1] = L;
  }
}

// GQA's split (bf16 q, one key segment of Dqk = 8 G features, Dv = 2 P with P dividing kThreads):
// the same partials as split_kernel, with the positions of a range taken kTile at a time in three
// phases that each keep many loads in flight: the scores (G lanes a key, 16 bytes each), the
// tile's max and probabilities (online softmax across tiles), then the values (a thread per pair
// of value features and group of positions).
constexpr int kTile = 128;

// The max over the CTA of v, returned to every thread (block_sum's pattern with warp_max).
__device__ __forceinline__ float block_max(float v, float* red) {
  v = warp_max(v);
  __syncthreads();
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  float r = red[0];
  for (int w = 1; w < kWarps; ++w) r = fmaxf(r, red[w]);
  return r;
}

// gqa_split_kernel's shared memory (dynamic, as the CPU emulation of clusters needs).
template <int G, int P>
struct GqaSplitSmem {
  float sq[8 * G];
  float sp[kTile];
  float red[kWarps];
  float2 sacc[kThreads / P][P];
  float part[2 + 2 * P];  // kCluster: this split's partial (max, sum, values), read by rank 0
  float fac[kMaxClusterSplits], sl[kMaxClusterSplits];  // kCluster: rank 0's merge
};

// kCluster: launched in clusters of a row's S splits (gridDim.x = S <= kMaxClusterSplits). Each CTA
// keeps its partial in shared memory, and after the cluster's barrier rank 0 merges them into
// p.o as merge_kernel would (the same bits), so no merge kernel follows.
template <int G, int P, bool kCluster>
__global__ void __launch_bounds__(kThreads) gqa_split_kernel(const __grid_constant__ SplitParams p) {
  constexpr int kPosPerWarp = 32 / G, kGroups = kThreads / P;
  constexpr int kKeyLoads = kTile / (kWarps * kPosPerWarp), kValueLoads = kTile / kGroups;  // a thread's, a tile
  static_assert(kTile % (kWarps * kPosPerWarp) == 0 && kThreads % P == 0, "tile and thread layout");
  // Where they fit in registers (16-byte keys and 4-byte values: key dims up to 128), the first
  // tile's keys and values are loaded before the grid wait.
  constexpr bool kEarly = 4 * kKeyLoads + kValueLoads <= 128;
  extern __shared__ __align__(16) uint8_t gqa_smem[];
  GqaSplitSmem<G, P>& sh = *reinterpret_cast<GqaSplitSmem<G, P>*>(gqa_smem);
  float* const sq = sh.sq;
  float* const sp = sh.sp;
  float* const red = sh.red;
  const int64_t s = blockIdx.x, h = blockIdx.y, n = blockIdx.z, row = n * p.H + h;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int part = lane % G, lp = lane / G, pair = tid % P, group = tid / P;
  // The position counter is advanced by the step's last kernel, so the length is read before the
  // wait; the cache rows before the new position were written by earlier steps. Only the new
  // position's key and value (written by the kernel before) wait.
  const int64_t len = decode_len(p.pos_dev, p.pos, p.cap), at = len - 1;
  const int64_t per = (len + p.S - 1) / p.S, t0 = s * per, t1 = t0 + per < len ? t0 + per : len;
  const int64_t hk = h / (p.H / p.Hkv);
  const uint16_t* kb = p.k1 + n * p.k1_seq + hk * p.k1_head;
  const uint16_t* vb = p.v + n * p.v_seq + hk * p.v_head;
  auto key_at = [&](int64_t t) { return __ldg(reinterpret_cast<const uint4*>(kb + t * p.k1_pos) + part); };
  auto value_at = [&](int64_t t) { return __ldg(reinterpret_cast<const uint32_t*>(vb + t * p.v_pos) + pair); };
  uint4 k_early[kEarly ? kKeyLoads : 1];
  uint32_t v_early[kEarly ? kValueLoads : 1];
  if constexpr (kEarly) {
    const int64_t te = t0 + kTile < t1 ? t0 + kTile : t1;
#pragma unroll
    for (int i = 0; i < kKeyLoads; ++i) {
      const int64_t t = t0 + (i * kWarps + warp) * kPosPerWarp + lp;
      if (t < te && t != at) k_early[i] = key_at(t);
    }
#pragma unroll
    for (int i = 0; i < kValueLoads; ++i) {
      const int64_t t = t0 + group + i * kGroups;
      if (t < te && t != at) v_early[i] = value_at(t);
    }
  }
  grid_dependency_wait();  // q and the cache's new position come from the kernel before
  grid_launch_dependents();
  // The new position's key and value, where the first tile holds it, go out with q: the threads
  // that take it in the key and the value layouts above.
  uint4 k_new{};
  uint32_t v_new = 0;
  if constexpr (kEarly) {
    const int64_t d = at - t0;
    if (d >= 0 && d < kTile && at < t1) {
      if ((d / kPosPerWarp) % kWarps == warp && d % kPosPerWarp == lp) k_new = key_at(at);
      if (d % kGroups == group) v_new = value_at(at);
    }
  }
  for (int d = tid; d < 8 * G; d += kThreads)
    sq[d] = bf16_bits_to_f32(static_cast<const uint16_t*>(p.q1)[row * 8 * G + d]);
  __syncthreads();
  float qf[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) qf[k] = sq[part * 8 + k];
  float m = -INFINITY, l = 0.f, a0 = 0.f, a1 = 0.f;
  for (int64_t tb = t0; tb < t1; tb += kTile) {
    const int64_t te = tb + kTile < t1 ? tb + kTile : t1;
    const bool early = kEarly && tb == t0;
    // scores
#pragma unroll(kEarly ? kKeyLoads : 4)
    for (int i = 0; i < kKeyLoads; ++i) {
      const int64_t t = tb + (i * kWarps + warp) * kPosPerWarp + lp;
      float dot = 0.f;
      if (t < te) {
        const uint4 kv = !early ? key_at(t) : t != at ? k_early[kEarly ? i : 0] : k_new;
        const uint16_t* kh = reinterpret_cast<const uint16_t*>(&kv);
#pragma unroll
        for (int k = 0; k < 8; ++k) dot += qf[k] * bf16_bits_to_f32(kh[k]);
      }
#pragma unroll
      for (int off = G / 2; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
      if (part == 0 && t < te) sp[t - tb] = dot * p.scale;
    }
    __syncthreads();
    // the tile's max, its probabilities and their sum
    const int cnt = static_cast<int>(te - tb);
    float mx = -INFINITY;
    for (int j = tid; j < cnt; j += kThreads) mx = fmaxf(mx, sp[j]);
    const float mn = fmaxf(m, block_max(mx, red));
    const float corr = expf(m - mn);  // 0 at the first tile (m = -inf)
    float sum = 0.f;
    for (int j = tid; j < cnt; j += kThreads) {
      const float pr = expf(sp[j] - mn);
      sp[j] = pr;
      sum += pr;
    }
    l = l * corr + block_sum(sum, red);  // block_sum's barriers also publish sp
    m = mn;
    // the values
    a0 *= corr, a1 *= corr;
#pragma unroll(kEarly ? kValueLoads : 4)
    for (int i = 0; i < kValueLoads; ++i) {
      const int64_t t = tb + group + i * kGroups;
      if (t >= te) break;
      const float pr = sp[t - tb];
      const uint32_t vv = !early ? value_at(t) : t != at ? v_early[kEarly ? i : 0] : v_new;
      a0 += pr * bf16_bits_to_f32(static_cast<uint16_t>(vv & 0xffffu));
      a1 += pr * bf16_bits_to_f32(static_cast<uint16_t>(vv >> 16));
    }
    __syncthreads();  // sp is reused by the next tile
  }
  sh.sacc[group][pair] = make_float2(a0, a1);
  __syncthreads();
  float* out = kCluster ? sh.part : p.partial + (row * p.S + s) * (p.Dv + 2);
  for (int d = tid; d < 2 * P; d += kThreads) {
    float a = 0.f;
    for (int g = 0; g < kGroups; ++g) a += d % 2 ? sh.sacc[g][d / 2].y : sh.sacc[g][d / 2].x;
    out[2 + d] = a;
  }
  if (tid == 0) out[0] = m, out[1] = l;  // an empty range: m = -inf, l = 0, no values
  if constexpr (kCluster) {
    cluster_sync();  // every split's partial is in its CTA's shared memory (rank = split)
    if (cluster_rank() == 0)
      merge_row<false, kMaxClusterSplits>(
          p.o, row, p.S, p.Dv, [&](int64_t r) { return cluster_smem(sh.part, static_cast<unsigned>(r)); }, sh.fac,
          sh.sl);
    cluster_sync();  // rank 0 has read the partials: the CTAs may exit
  }
}

// The merge of each row's S partials in global memory: one CTA per (head, sequence).
template <bool kOutF32>
__global__ void __launch_bounds__(kThreads) merge_kernel(void* o, const float* partial, int64_t H, int64_t S,
                                                         int64_t Dv) {
  __shared__ float fac[kMaxSplits];
  __shared__ float sl[kMaxSplits];
  const int64_t row = blockIdx.y * H + blockIdx.x;
  const float* pr = partial + row * S * (Dv + 2);
  grid_dependency_wait();  // a no-op unless launched as a dependent (GQA's launch)
  grid_launch_dependents();
  merge_row<kOutF32, kMaxSplits>(o, row, S, Dv, [&](int64_t s) { return pr + s * (Dv + 2); }, fac, sl);
}

// q_lat[row, j] = sum_i q_nope[row, i] W_kb[h][i, j] (fp32), W_kb = w rows [h (dn + dv), + dn).
__global__ void __launch_bounds__(kThreads) mla_q_kernel(float* q_lat, const uint16_t* q_nope, const uint16_t* w,
                                                         int64_t H, int64_t dn, int64_t dv, int64_t kvr) {
  const int64_t h = blockIdx.x, row = blockIdx.y * H + h;
  const uint16_t* wk = w + h * (dn + dv) * kvr;
  for (int64_t j = threadIdx.x; j < kvr; j += kThreads) {
    float a = 0.f;
    for (int64_t i = 0; i < dn; ++i) a += bf16_bits_to_f32(q_nope[row * dn + i]) * bf16_bits_to_f32(wk[i * kvr + j]);
    q_lat[row * kvr + j] = a;
  }
}

// o[row, i] = sum_j W_vb[h][i, j] o_lat[row, j] (bf16 out), W_vb = the dv rows after W_kb; a warp per i.
__global__ void __launch_bounds__(kThreads) mla_out_kernel(uint16_t* o, const float* o_lat, const uint16_t* w,
                                                           int64_t H, int64_t dn, int64_t dv, int64_t kvr) {
  const int64_t h = blockIdx.x, row = blockIdx.y * H + h;
  const uint16_t* wv = w + (h * (dn + dv) + dn) * kvr;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int64_t i = warp; i < dv; i += kWarps) {
    float a = 0.f;
    for (int64_t j = lane; j < kvr; j += 32) a += bf16_bits_to_f32(wv[i * kvr + j]) * o_lat[row * kvr + j];
    a = warp_sum(a);
    if (lane == 0) o[row * dv + i] = f32_to_bf16_bits(a);
  }
}

template <bool kQ1F32>
void launch_split(const SplitParams& p, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(p.S), static_cast<unsigned>(p.H), static_cast<unsigned>(p.N));
  if (p.Dv <= 64)
    split_kernel<2, kQ1F32><<<grid, kThreads, 0, s>>>(p);
  else if (p.Dv <= 128)
    split_kernel<4, kQ1F32><<<grid, kThreads, 0, s>>>(p);
  else if (p.Dv <= 256)
    split_kernel<8, kQ1F32><<<grid, kThreads, 0, s>>>(p);
  else
    split_kernel<16, kQ1F32><<<grid, kThreads, 0, s>>>(p);
}

// MLA's split over the fp8 latent (kvr = Dv a multiple of kFp8Block, at most kMaxValueDim).
void launch_split_fp8(const SplitParams& p, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(p.S), static_cast<unsigned>(p.H), static_cast<unsigned>(p.N));
  if (p.Dv <= 128)
    split_kernel<4, true, true><<<grid, kThreads, 0, s>>>(p);
  else if (p.Dv <= 256)
    split_kernel<8, true, true><<<grid, kThreads, 0, s>>>(p);
  else
    split_kernel<16, true, true><<<grid, kThreads, 0, s>>>(p);
}

// GQA's split by gqa_split_kernel, its head dims in its layout (key dims 8 to 256 and value dims 2
// to 256, powers of two, 16-byte aligned rows): in clusters that merge the row where `clusters`
// asks for them, the row's splits fit a cluster and the device runs such clusters (*merged), else
// writing the partials for merge_kernel.
template <int G, int P>
void launch_gqa_split_gp(const SplitParams& p, const dim3& grid, bool clusters, bool* merged, cudaStream_t s) {
  const size_t smem = sizeof(GqaSplitSmem<G, P>);
  const auto cx = static_cast<unsigned>(p.S);
  *merged = clusters && p.S <= kMaxClusterSplits &&
            cluster_fits(gqa_split_kernel<G, P, true>, grid, cx, dim3(kThreads), smem, s);
  if (*merged)
    DT_CUDA_OK(launch_dependent_clusters(gqa_split_kernel<G, P, true>, grid, cx, dim3(kThreads), smem, s, p),
               "decode_attention (GPU)");
  else
    DT_CUDA_OK(launch_dependent(gqa_split_kernel<G, P, false>, grid, dim3(kThreads), smem, s, p),
               "decode_attention (GPU)");
}

template <int G>
void launch_gqa_split_g(const SplitParams& p, const dim3& grid, bool clusters, bool* merged, cudaStream_t s) {
  switch (p.Dv) {
    case 2: return launch_gqa_split_gp<G, 1>(p, grid, clusters, merged, s);
    case 4: return launch_gqa_split_gp<G, 2>(p, grid, clusters, merged, s);
    case 8: return launch_gqa_split_gp<G, 4>(p, grid, clusters, merged, s);
    case 16: return launch_gqa_split_gp<G, 8>(p, grid, clusters, merged, s);
    case 32: return launch_gqa_split_gp<G, 16>(p, grid, clusters, merged, s);
    case 64: return launch_gqa_split_gp<G, 32>(p, grid, clusters, merged, s);
    case 128: return launch_gqa_split_gp<G, 64>(p, grid, clusters, merged, s);
    default: return launch_gqa_split_gp<G, 128>(p, grid, clusters, merged, s);  // 256 (gqa_tiled)
  }
}

bool pow2_in(int64_t v, int64_t lo, int64_t hi) { return v >= lo && v <= hi && (v & (v - 1)) == 0; }

// Whether gqa_split_kernel takes these dims and rows.
bool gqa_tiled(const SplitParams& p) {
  return pow2_in(p.D1, 8, 256) && pow2_in(p.Dv, 2, 256) && reinterpret_cast<uintptr_t>(p.k1) % 16 == 0 &&
         p.k1_pos % 8 == 0 && p.k1_head % 8 == 0 && reinterpret_cast<uintptr_t>(p.v) % 4 == 0 && p.v_pos % 2 == 0 &&
         p.v_head % 2 == 0;
}

void launch_gqa_split(const SplitParams& p, bool clusters, bool* merged, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(p.S), static_cast<unsigned>(p.H), static_cast<unsigned>(p.N));
  switch (p.D1) {
    case 8: return launch_gqa_split_g<1>(p, grid, clusters, merged, s);
    case 16: return launch_gqa_split_g<2>(p, grid, clusters, merged, s);
    case 32: return launch_gqa_split_g<4>(p, grid, clusters, merged, s);
    case 64: return launch_gqa_split_g<8>(p, grid, clusters, merged, s);
    case 128: return launch_gqa_split_g<16>(p, grid, clusters, merged, s);
    default: return launch_gqa_split_g<32>(p, grid, clusters, merged, s);  // 256 (gqa_tiled)
  }
}

void check_dims(const char* op, int64_t N, int64_t H, int64_t cap, int64_t Dk, int64_t Dv) {
  DT_CHECK(N >= 1 && H >= 1 && cap >= 1 && N <= 65535 && H <= 65535, "{}: bad sizes N {}, H {}, capacity {}", op, N,
           H, cap);
  DT_CHECK(Dk >= 1 && Dk <= kMaxKeyDim && Dv >= 1 && Dv <= kMaxValueDim,
           "{}: key dim {} (at most {}) or value dim {} (at most {}) outside what the GPU decode kernels take", op, Dk,
           kMaxKeyDim, Dv, kMaxValueDim);
}

}  // namespace

namespace {
int64_t splits_of(int64_t cap, int64_t per) {
  const int64_t s = (cap + per - 1) / per;
  return s < 1 ? 1 : (s > kMaxSplits ? kMaxSplits : s);
}
}  // namespace

int64_t attention_splits(int64_t cap) { return splits_of(cap, kPositionsPerSplit); }

int64_t attention_workspace_elems(int64_t N, int64_t H, int64_t cap, int64_t Dv) {
  return N * H * attention_splits(cap) * (Dv + 2);
}

int64_t mla_workspace_elems(int64_t N, int64_t H, int64_t cap, int64_t kvr) {
  return 2 * N * H * kvr + attention_workspace_elems(N, H, cap, kvr);  // q_lat, o_lat, the partials
}

void attention(uint16_t* o, const uint16_t* q, const uint16_t* k_cache, const uint16_t* v_cache, float* ws,
               int64_t N, int64_t cap, int64_t H, int64_t Hkv, int64_t Dqk, int64_t Dv, int64_t pos,
               const int32_t* pos_dev, float scale, void* stream, bool clusters) {
  const char* op = "decode_attention (GPU)";
  DT_CHECK(o && q && k_cache && v_cache && ws, "{}: null tensor pointer", op);
  check_dims(op, N, H, cap, Dqk, Dv);
  DT_CHECK(Hkv >= 1 && H % Hkv == 0, "{}: KV heads {} must divide query heads {}", op, Hkv, H);
  SplitParams p{};
  p.q1 = q, p.q2 = nullptr, p.k1 = k_cache, p.k2 = nullptr, p.v = v_cache;
  p.k1_seq = cap * Hkv * Dqk, p.k1_pos = Hkv * Dqk, p.k1_head = Dqk;
  p.v_seq = cap * Hkv * Dv, p.v_pos = Hkv * Dv, p.v_head = Dv;
  p.N = N, p.H = H, p.Hkv = Hkv, p.D1 = Dqk, p.D2 = 0, p.Dv = Dv, p.cap = cap;
  p.pos = pos, p.pos_dev = pos_dev, p.scale = scale, p.partial = ws, p.o = o;
  auto s = static_cast<cudaStream_t>(stream);
  // The tiled kernel takes a tile of positions at once, so its splits are a tile each (fewer CTAs,
  // the same loads in flight a CTA): at most attention_splits(cap), which sizes the workspace.
  const bool tiled = gqa_tiled(p);
  p.S = tiled ? splits_of(cap, kTile) : attention_splits(cap);
  bool merged = false;
  if (tiled)
    launch_gqa_split(p, clusters, &merged, s);
  else
    launch_split<false>(p, s);
  DT_CUDA_OK(cudaGetLastError(), op);
  if (!merged)
    DT_CUDA_OK(launch_dependent(merge_kernel<false>, dim3(static_cast<unsigned>(H), static_cast<unsigned>(N)),
                                dim3(kThreads), 0, s, static_cast<void*>(o), static_cast<const float*>(ws), H, p.S,
                                Dv),
               op);
}

namespace {

// mla_attention's kernels, the latent cache in bf16 (c_cache) or fp8 (c8, c8_scale; c_cache null).
void mla_run(const char* op, uint16_t* o, const uint16_t* q_nope, const uint16_t* q_pe, const uint16_t* w_kvb,
             const uint16_t* c_cache, const uint8_t* c8, const float* c8_scale, const uint16_t* pe_cache, float* ws,
             int64_t N, int64_t cap, int64_t H, int64_t dn, int64_t dr, int64_t dv, int64_t kvr, int64_t pos,
             const int32_t* pos_dev, float scale, void* stream) {
  DT_CHECK(o && q_nope && q_pe && w_kvb && (c_cache || (c8 && c8_scale)) && pe_cache && ws, "{}: null tensor pointer",
           op);
  check_dims(op, N, H, cap, kvr + dr, kvr);
  DT_CHECK(dn >= 1 && dv >= 1 && dr >= 0, "{}: bad head dims nope {}, rope {}, v {}", op, dn, dr, dv);
  float* q_lat = ws;
  float* o_lat = ws + N * H * kvr;
  float* partial = o_lat + N * H * kvr;
  auto s = static_cast<cudaStream_t>(stream);
  const dim3 rows(static_cast<unsigned>(H), static_cast<unsigned>(N));
  mla_q_kernel<<<rows, kThreads, 0, s>>>(q_lat, q_nope, w_kvb, H, dn, dv, kvr);
  DT_CUDA_OK(cudaGetLastError(), op);
  SplitParams p{};
  p.q1 = q_lat, p.q2 = dr > 0 ? q_pe : nullptr, p.k1 = c_cache, p.k2 = dr > 0 ? pe_cache : nullptr, p.v = c_cache;
  p.k1_seq = cap * kvr, p.k1_pos = kvr, p.k1_head = 0;
  p.k2_seq = cap * dr, p.k2_pos = dr;
  p.v_seq = cap * kvr, p.v_pos = kvr, p.v_head = 0;
  p.N = N, p.H = H, p.Hkv = 1, p.D1 = kvr, p.D2 = dr, p.Dv = kvr, p.cap = cap, p.S = attention_splits(cap);
  p.pos = pos, p.pos_dev = pos_dev, p.scale = scale, p.partial = partial;
  p.c8 = c8, p.c8_scale = c8_scale;
  if (c8)
    launch_split_fp8(p, s);
  else
    launch_split<true>(p, s);
  DT_CUDA_OK(cudaGetLastError(), op);
  merge_kernel<true><<<rows, kThreads, 0, s>>>(o_lat, partial, H, p.S, kvr);
  DT_CUDA_OK(cudaGetLastError(), op);
  mla_out_kernel<<<rows, kThreads, 0, s>>>(o, o_lat, w_kvb, H, dn, dv, kvr);
  DT_CUDA_OK(cudaGetLastError(), op);
}

}  // namespace

void mla_attention(uint16_t* o, const uint16_t* q_nope, const uint16_t* q_pe, const uint16_t* w_kvb,
                   const uint16_t* c_cache, const uint16_t* pe_cache, float* ws, int64_t N, int64_t cap, int64_t H,
                   int64_t dn, int64_t dr, int64_t dv, int64_t kvr, int64_t pos, const int32_t* pos_dev,
                   float scale, void* stream) {
  DT_CHECK(c_cache, "mla_decode_attention (GPU): null tensor pointer");
  mla_run("mla_decode_attention (GPU)", o, q_nope, q_pe, w_kvb, c_cache, nullptr, nullptr, pe_cache, ws, N, cap, H, dn,
          dr, dv, kvr, pos, pos_dev, scale, stream);
}

void mla_attention_fp8(uint16_t* o, const uint16_t* q_nope, const uint16_t* q_pe, const uint16_t* w_kvb,
                       const uint8_t* c_fp8, const float* c_scales, const uint16_t* pe_cache, float* ws, int64_t N,
                       int64_t cap, int64_t H, int64_t dn, int64_t dr, int64_t dv, int64_t kvr, int64_t pos,
                       const int32_t* pos_dev, float scale, void* stream) {
  const char* op = "mla_decode_attention_fp8 (GPU)";
  DT_CHECK(c_fp8 && c_scales, "{}: null tensor pointer", op);
  DT_CHECK(kvr % kFp8Block == 0, "{}: the latent width {} is not a multiple of {}", op, kvr, kFp8Block);
  mla_run(op, o, q_nope, q_pe, w_kvb, nullptr, c_fp8, c_scales, pe_cache, ws, N, cap, H, dn, dr, dv, kvr, pos, pos_dev,
          scale, stream);
}

}  // namespace dt::cuda
