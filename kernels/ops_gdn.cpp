// The Gated DeltaNet ops (kernels/ops.h, gdn section): the GPU branch (kernels/cuda/gdn_ops.cpp),
// else the CPU references in kernels/cpu/gdn_*.h, past the shape checks the two share
// (kernels/gdn_op_checks.h). Every shape is checked before any work.
#include <algorithm>
#include <initializer_list>
#include <type_traits>
#include <utility>

#include "kernels/cpu/gdn_chunk.h"
#include "kernels/cpu/gdn_conv.h"
#include "kernels/cpu/gdn_delta_rule.h"
#include "kernels/cpu/gdn_gates.h"
#include "kernels/cpu/gdn_l2norm.h"
#include "kernels/cpu/gdn_norm.h"
#include "kernels/gdn_op_checks.h"
#include "kernels/ops.h"
#include "kernels/ops_dispatch.h"

namespace dt {

namespace {

using namespace gdn_checks;
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
  const int64_t ld = row_stride(t, s, op, name);
  using U = std::remove_const_t<T>;
  return GdnRows<T>{static_cast<U*>(t.data), ld};
}

template <class T>
T* ptr_or_null(const Tensor& t) {
  return t.defined() ? t.ptr<T>() : nullptr;
}

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

// GdnQkL2Norm's r and scales; the forward's q_hat, k_hat too (`forward`).
template <class T>
GdnQkL2NormArgs<T> l2norm_args(const GdnQkL2Norm& l2, const GdnDims& d, DType t, bool forward, const char* op) {
  GdnQkL2NormArgs<T> a;
  if (forward) {
    check_contiguous(l2.q_hat, t, qk_shape(d), op, "q_hat");
    check_contiguous(l2.k_hat, t, qk_shape(d), op, "k_hat");
    a.q_hat = GdnRows<T>{l2.q_hat.ptr<T>(), d.Hk * d.dk}, a.k_hat = GdnRows<T>{l2.k_hat.ptr<T>(), d.Hk * d.dk};
  }
  check_contiguous(l2.q_rnorm, t, rnorm_shape(d), op, "q_rnorm");
  check_contiguous(l2.k_rnorm, t, rnorm_shape(d), op, "k_rnorm");
  a.q_rnorm = l2.q_rnorm.ptr<T>(), a.k_rnorm = l2.k_rnorm.ptr<T>();
  a.q_scale = static_cast<T>(l2.q_scale), a.k_scale = static_cast<T>(l2.k_scale);
  return a;
}

template <class T>
GdnForwardArgs<T> forward_args(const char* op, const Tensor& o, const Tensor& S_out, const Tensor& q,
                               const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                               const Tensor& S0, const GdnQkL2Norm& l2) {
  GdnForwardArgs<T> a;
  fill_inputs<T>(a, op, q, k, v, g, beta, S0);
  const GdnDims& d = a.dims;
  DType t = q.dtype;
  a.o = rows_of<T>(o, t, v_shape(d), op, "o");
  if (S_out.defined()) check_contiguous(S_out, t, state_shape(d), op, "S_out");
  a.S_out = ptr_or_null<T>(S_out);
  if (qk_l2norm_forward(l2, op)) a.l2 = l2norm_args<T>(l2, d, t, /*forward=*/true, op);
  return a;
}

template <class T>
GdnBackwardArgs<T> backward_args(const char* op, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                 const Tensor& dg, const Tensor& dbeta, const Tensor& dS0, const Tensor& d_o,
                                 const Tensor& dS_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                 const Tensor& g, const Tensor& beta, const Tensor& S0, const GdnQkL2Norm& l2) {
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
  if (qk_l2norm_backward(l2, op)) a.l2 = l2norm_args<T>(l2, d, t, /*forward=*/false, op);
  return a;
}

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
  DT_CUDA_DISPATCH(gdn_conv_forward, ctx, y, x, w);
  require_cpu(ctx, op);
  const ConvDims c = conv_dims(x, w, op);
  check_contiguous(x, w.dtype, x.shape, op, "x");
  check_contiguous(y, w.dtype, x.shape, op, "y");
  dispatch_float(w.dtype, op, [&](auto t) {
    using T = decltype(t);
    gdn_conv_forward_ref<T>(y.ptr<T>(), x.ptr<T>(), w.ptr<T>(), c.B, c.T, c.C, c.K);
  });
}

