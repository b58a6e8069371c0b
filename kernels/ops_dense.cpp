// CPU dispatch of the dense ops (kernels/ops.h) to the references in kernels/cpu/.
#include <initializer_list>
#include <utility>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/swiglu.h"
#include "kernels/ops_dispatch.h"

namespace dt {

namespace {

using ops_detail::dispatch_float;
using ops_detail::require_cpu;

// Every tensor an op touches must be contiguous and hold `dtype`.
void check_tensors(const char* op, DType dtype, std::initializer_list<std::pair<const char*, const Tensor*>> ts) {
  for (auto [name, t] : ts) {
    if (!t->defined()) continue;
    DT_CHECK(t->dtype == dtype, "{}: {} is {}, expected {}", op, name, t->str(), dtype_name(dtype));
    DT_CHECK(t->is_contiguous(), "{}: {} {} must be contiguous", op, name, t->str());
  }
}

void check_same_numel(const char* op, const char* a_name, const Tensor& a, const char* b_name, const Tensor& b) {
  DT_CHECK(a.numel() == b.numel(), "{}: {} {} and {} {} must have the same number of elements", op, a_name,
           a.shape.str(), b_name, b.shape.str());
}

}  // namespace

void linear_forward(Context& ctx, const Tensor& y, const Tensor& x, const Tensor& w) {
  DT_CUDA_DISPATCH(linear_forward, ctx, y, x, w);
  require_cpu(ctx, "linear_forward");
  DT_CHECK(w.ndim() == 2, "linear_forward: weight must be 2-D, got {}", w.shape.str());
  int64_t out = w.size(0), in = w.size(1);
  DT_CHECK(x.size(-1) == in, "linear_forward: x {} does not match weight {}", x.shape.str(), w.shape.str());
  DT_CHECK(y.size(-1) == out && y.numel() / out == x.numel() / in,
           "linear_forward: y {} does not match x {} and weight {}", y.shape.str(), x.shape.str(),
           w.shape.str());
  DT_CHECK(x.is_contiguous() && y.is_contiguous(), "linear_forward: x and y must be contiguous");
  int64_t rows = x.numel() / in;
  dispatch_float(w.dtype, "linear_forward", [&](auto t) {
    using T = decltype(t);
    linear_forward_ref<T>(y.ptr<T>(), x.ptr<T>(), w.ptr<T>(), rows, in, out);
  });
}

void linear_backward(Context& ctx, const Tensor& dx, const Tensor& dw, const Tensor& dy, const Tensor& x,
                     const Tensor& w, double alpha, bool accumulate_dx) {
  DT_CUDA_DISPATCH(linear_backward, ctx, dx, dw, dy, x, w, alpha, accumulate_dx);
  require_cpu(ctx, "linear_backward");
  int64_t out = w.size(0), in = w.size(1);
  int64_t rows = x.numel() / in;
  DT_CHECK(dy.size(-1) == out && dy.numel() == rows * out, "linear_backward: dy {} does not match x {}, w {}",
           dy.shape.str(), x.shape.str(), w.shape.str());
  if (dx.defined()) DT_CHECK(dx.numel() == x.numel(), "linear_backward: dx {} vs x {}", dx.shape.str(), x.shape.str());
  if (dw.defined()) DT_CHECK(dw.shape == w.shape, "linear_backward: dw {} vs w {}", dw.shape.str(), w.shape.str());
  dispatch_float(w.dtype, "linear_backward", [&](auto t) {
    using T = decltype(t);
    linear_backward_ref<T>(dx.defined() ? dx.ptr<T>() : nullptr, dw.defined() ? dw.ptr<T>() : nullptr,
                           dy.ptr<T>(), x.ptr<T>(), w.ptr<T>(), rows, in, out, T(alpha), accumulate_dx);
  });
}

}  // namespace dt

