// The ops a decode step needs beyond kernels/ops.h: one new token per sequence against the state a
// sequence keeps (infer/decode_state.h). They dispatch on ctx.device like kernels/ops.h: on the CPU
// to the references in infer/cpu/decode_ref.h (f32 or f64, one dtype per call), on the GPU to
// infer/cuda/decode_cuda.h (bf16 activations and caches, fp32 arithmetic; the conv weight fp32).
//
// N is the number of sequences decoded together; every sequence is at the same position `pos`
// (the continuations of one prompt advance in step). Caches are [N, capacity, ...] and hold the
// first `pos` positions of each sequence before the step writes position pos.
//
// The position is a DecodePosition: the host value, and on the GPU optionally a device counter
// (int32 [1]) holding it. With the counter the GPU kernels read the position there when they run,
// not at launch: a step captured once in a CUDA graph replays at the next position after
// decode_advance (infer/decoder.h). Without it they take the host value.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "core/context.h"
#include "core/tensor.h"
#include "infer/gemv_input.h"

namespace dt {

struct DecodePosition {
  int64_t host = 0;  // the new token's position (= the tokens already in the context)
  Tensor counter;    // GPU only, optional: int32 [1] on the device holding the same position
};

// One step of the GDN causal depthwise conv1d + SiLU (kernels/ops.h gdn_conv_forward, K = conv_kernel):
//   y[n, c] = silu( sum_{i<K-1} w[c, 0, i] tail[n, i, c] + w[c, 0, K-1] x[n, c] )
// then the tail shifts by one, tail[n] = [tail[n, 1:], x[n]] (the last K-1 inputs).
// x, y: [N, C]; tail: [N, K-1, C] (nothing when K = 1); w: [C, 1, K].
void decode_conv_step(Context& ctx, const Tensor& y, const Tensor& tail, const Tensor& x, const Tensor& w);

// RoPE at position `pos` on x [N, H, D] in place: kernels/ops.h rope_forward's rotation of a token
// at time pos (same tables, same float arithmetic).
void decode_rope(Context& ctx, const Tensor& x, const DecodePosition& pos, int64_t rotary_dim, double theta,
                 bool interleaved);

// Softmax attention of one query per sequence over the cached positions 0..pos (len = pos + 1;
// GQA: query head h reads KV head h / (H / Hkv)):
//   o[n, h] = sum_{t<len} softmax_t(scale q[n, h] . k[n, t, hk]) v[n, t, hk]
// q [N, H, Dqk], o [N, H, Dv], k_cache [N, cap, Hkv, Dqk], v_cache [N, cap, Hkv, Dv].
// workspace: on the GPU an fp32 tensor of at least decode_attention_workspace(...) elements (the
// partial softmax sums of the splits of the positions); unused on the CPU.
void decode_attention(Context& ctx, const Tensor& o, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                      const DecodePosition& pos, double scale, const Tensor& workspace = {});
int64_t decode_attention_workspace(Device device, int64_t N, int64_t H, int64_t cap, int64_t Dv);

// MLA attention in the latent space (DeepSeek-V2/V3's weight absorption). With W = kv_b_proj.weight
// [H (dn + dv), kvr], per head h: W_kb = rows [h (dn+dv), h (dn+dv) + dn), W_vb = the next dv rows.
//   q_lat = W_kb^T q_nope[n, h]                                          [kvr]
//   s_t   = scale (q_lat . c[n, t] + q_pe[n, h] . pe[n, t]),  p = softmax_{t<len}(s)
//   o[n, h] = W_vb (sum_t p_t c[n, t])                                   [dv]
// which equals attention over k = [W_kb c_t | pe_t], v = W_vb c_t without expanding them.
// q_nope [N, H, dn], q_pe [N, H, dr] (rotated), o [N, H, dv], c_cache [N, cap, kvr] (normed c_kv),
// pe_cache [N, cap, dr] (rotated shared key); t runs over 0..pos. workspace: as decode_attention's,
// of mla_decode_workspace(...) elements.
void mla_decode_attention(Context& ctx, const Tensor& o, const Tensor& q_nope, const Tensor& q_pe, const Tensor& w_kvb,
                          const Tensor& c_cache, const Tensor& pe_cache, const DecodePosition& pos, double scale,
                          const Tensor& workspace = {});
int64_t mla_decode_workspace(Device device, int64_t N, int64_t H, int64_t cap, int64_t kvr);

// dst[n, pos] = src[n] for every sequence n: one position of a cache [N, cap, ...] from [N, ...].
void cache_write(Context& ctx, const Tensor& cache, const Tensor& src, const DecodePosition& pos);

// ---- The MLA fp8 latent cache (layers/decode_memory.h MlaCache::kFp8; the format: core/fp8.h) ----
// latent f8e4m3 [N, cap, kvr] and scales fp32 [N, cap, kvr / 128], kvr a multiple of 128. On the
// GPU the latents come in bf16 and one kernel quantises (cuda_fp8.h's satfinite conversion, the
// scales from the same bits as core/fp8.h: the same bytes as the CPU's); on the CPU core/fp8.h.

// cache_write of src [N, kvr] (the activations' dtype) quantised: each sequence's row at the position.
void latent_cache_write_fp8(Context& ctx, const Tensor& latent, const Tensor& scales, const Tensor& src,
                            const DecodePosition& pos);
// The prefill's capture: rows [T, kvr] quantised into positions 0 .. T-1 of sequence 0.
void latent_cache_fill_fp8(Context& ctx, const Tensor& latent, const Tensor& scales, const Tensor& rows);
// mla_decode_attention with c_cache read from the fp8 cache (c_fp8, c_scales): the same computation on
// the latents read back (e4m3 value times its block's scale, exact in fp32).
void mla_decode_attention_fp8(Context& ctx, const Tensor& o, const Tensor& q_nope, const Tensor& q_pe,
                              const Tensor& w_kvb, const Tensor& c_fp8, const Tensor& c_scales,
                              const Tensor& pe_cache, const DecodePosition& pos, double scale,
                              const Tensor& workspace = {});

// ---- Fused ops of a step (infer/cuda/decode_fused.cu on the GPU): fewer, larger kernels ----

// One weight of decode_gemv: y [N, rows] = w [rows, C] x (+ residual [N, rows], optional), or with
// conv_w the GDN conv step on it: y = decode_conv_step of w x with conv_w [rows, 1, K] and conv_tail
// [N, K - 1, rows] (undefined when K = 1; shifted by one), as decode_conv_step would give.
struct GemvOut {
  GemvOut(const Tensor& w_, const Tensor& y_, const Tensor& residual_ = {}) : w(w_), y(y_), residual(residual_) {}
  static GemvOut with_conv(const Tensor& w, const Tensor& y, const Tensor& conv_w, const Tensor& conv_tail) {
    GemvOut o(w, y);
    o.conv_w = conv_w, o.conv_tail = conv_tail;
    return o;
  }
  // The residual and conv_tail were written two or more kernels before this GEMV (or by this GEMV a
  // step before), as a decode step's are: on the GPU each warp reads them before it waits for the
  // kernel before (infer/cuda/decode_cuda.h, GemvSegment::settled).
  GemvOut& settled() {
    operands_settled = true;
    return *this;
  }
  Tensor w, y, residual, conv_w, conv_tail;
  bool operands_settled = false;
};
// Whether decode_gemv takes N sequences of C inputs here: on the CPU always; on the GPU for N <= 8
// sequences and C a multiple of 8 that fits its shared memory (the decoder runs the unfused ops,
// cuBLAS GEMMs, otherwise).
bool decode_gemv_supported(Device device, int64_t N, int64_t C);
// The input of decode_gemv: x [N, C] (contiguous), taken as `kind` says (infer/gemv_input.h).
struct GemvIn {
  GemvIn(const Tensor& plain) : x(plain) {}  // NOLINT(google-explicit-constructor): a tensor is a plain input
  static GemvIn swiglu(const Tensor& gate, const Tensor& up) { return {GemvInput::kSwiGLU, gate, up}; }
  static GemvIn gated(const Tensor& x, const Tensor& gate) { return {GemvInput::kGate, x, gate}; }
  static GemvIn rmsnorm(const Tensor& x, const Tensor& w, double eps, bool zero_centered) {
    GemvIn in{GemvInput::kRmsNorm, x, {}};
    in.norm_w = w, in.eps = eps, in.zero_centered = zero_centered;
    return in;
  }
  GemvInput kind = GemvInput::kPlain;
  Tensor x, x2, norm_w;  // x2: SwiGLU's up or the gate, x's shape; norm_w [C] (fp32 on the GPU)
  double eps = 0;
  bool zero_centered = false;