void gdn_conv_backward(Context& ctx, const Tensor& dx, const Tensor& dw, const Tensor& dy, const Tensor& x,
                       const Tensor& w) {
  const char* op = "gdn_conv_backward";
  DT_CUDA_DISPATCH(gdn_conv_backward, ctx, dx, dw, dy, x, w);
  require_cpu(ctx, op);
  const ConvDims c = conv_dims(x, w, op);
  check_contiguous(x, w.dtype, x.shape, op, "x");
  check_contiguous(dy, w.dtype, x.shape, op, "dy");
  check_contiguous(dx, w.dtype, x.shape, op, "dx");
  check_contiguous(dw, w.dtype, w.shape, op, "dw");
  dispatch_float(w.dtype, op, [&](auto t) {
    using T = decltype(t);
    gdn_conv_backward_ref<T>(dx.ptr<T>(), dw.ptr<T>(), dy.ptr<T>(), x.ptr<T>(), w.ptr<T>(), c.B, c.T, c.C, c.K);
  });
}

void gdn_l2norm_forward(Context& ctx, const Tensor& y, const Tensor& x, double scale, const Tensor& rnorm) {
  const char* op = "gdn_l2norm_forward";
  DT_CUDA_DISPATCH(gdn_l2norm_forward, ctx, y, x, scale, rnorm);
  require_cpu(ctx, op);
  check_ndim(x, 4, op, "x", "[B, T, H, d]");
  if (rnorm.defined()) check_contiguous(rnorm, x.dtype, Shape{x.size(0), x.size(1), x.size(2)}, op, "rnorm");
  dispatch_float(x.dtype, op, [&](auto t) {
    using T = decltype(t);
    auto xr = rows_of<const T>(x, x.dtype, x.shape, op, "x");
    auto yr = rows_of<T>(y, x.dtype, x.shape, op, "y");
    gdn_l2norm_forward_ref<T>(yr, xr, x.size(0) * x.size(1), x.size(2), x.size(3), static_cast<T>(scale),
                              ptr_or_null<T>(rnorm));
  });
}

void gdn_l2norm_backward(Context& ctx, const Tensor& dx, const Tensor& dy, const Tensor& x, double scale) {
  const char* op = "gdn_l2norm_backward";
  DT_CUDA_DISPATCH(gdn_l2norm_backward, ctx, dx, dy, x, scale);
  require_cpu(ctx, op);
  check_ndim(x, 4, op, "x", "[B, T, H, d]");
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
  DT_CUDA_DISPATCH(gdn_gates_forward, ctx, g, beta, a, b, A_log, dt_bias);
  require_cpu(ctx, op);
  check_ndim(a, 3, op, "a", "[B, T, Hv]");
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
  DT_CUDA_DISPATCH(gdn_gates_backward, ctx, da, db, dA_log, ddt_bias, dg, dbeta, a, b, A_log, dt_bias);
  require_cpu(ctx, op);
  check_ndim(a, 3, op, "a", "[B, T, Hv]");
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
                           const Tensor& v, const Tensor& g, const Tensor& beta, const Tensor& S0,
                           const GdnQkL2Norm& l2) {
  const char* op = "gdn_recurrent_forward";
  DT_CUDA_DISPATCH(gdn_recurrent_forward, ctx, o, S_out, q, k, v, g, beta, S0, l2);
  require_cpu(ctx, op);
  dispatch_float(q.dtype, op, [&](auto t) {
    using T = decltype(t);
    gdn_recurrent_forward_ref<T>(forward_args<T>(op, o, S_out, q, k, v, g, beta, S0, l2));
  });
}