namespace dt {

// ---- embedding ----

void embedding_forward(Context& ctx, const Tensor& y, const Tensor& ids, const Tensor& w) {
  DT_CUDA_DISPATCH(embedding_forward, ctx, y, ids, w);
  const char* op = "embedding_forward";
  require_cpu(ctx, op);
  DT_CHECK(w.ndim() == 2, "{}: weight must be [vocab, dim], got {}", op, w.shape.str());
  int64_t vocab = w.size(0), dim = w.size(1), n = ids.numel();
  check_tensors(op, DType::kI32, {{"ids", &ids}});
  check_tensors(op, w.dtype, {{"y", &y}, {"w", &w}});
  DT_CHECK(y.size(-1) == dim && y.numel() == n * dim, "{}: y {} does not match ids {} and weight {}", op,
           y.shape.str(), ids.shape.str(), w.shape.str());
  dispatch_float(w.dtype, op, [&](auto t) {
    using T = decltype(t);
    embedding_forward_ref<T>(y.ptr<T>(), ids.ptr<int32_t>(), w.ptr<T>(), n, vocab, dim);
  });
}

void embedding_backward(Context& ctx, const Tensor& dw, const Tensor& dy, const Tensor& ids) {
  DT_CUDA_DISPATCH(embedding_backward, ctx, dw, dy, ids);
  const char* op = "embedding_backward";
  require_cpu(ctx, op);
  DT_CHECK(dw.ndim() == 2, "{}: dw must be [vocab, dim], got {}", op, dw.shape.str());
  int64_t vocab = dw.size(0), dim = dw.size(1), n = ids.numel();
  check_tensors(op, DType::kI32, {{"ids", &ids}});
  check_tensors(op, dw.dtype, {{"dw", &dw}, {"dy", &dy}});
  DT_CHECK(dy.size(-1) == dim && dy.numel() == n * dim, "{}: dy {} does not match ids {} and dw {}", op,
           dy.shape.str(), ids.shape.str(), dw.shape.str());
  dispatch_float(dw.dtype, op, [&](auto t) {
    using T = decltype(t);
    embedding_backward_ref<T>(dw.ptr<T>(), dy.ptr<T>(), ids.ptr<int32_t>(), n, vocab, dim);
  });
}

// ---- RMSNorm ----

namespace {

int64_t rmsnorm_rows(const char* op, const Tensor& x, const Tensor& w, const Tensor& rstd) {
  DT_CHECK(w.ndim() == 1 && x.ndim() >= 1 && x.size(-1) == w.size(0), "{}: weight {} does not match x {}", op,
           w.shape.str(), x.shape.str());
  int64_t rows = x.numel() / w.size(0);
  DT_CHECK(rstd.numel() == rows, "{}: rstd {} must have one entry per row of x {} ({} rows)", op,
           rstd.shape.str(), x.shape.str(), rows);
  return rows;
}

}  // namespace

void rmsnorm_forward(Context& ctx, const Tensor& y, const Tensor& rstd, const Tensor& x, const Tensor& w,
                     double eps, bool zero_centered) {
  DT_CUDA_DISPATCH(rmsnorm_forward, ctx, y, rstd, x, w, eps, zero_centered);
  const char* op = "rmsnorm_forward";
  require_cpu(ctx, op);
  int64_t rows = rmsnorm_rows(op, x, w, rstd);
  check_same_numel(op, "y", y, "x", x);
  check_tensors(op, x.dtype, {{"y", &y}, {"rstd", &rstd}, {"x", &x}, {"w", &w}});
  dispatch_float(x.dtype, op, [&](auto t) {
    using T = decltype(t);
    rmsnorm_forward_ref<T>(y.ptr<T>(), rstd.ptr<T>(), x.ptr<T>(), w.ptr<T>(), rows, w.size(0), T(eps),
                           zero_centered);
  });
}

void rmsnorm_backward(Context& ctx, const Tensor& dx, const Tensor& dw, const Tensor& dy, const Tensor& x,
                      const Tensor& w, const Tensor& rstd, bool zero_centered, const Tensor& residual) {
  DT_CUDA_DISPATCH(rmsnorm_backward, ctx, dx, dw, dy, x, w, rstd, zero_centered, residual);
  const char* op = "rmsnorm_backward";
  require_cpu(ctx, op);
  int64_t rows = rmsnorm_rows(op, x, w, rstd);
  check_same_numel(op, "dx", dx, "x", x);
  check_same_numel(op, "dy", dy, "x", x);
  if (residual.defined()) check_same_numel(op, "residual", residual, "x", x);
  if (dw.defined()) DT_CHECK(dw.shape == w.shape, "{}: dw {} vs w {}", op, dw.shape.str(), w.shape.str());
  check_tensors(op, x.dtype,
                {{"dx", &dx}, {"dw", &dw}, {"dy", &dy}, {"x", &x}, {"w", &w}, {"rstd", &rstd},
                 {"residual", &residual}});
  dispatch_float(x.dtype, op, [&](auto t) {
    using T = decltype(t);
    rmsnorm_backward_ref<T>(dx.ptr<T>(), dw.defined() ? dw.ptr<T>() : nullptr, dy.ptr<T>(), x.ptr<T>(),
                            w.ptr<T>(), rstd.ptr<T>(), rows, w.size(0), zero_centered,
                            residual.defined() ? residual.ptr<T>() : nullptr);
  });
}

// ---- elementwise: SwiGLU, sigmoid gate, residual add ----

void swiglu_forward(Context& ctx, const Tensor& h, const Tensor& gate, const Tensor& up) {
  DT_CUDA_DISPATCH(swiglu_forward, ctx, h, gate, up);
  const char* op = "swiglu_forward";
  require_cpu(ctx, op);
  check_same_numel(op, "h", h, "gate", gate);
  check_same_numel(op, "up", up, "gate", gate);
  check_tensors(op, gate.dtype, {{"h", &h}, {"gate", &gate}, {"up", &up}});
  dispatch_float(gate.dtype, op, [&](auto t) {
    using T = decltype(t);
    swiglu_forward_ref<T>(h.ptr<T>(), gate.ptr<T>(), up.ptr<T>(), gate.numel());
  });
}

void swiglu_backward(Context& ctx, const Tensor& dgate, const Tensor& dup, const Tensor& dh, const Tensor& gate,
                     const Tensor& up) {
  DT_CUDA_DISPATCH(swiglu_backward, ctx, dgate, dup, dh, gate, up);
  const char* op = "swiglu_backward";
  require_cpu(ctx, op);
  for (auto [name, t] : {std::pair{"dgate", &dgate}, {"dup", &dup}, {"dh", &dh}, {"up", &up}})
    check_same_numel(op, name, *t, "gate", gate);
  check_tensors(op, gate.dtype, {{"dgate", &dgate}, {"dup", &dup}, {"dh", &dh}, {"gate", &gate}, {"up", &up}});
  dispatch_float(gate.dtype, op, [&](auto t) {
    using T = decltype(t);
    swiglu_backward_ref<T>(dgate.ptr<T>(), dup.ptr<T>(), dh.ptr<T>(), gate.ptr<T>(), up.ptr<T>(), gate.numel());
  });
}

void sigmoid_gate_forward(Context& ctx, const Tensor& y, const Tensor& x, const Tensor& g) {
  DT_CUDA_DISPATCH(sigmoid_gate_forward, ctx, y, x, g);
  const char* op = "sigmoid_gate_forward";
  require_cpu(ctx, op);
  check_same_numel(op, "y", y, "x", x);
  check_same_numel(op, "g", g, "x", x);
  check_tensors(op, x.dtype, {{"y", &y}, {"x", &x}, {"g", &g}});
  dispatch_float(x.dtype, op, [&](auto t) {
    using T = decltype(t);
    sigmoid_gate_forward_ref<T>(y.ptr<T>(), x.ptr<T>(), g.ptr<T>(), x.numel());
  });
}

void sigmoid_gate_backward(Context& ctx, const Tensor& dx, const Tensor& dg, const Tensor& dy, const Tensor& x,
                           const Tensor& g) {
  DT_CUDA_DISPATCH(sigmoid_gate_backward, ctx, dx, dg, dy, x, g);
  const char* op = "sigmoid_gate_backward";
  require_cpu(ctx, op);
  for (auto [name, t] : {std::pair{"dx", &dx}, {"dg", &dg}, {"dy", &dy}, {"g", &g}})
    check_same_numel(op, name, *t, "x", x);
  check_tensors(op, x.dtype, {{"dx", &dx}, {"dg", &dg}, {"dy", &dy}, {"x", &x}, {"g", &g}});
  dispatch_float(x.dtype, op, [&](auto t) {
    using T = decltype(t);
    sigmoid_gate_backward_ref<T>(dx.ptr<T>(), dg.ptr<T>(), dy.ptr<T>(), x.ptr<T>(), g.ptr<T>(), x.numel());
  });
}

void residual_add(Context& ctx, const Tensor& y, const Tensor& a, const Tensor& b) {
  DT_CUDA_DISPATCH(residual_add, ctx, y, a, b);
  const char* op = "residual_add";
  require_cpu(ctx, op);
  check_same_numel(op, "y", y, "a", a);
  check_same_numel(op, "b", b, "a", a);
  check_tensors(op, a.dtype, {{"y", &y}, {"a", &a}, {"b", &b}});
  dispatch_float(a.dtype, op, [&](auto t) {
    using T = decltype(t);
    residual_add_ref<T>(y.ptr<T>(), a.ptr<T>(), b.ptr<T>(), a.numel());
  });
}

// ---- RoPE ----

namespace {

void rope_check(const char* op, const Tensor& y, const Tensor& x, int64_t rotary_dim, double theta) {
  DT_CHECK(x.ndim() == 4, "{}: x must be [B, T, H, D], got {}", op, x.shape.str());
  DT_CHECK(y.shape == x.shape, "{}: output {} must match input {}", op, y.shape.str(), x.shape.str());
  DT_CHECK(rotary_dim >= 0 && rotary_dim % 2 == 0 && rotary_dim <= x.size(3),
           "{}: rotary_dim {} must be even and at most the head dim {}", op, rotary_dim, x.size(3));
  DT_CHECK(theta > 0, "{}: rope theta must be positive, got {}", op, theta);
  check_tensors(op, x.dtype, {{"y", &y}, {"x", &x}});
}

}  // namespace

void rope_forward(Context& ctx, const Tensor& y, const Tensor& x, int64_t rotary_dim, double theta,
                  bool interleaved) {
  DT_CUDA_DISPATCH(rope_forward, ctx, y, x, rotary_dim, theta, interleaved);
  const char* op = "rope_forward";
  require_cpu(ctx, op);
  rope_check(op, y, x, rotary_dim, theta);
  dispatch_float(x.dtype, op, [&](auto t) {
    using T = decltype(t);
    rope_forward_ref<T>(y.ptr<T>(), x.ptr<T>(), x.size(0), x.size(1), x.size(2), x.size(3), rotary_dim, theta,
                        interleaved);
  });
}

void rope_backward(Context& ctx, const Tensor& dx, const Tensor& dy, int64_t rotary_dim, double theta,
                   bool interleaved) {
  DT_CUDA_DISPATCH(rope_backward, ctx, dx, dy, rotary_dim, theta, interleaved);
  const char* op = "rope_backward";
  require_cpu(ctx, op);
  rope_check(op, dx, dy, rotary_dim, theta);
  dispatch_float(dy.dtype, op, [&](auto t) {
    using T = decltype(t);
    rope_backward_ref<T>(dx.ptr<T>(), dy.ptr<T>(), dy.size(0), dy.size(1), dy.size(2), dy.size(3), rotary_dim,
                         theta, interleaved);
  });
}

// ---- attention ----

namespace {

struct AttnDims {
  int64_t B, T, H, Hkv, Dqk, Dv;
};

AttnDims attention_check(const char* op, const Tensor& o, const Tensor& lse, const Tensor& q, const Tensor& k,
                         const Tensor& v) {
  DT_CHECK(q.ndim() == 4 && k.ndim() == 4 && v.ndim() == 4,
           "{}: q {}, k {}, v {} must be [B, T, heads, head_dim]", op, q.shape.str(), k.shape.str(), v.shape.str());
  AttnDims d{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), v.size(3)};
  DT_CHECK(k.size(0) == d.B && k.size(1) == d.T && k.size(3) == d.Dqk, "{}: k {} does not match q {}", op,
           k.shape.str(), q.shape.str());
  DT_CHECK(v.size(0) == d.B && v.size(1) == d.T && v.size(2) == d.Hkv, "{}: v {} does not match k {}", op,
           v.shape.str(), k.shape.str());
  DT_CHECK(d.Hkv > 0 && d.H % d.Hkv == 0, "{}: {} KV heads must divide {} query heads", op, d.Hkv, d.H);
  check_shape(o, Shape{d.B, d.T, d.H, d.Dv}, "attention output o");
  DT_CHECK(lse.numel() == d.B * d.H * d.T, "{}: lse {} must hold B*H*T = {} values", op, lse.shape.str(),
           d.B * d.H * d.T);
  check_tensors(op, q.dtype, {{"o", &o}, {"lse", &lse}, {"q", &q}, {"k", &k}, {"v", &v}});
  return d;
}

}  // namespace

