// The CUDA side of kernels/ops.h: one function per op, with the op's own signature, in
// namespace dt::cuda. kernels/ops_*.cpp check devices and dispatch here when
// ctx.device == kCUDA; these functions check shapes (kernels/op_checks.h, the same checks as the
// CPU path) and dtypes (benchmarks and tests call them directly) and launch the kernels in
// kernels/cuda/ on ctx.stream. RMSNorm has no entry here: kernels/ops_dense.cpp checks it and
// calls its launchers (kernels/cuda/dense_elem.h) itself.
// Defined only when the CUDA backend is built (DELTATRON_HAVE_CUDA).
#pragma once

#include <optional>

#include "kernels/cuda/dense_mm_launch.h"
#include "kernels/ops.h"

namespace dt::cuda {

void linear_forward(Context& ctx, const Tensor& y, const Tensor& x, const Tensor& w);
void linear_backward(Context& ctx, const Tensor& dx, const Tensor& dw, const Tensor& dy,
                     const Tensor& x, const Tensor& w, double alpha, bool accumulate_dx);
void embedding_forward(Context& ctx, const Tensor& y, const Tensor& ids, const Tensor& w);
void embedding_backward(Context& ctx, const Tensor& dw, const Tensor& dy, const Tensor& ids);
void swiglu_forward(Context& ctx, const Tensor& h, const Tensor& gate, const Tensor& up);
void swiglu_backward(Context& ctx, const Tensor& dgate, const Tensor& dup, const Tensor& dh, const Tensor& gate,
                     const Tensor& up);
void sigmoid_gate_forward(Context& ctx, const Tensor& y, const Tensor& x, const Tensor& g);
void sigmoid_gate_backward(Context& ctx, const Tensor& dx, const Tensor& dg, const Tensor& dy, const Tensor& x,
                           const Tensor& g);
void residual_add(Context& ctx, const Tensor& y, const Tensor& a, const Tensor& b);
void rope_forward(Context& ctx, const Tensor& y, const Tensor& x, int64_t rotary_dim, double theta,
                  bool interleaved);
void rope_backward(Context& ctx, const Tensor& dx, const Tensor& dy, int64_t rotary_dim, double theta,
                   bool interleaved);
void attention_forward(Context& ctx, const Tensor& o, const Tensor& lse, const Tensor& q, const Tensor& k,
                       const Tensor& v, double scale);
void attention_backward(Context& ctx, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                        double scale);
void head_concat_forward(Context& ctx, const Tensor& x, const Tensor& a, const Tensor& b);
void head_concat_backward(Context& ctx, const Tensor& da, const Tensor& db, const Tensor& dx);
void cross_entropy_forward(Context& ctx, const Tensor& losses, const Tensor& lse, const Tensor& logits,
                           const Tensor& targets);
void cross_entropy_backward(Context& ctx, const Tensor& dlogits, const Tensor& logits, const Tensor& lse,
                            const Tensor& targets, double grad_scale);
void cross_entropy_fused(Context& ctx, const Tensor& losses, const Tensor& lse, const Tensor& logits,
                         const Tensor& targets, double grad_scale);
void cast(Context& ctx, const Tensor& y, const Tensor& x);
void adamw_update(Context& ctx, std::span<const AdamWTensor> tensors, double beta1, double beta2,
                  double step_size, double bc2_sqrt, double eps, double grad_scale);
double sum_squares(Context& ctx, std::span<const Tensor> xs);
void scale_tensors(Context& ctx, std::span<const Tensor> xs, double factor);

// Test-only override (GPU tests, bench_dense_ops): the cross-entropy variant that this context's forward
// and fused prefer over the plan's default (kernels/cuda/dense_mm_launch.h); std::nullopt restores the
// default. It holds for this context only; the plan's fallbacks still apply.
void set_cross_entropy_variant_for_testing(Context& ctx, std::optional<CrossEntropyVariant> variant);

// Gated DeltaNet (kernels/cuda/gdn_ops.cpp; gdn_recurrent_backward has no GPU form).
void gdn_conv_forward(Context& ctx, const Tensor& y, const Tensor& x, const Tensor& w);
void gdn_conv_backward(Context& ctx, const Tensor& dx, const Tensor& dw, const Tensor& dy, const Tensor& x,
                       const Tensor& w);
void gdn_l2norm_forward(Context& ctx, const Tensor& y, const Tensor& x, double scale, const Tensor& rnorm);
void gdn_l2norm_backward(Context& ctx, const Tensor& dx, const Tensor& dy, const Tensor& x, double scale);
void gdn_gates_forward(Context& ctx, const Tensor& g, const Tensor& beta, const Tensor& a, const Tensor& b,
                       const Tensor& A_log, const Tensor& dt_bias);
void gdn_gates_backward(Context& ctx, const Tensor& da, const Tensor& db, const Tensor& dA_log,
                        const Tensor& ddt_bias, const Tensor& dg, const Tensor& dbeta, const Tensor& a,
                        const Tensor& b, const Tensor& A_log, const Tensor& dt_bias);
void gdn_recurrent_forward(Context& ctx, const Tensor& o, const Tensor& S_out, const Tensor& q, const Tensor& k,
                           const Tensor& v, const Tensor& g, const Tensor& beta, const Tensor& S0,
                           const GdnQkL2Norm& l2);
void gdn_chunk_forward(Context& ctx, const Tensor& o, const Tensor& S_out, const Tensor& q, const Tensor& k,
                       const Tensor& v, const Tensor& g, const Tensor& beta, const Tensor& S0, int chunk,
                       const Tensor& saved, const GdnQkL2Norm& l2);
void gdn_chunk_backward(Context& ctx, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dg,
                        const Tensor& dbeta, const Tensor& dS0, const Tensor& d_o, const Tensor& dS_out,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                        const Tensor& S0, int chunk, const Tensor& saved, const GdnQkL2Norm& l2);
int64_t gdn_chunk_saved_elems(int64_t B, int64_t T, int64_t Hk, int64_t Hv, int64_t dk, int64_t dv, int chunk);
void gdn_norm_forward(Context& ctx, const Tensor& y, const Tensor& o, const Tensor& z, const Tensor& w,
                      double eps);
void gdn_norm_backward(Context& ctx, const Tensor& d_o, const Tensor& dz, const Tensor& dw, const Tensor& dy,
                       const Tensor& o, const Tensor& z, const Tensor& w, double eps);

}  // namespace dt::cuda
