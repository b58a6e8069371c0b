// kernels/ops.h: the one dispatch API for every op (docs/architecture.md, "The op pattern").
//
// Each op takes a Context and Tensor views and dispatches on ctx.device and the
// tensors' dtype: on the CPU to the readable references in kernels/cpu/ (`*_ref`,
// templated on float and double), on the GPU to kernels/cuda/.
//
// Conventions for every op here:
//   - Shapes are checked before any work; a mismatch is a dt::Error naming the op,
//     the argument and both shapes.
//   - Outputs are WRITTEN (=), except parameter gradients (dw, dweight, dbias, ...),
//     which are ACCUMULATED (+=).
//   - Linear weights use the Hugging Face layout [out_features, in_features]:
//     y = x W^T.
//   - Activations are row-major [..., features]; "rows" means the product of the
//     leading dimensions.
#pragma once

#include <span>

#include "core/context.h"
#include "core/tensor.h"

namespace dt {

// ============================================================================
// Dense ops: embedding, RMSNorm, linear, SwiGLU, RoPE, attention (GQA, MLA),
// LM head + cross-entropy. Implemented in kernels/ops_dense.cpp.
// ============================================================================
// (dense section begins)
//
// On the GPU (ctx.device == kCUDA; kernels/cuda_ops.h; docs/architecture.md, "Precision")
// activations and matmul operands are bf16 and every sum is taken in fp32:
//   - linear: x, w, y, dy, dx bf16; dw fp32 (accumulated by the GEMM, beta = 1). y may also be
//     fp32 (the GDN gate projections feed fp32 gates).
//   - embedding: ids int32, w and y bf16; dw fp32. Deterministic backward (no float atomics).
//   - rmsnorm: x, y, dx, dy bf16; w, dw, rstd fp32.
//   - swiglu, sigmoid gate, residual add, rope, head concat/split: bf16.
//   - attention: q, k, v, o, dout, dq, dk, dv bf16; lse fp32 [B, H, T] (cuDNN SDPA).
//   - cross-entropy: logits and dlogits bf16; losses, lse fp32.
//   - cast: between f32 and bf16.
// The CPU takes f32 or f64 everywhere (one dtype per call).

// y[..., out] = x[..., in] w[out, in]^T
void linear_forward(Context& ctx, const Tensor& y, const Tensor& x, const Tensor& w);
// dx[..., in] = alpha dy w (written, or added to dx when accumulate_dx: a layer whose input feeds
// several projections sums their input gradients in the GEMM instead of a separate add; skipped
// when dx is undefined); dw[out, in] += alpha dy^T x (accumulated; skipped when dw is undefined).
void linear_backward(Context& ctx, const Tensor& dx, const Tensor& dw, const Tensor& dy,
                     const Tensor& x, const Tensor& w, double alpha = 1.0, bool accumulate_dx = false);

// Token embedding. ids: int32 [...] (n tokens), w [vocab, dim], y [..., dim].
// y[n] = w[ids[n]]; backward: dw[ids[n]] += dy[n]. Ids outside [0, vocab) are an error.
void embedding_forward(Context& ctx, const Tensor& y, const Tensor& ids, const Tensor& w);
void embedding_backward(Context& ctx, const Tensor& dw, const Tensor& dy, const Tensor& ids);

// RMSNorm over the last dim D of x [..., D]: rstd[rows] = 1/sqrt(mean(x^2) + eps) (saved),
// y = x * rstd * w, or * (1 + w) when zero_centered. w [D].
// Backward writes dx and accumulates dw (skipped when undefined). With `residual` defined (same
// numel and dtype as dx; it may alias dx or dy) it writes dx = residual + (the norm's dx), summed
// in fp32 on the GPU and rounded to bf16 once: a pre-norm block's skip path without a separate add.
void rmsnorm_forward(Context& ctx, const Tensor& y, const Tensor& rstd, const Tensor& x, const Tensor& w,
                     double eps, bool zero_centered);
void rmsnorm_backward(Context& ctx, const Tensor& dx, const Tensor& dw, const Tensor& dy, const Tensor& x,
                      const Tensor& w, const Tensor& rstd, bool zero_centered, const Tensor& residual = {});

// SwiGLU product, elementwise: h = silu(gate) * up. Backward writes dgate and dup.
void swiglu_forward(Context& ctx, const Tensor& h, const Tensor& gate, const Tensor& up);
void swiglu_backward(Context& ctx, const Tensor& dgate, const Tensor& dup, const Tensor& dh, const Tensor& gate,
                     const Tensor& up);

// Sigmoid output gate, elementwise: y = x * sigmoid(g). Backward writes dx and dg.
void sigmoid_gate_forward(Context& ctx, const Tensor& y, const Tensor& x, const Tensor& g);
void sigmoid_gate_backward(Context& ctx, const Tensor& dx, const Tensor& dg, const Tensor& dy, const Tensor& x,
                           const Tensor& g);

// y = a + b, elementwise (y may alias a or b). Its backward is the identity on both sides.
void residual_add(Context& ctx, const Tensor& y, const Tensor& a, const Tensor& b);

// RoPE on x [B, T, H, D], position of token (b, t) = t: the first rotary_dim dims of each head
// rotate with inv_freq_i = theta^(-2i/rotary_dim). interleaved = false: rotate-half pairs
// (i, i + rotary_dim/2) (Qwen3.5); true: adjacent pairs (2i, 2i+1), output de-interleaved, as HF's
// DeepSeek-V3 apply_rotary_pos_emb_interleave. y may alias x; dx may alias dy.
void rope_forward(Context& ctx, const Tensor& y, const Tensor& x, int64_t rotary_dim, double theta,
                  bool interleaved);
void rope_backward(Context& ctx, const Tensor& dx, const Tensor& dy, int64_t rotary_dim, double theta,
                   bool interleaved);

// Causal softmax attention, GQA: q [B, T, H, Dqk], k [B, T, Hkv, Dqk], v [B, T, Hkv, Dv],
// o [B, T, H, Dv], lse [B, H, T] (saved log-sum-exp of the scaled scores). Hkv divides H;
// query head h reads KV head h / (H / Hkv). Backward writes dq, dk, dv.
void attention_forward(Context& ctx, const Tensor& o, const Tensor& lse, const Tensor& q, const Tensor& k,
                       const Tensor& v, double scale);
void attention_backward(Context& ctx, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                        double scale);

// Per-head concat: x [..., H, Da + Db] = [a [..., H, Da] | b [..., Hb, Db]], Hb = H, or Hb = 1
// (b shared by all heads, MLA's k_rope). Its backward, head_concat_backward, writes da and db
// (db summed over heads when shared). head_split is the same pair the other way round:
// a, b = torch.split(x, [Da, Db], -1) with Hb = H.
void head_concat_forward(Context& ctx, const Tensor& x, const Tensor& a, const Tensor& b);
void head_concat_backward(Context& ctx, const Tensor& da, const Tensor& db, const Tensor& dx);
inline void head_split_forward(Context& ctx, const Tensor& a, const Tensor& b, const Tensor& x) {
  head_concat_backward(ctx, a, b, x);
}
inline void head_split_backward(Context& ctx, const Tensor& dx, const Tensor& da, const Tensor& db) {
  head_concat_forward(ctx, dx, da, db);
}

// Cross-entropy over logits [..., V] with int32 targets [...] (N tokens): losses [N] per token,
// lse [N] saved. Backward writes dlogits = grad_scale * (softmax(logits) - onehot(target))
// (grad_scale = loss_scale / N for the mean loss); dlogits may alias logits.
void cross_entropy_forward(Context& ctx, const Tensor& losses, const Tensor& lse, const Tensor& logits,
                           const Tensor& targets);
void cross_entropy_backward(Context& ctx, const Tensor& dlogits, const Tensor& logits, const Tensor& lse,
                            const Tensor& targets, double grad_scale);
// Both in one pass over the logits: losses and lse written, logits OVERWRITTEN by
// dlogits = grad_scale * (softmax(logits) - onehot(target)). The LM head's path on the GPU
// (the bf16 logits are read once and never exist in fp32).
void cross_entropy_fused(Context& ctx, const Tensor& losses, const Tensor& lse, const Tensor& logits,
                         const Tensor& targets, double grad_scale);

// Elementwise dtype conversion, y = x (f32 <-> bf16, f32 <-> f64; round to nearest even).
void cast(Context& ctx, const Tensor& y, const Tensor& x);

// (dense section ends)

// ============================================================================
// Optimizer: AdamW over many tensors at once, the global gradient norm.
// Implemented in kernels/ops_optim.cpp. On the GPU each call is a few launches
// for all the tensors together, not one per tensor.
// ============================================================================
// (optim section begins)

// One parameter tensor's view for a fused AdamW step: p, g, m, v of one dtype (f32 on the GPU,
// f32 or f64 on the CPU), contiguous, same numel. p_compute (optional, GPU only, bf16): the
// low-precision copy used by the matmuls, rewritten from the updated p.
struct AdamWTensor {
  Tensor p, g, m, v, p_compute;
  double decay_factor = 1.0;  // 1 - lr * weight_decay where decay applies, else 1
};
// PyTorch's AdamW for each tensor, the scalars in double (trainer/adamw.h):
//   g' = g * grad_scale rounded to g's dtype (scale_tensors' rounding: the same bits as
//        scale_tensors(g, grad_scale) first; gradient clipping folded in; g itself is not written)
//   m = b1 m + (1-b1) g';  v = b2 v + (1-b2) g'^2;
//   p = p * decay_factor - step_size * m / (sqrt(v) / bc2_sqrt + eps)
void adamw_update(Context& ctx, std::span<const AdamWTensor> tensors, double beta1, double beta2,
                  double step_size, double bc2_sqrt, double eps, double grad_scale = 1.0);
// Sum of x^2 over every element of every tensor, returned on the host. Deterministic: a fixed
// reduction order for a given set of shapes (no float atomics), accumulated in double on the
// CPU, fp32 partials then double on the GPU.
double sum_squares(Context& ctx, std::span<const Tensor> xs);
// x *= factor for every tensor.
void scale_tensors(Context& ctx, std::span<const Tensor> xs, double factor);

// (optim section ends)

// ============================================================================
// Gated DeltaNet core: causal depthwise conv + SiLU, l2norm, gates, the delta
// rule (recurrent and chunked), gated RMSNorm. Implemented in kernels/ops_gdn.cpp (the CPU) and
// kernels/cuda/gdn_ops.cpp (the GPU), past the shape checks both share (kernels/gdn_op_checks.h).
// ============================================================================
// (gdn section begins)
//
// Layout: q, k are [B, T, Hk, dk], v and the output o are [B, T, Hv, dv], the gates g, beta are
// [B, T, Hv] (contiguous), states are [B, Hv, dk, dv] (contiguous). The (b, t) rows of q, k, v
// and of their gradients may be strided: they are column slices of the conv output
// [B, T, 2*Hk*dk + Hv*dv] (gdn_head_view); inside a row, heads and features are packed.
// Value head h reads key head h / (Hv / Hk) (HF: repeat_interleave of q and k).
// All tensors of one call share one dtype (f32 or f64 on the CPU); the state, gates and
// decays are computed in that precision.
// On the GPU (ctx.device == kCUDA; kernels/gdn_cuda.h), for gdn_chunk_*, gdn_recurrent_forward,
// gdn_l2norm_*, gdn_gates_*, gdn_conv_* and gdn_norm_* (gdn_recurrent_backward is CPU only):
// q, k, v, o, d_o, dq, dk, dv (and l2norm's, the conv's and the gated norm's activations) are
// bf16; g, beta, a, b, A_log, dt_bias, the conv weight, the norm weight, their gradients, the
// l2norms' r and the states are fp32; chunk <= 64; head dims any multiple of 8 up to 128, dk != dv allowed (chunk 64
// with dk = dv in {64, 128} runs the tensor-core kernels, everything else the fp32 SIMT ones).

// The [B, T, heads, dim] view of columns [col, col + heads*dim) of a contiguous [B, T, C] buffer.
Tensor gdn_head_view(const Tensor& buf, int64_t col, int64_t heads, int64_t dim);

// Causal depthwise conv1d (kernel K, left zero padding, no bias) + SiLU, per channel c:
//   y[b,t,c] = silu( sum_{i<K} w[c,0,i] x[b, t-K+1+i, c] )
// x, y: [B, T, C] contiguous; w: [C, 1, K] (HF conv1d.weight).
void gdn_conv_forward(Context& ctx, const Tensor& y, const Tensor& x, const Tensor& w);
// dx written; dw accumulated.
void gdn_conv_backward(Context& ctx, const Tensor& dx, const Tensor& dw, const Tensor& dy, const Tensor& x,
                       const Tensor& w);

// Per-head L2 norm: y = scale * x / sqrt(sum_d x^2 + 1e-6). x, y: [B, T, H, d], rows may be
// strided. q takes scale = dk^-1/2, k takes 1.
// rnorm (optional): [B, T, H] contiguous, r = 1 / sqrt(sum_d x^2 + 1e-6) written per row and head,
// as the delta rule's GdnQkL2Norm keeps it.
void gdn_l2norm_forward(Context& ctx, const Tensor& y, const Tensor& x, double scale, const Tensor& rnorm = {});
// dx written (rows may be strided: it can be a slice of the conv output's gradient).
void gdn_l2norm_backward(Context& ctx, const Tensor& dx, const Tensor& dy, const Tensor& x, double scale);

// Gates: g = -exp(A_log) * softplus(a + dt_bias), beta = sigmoid(b).
// a, b, g, beta: [B, T, Hv] contiguous; A_log, dt_bias: [Hv].
void gdn_gates_forward(Context& ctx, const Tensor& g, const Tensor& beta, const Tensor& a, const Tensor& b,
                       const Tensor& A_log, const Tensor& dt_bias);
// da, db written; dA_log, ddt_bias accumulated.
void gdn_gates_backward(Context& ctx, const Tensor& da, const Tensor& db, const Tensor& dA_log,
                        const Tensor& ddt_bias, const Tensor& dg, const Tensor& dbeta, const Tensor& a,
                        const Tensor& b, const Tensor& A_log, const Tensor& dt_bias);

// The gated delta rule, per (batch, value head), S: dk x dv:
//   S_t = exp(g_t) S_{t-1} + beta_t k_t (v_t - exp(g_t) S_{t-1}^T k_t)^T,   o_t = S_t^T q_t
// q must already be l2-normalised and scaled by dk^-1/2, k l2-normalised, unless the l2norms are
// taken inside (GdnQkL2Norm below).
// S0 (initial state) may be undefined: zero. S_out (final state) may be undefined: not written.
// The recurrent form runs token by token (the reference); the chunked form runs the WY form in
// chunks of `chunk` tokens (any T; the last chunk may be partial). They agree to rounding.
//
// The l2norms of q and k taken inside the delta rule (the layer's one path on both devices; on the
// GPU the chunked kernels save the four passes of gdn_l2norm_forward / _backward, the recurrent
// forward runs the two l2norms first). Forward: q and k
// are the l2norms' inputs x (rows may be strided: slices of the conv output); q_hat, k_hat
// ([B, T, Hk, dk], contiguous) receive y = scale x r, q_rnorm, k_rnorm ([B, T, Hk], contiguous; fp32
// on the GPU) r = 1 / sqrt(sum x^2 + 1e-6). Backward: q and k are those y (q_hat, k_hat unused),
// dq, dk come out as the gradients with respect to x, from y and r: x^ = y (1 / scale).
struct GdnQkL2Norm {
  Tensor q_hat, k_hat, q_rnorm, k_rnorm;
  double q_scale = 1, k_scale = 1;
};
void gdn_recurrent_forward(Context& ctx, const Tensor& o, const Tensor& S_out, const Tensor& q, const Tensor& k,
                           const Tensor& v, const Tensor& g, const Tensor& beta, const Tensor& S0,
                           const GdnQkL2Norm& l2 = {});
// `saved` (GPU only; ignored elsewhere): a device buffer of gdn_chunk_saved_elems(...) kU16 elements
// (when that is > 0) in which the forward leaves what the backward needs; the backward given the
// same buffer, untouched, with the same inputs, skips recomputing it (memory for time: at
// 16 x 1024 tokens, 12 heads of 64, about 200 MB per layer).
void gdn_chunk_forward(Context& ctx, const Tensor& o, const Tensor& S_out, const Tensor& q, const Tensor& k,
                       const Tensor& v, const Tensor& g, const Tensor& beta, const Tensor& S0, int chunk,
                       const Tensor& saved = {}, const GdnQkL2Norm& l2 = {});
int64_t gdn_chunk_saved_elems(Device device, int64_t B, int64_t T, int64_t Hk, int64_t Hv, int64_t dk,
                              int64_t dv, int chunk);
// Backward: dq, dk, dv, dg, dbeta WRITTEN (dq, dk summed over the value heads reading each key
// head); dS0 written when defined. dS_out (gradient of the final state) may be undefined: zero.
void gdn_recurrent_backward(Context& ctx, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dg,
                            const Tensor& dbeta, const Tensor& dS0, const Tensor& d_o, const Tensor& dS_out,
                            const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                            const Tensor& beta, const Tensor& S0, const GdnQkL2Norm& l2 = {});
void gdn_chunk_backward(Context& ctx, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dg,
                        const Tensor& dbeta, const Tensor& dS0, const Tensor& d_o, const Tensor& dS_out,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                        const Tensor& S0, int chunk, const Tensor& saved = {}, const GdnQkL2Norm& l2 = {});

// Gated RMSNorm per value head (norm, then gate): y = o / sqrt(mean_d(o^2) + eps) * w * silu(z).
// o, z, y: [B, T, Hv, dv] contiguous; w: [dv].
void gdn_norm_forward(Context& ctx, const Tensor& y, const Tensor& o, const Tensor& z, const Tensor& w,
                      double eps);
// d_o, dz written; dw accumulated.
void gdn_norm_backward(Context& ctx, const Tensor& d_o, const Tensor& dz, const Tensor& dw, const Tensor& dy,
                       const Tensor& o, const Tensor& z, const Tensor& w, double eps);

// (gdn section ends)

}  // namespace dt