void attention_forward(Context& ctx, const Tensor& o, const Tensor& lse, const Tensor& q, const Tensor& k,
                       const Tensor& v, double scale) {
  DT_CUDA_DISPATCH(attention_forward, ctx, o, lse, q, k, v, scale);
  const char* op = "attention_forward";
  require_cpu(ctx, op);
  AttnDims d = attention_check(op, o, lse, q, k, v);
  dispatch_float(q.dtype, op, [&](auto t) {
    using T = decltype(t);
    attention_forward_ref<T>(o.ptr<T>(), lse.ptr<T>(), q.ptr<T>(), k.ptr<T>(), v.ptr<T>(), d.B, d.T, d.H, d.Hkv,
                             d.Dqk, d.Dv, T(scale));
  });
}

void attention_backward(Context& ctx, const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                        const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                        double scale) {
  DT_CUDA_DISPATCH(attention_backward, ctx, dq, dk, dv, dout, q, k, v, o, lse, scale);
  const char* op = "attention_backward";
  require_cpu(ctx, op);
  AttnDims d = attention_check(op, o, lse, q, k, v);
  check_shape(dq, q.shape, "attention_backward: dq");
  check_shape(dk, k.shape, "attention_backward: dk");
  check_shape(dv, v.shape, "attention_backward: dv");
  check_shape(dout, o.shape, "attention_backward: dout");
  check_tensors(op, q.dtype, {{"dq", &dq}, {"dk", &dk}, {"dv", &dv}, {"dout", &dout}});
  dispatch_float(q.dtype, op, [&](auto t) {
    using T = decltype(t);
    attention_backward_ref<T>(dq.ptr<T>(), dk.ptr<T>(), dv.ptr<T>(), dout.ptr<T>(), q.ptr<T>(), k.ptr<T>(),
                              v.ptr<T>(), o.ptr<T>(), lse.ptr<T>(), d.B, d.T, d.H, d.Hkv, d.Dqk, d.Dv, T(scale));
  });
}