void gdn_chunk_forward(Context& ctx, const Tensor& o, const Tensor& S_out, const Tensor& q, const Tensor& k,
                       const Tensor& v, const Tensor& g, const Tensor& beta, const Tensor& S0, int chunk,
                       const Tensor& saved, const GdnQkL2Norm& l2) {
  const char* op = "gdn_chunk_forward";
  DT_CUDA_DISPATCH(gdn_chunk_forward, ctx, o, S_out, q, k, v, g, beta, S0, chunk, saved, l2);
  require_cpu(ctx, op);
  check_chunk(chunk, op);
  (void)saved;  // the CPU reference keeps nothing for the backward
  dispatch_float(q.dtype, op, [&](auto t) {
    using T = decltype(t);
    gdn_chunk_forward_ref<T>(forward_args<T>(op, o, S_out, q, k, v, g, beta, S0, l2), chunk);
  });
}

void gdn_recurrent_backward(Context& ctx, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dg,
                            const Tensor& dbeta, const Tensor& dS0, const Tensor& d_o, const Tensor& dS_out,
                            const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                            const Tensor& beta, const Tensor& S0, const GdnQkL2Norm& l2) {
  const char* op = "gdn_recurrent_backward";
  require_cpu(ctx, op);
  dispatch_float(q.dtype, op, [&](auto t) {
    using T = decltype(t);
    gdn_recurrent_backward_ref<T>(
        backward_args<T>(op, dq, dk, dv, dg, dbeta, dS0, d_o, dS_out, q, k, v, g, beta, S0, l2));
  });
}

void gdn_chunk_backward(Context& ctx, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dg,
                        const Tensor& dbeta, const Tensor& dS0, const Tensor& d_o, const Tensor& dS_out,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                        const Tensor& S0, int chunk, const Tensor& saved, const GdnQkL2Norm& l2) {
  const char* op = "gdn_chunk_backward";
  DT_CUDA_DISPATCH(gdn_chunk_backward, ctx, dq, dk, dv, dg, dbeta, dS0, d_o, dS_out, q, k, v, g, beta, S0, chunk,
                   saved, l2);
  require_cpu(ctx, op);
  check_chunk(chunk, op);
  (void)saved;
  dispatch_float(q.dtype, op, [&](auto t) {
    using T = decltype(t);
    gdn_chunk_backward_ref<T>(
        backward_args<T>(op, dq, dk, dv, dg, dbeta, dS0, d_o, dS_out, q, k, v, g, beta, S0, l2), chunk);
  });
}

// The CPU references keep nothing between the forward and the backward.
int64_t gdn_chunk_saved_elems(Device device, int64_t B, int64_t T, int64_t Hk, int64_t Hv, int64_t dk,
                              int64_t dv, int chunk) {
#ifdef DELTATRON_HAVE_CUDA
  if (device == Device::kCUDA) return cuda::gdn_chunk_saved_elems(B, T, Hk, Hv, dk, dv, chunk);
#endif
  (void)device, (void)B, (void)T, (void)Hk, (void)Hv, (void)dk, (void)dv, (void)chunk;
  return 0;
}

void gdn_norm_forward(Context& ctx, const Tensor& y, const Tensor& o, const Tensor& z, const Tensor& w,
                      double eps) {
  const char* op = "gdn_norm_forward";
  DT_CUDA_DISPATCH(gdn_norm_forward, ctx, y, o, z, w, eps);
  require_cpu(ctx, op);
  check_ndim(o, 4, op, "o", "[B, T, Hv, dv]");
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
  DT_CUDA_DISPATCH(gdn_norm_backward, ctx, d_o, dz, dw, dy, o, z, w, eps);
  require_cpu(ctx, op);
  check_ndim(o, 4, op, "o", "[B, T, Hv, dv]");
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
