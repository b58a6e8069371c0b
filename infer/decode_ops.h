// The ops a decode step needs beyond kernels/ops.h: one new token per sequence against the state a
// sequence keeps (infer/decode_state.h). They dispatch on ctx.device like kernels/ops.h: on the CPU
// to the references in infer/cpu/decode_ref.h (f32 or f64, one dtype per call). A CUDA context is
// a clear error: the GPU decode kernels belong in infer/decode_ops.cpp's dispatch, next to the CPU's.
//
// N is the number of sequences decoded together; every sequence is at the same position `pos`
// (the continuations of one prompt advance in step). Caches are [N, capacity, ...] and hold the
// first `len` positions of each sequence.
#pragma once

#include <cstdint>

#include "core/context.h"
#include "core/tensor.h"

namespace dt {

// One step of the GDN causal depthwise conv1d + SiLU (kernels/ops.h gdn_conv_forward, K = conv_kernel):
//   y[n, c] = silu( sum_{i<K-1} w[c, 0, i] tail[n, i, c] + w[c, 0, K-1] x[n, c] )
// then the tail shifts by one, tail[n] = [tail[n, 1:], x[n]] (the last K-1 inputs).
// x, y: [N, C]; tail: [N, K-1, C] (nothing when K = 1); w: [C, 1, K].
void decode_conv_step(Context& ctx, const Tensor& y, const Tensor& tail, const Tensor& x, const Tensor& w);

// RoPE at position `pos` on x [N, H, D] in place: kernels/ops.h rope_forward's rotation of a token
// at time pos (same tables, same float arithmetic).
void decode_rope(Context& ctx, const Tensor& x, int64_t pos, int64_t rotary_dim, double theta, bool interleaved);

// Softmax attention of one query per sequence over the first `len` cached positions (GQA: query
// head h reads KV head h / (H / Hkv)):
//   o[n, h] = sum_{t<len} softmax_t(scale q[n, h] . k[n, t, hk]) v[n, t, hk]
// q [N, H, Dqk], o [N, H, Dv], k_cache [N, cap, Hkv, Dqk], v_cache [N, cap, Hkv, Dv].
void decode_attention(Context& ctx, const Tensor& o, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                      int64_t len, double scale);

// MLA attention in the latent space (DeepSeek-V2/V3's weight absorption). With W = kv_b_proj.weight
// [H (dn + dv), kvr], per head h: W_kb = rows [h (dn+dv), h (dn+dv) + dn), W_vb = the next dv rows.
//   q_lat = W_kb^T q_nope[n, h]                                          [kvr]
//   s_t   = scale (q_lat . c[n, t] + q_pe[n, h] . pe[n, t]),  p = softmax_{t<len}(s)
//   o[n, h] = W_vb (sum_t p_t c[n, t])                                   [dv]
// which equals attention over k = [W_kb c_t | pe_t], v = W_vb c_t without expanding them.
// q_nope [N, H, dn], q_pe [N, H, dr] (rotated), o [N, H, dv], c_cache [N, cap, kvr] (normed c_kv),
// pe_cache [N, cap, dr] (rotated shared key).
void mla_decode_attention(Context& ctx, const Tensor& o, const Tensor& q_nope, const Tensor& q_pe, const Tensor& w_kvb,
                          const Tensor& c_cache, const Tensor& pe_cache, int64_t len, double scale);

// dst[n, pos] = src[n] for every sequence n: one position of a cache [N, cap, ...] from [N, ...].
void cache_write(Context& ctx, const Tensor& cache, const Tensor& src, int64_t pos);

}  // namespace dt