// ---- per-head concat / split ----

namespace {

struct ConcatDims {
  int64_t rows, H, da, db;
  bool shared;
};

ConcatDims head_concat_check(const char* op, const Tensor& x, const Tensor& a, const Tensor& b) {
  DT_CHECK(x.ndim() >= 2 && a.ndim() == x.ndim() && b.ndim() == x.ndim(),
           "{}: x {}, a {}, b {} must all be [..., heads, dim]", op, x.shape.str(), a.shape.str(), b.shape.str());
  ConcatDims d{x.numel() / (x.size(-1) * x.size(-2)), x.size(-2), a.size(-1), b.size(-1), false};
  DT_CHECK(a.size(-2) == d.H && (b.size(-2) == d.H || b.size(-2) == 1) && d.da + d.db == x.size(-1),
           "{}: x {} is not the per-head concat of a {} and b {}", op, x.shape.str(), a.shape.str(),
           b.shape.str());
  d.shared = b.size(-2) != d.H;
  DT_CHECK(a.numel() == d.rows * d.H * d.da && b.numel() == d.rows * b.size(-2) * d.db,
           "{}: leading dims of x {}, a {}, b {} differ", op, x.shape.str(), a.shape.str(), b.shape.str());
  check_tensors(op, x.dtype, {{"x", &x}, {"a", &a}, {"b", &b}});
  return d;
}

}  // namespace