 private:
  GemvIn(GemvInput k, const Tensor& a, const Tensor& b) : kind(k), x(a), x2(b) {}
};
// Greedy decoding inside decode_gemv (ids defined; one weight, its y f32 [N, V]): also
// decode_argmax(ids, y, vocab, counter), the same ids and the counter (optional) one on. On the GPU
// it takes the GEMV's own sums, no kernel of its own, and needs ws: int32 of at least
// decode_gemv_argmax_workspace(kCUDA) elements, zero before its first use (each call leaves it zero).
// With embed (the embedding table [>= vocab, C]): also embedding_forward(embed_out [N, C], ids,
// embed), the next step's input, in the same kernel.
struct GemvArgmax {
  Tensor ids;
  int64_t vocab = 0;
  Tensor counter, ws;
  Tensor embed, embed_out;
};
int64_t decode_gemv_argmax_workspace(Device device);
// y_i = W_i x' (+ residual_i) for up to 4 weights sharing the input. GPU: bf16 x, weights and
// residuals; each y bf16 or fp32 (no residual then). l2: up to 4 tensors (contiguous, on the GPU)
// that the GPU asks L2 to fetch while it runs, the weights of a GEMV further on (infer/l2_plan.h);
// a hint only, ignored on the CPU.
void decode_gemv(Context& ctx, std::initializer_list<GemvOut> outs, const GemvIn& in,
                 const std::vector<Tensor>& l2 = {}, const GemvArgmax& argmax = {});

// The softmax attention layer's token before the attention, one op (one kernel on the GPU): from
// qg [N, H qw] (each head's hd query features, then with an output gate its hd gate features),
// k, v [N, Hkv hd]: the queries and keys RMS-normed per head (with qn_w, kn_w [hd]; none when
// undefined) and rotated at the position (the first rotary_dim features, RoPE as decode_rope):
// q [N, H, hd]; the keys and values written into the caches [N, cap, Hkv, hd] at the position; the
// gates into gate [N, H, hd] (defined iff qg holds them). The composition of head_split_forward,
// rmsnorm_forward, decode_rope and cache_write, with the same roundings on the GPU (on the CPU it
// runs them, normalising and rotating k in place).
struct AttnPrepArgs {
  Tensor q, gate, k_cache, v_cache;  // outputs
  Tensor qg, k, v, qn_w, kn_w;       // inputs
  int64_t n_heads = 0, n_kv_heads = 0, head_dim = 0, rotary_dim = 0;
  double eps = 0, theta = 0;
  bool zero_centered = false;
};
void decode_attn_prep(Context& ctx, const AttnPrepArgs& a, const DecodePosition& pos);

// The GDN token after the conv in one op (infer/cpu/decode_ref.h gdn_decode_step_ref says what it
// computes): qkv [N, 2 Hk dk + Hv dv] (the conv's output, contiguous), z [N, Hv dv],
// a, b [N, Hv] (stat dtype), A_log, dt_bias [Hv] and norm_w [dv] (fp32 on the GPU), state
// [N, Hv, dk, dv] (stat dtype, updated in place) -> y [N, Hv dv].
void gdn_decode_step(Context& ctx, const Tensor& y, const Tensor& state, const Tensor& qkv, const Tensor& z,
                     const Tensor& a, const Tensor& b, const Tensor& A_log, const Tensor& dt_bias,
                     const Tensor& norm_w, int64_t Hk, int64_t dk, double q_scale, double eps);

// out[n] = the first index of the largest of logits[n, 0 .. vocab) (NaN never wins; a row of NaN
// gives 0): greedy decoding where the logits are. out int32 [N] and logits f32 [N, V >= vocab] on
// the context's device. With a counter (GPU): also decode_advance's work, in the same kernel (the
// argmax as a step's last op).
void decode_argmax(Context& ctx, const Tensor& out, const Tensor& logits, int64_t vocab, const Tensor& counter = {});

// counter[0] += 1 on the device (GPU; nothing to do when the counter is undefined): a step's last op.
void decode_advance(Context& ctx, const Tensor& counter);

}  // namespace dt
