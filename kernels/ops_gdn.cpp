// CPU dispatch of the Gated DeltaNet ops (kernels/ops.h, gdn section) to the references in
// kernels/cpu/gdn_*.h. Every shape is checked here, before any work.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <type_traits>
#include <utility>

#include "kernels/cpu/gdn_chunk.h"
#include "kernels/cpu/gdn_conv.h"
#include "kernels/cpu/gdn_delta_rule.h"
#include "kernels/cpu/gdn_gates.h"
#include "kernels/cpu/gdn_l2norm.h"
#include "kernels/cpu/gdn_norm.h"
#include "kernels/ops.h"
#include "kernels/ops_dispatch.h"
#ifdef DELTATRON_HAVE_CUDA
#include "kernels/gdn_cuda.h"
#endif

namespace dt {

namespace {

using Named = std::pair<const Tensor*, const char*>;  // a tensor and its name in messages
using ops_detail::dispatch_float;
using ops_detail::require_cpu;

void check_dtype(const Tensor& t, DType want, const char* op, const char* name) {
  DT_CHECK(t.dtype == want, "{}: {} is {}, expected {} like the other arguments", op, name, dtype_name(t.dtype),
           dtype_name(want));
  DT_CHECK(t.device == Device::kCPU, "{}: {} lives on the GPU, this is the CPU path", op, name);
}

void check_contiguous(const Tensor& t, DType want, const Shape& s, const char* op, const char* name) {
  check_dtype(t, want, op, name);
  DT_CHECK(t.shape == s, "{}: {} has shape {}, expected {}", op, name, t.shape.str(), s.str());
  DT_CHECK(t.is_contiguous(), "{}: {} {} must be contiguous", op, name, t.str());
}

// A [B, T, H, d] tensor whose (b, t) rows sit ld elements apart and whose heads are packed.
template <class T>
GdnRows<T> rows_of(const Tensor& t, DType want, const Shape& s, const char* op, const char* name) {
  check_dtype(t, want, op, name);
  DT_CHECK(t.shape == s, "{}: {} has shape {}, expected {}", op, name, t.shape.str(), s.str());
  const int64_t Tn = s[1], H = s[2], d = s[3];
  DT_CHECK((d <= 1 || t.stride[3] == 1) && (H <= 1 || t.stride[2] == d),
           "{}: {} {} must have packed heads (strides [.., .., {}, 1])", op, name, t.str(), d);
  const int64_t ld = Tn > 1 ? t.stride[1] : t.stride[0];
  DT_CHECK(s[0] <= 1 || Tn <= 1 || t.stride[0] == Tn * t.stride[1],
           "{}: {} {}: rows (b, t) must be evenly strided (stride[0] == T * stride[1])", op, name, t.str());
  DT_CHECK(s[0] * Tn <= 1 || ld >= H * d, "{}: {} {}: row stride {} is smaller than a row ({})", op, name,
           t.str(), ld, H * d);
  using U = std::remove_const_t<T>;
  return GdnRows<T>{static_cast<U*>(t.data), std::max<int64_t>(ld, H * d)};
}

template <class T>
T* ptr_or_null(const Tensor& t) {
  return t.defined() ? t.ptr<T>() : nullptr;
}

// Shapes of one delta-rule call, read from q and v.
GdnDims delta_dims(const Tensor& q, const Tensor& v, const char* op) {
  DT_CHECK(q.ndim() == 4, "{}: q must be [B, T, Hk, dk], got {}", op, q.shape.str());
  DT_CHECK(v.ndim() == 4, "{}: v must be [B, T, Hv, dv], got {}", op, v.shape.str());
  GdnDims d{q.size(0), q.size(1), q.size(2), v.size(2), q.size(3), v.size(3)};
  DT_CHECK(v.size(0) == d.B && v.size(1) == d.T, "{}: v {} does not match q {} in [B, T]", op, v.shape.str(),
           q.shape.str());
  DT_CHECK(d.Hk > 0 && d.Hv % d.Hk == 0, "{}: value heads ({}) must be a multiple of key heads ({})", op, d.Hv,
           d.Hk);
  return d;
}

Shape qk_shape(const GdnDims& d) { return {d.B, d.T, d.Hk, d.dk}; }
Shape v_shape(const GdnDims& d) { return {d.B, d.T, d.Hv, d.dv}; }
Shape gate_shape(const GdnDims& d) { return {d.B, d.T, d.Hv}; }
Shape state_shape(const GdnDims& d) { return {d.B, d.Hv, d.dk, d.dv}; }

// The inputs shared by the forward and backward argument structs: q, k, v, g, beta, S0.
template <class T, class Args>
void fill_inputs(Args& a, const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                 const Tensor& beta, const Tensor& S0) {
  GdnDims d = delta_dims(q, v, op);
  DType t = q.dtype;
  a.dims = d;
  a.q = rows_of<const T>(q, t, qk_shape(d), op, "q");
  a.k = rows_of<const T>(k, t, qk_shape(d), op, "k");
  a.v = rows_of<const T>(v, t, v_shape(d), op, "v");
  check_contiguous(g, t, gate_shape(d), op, "g");
  check_contiguous(beta, t, gate_shape(d), op, "beta");
  a.g = g.ptr<T>();
  a.beta = beta.ptr<T>();
  if (S0.defined()) check_contiguous(S0, t, state_shape(d), op, "S0");
  a.S0 = ptr_or_null<T>(S0);
}

template <class T>
GdnForwardArgs<T> forward_args(const char* op, const Tensor& o, const Tensor& S_out, const Tensor& q,
                               const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                               const Tensor& S0) {
  GdnForwardArgs<T> a;
  fill_inputs<T>(a, op, q, k, v, g, beta, S0);
  const GdnDims& d = a.dims;
  DType t = q.dtype;
  a.o = rows_of<T>(o, t, v_shape(d), op, "o");
  if (S_out.defined()) check_contiguous(S_out, t, state_shape(d), op, "S_out");
  a.S_out = ptr_or_null<T>(S_out);
  return a;
}

template <class T>
GdnBackwardArgs<T> backward_args(const char* op, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                 const Tensor& dg, const Tensor& dbeta, const Tensor& dS0, const Tensor& d_o,
                                 const Tensor& dS_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                 const Tensor& g, const Tensor& beta, const Tensor& S0) {
  GdnBackwardArgs<T> a;
  fill_inputs<T>(a, op, q, k, v, g, beta, S0);
  const GdnDims& d = a.dims;
  DType t = q.dtype;
  a.d_o = rows_of<const T>(d_o, t, v_shape(d), op, "d_o");
  if (dS_out.defined()) check_contiguous(dS_out, t, state_shape(d), op, "dS_out");
  a.dS_out = ptr_or_null<T>(dS_out);
  a.dq = rows_of<T>(dq, t, qk_shape(d), op, "dq");
  a.dk = rows_of<T>(dk, t, qk_shape(d), op, "dk");
  a.dv = rows_of<T>(dv, t, v_shape(d), op, "dv");
  check_contiguous(dg, t, gate_shape(d), op, "dg");
  check_contiguous(dbeta, t, gate_shape(d), op, "dbeta");
  a.dg = dg.ptr<T>();
  a.dbeta = dbeta.ptr<T>();
  if (dS0.defined()) check_contiguous(dS0, t, state_shape(d), op, "dS0");
  a.dS0 = ptr_or_null<T>(dS0);
  return a;
}

void check_chunk(int chunk, const char* op) {
  DT_CHECK(chunk > 0, "{}: chunk size must be positive, got {} (0 selects the recurrent form in the layer)", op,
           chunk);
}

// [B, T, C] and w [C, 1, K] (or [C, K]) of the conv.
void conv_shapes(const char* op, const Tensor& x, const Tensor& w, int64_t& B, int64_t& Tn, int64_t& C,
                 int64_t& K) {
  DT_CHECK(x.ndim() == 3, "{}: x must be [B, T, C], got {}", op, x.shape.str());
  B = x.size(0), Tn = x.size(1), C = x.size(2);
  DT_CHECK((w.ndim() == 3 && w.size(1) == 1) || w.ndim() == 2, "{}: weight must be [C, 1, K], got {}", op,
           w.shape.str());
  DT_CHECK(w.size(0) == C, "{}: weight {} has {} channels, x {} has {}", op, w.shape.str(), w.size(0),
           x.shape.str(), C);
  K = w.size(-1);
  DT_CHECK(K >= 1, "{}: kernel size must be >= 1, weight {}", op, w.shape.str());
  DT_CHECK(w.is_contiguous(), "{}: weight must be contiguous", op);
}

#ifdef DELTATRON_HAVE_CUDA
// ---- CUDA path of the chunked delta rule (kernels/gdn_cuda.h): bf16 q, k, v, o, d_o and their
// gradients; fp32 g, beta, dg, dbeta and states; everything on the GPU.

void check_cuda_tensor(const Tensor& t, DType want, const Shape& s, const char* op, const char* name) {
  DT_CHECK(t.defined(), "{}: {} is undefined", op, name);
  DT_CHECK(t.device == Device::kCUDA, "{}: {} {} is on the CPU; the CUDA path needs every tensor on the GPU", op,
           name, t.str());
  DT_CHECK(t.dtype == want, "{}: {} is {}, the CUDA path takes {} here (bf16 activations, fp32 gates and states)",
           op, name, dtype_name(t.dtype), dtype_name(want));
  DT_CHECK(t.shape == s, "{}: {} has shape {}, expected {}", op, name, t.shape.str(), s.str());
}

// Row stride of a bf16 [B, T, H, d] GPU tensor with packed heads (rows may be strided).
int64_t cuda_rows(const Tensor& t, const Shape& s, const char* op, const char* name) {
  check_cuda_tensor(t, DType::kBF16, s, op, name);
  const int64_t Tn = s[1], H = s[2], d = s[3];
  DT_CHECK((d <= 1 || t.stride[3] == 1) && (H <= 1 || t.stride[2] == d),
           "{}: {} {} must have packed heads (strides [.., .., {}, 1])", op, name, t.str(), d);
  DT_CHECK(s[0] <= 1 || Tn <= 1 || t.stride[0] == Tn * t.stride[1],
           "{}: {} {}: rows (b, t) must be evenly strided (stride[0] == T * stride[1])", op, name, t.str());
  const int64_t ld = Tn > 1 ? t.stride[1] : t.stride[0];
  DT_CHECK(s[0] * Tn <= 1 || ld >= H * d, "{}: {} {}: row stride {} is smaller than a row ({})", op, name, t.str(),
           ld, H * d);
  return std::max<int64_t>(ld, H * d);
}

const float* cuda_f32_or_null(const Tensor& t, const Shape& s, const char* op, const char* name) {
  if (!t.defined()) return nullptr;
  check_cuda_tensor(t, DType::kF32, s, op, name);
  DT_CHECK(t.is_contiguous(), "{}: {} {} must be contiguous", op, name, t.str());
  return static_cast<const float*>(t.data);
}

float* cuda_f32(const Tensor& t, const Shape& s, const char* op, const char* name) {
  DT_CHECK(t.defined(), "{}: {} is undefined", op, name);
  return const_cast<float*>(cuda_f32_or_null(t, s, op, name));
}

GdnCudaDims cuda_dims(const Tensor& q, const Tensor& v, int chunk, const char* op) {
  GdnDims d = delta_dims(q, v, op);
  GdnCudaDims c;
  c.B = d.B, c.T = d.T, c.Hk = d.Hk, c.Hv = d.Hv, c.dk = d.dk, c.dv = d.dv, c.chunk = chunk;
  return c;
}

const uint16_t* bf16_ptr(const Tensor& t) { return static_cast<const uint16_t*>(t.data); }
uint16_t* bf16_mut(const Tensor& t) { return static_cast<uint16_t*>(t.data); }

// Fills the forward parameters (checks included); chunk_forward_cuda and the recurrent form share it.
GdnCudaForwardParams forward_params_cuda(const char* op, const Tensor& o, const Tensor& S_out, const Tensor& q,
                                         const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                                         const Tensor& S0, int chunk) {
  GdnCudaForwardParams p;
  p.dims = cuda_dims(q, v, chunk, op);
  GdnDims d{p.dims.B, p.dims.T, p.dims.Hk, p.dims.Hv, p.dims.dk, p.dims.dv};
  p.ld_q = cuda_rows(q, qk_shape(d), op, "q");
  p.ld_k = cuda_rows(k, qk_shape(d), op, "k");
  p.ld_v = cuda_rows(v, v_shape(d), op, "v");
  p.ld_o = cuda_rows(o, v_shape(d), op, "o");
  p.q = bf16_ptr(q), p.k = bf16_ptr(k), p.v = bf16_ptr(v), p.o = bf16_mut(o);
  p.g = cuda_f32(g, gate_shape(d), op, "g");
  p.beta = cuda_f32(beta, gate_shape(d), op, "beta");
  p.S0 = cuda_f32_or_null(S0, state_shape(d), op, "S0");
  p.S_out = const_cast<float*>(cuda_f32_or_null(S_out, state_shape(d), op, "S_out"));
  return p;
}

// The saved buffer's pointer, checked against the size these dims need (null when undefined).
void* saved_ptr_cuda(const Tensor& saved, const GdnCudaDims& d, const char* op) {
  if (!saved.defined()) return nullptr;
  const int64_t bytes = gdn_chunk_saved_bytes(d);
  if (bytes == 0) return nullptr;
  DT_CHECK(saved.device == Device::kCUDA && saved.is_contiguous() &&
               static_cast<int64_t>(saved.numel() * dtype_size(saved.dtype)) >= bytes,
           "{}: the saved buffer must be a contiguous GPU tensor of at least {} bytes, got {} {} on {}", op, bytes,
           dtype_name(saved.dtype), saved.shape.str(), saved.device == Device::kCUDA ? "the GPU" : "the CPU");
  return saved.data;
}

void chunk_forward_cuda(Context& ctx, const Tensor& o, const Tensor& S_out, const Tensor& q, const Tensor& k,
                        const Tensor& v, const Tensor& g, const Tensor& beta, const Tensor& S0, int chunk,
                        const Tensor& saved, const GdnQkL2Norm& l2) {
  const char* op = "gdn_chunk_forward";
  GdnCudaForwardParams p = forward_params_cuda(op, o, S_out, q, k, v, g, beta, S0, chunk);
  p.saved = saved_ptr_cuda(saved, p.dims, op);
  const int set = l2.q_hat.defined() + l2.k_hat.defined() + l2.q_rnorm.defined() + l2.k_rnorm.defined();
  DT_CHECK(set == 0 || set == 4, "{}: GdnQkL2Norm takes q_hat, k_hat, q_rnorm and k_rnorm together, got {} of 4", op,
           set);
  if (set == 4) {
    const GdnCudaDims& d = p.dims;
    const Shape ys{d.B, d.T, d.Hk, d.dk}, rs{d.B, d.T, d.Hk};
    for (const Tensor* t : {&l2.q_hat, &l2.k_hat}) {
      check_cuda_tensor(*t, DType::kBF16, ys, op, t == &l2.q_hat ? "q_hat" : "k_hat");
      DT_CHECK(t->is_contiguous(), "{}: {} {} must be contiguous", op, t == &l2.q_hat ? "q_hat" : "k_hat", t->str());
    }
    p.q_hat = bf16_mut(l2.q_hat), p.k_hat = bf16_mut(l2.k_hat), p.ld_hat = d.Hk * d.dk;
    p.q_rnorm = cuda_f32(l2.q_rnorm, rs, op, "q_rnorm"), p.k_rnorm = cuda_f32(l2.k_rnorm, rs, op, "k_rnorm");
    p.q_scale = static_cast<float>(l2.q_scale), p.k_scale = static_cast<float>(l2.k_scale);
  }
  gdn_chunk_forward_cuda(p, ctx.stream);
}

void chunk_backward_cuda(Context& ctx, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dg,
                         const Tensor& dbeta, const Tensor& dS0, const Tensor& d_o, const Tensor& dS_out,
                         const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                         const Tensor& S0, int chunk, const Tensor& saved, const GdnQkL2Norm& l2) {
  const char* op = "gdn_chunk_backward";
  GdnCudaBackwardParams p;
  p.dims = cuda_dims(q, v, chunk, op);
  GdnDims d{p.dims.B, p.dims.T, p.dims.Hk, p.dims.Hv, p.dims.dk, p.dims.dv};
  p.ld_q = cuda_rows(q, qk_shape(d), op, "q");
  p.ld_k = cuda_rows(k, qk_shape(d), op, "k");
  p.ld_v = cuda_rows(v, v_shape(d), op, "v");
  p.ld_do = cuda_rows(d_o, v_shape(d), op, "d_o");
  p.ld_dq = cuda_rows(dq, qk_shape(d), op, "dq");
  p.ld_dk = cuda_rows(dk, qk_shape(d), op, "dk");
  p.ld_dv = cuda_rows(dv, v_shape(d), op, "dv");
  p.q = bf16_ptr(q), p.k = bf16_ptr(k), p.v = bf16_ptr(v), p.d_o = bf16_ptr(d_o);
  p.dq = bf16_mut(dq), p.dk = bf16_mut(dk), p.dv = bf16_mut(dv);
  p.g = cuda_f32(g, gate_shape(d), op, "g");
  p.beta = cuda_f32(beta, gate_shape(d), op, "beta");
  p.S0 = cuda_f32_or_null(S0, state_shape(d), op, "S0");
  p.dS_out = cuda_f32_or_null(dS_out, state_shape(d), op, "dS_out");
  p.dg = cuda_f32(dg, gate_shape(d), op, "dg");
  p.dbeta = cuda_f32(dbeta, gate_shape(d), op, "dbeta");
  p.dS0 = const_cast<float*>(cuda_f32_or_null(dS0, state_shape(d), op, "dS0"));
  p.saved = saved_ptr_cuda(saved, p.dims, op);
  DT_CHECK(l2.q_rnorm.defined() == l2.k_rnorm.defined(), "{}: GdnQkL2Norm takes q_rnorm and k_rnorm together", op);
  if (l2.q_rnorm.defined()) {
    const Shape rs{p.dims.B, p.dims.T, p.dims.Hk};
    p.q_rnorm = cuda_f32(l2.q_rnorm, rs, op, "q_rnorm"), p.k_rnorm = cuda_f32(l2.k_rnorm, rs, op, "k_rnorm");
    p.q_scale = static_cast<float>(l2.q_scale), p.k_scale = static_cast<float>(l2.k_scale);
  }
  gdn_chunk_backward_cuda(p, ctx.stream);
}

void l2norm_cuda(Context& ctx, const Tensor& out, const Tensor& dy, const Tensor& x, double scale, bool backward,
                 const Tensor& rnorm = {}) {
  const char* op = backward ? "gdn_l2norm_backward" : "gdn_l2norm_forward";
  DT_CHECK(x.ndim() == 4, "{}: x must be [B, T, H, d], got {}", op, x.shape.str());
  GdnCudaL2NormParams p;
  p.rows = x.size(0) * x.size(1), p.H = x.size(2), p.d = x.size(3), p.scale = static_cast<float>(scale);
  if (rnorm.defined()) p.rnorm = cuda_f32(rnorm, Shape{x.size(0), x.size(1), x.size(2)}, op, "rnorm");
  p.ld_x = cuda_rows(x, x.shape, op, "x"), p.x = bf16_ptr(x);
  p.ld_y = cuda_rows(out, x.shape, op, backward ? "dx" : "y"), p.y = bf16_mut(out);
  if (backward) p.ld_dy = cuda_rows(dy, x.shape, op, "dy"), p.dy = bf16_ptr(dy);
  if (backward) gdn_l2norm_backward_cuda(p, ctx.stream);
  else gdn_l2norm_forward_cuda(p, ctx.stream);
}


// conv on the GPU: x, y, dy, dx bf16 [B, T, C] contiguous; w, dw fp32.
GdnCudaConvParams conv_params_cuda(const char* op, const Tensor& x, const Tensor& w) {
  int64_t B, Tn, C, K;
  conv_shapes(op, x, w, B, Tn, C, K);
  check_cuda_tensor(x, DType::kBF16, x.shape, op, "x");
  DT_CHECK(x.is_contiguous(), "{}: x {} must be contiguous", op, x.str());
  check_cuda_tensor(w, DType::kF32, w.shape, op, "w");
  GdnCudaConvParams p;
  p.B = B, p.T = Tn, p.C = C, p.K = K, p.x = bf16_ptr(x), p.w = static_cast<const float*>(w.data);
  return p;
}

uint16_t* conv_bf16_out(const Tensor& t, const Shape& s, const char* op, const char* name) {
  check_cuda_tensor(t, DType::kBF16, s, op, name);
  DT_CHECK(t.is_contiguous(), "{}: {} {} must be contiguous", op, name, t.str());
  return bf16_mut(t);
}

// Gated RMSNorm on the GPU: o, z (and y, dy, d_o, dz) bf16 [B, T, Hv, dv] contiguous; w, dw fp32 [dv].
GdnCudaNormParams norm_params_cuda(const char* op, const Tensor& o, const Tensor& z, const Tensor& w, double eps) {
  GdnCudaNormParams p;
  p.o = conv_bf16_out(o, o.shape, op, "o");
  p.z = conv_bf16_out(z, o.shape, op, "z");
  p.w = cuda_f32(w, Shape{o.size(3)}, op, "w");
  p.rows = o.size(0) * o.size(1), p.H = o.size(2), p.d = o.size(3), p.eps = static_cast<float>(eps);
  return p;
}

#endif  // DELTATRON_HAVE_CUDA

}  // namespace

Tensor gdn_head_view(const Tensor& buf, int64_t col, int64_t heads, int64_t dim) {
  DT_CHECK(buf.ndim() == 3 && buf.is_contiguous(), "gdn_head_view: buffer must be a contiguous [B, T, C], got {}",
           buf.str());
  const int64_t C = buf.size(2);
  DT_CHECK(col >= 0 && heads >= 0 && dim >= 0 && col + heads * dim <= C,
           "gdn_head_view: columns [{}, {}) do not fit in {}", col, col + heads * dim, buf.str());
  Tensor t(static_cast<char*>(buf.data) + col * static_cast<int64_t>(dtype_size(buf.dtype)), buf.dtype,
           buf.device, Shape{buf.size(0), buf.size(1), heads, dim});
  t.stride = {buf.size(1) * C, C, dim, 1, 0, 0};
  return t;
}

void gdn_conv_forward(Context& ctx, const Tensor& y, const Tensor& x, const Tensor& w) {
  const char* op = "gdn_conv_forward";
#ifdef DELTATRON_HAVE_CUDA
  if (ctx.device == Device::kCUDA) {
    GdnCudaConvParams p = conv_params_cuda(op, x, w);
    p.y = conv_bf16_out(y, x.shape, op, "y");
    return gdn_conv_forward_cuda(p, ctx.stream);
  }
#endif
  require_cpu(ctx, op);
  int64_t B, Tn, C, K;
  conv_shapes(op, x, w, B, Tn, C, K);
  check_contiguous(x, w.dtype, x.shape, op, "x");
  check_contiguous(y, w.dtype, x.shape, op, "y");
  dispatch_float(w.dtype, op, [&](auto t) {
    using T = decltype(t);
    gdn_conv_forward_ref<T>(y.ptr<T>(), x.ptr<T>(), w.ptr<T>(), B, Tn, C, K);
  });
}

void gdn_conv_backward(Context& ctx, const Tensor& dx, const Tensor& dw, const Tensor& dy, const Tensor& x,
                       const Tensor& w) {
  const char* op = "gdn_conv_backward";
#ifdef DELTATRON_HAVE_CUDA
  if (ctx.device == Device::kCUDA) {
    GdnCudaConvParams p = conv_params_cuda(op, x, w);
    check_cuda_tensor(dy, DType::kBF16, x.shape, op, "dy");
    DT_CHECK(dy.is_contiguous(), "{}: dy {} must be contiguous", op, dy.str());
    p.dy = bf16_ptr(dy);
    p.dx = conv_bf16_out(dx, x.shape, op, "dx");
    check_cuda_tensor(dw, DType::kF32, w.shape, op, "dw");
    DT_CHECK(dw.is_contiguous(), "{}: dw {} must be contiguous", op, dw.str());
    p.dw = static_cast<float*>(dw.data);
    return gdn_conv_backward_cuda(p, ctx.stream);
  }
#endif
  require_cpu(ctx, op);
  int64_t B, Tn, C, K;
  conv_shapes(op, x, w, B, Tn, C, K);
  check_contiguous(x, w.dtype, x.shape, op, "x");
  check_contiguous(dy, w.dtype, x.shape, op, "dy");
  check_contiguous(dx, w.dtype, x.shape, op, "dx");
  check_contiguous(dw, w.dtype, w.shape, op, "dw");
  dispatch_float(w.dtype, op, [&](auto t) {
    using T = decltype(t);
    gdn_conv_backward_ref<T>(dx.ptr<T>(), dw.ptr<T>(), dy.ptr<T>(), x.ptr<T>(), w.ptr<T>(), B, Tn, C, K);
  });
}

void gdn_l2norm_forward(Context& ctx, const Tensor& y, const Tensor& x, double scale, const Tensor& rnorm) {
  const char* op = "gdn_l2norm_forward";
#ifdef DELTATRON_HAVE_CUDA
  if (ctx.device == Device::kCUDA) return l2norm_cuda(ctx, y, Tensor(), x, scale, false, rnorm);
#endif
  require_cpu(ctx, op);
  DT_CHECK(!rnorm.defined(), "{}: rnorm (the saved r for gdn_chunk_backward's GdnQkL2Norm) is GPU only", op);
  DT_CHECK(x.ndim() == 4, "{}: x must be [B, T, H, d], got {}", op, x.shape.str());
  dispatch_float(x.dtype, op, [&](auto t) {
    using T = decltype(t);
    auto xr = rows_of<const T>(x, x.dtype, x.shape, op, "x");
    auto yr = rows_of<T>(y, x.dtype, x.shape, op, "y");
    gdn_l2norm_forward_ref<T>(yr, xr, x.size(0) * x.size(1), x.size(2), x.size(3), static_cast<T>(scale));
  });
}

void gdn_l2norm_backward(Context& ctx, const Tensor& dx, const Tensor& dy, const Tensor& x, double scale) {
  const char* op = "gdn_l2norm_backward";
#ifdef DELTATRON_HAVE_CUDA
  if (ctx.device == Device::kCUDA) return l2norm_cuda(ctx, dx, dy, x, scale, true);
#endif
  require_cpu(ctx, op);
  DT_CHECK(x.ndim() == 4, "{}: x must be [B, T, H, d], got {}", op, x.shape.str());
  dispatch_float(x.dtype, op, [&](auto t) {
    using T = decltype(t);
    auto xr = rows_of<const T>(x, x.dtype, x.shape, op, "x");
    auto dyr = rows_of<const T>(dy, x.dtype, x.shape, op, "dy");
    auto dxr = rows_of<T>(dx, x.dtype, x.shape, op, "dx");
    gdn_l2norm_backward_ref<T>(dxr, dyr, xr, x.size(0) * x.size(1), x.size(2), x.size(3), static_cast<T>(scale));
  });
}

void gdn_gates_forward(Context& ctx, const Tensor& g, const Tensor& beta, const Tensor& a, const Tensor& b,
                       const Tensor& A_log, const Tensor& dt_bias) {
  const char* op = "gdn_gates_forward";
  DT_CHECK(a.ndim() == 3, "{}: a must be [B, T, Hv], got {}", op, a.shape.str());
#ifdef DELTATRON_HAVE_CUDA
  if (ctx.device == Device::kCUDA) {
    GdnCudaGatesParams p;
    p.rows = a.size(0) * a.size(1), p.H = a.size(2);
    const Shape hs{p.H};
    p.a = cuda_f32(a, a.shape, op, "a"), p.b = cuda_f32(b, a.shape, op, "b");
    p.A_log = cuda_f32(A_log, hs, op, "A_log"), p.dt_bias = cuda_f32(dt_bias, hs, op, "dt_bias");
    p.g = cuda_f32(g, a.shape, op, "g"), p.beta = cuda_f32(beta, a.shape, op, "beta");
    return gdn_gates_forward_cuda(p, ctx.stream);
  }
#endif
  require_cpu(ctx, op);
  const DType t = a.dtype;
  const int64_t H = a.size(2), rows = a.size(0) * a.size(1);
  for (auto [ten, name] : std::initializer_list<Named>{{&a, "a"}, {&b, "b"}, {&g, "g"}, {&beta, "beta"}})
    check_contiguous(*ten, t, a.shape, op, name);
  check_contiguous(A_log, t, Shape{H}, op, "A_log");
  check_contiguous(dt_bias, t, Shape{H}, op, "dt_bias");
  dispatch_float(t, op, [&](auto z) {
    using T = decltype(z);
    gdn_gates_forward_ref<T>(g.ptr<T>(), beta.ptr<T>(), a.ptr<T>(), b.ptr<T>(), A_log.ptr<T>(), dt_bias.ptr<T>(),
                             rows, H);
  });
}

void gdn_gates_backward(Context& ctx, const Tensor& da, const Tensor& db, const Tensor& dA_log,
                        const Tensor& ddt_bias, const Tensor& dg, const Tensor& dbeta, const Tensor& a,
                        const Tensor& b, const Tensor& A_log, const Tensor& dt_bias) {
  const char* op = "gdn_gates_backward";
  DT_CHECK(a.ndim() == 3, "{}: a must be [B, T, Hv], got {}", op, a.shape.str());
#ifdef DELTATRON_HAVE_CUDA
  if (ctx.device == Device::kCUDA) {
    GdnCudaGatesParams p;
    p.rows = a.size(0) * a.size(1), p.H = a.size(2);
    const Shape hs{p.H};
    p.a = cuda_f32(a, a.shape, op, "a"), p.b = cuda_f32(b, a.shape, op, "b");
    p.A_log = cuda_f32(A_log, hs, op, "A_log"), p.dt_bias = cuda_f32(dt_bias, hs, op, "dt_bias");
    p.dg = cuda_f32(dg, a.shape, op, "dg"), p.dbeta = cuda_f32(dbeta, a.shape, op, "dbeta");
    p.da = cuda_f32(da, a.shape, op, "da"), p.db = cuda_f32(db, a.shape, op, "db");
    p.dA_log = cuda_f32(dA_log, hs, op, "dA_log"), p.ddt_bias = cuda_f32(ddt_bias, hs, op, "ddt_bias");
    return gdn_gates_backward_cuda(p, ctx.stream);
  }
#endif
  require_cpu(ctx, op);
  const DType t = a.dtype;
  const int64_t H = a.size(2), rows = a.size(0) * a.size(1);
  for (auto [ten, name] : std::initializer_list<Named>{{&a, "a"}, {&b, "b"}, {&da, "da"}, {&db, "db"}, {&dg, "dg"}, {&dbeta, "dbeta"}})
    check_contiguous(*ten, t, a.shape, op, name);
  for (auto [ten, name] : std::initializer_list<Named>{{&A_log, "A_log"}, {&dt_bias, "dt_bias"}, {&dA_log, "dA_log"},
                           {&ddt_bias, "ddt_bias"}})
    check_contiguous(*ten, t, Shape{H}, op, name);
  dispatch_float(t, op, [&](auto z) {
    using T = decltype(z);
    gdn_gates_backward_ref<T>(da.ptr<T>(), db.ptr<T>(), dA_log.ptr<T>(), ddt_bias.ptr<T>(), dg.ptr<T>(),
                              dbeta.ptr<T>(), a.ptr<T>(), b.ptr<T>(), A_log.ptr<T>(), dt_bias.ptr<T>(), rows, H);
  });
}

void gdn_recurrent_forward(Context& ctx, const Tensor& o, const Tensor& S_out, const Tensor& q, const Tensor& k,
                           const Tensor& v, const Tensor& g, const Tensor& beta, const Tensor& S0) {
  const char* op = "gdn_recurrent_forward";
#ifdef DELTATRON_HAVE_CUDA
  if (ctx.device == Device::kCUDA)
    return gdn_recurrent_forward_cuda(forward_params_cuda(op, o, S_out, q, k, v, g, beta, S0, 64), ctx.stream);
#endif
  require_cpu(ctx, op);
  dispatch_float(q.dtype, op, [&](auto t) {
    using T = decltype(t);
    gdn_recurrent_forward_ref<T>(forward_args<T>(op, o, S_out, q, k, v, g, beta, S0));
  });
}

void gdn_chunk_forward(Context& ctx, const Tensor& o, const Tensor& S_out, const Tensor& q, const Tensor& k,
                       const Tensor& v, const Tensor& g, const Tensor& beta, const Tensor& S0, int chunk,
                       const Tensor& saved, const GdnQkL2Norm& l2) {
  const char* op = "gdn_chunk_forward";
  check_chunk(chunk, op);
#ifdef DELTATRON_HAVE_CUDA
  if (ctx.device == Device::kCUDA) return chunk_forward_cuda(ctx, o, S_out, q, k, v, g, beta, S0, chunk, saved, l2);
#endif
  (void)saved;
  require_cpu(ctx, op);
  DT_CHECK(!l2.q_hat.defined() && !l2.k_hat.defined() && !l2.q_rnorm.defined() && !l2.k_rnorm.defined(),
           "{}: GdnQkL2Norm (the l2norms taken here) is GPU only; on the CPU call gdn_l2norm_forward", op);
  dispatch_float(q.dtype, op, [&](auto t) {
    using T = decltype(t);
    gdn_chunk_forward_ref<T>(forward_args<T>(op, o, S_out, q, k, v, g, beta, S0), chunk);
  });
}

void gdn_recurrent_backward(Context& ctx, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dg,
                            const Tensor& dbeta, const Tensor& dS0, const Tensor& d_o, const Tensor& dS_out,
                            const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                            const Tensor& beta, const Tensor& S0) {
  const char* op = "gdn_recurrent_backward";
  require_cpu(ctx, op);
  dispatch_float(q.dtype, op, [&](auto t) {
    using T = decltype(t);
    gdn_recurrent_backward_ref<T>(
        backward_args<T>(op, dq, dk, dv, dg, dbeta, dS0, d_o, dS_out, q, k, v, g, beta, S0));
  });
}

void gdn_chunk_backward(Context& ctx, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dg,
                        const Tensor& dbeta, const Tensor& dS0, const Tensor& d_o, const Tensor& dS_out,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                        const Tensor& S0, int chunk, const Tensor& saved, const GdnQkL2Norm& l2) {
  const char* op = "gdn_chunk_backward";
  check_chunk(chunk, op);
#ifdef DELTATRON_HAVE_CUDA
  if (ctx.device == Device::kCUDA)
    return chunk_backward_cuda(ctx, dq, dk, dv, dg, dbeta, dS0, d_o, dS_out, q, k, v, g, beta, S0, chunk, saved, l2);
#endif
  (void)saved;
  require_cpu(ctx, op);
  DT_CHECK(!l2.q_rnorm.defined() && !l2.k_rnorm.defined(),
           "{}: GdnQkL2Norm (the l2norms' backward taken here) is GPU only; on the CPU call gdn_l2norm_backward", op);
  dispatch_float(q.dtype, op, [&](auto t) {
    using T = decltype(t);
    gdn_chunk_backward_ref<T>(backward_args<T>(op, dq, dk, dv, dg, dbeta, dS0, d_o, dS_out, q, k, v, g, beta, S0),
                              chunk);
  });
}

int64_t gdn_chunk_saved_elems(Device device, int64_t B, int64_t T, int64_t Hk, int64_t Hv, int64_t dk,
                              int64_t dv, int chunk) {
#ifdef DELTATRON_HAVE_CUDA
  if (device == Device::kCUDA) {
    GdnCudaDims d;
    d.B = B, d.T = T, d.Hk = Hk, d.Hv = Hv, d.dk = dk, d.dv = dv, d.chunk = chunk;
    return (gdn_chunk_saved_bytes(d) + 1) / 2;
  }
#endif
  (void)device, (void)B, (void)T, (void)Hk, (void)Hv, (void)dk, (void)dv, (void)chunk;
  return 0;
}

void gdn_norm_forward(Context& ctx, const Tensor& y, const Tensor& o, const Tensor& z, const Tensor& w,
                      double eps) {
  const char* op = "gdn_norm_forward";
  DT_CHECK(o.ndim() == 4, "{}: o must be [B, T, Hv, dv], got {}", op, o.shape.str());
#ifdef DELTATRON_HAVE_CUDA
  if (ctx.device == Device::kCUDA) {
    GdnCudaNormParams p = norm_params_cuda(op, o, z, w, eps);
    p.y = conv_bf16_out(y, o.shape, op, "y");
    return gdn_norm_forward_cuda(p, ctx.stream);
  }
#endif
  require_cpu(ctx, op);
  const DType t = o.dtype;
  check_contiguous(o, t, o.shape, op, "o");
  check_contiguous(z, t, o.shape, op, "z");
  check_contiguous(y, t, o.shape, op, "y");
  check_contiguous(w, t, Shape{o.size(3)}, op, "w");
  dispatch_float(t, op, [&](auto s) {
    using T = decltype(s);
    gdn_norm_forward_ref<T>(y.ptr<T>(), o.ptr<T>(), z.ptr<T>(), w.ptr<T>(), o.size(0) * o.size(1), o.size(2),
                            o.size(3), static_cast<T>(eps));
  });
}

void gdn_norm_backward(Context& ctx, const Tensor& d_o, const Tensor& dz, const Tensor& dw, const Tensor& dy,
                       const Tensor& o, const Tensor& z, const Tensor& w, double eps) {
  const char* op = "gdn_norm_backward";
  DT_CHECK(o.ndim() == 4, "{}: o must be [B, T, Hv, dv], got {}", op, o.shape.str());
#ifdef DELTATRON_HAVE_CUDA
  if (ctx.device == Device::kCUDA) {
    GdnCudaNormParams p = norm_params_cuda(op, o, z, w, eps);
    p.dy = conv_bf16_out(dy, o.shape, op, "dy");
    p.d_o = conv_bf16_out(d_o, o.shape, op, "d_o");
    p.dz = conv_bf16_out(dz, o.shape, op, "dz");
    p.dw = cuda_f32(dw, w.shape, op, "dw");
    return gdn_norm_backward_cuda(p, ctx.stream);
  }
#endif
  require_cpu(ctx, op);
  const DType t = o.dtype;
  for (auto [ten, name] : std::initializer_list<Named>{{&o, "o"}, {&z, "z"}, {&dy, "dy"}, {&d_o, "d_o"}, {&dz, "dz"}})
    check_contiguous(*ten, t, o.shape, op, name);
  check_contiguous(w, t, Shape{o.size(3)}, op, "w");
  check_contiguous(dw, t, Shape{o.size(3)}, op, "dw");
  dispatch_float(t, op, [&](auto s) {
    using T = decltype(s);
    gdn_norm_backward_ref<T>(d_o.ptr<T>(), dz.ptr<T>(), dw.ptr<T>(), dy.ptr<T>(), o.ptr<T>(), z.ptr<T>(),
                             w.ptr<T>(), o.size(0) * o.size(1), o.size(2), o.size(3), static_cast<T>(eps));
  });
}

}  // namespace dt