void head_concat_forward(Context& ctx, const Tensor& x, const Tensor& a, const Tensor& b) {
  DT_CUDA_DISPATCH(head_concat_forward, ctx, x, a, b);
  const char* op = "head_concat_forward";
  require_cpu(ctx, op);
  ConcatDims d = head_concat_check(op, x, a, b);
  dispatch_float(x.dtype, op, [&](auto t) {
    using T = decltype(t);
    head_concat_ref<T>(x.ptr<T>(), a.ptr<T>(), b.ptr<T>(), d.rows, d.H, d.da, d.db, d.shared);
  });
}

void head_concat_backward(Context& ctx, const Tensor& da, const Tensor& db, const Tensor& dx) {
  DT_CUDA_DISPATCH(head_concat_backward, ctx, da, db, dx);
  const char* op = "head_concat_backward";
  require_cpu(ctx, op);
  ConcatDims d = head_concat_check(op, dx, da, db);
  dispatch_float(dx.dtype, op, [&](auto t) {
    using T = decltype(t);
    head_split_ref<T>(da.ptr<T>(), db.ptr<T>(), dx.ptr<T>(), d.rows, d.H, d.da, d.db, d.shared);
  });
}

// ---- cross-entropy ----

namespace {

int64_t cross_entropy_check(const char* op, const Tensor& logits, const Tensor& lse, const Tensor& targets) {
  int64_t vocab = logits.size(-1), n = targets.numel();
  DT_CHECK(logits.numel() == n * vocab, "{}: logits {} do not match targets {}", op, logits.shape.str(),
           targets.shape.str());
  DT_CHECK(lse.numel() == n, "{}: lse {} must hold one value per target ({})", op, lse.shape.str(), n);
  check_tensors(op, DType::kI32, {{"targets", &targets}});
  check_tensors(op, logits.dtype, {{"logits", &logits}, {"lse", &lse}});
  return vocab;
}

}  // namespace

