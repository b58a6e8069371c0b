// The Tensor-level Gated DeltaNet ops of kernels/cuda_ops.h: the shapes checked as on the CPU
// (kernels/gdn_op_checks.h), then devices and dtypes, then the launchers' parameters
// (kernels/gdn_cuda.h), launched on the context's stream with scratch from the context's pool.
//
// Dtypes (kernels/ops.h, gdn section): q, k, v, o, d_o and their gradients, the conv's and the
// gated norm's activations bf16; the gates, their inputs and gradients, the conv and norm weights
// and their gradients, the l2norms' r and the states fp32.
#include <algorithm>
#include <cstdint>

#include "kernels/cuda_context.h"
#include "kernels/cuda_ops.h"
#include "kernels/gdn_cuda.h"
#include "kernels/gdn_op_checks.h"

namespace dt::cuda {

namespace {

using namespace gdn_checks;

void check_tensor(const Tensor& t, DType want, const Shape& s, const char* op, const char* name) {
  DT_CHECK(t.defined(), "{}: {} is undefined", op, name);
  DT_CHECK(t.device == Device::kCUDA, "{}: {} {} is on the CPU; the CUDA path needs every tensor on the GPU", op,
           name, t.str());
  DT_CHECK(t.dtype == want, "{}: {} is {}, the CUDA path takes {} here (bf16 activations, fp32 gates and states)",
           op, name, dtype_name(t.dtype), dtype_name(want));
  DT_CHECK(t.shape == s, "{}: {} has shape {}, expected {}", op, name, t.shape.str(), s.str());
}

// Row stride of a bf16 [B, T, H, d] GPU tensor with packed heads (rows may be strided).
int64_t bf16_rows(const Tensor& t, const Shape& s, const char* op, const char* name) {
  check_tensor(t, DType::kBF16, s, op, name);
  return row_stride(t, s, op, name);
}

const float* f32_or_null(const Tensor& t, const Shape& s, const char* op, const char* name) {
  if (!t.defined()) return nullptr;
  check_tensor(t, DType::kF32, s, op, name);
  DT_CHECK(t.is_contiguous(), "{}: {} {} must be contiguous", op, name, t.str());
  return static_cast<const float*>(t.data);
}

float* f32(const Tensor& t, const Shape& s, const char* op, const char* name) {
  DT_CHECK(t.defined(), "{}: {} is undefined", op, name);
  return const_cast<float*>(f32_or_null(t, s, op, name));
}

const uint16_t* bf16_ptr(const Tensor& t) { return static_cast<const uint16_t*>(t.data); }
uint16_t* bf16_mut(const Tensor& t) { return static_cast<uint16_t*>(t.data); }

// A contiguous bf16 tensor of shape s.
uint16_t* bf16_contiguous(const Tensor& t, const Shape& s, const char* op, const char* name) {
  check_tensor(t, DType::kBF16, s, op, name);
  DT_CHECK(t.is_contiguous(), "{}: {} {} must be contiguous", op, name, t.str());
  return bf16_mut(t);
}

GdnCudaDims cuda_dims(const GdnDims& d, int chunk) {
  GdnCudaDims c;
  c.B = d.B, c.T = d.T, c.Hk = d.Hk, c.Hv = d.Hv, c.dk = d.dk, c.dv = d.dv, c.chunk = chunk;
  return c;
}

// The inputs the forward and the backward parameters share (checks included): dims, q, k, v and
// their row strides, g, beta, S0, and the context's scratch pool.
template <class Params>
GdnDims delta_inputs(Params& p, const Context& ctx, const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                     const Tensor& g, const Tensor& beta, const Tensor& S0, int chunk) {
  const GdnDims d = delta_dims(q, v, op);
  p.dims = cuda_dims(d, chunk);
  p.ld_q = bf16_rows(q, qk_shape(d), op, "q");
  p.ld_k = bf16_rows(k, qk_shape(d), op, "k");
  p.ld_v = bf16_rows(v, v_shape(d), op, "v");
  p.q = bf16_ptr(q), p.k = bf16_ptr(k), p.v = bf16_ptr(v);
  p.g = f32(g, gate_shape(d), op, "g");
  p.beta = f32(beta, gate_shape(d), op, "beta");
  p.S0 = f32_or_null(S0, state_shape(d), op, "S0");
  p.pool = cuda_scratch_pool(ctx);
  return d;
}

// The forward's parameters (checks included); the chunked and the recurrent forms share them.
GdnCudaForwardParams forward_params(const Context& ctx, const char* op, const Tensor& o, const Tensor& S_out,
                                    const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                    const Tensor& beta, const Tensor& S0, int chunk) {
  GdnCudaForwardParams p;
  const GdnDims d = delta_inputs(p, ctx, op, q, k, v, g, beta, S0, chunk);
  p.ld_o = bf16_rows(o, v_shape(d), op, "o"), p.o = bf16_mut(o);
  p.S_out = const_cast<float*>(f32_or_null(S_out, state_shape(d), op, "S_out"));
  return p;
}

// The saved buffer's pointer, checked against the size these dims need (null when undefined).
void* saved_ptr(const Tensor& saved, const GdnCudaDims& d, const char* op) {
  if (!saved.defined()) return nullptr;
  const int64_t bytes = gdn_chunk_saved_bytes(d);
  if (bytes == 0) return nullptr;
  DT_CHECK(saved.device == Device::kCUDA && saved.is_contiguous() &&
               static_cast<int64_t>(saved.numel() * dtype_size(saved.dtype)) >= bytes,
           "{}: the saved buffer must be a contiguous GPU tensor of at least {} bytes, got {} {} on {}", op, bytes,
           dtype_name(saved.dtype), saved.shape.str(), saved.device == Device::kCUDA ? "the GPU" : "the CPU");
  return saved.data;
}

void l2norm(Context& ctx, const Tensor& out, const Tensor& dy, const Tensor& x, double scale, bool backward,
            const Tensor& rnorm) {
  const char* op = backward ? "gdn_l2norm_backward" : "gdn_l2norm_forward";
  check_ndim(x, 4, op, "x", "[B, T, H, d]");
  GdnCudaL2NormParams p;
  p.rows = x.size(0) * x.size(1), p.H = x.size(2), p.d = x.size(3), p.scale = static_cast<float>(scale);
  if (rnorm.defined()) p.rnorm = f32(rnorm, Shape{x.size(0), x.size(1), x.size(2)}, op, "rnorm");
  p.ld_x = bf16_rows(x, x.shape, op, "x"), p.x = bf16_ptr(x);
  p.ld_y = bf16_rows(out, x.shape, op, backward ? "dx" : "y"), p.y = bf16_mut(out);
  if (backward) p.ld_dy = bf16_rows(dy, x.shape, op, "dy"), p.dy = bf16_ptr(dy);
  if (backward) gdn_l2norm_backward_cuda(p, ctx.stream);
  else gdn_l2norm_forward_cuda(p, ctx.stream);
}

// The conv's parameters: x, y, dy, dx bf16 [B, T, C] contiguous; w, dw fp32.
GdnCudaConvParams conv_params(const Context& ctx, const char* op, const Tensor& x, const Tensor& w) {
  const ConvDims c = conv_dims(x, w, op);
  check_tensor(x, DType::kBF16, x.shape, op, "x");
  DT_CHECK(x.is_contiguous(), "{}: x {} must be contiguous", op, x.str());
  check_tensor(w, DType::kF32, w.shape, op, "w");
  GdnCudaConvParams p;
  p.B = c.B, p.T = c.T, p.C = c.C, p.K = c.K, p.x = bf16_ptr(x), p.w = static_cast<const float*>(w.data);
  p.pool = cuda_scratch_pool(ctx);
  return p;
}

// The gated RMSNorm's parameters: o, z (and y, dy, d_o, dz) bf16 [B, T, Hv, dv] contiguous; w, dw fp32 [dv].
GdnCudaNormParams norm_params(const Context& ctx, const char* op, const Tensor& o, const Tensor& z, const Tensor& w,
                              double eps) {
  check_ndim(o, 4, op, "o", "[B, T, Hv, dv]");
  GdnCudaNormParams p;
  p.o = bf16_contiguous(o, o.shape, op, "o");
  p.z = bf16_contiguous(z, o.shape, op, "z");
  p.w = f32(w, Shape{o.size(3)}, op, "w");
  p.rows = o.size(0) * o.size(1), p.H = o.size(2), p.d = o.size(3), p.eps = static_cast<float>(eps);
  p.pool = cuda_scratch_pool(ctx);
  return p;
}

// The gates' parameters: a, b fp32 [B, T, Hv] contiguous; A_log, dt_bias fp32 [Hv].
GdnCudaGatesParams gates_params(const Context& ctx, const char* op, const Tensor& a, const Tensor& b,
                                const Tensor& A_log, const Tensor& dt_bias) {
  check_ndim(a, 3, op, "a", "[B, T, Hv]");
  GdnCudaGatesParams p;
  p.rows = a.size(0) * a.size(1), p.H = a.size(2);
  const Shape hs{p.H};
  p.a = f32(a, a.shape, op, "a"), p.b = f32(b, a.shape, op, "b");
  p.A_log = f32(A_log, hs, op, "A_log"), p.dt_bias = f32(dt_bias, hs, op, "dt_bias");
  p.pool = cuda_scratch_pool(ctx);
  return p;
}

}  // namespace

void gdn_conv_forward(Context& ctx, const Tensor& y, const Tensor& x, const Tensor& w) {
  const char* op = "gdn_conv_forward";
  GdnCudaConvParams p = conv_params(ctx, op, x, w);
  p.y = bf16_contiguous(y, x.shape, op, "y");
  gdn_conv_forward_cuda(p, ctx.stream);
}

void gdn_conv_backward(Context& ctx, const Tensor& dx, const Tensor& dw, const Tensor& dy, const Tensor& x,
                       const Tensor& w) {
  const char* op = "gdn_conv_backward";
  GdnCudaConvParams p = conv_params(ctx, op, x, w);
  p.dy = bf16_contiguous(dy, x.shape, op, "dy");
  p.dx = bf16_contiguous(dx, x.shape, op, "dx");
  check_tensor(dw, DType::kF32, w.shape, op, "dw");
  DT_CHECK(dw.is_contiguous(), "{}: dw {} must be contiguous", op, dw.str());
  p.dw = static_cast<float*>(dw.data);
  gdn_conv_backward_cuda(p, ctx.stream);
}

void gdn_l2norm_forward(Context& ctx, const Tensor& y, const Tensor& x, double scale, const Tensor& rnorm) {
  l2norm(ctx, y, Tensor(), x, scale, false, rnorm);
}

void gdn_l2norm_backward(Context& ctx, const Tensor& dx, const Tensor& dy, const Tensor& x, double scale) {
  l2norm(ctx, dx, dy, x, scale, true, Tensor());
}

void gdn_gates_forward(Context& ctx, const Tensor& g, const Tensor& beta, const Tensor& a, const Tensor& b,
                       const Tensor& A_log, const Tensor& dt_bias) {
  const char* op = "gdn_gates_forward";
  GdnCudaGatesParams p = gates_params(ctx, op, a, b, A_log, dt_bias);
  p.g = f32(g, a.shape, op, "g"), p.beta = f32(beta, a.shape, op, "beta");
  gdn_gates_forward_cuda(p, ctx.stream);
}

void gdn_gates_backward(Context& ctx, const Tensor& da, const Tensor& db, const Tensor& dA_log,
                        const Tensor& ddt_bias, const Tensor& dg, const Tensor& dbeta, const Tensor& a,
                        const Tensor& b, const Tensor& A_log, const Tensor& dt_bias) {
  const char* op = "gdn_gates_backward";
  GdnCudaGatesParams p = gates_params(ctx, op, a, b, A_log, dt_bias);
  const Shape hs{p.H};
  p.dg = f32(dg, a.shape, op, "dg"), p.dbeta = f32(dbeta, a.shape, op, "dbeta");
  p.da = f32(da, a.shape, op, "da"), p.db = f32(db, a.shape, op, "db");
  p.dA_log = f32(dA_log, hs, op, "dA_log"), p.ddt_bias = f32(ddt_bias, hs, op, "ddt_bias");
  gdn_gates_backward_cuda(p, ctx.stream);
}

// The recurrent kernel reads normalised q and k: with GdnQkL2Norm the two l2norms run first, into
// q_hat and k_hat.
void gdn_recurrent_forward(Context& ctx, const Tensor& o, const Tensor& S_out, const Tensor& q, const Tensor& k,
                           const Tensor& v, const Tensor& g, const Tensor& beta, const Tensor& S0,
                           const GdnQkL2Norm& l2) {
  const char* op = "gdn_recurrent_forward";
  if (!qk_l2norm_forward(l2, op))
    return gdn_recurrent_forward_cuda(forward_params(ctx, op, o, S_out, q, k, v, g, beta, S0, 64), ctx.stream);
  const GdnDims d = delta_dims(q, v, op);
  bf16_contiguous(l2.q_hat, qk_shape(d), op, "q_hat");
  bf16_contiguous(l2.k_hat, qk_shape(d), op, "k_hat");
  l2norm(ctx, l2.q_hat, Tensor(), q, l2.q_scale, false, l2.q_rnorm);
  l2norm(ctx, l2.k_hat, Tensor(), k, l2.k_scale, false, l2.k_rnorm);
  gdn_recurrent_forward_cuda(forward_params(ctx, op, o, S_out, l2.q_hat, l2.k_hat, v, g, beta, S0, 64), ctx.stream);
}

void gdn_chunk_forward(Context& ctx, const Tensor& o, const Tensor& S_out, const Tensor& q, const Tensor& k,
                       const Tensor& v, const Tensor& g, const Tensor& beta, const Tensor& S0, int chunk,
                       const Tensor& saved, const GdnQkL2Norm& l2) {
  const char* op = "gdn_chunk_forward";
  check_chunk(chunk, op);
  GdnCudaForwardParams p = forward_params(ctx, op, o, S_out, q, k, v, g, beta, S0, chunk);
  p.saved = saved_ptr(saved, p.dims, op);
  if (qk_l2norm_forward(l2, op)) {
    const GdnCudaDims& d = p.dims;
    const Shape ys{d.B, d.T, d.Hk, d.dk}, rs{d.B, d.T, d.Hk};
    p.q_hat = bf16_contiguous(l2.q_hat, ys, op, "q_hat"), p.k_hat = bf16_contiguous(l2.k_hat, ys, op, "k_hat");
    p.ld_hat = d.Hk * d.dk;
    p.q_rnorm = f32(l2.q_rnorm, rs, op, "q_rnorm"), p.k_rnorm = f32(l2.k_rnorm, rs, op, "k_rnorm");
    p.q_scale = static_cast<float>(l2.q_scale), p.k_scale = static_cast<float>(l2.k_scale);
  }
  gdn_chunk_forward_cuda(p, ctx.stream);
}

void gdn_chunk_backward(Context& ctx, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dg,
                        const Tensor& dbeta, const Tensor& dS0, const Tensor& d_o, const Tensor& dS_out,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                        const Tensor& S0, int chunk, const Tensor& saved, const GdnQkL2Norm& l2) {
  const char* op = "gdn_chunk_backward";
  check_chunk(chunk, op);
  GdnCudaBackwardParams p;
  const GdnDims d = delta_inputs(p, ctx, op, q, k, v, g, beta, S0, chunk);
  p.ld_do = bf16_rows(d_o, v_shape(d), op, "d_o");
  p.ld_dq = bf16_rows(dq, qk_shape(d), op, "dq");
  p.ld_dk = bf16_rows(dk, qk_shape(d), op, "dk");
  p.ld_dv = bf16_rows(dv, v_shape(d), op, "dv");
  p.d_o = bf16_ptr(d_o);
  p.dq = bf16_mut(dq), p.dk = bf16_mut(dk), p.dv = bf16_mut(dv);
  p.dS_out = f32_or_null(dS_out, state_shape(d), op, "dS_out");
  p.dg = f32(dg, gate_shape(d), op, "dg");
  p.dbeta = f32(dbeta, gate_shape(d), op, "dbeta");
  p.dS0 = const_cast<float*>(f32_or_null(dS0, state_shape(d), op, "dS0"));
  p.saved = saved_ptr(saved, p.dims, op);
  if (qk_l2norm_backward(l2, op)) {
    p.q_rnorm = f32(l2.q_rnorm, rnorm_shape(d), op, "q_rnorm");
    p.k_rnorm = f32(l2.k_rnorm, rnorm_shape(d), op, "k_rnorm");
    p.q_scale = static_cast<float>(l2.q_scale), p.k_scale = static_cast<float>(l2.k_scale);
  }
  gdn_chunk_backward_cuda(p, ctx.stream);
}

int64_t gdn_chunk_saved_elems(int64_t B, int64_t T, int64_t Hk, int64_t Hv, int64_t dk, int64_t dv, int chunk) {
  GdnCudaDims d;
  d.B = B, d.T = T, d.Hk = Hk, d.Hv = Hv, d.dk = dk, d.dv = dv, d.chunk = chunk;
  return (gdn_chunk_saved_bytes(d) + 1) / 2;
}

void gdn_norm_forward(Context& ctx, const Tensor& y, const Tensor& o, const Tensor& z, const Tensor& w,
                      double eps) {
  const char* op = "gdn_norm_forward";
  GdnCudaNormParams p = norm_params(ctx, op, o, z, w, eps);
  p.y = bf16_contiguous(y, o.shape, op, "y");
  gdn_norm_forward_cuda(p, ctx.stream);
}

void gdn_norm_backward(Context& ctx, const Tensor& d_o, const Tensor& dz, const Tensor& dw, const Tensor& dy,
                       const Tensor& o, const Tensor& z, const Tensor& w, double eps) {
  const char* op = "gdn_norm_backward";
  GdnCudaNormParams p = norm_params(ctx, op, o, z, w, eps);
  p.dy = bf16_contiguous(dy, o.shape, op, "dy");
  p.d_o = bf16_contiguous(d_o, o.shape, op, "d_o");
  p.dz = bf16_contiguous(dz, o.shape, op, "dz");
  p.dw = f32(dw, w.shape, op, "dw");
  gdn_norm_backward_cuda(p, ctx.stream);
}

}  // namespace dt::cuda