void cross_entropy_forward(Context& ctx, const Tensor& losses, const Tensor& lse, const Tensor& logits,
                           const Tensor& targets) {
  DT_CUDA_DISPATCH(cross_entropy_forward, ctx, losses, lse, logits, targets);
  const char* op = "cross_entropy_forward";
  require_cpu(ctx, op);
  int64_t vocab = cross_entropy_check(op, logits, lse, targets);
  check_same_numel(op, "losses", losses, "targets", targets);
  check_tensors(op, logits.dtype, {{"losses", &losses}});
  dispatch_float(logits.dtype, op, [&](auto t) {
    using T = decltype(t);
    cross_entropy_forward_ref<T>(losses.ptr<T>(), lse.ptr<T>(), logits.ptr<T>(), targets.ptr<int32_t>(),
                                 targets.numel(), vocab);
  });
}

void cross_entropy_backward(Context& ctx, const Tensor& dlogits, const Tensor& logits, const Tensor& lse,
                            const Tensor& targets, double grad_scale) {
  DT_CUDA_DISPATCH(cross_entropy_backward, ctx, dlogits, logits, lse, targets, grad_scale);
  const char* op = "cross_entropy_backward";
  require_cpu(ctx, op);
  int64_t vocab = cross_entropy_check(op, logits, lse, targets);
  check_same_numel(op, "dlogits", dlogits, "logits", logits);
  check_tensors(op, logits.dtype, {{"dlogits", &dlogits}});
  dispatch_float(logits.dtype, op, [&](auto t) {
    using T = decltype(t);
    cross_entropy_backward_ref<T>(dlogits.ptr<T>(), logits.ptr<T>(), lse.ptr<T>(), targets.ptr<int32_t>(),
                                  targets.numel(), vocab, T(grad_scale));
  });
}

void cross_entropy_fused(Context& ctx, const Tensor& losses, const Tensor& lse, const Tensor& logits,
                         const Tensor& targets, double grad_scale) {
  DT_CUDA_DISPATCH(cross_entropy_fused, ctx, losses, lse, logits, targets, grad_scale);
  cross_entropy_forward(ctx, losses, lse, logits, targets);
  cross_entropy_backward(ctx, logits, logits, lse, targets, grad_scale);
}

// ---- dtype conversion ----

void cast(Context& ctx, const Tensor& y, const Tensor& x) {
  const char* op = "cast";
  DT_CUDA_DISPATCH(cast, ctx, y, x);
  require_cpu(ctx, op);
  check_same_numel(op, "y", y, "x", x);
  DT_CHECK(x.is_contiguous() && y.is_contiguous(), "{}: x {} and y {} must be contiguous", op, x.str(), y.str());
  const int64_t n = x.numel();
  auto load = [&](int64_t i) -> double {
    switch (x.dtype) {
      case DType::kF32: return x.ptr<float>()[i];
      case DType::kF64: return x.ptr<double>()[i];
      case DType::kBF16: return bf16_to_f32(x.ptr<uint16_t>()[i]);
      default: DT_FAIL("{}: cannot convert from {}", op, dtype_name(x.dtype));
    }
  };
  for (int64_t i = 0; i < n; ++i) {
    double v = load(i);
    switch (y.dtype) {
      case DType::kF32: y.ptr<float>()[i] = static_cast<float>(v); break;
      case DType::kF64: y.ptr<double>()[i] = v; break;
      case DType::kBF16: y.ptr<uint16_t>()[i] = f32_to_bf16(static_cast<float>(v)); break;
      default: DT_FAIL("{}: cannot convert to {}", op, dtype_name(y.dtype));
    }
  }
}

}  // namespace dt
