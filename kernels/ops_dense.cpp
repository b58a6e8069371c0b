// The dense ops of kernels/ops.h: the shared argument checks (kernels/op_checks.h), then the GPU path
// (kernels/cuda_ops.h; RMSNorm's launchers directly) or the CPU references in kernels/cpu/.
#include <initializer_list>
#include <utility>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/swiglu.h"
#include "kernels/op_checks.h"
#include "kernels/ops_dispatch.h"

#ifdef DELTATRON_HAVE_CUDA
#include "kernels/cuda/dense_elem.h"
#include "kernels/cuda_context.h"
#endif

namespace dt {

namespace {

using ops_detail::dispatch_float;
using ops_detail::require_cpu;

using op_checks::same_numel;
using op_checks::cpu_tensors;

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
  const auto [n, vocab, dim] = op_checks::embedding(op, "y", y, ids, "weight", w);
  cpu_tensors(op, DType::kI32, {{"ids", &ids}});
  cpu_tensors(op, w.dtype, {{"y", &y}, {"w", &w}});
  dispatch_float(w.dtype, op, [&](auto t) {
    using T = decltype(t);
    embedding_forward_ref<T>(y.ptr<T>(), ids.ptr<int32_t>(), w.ptr<T>(), n, vocab, dim);
  });
}

void embedding_backward(Context& ctx, const Tensor& dw, const Tensor& dy, const Tensor& ids) {
  DT_CUDA_DISPATCH(embedding_backward, ctx, dw, dy, ids);
  const char* op = "embedding_backward";
  require_cpu(ctx, op);
  const auto [n, vocab, dim] = op_checks::embedding(op, "dy", dy, ids, "dw", dw);
  cpu_tensors(op, DType::kI32, {{"ids", &ids}});
  cpu_tensors(op, dw.dtype, {{"dw", &dw}, {"dy", &dy}});
  dispatch_float(dw.dtype, op, [&](auto t) {
    using T = decltype(t);
    embedding_backward_ref<T>(dw.ptr<T>(), dy.ptr<T>(), ids.ptr<int32_t>(), n, vocab, dim);
  });
}

// ---- RMSNorm: the shared checks, then the kernels (kernels/cuda/rmsnorm.cu) or the reference ----

void rmsnorm_forward(Context& ctx, const Tensor& y, const Tensor& rstd, const Tensor& x, const Tensor& w,
                     double eps, bool zero_centered) {
  const char* op = "rmsnorm_forward";
  const op_checks::RmsNormDims d = op_checks::rmsnorm_forward(op, y, rstd, x, w);
#ifdef DELTATRON_HAVE_CUDA
  if (ctx.device == Device::kCUDA) {
    op_checks::gpu_tensors(op, DType::kBF16, {{"y", &y}, {"x", &x}});
    op_checks::gpu_tensors(op, DType::kF32, {{"w", &w}, {"rstd", &rstd}});
    cuda::RmsNormParams p;
    p.rows = d.rows, p.dim = d.dim, p.eps = static_cast<float>(eps), p.zero_centered = zero_centered;
    p.x = static_cast<const uint16_t*>(x.data), p.w = w.ptr<float>(), p.rstd = rstd.ptr<float>();
    p.y = static_cast<uint16_t*>(y.data);
    return cuda::rmsnorm_forward_launch(p, ctx.stream);
  }
#endif
  require_cpu(ctx, op);
  cpu_tensors(op, x.dtype, {{"y", &y}, {"rstd", &rstd}, {"x", &x}, {"w", &w}});
  dispatch_float(x.dtype, op, [&](auto t) {
    using T = decltype(t);
    rmsnorm_forward_ref<T>(y.ptr<T>(), rstd.ptr<T>(), x.ptr<T>(), w.ptr<T>(), d.rows, d.dim, T(eps), zero_centered);
  });
}

void rmsnorm_backward(Context& ctx, const Tensor& dx, const Tensor& dw, const Tensor& dy, const Tensor& x,
                      const Tensor& w, const Tensor& rstd, bool zero_centered, const Tensor& residual) {
  const char* op = "rmsnorm_backward";
  const op_checks::RmsNormDims d = op_checks::rmsnorm_backward(op, dx, dw, dy, x, w, rstd, residual);
#ifdef DELTATRON_HAVE_CUDA
  if (ctx.device == Device::kCUDA) {
    op_checks::gpu_tensors(op, DType::kBF16, {{"dx", &dx}, {"dy", &dy}, {"x", &x}});
    op_checks::gpu_tensors(op, DType::kF32, {{"w", &w}, {"rstd", &rstd}});
    if (residual.defined()) op_checks::gpu_tensors(op, DType::kBF16, {{"residual", &residual}});
    if (dw.defined()) op_checks::gpu_tensors(op, DType::kF32, {{"dw", &dw}});
    cuda::RmsNormParams p;
    p.rows = d.rows, p.dim = d.dim, p.zero_centered = zero_centered;
    p.x = static_cast<const uint16_t*>(x.data), p.w = w.ptr<float>(), p.rstd = rstd.ptr<float>();
    p.dy = static_cast<const uint16_t*>(dy.data), p.dx = static_cast<uint16_t*>(dx.data);
    p.dw = dw.defined() ? dw.ptr<float>() : nullptr;
    p.residual = residual.defined() ? static_cast<const uint16_t*>(residual.data) : nullptr;
    // dw's per-chunk partials (rmsnorm_backward_scratch_bytes) come from the context's scratch pool.
    return cuda::rmsnorm_backward_launch(p, nullptr, cuda_scratch_pool(ctx), ctx.stream);
  }
#endif
  require_cpu(ctx, op);
  cpu_tensors(op, x.dtype,
              {{"dx", &dx}, {"dw", &dw}, {"dy", &dy}, {"x", &x}, {"w", &w}, {"rstd", &rstd},
               {"residual", &residual}});
  dispatch_float(x.dtype, op, [&](auto t) {
    using T = decltype(t);
    rmsnorm_backward_ref<T>(dx.ptr<T>(), dw.defined() ? dw.ptr<T>() : nullptr, dy.ptr<T>(), x.ptr<T>(),
                            w.ptr<T>(), rstd.ptr<T>(), d.rows, d.dim, zero_centered,
                            residual.defined() ? residual.ptr<T>() : nullptr);
  });
}

// ---- elementwise: SwiGLU, sigmoid gate, residual add ----

void swiglu_forward(Context& ctx, const Tensor& h, const Tensor& gate, const Tensor& up) {
  DT_CUDA_DISPATCH(swiglu_forward, ctx, h, gate, up);
  const char* op = "swiglu_forward";
  require_cpu(ctx, op);
  op_checks::elementwise(op, "gate", gate, {{"h", &h}, {"up", &up}});
  cpu_tensors(op, gate.dtype, {{"h", &h}, {"gate", &gate}, {"up", &up}});
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
  op_checks::elementwise(op, "gate", gate, {{"dgate", &dgate}, {"dup", &dup}, {"dh", &dh}, {"up", &up}});
  cpu_tensors(op, gate.dtype, {{"dgate", &dgate}, {"dup", &dup}, {"dh", &dh}, {"gate", &gate}, {"up", &up}});
  dispatch_float(gate.dtype, op, [&](auto t) {
    using T = decltype(t);
    swiglu_backward_ref<T>(dgate.ptr<T>(), dup.ptr<T>(), dh.ptr<T>(), gate.ptr<T>(), up.ptr<T>(), gate.numel());
  });
}

void sigmoid_gate_forward(Context& ctx, const Tensor& y, const Tensor& x, const Tensor& g) {
  DT_CUDA_DISPATCH(sigmoid_gate_forward, ctx, y, x, g);
  const char* op = "sigmoid_gate_forward";
  require_cpu(ctx, op);
  op_checks::elementwise(op, "x", x, {{"y", &y}, {"g", &g}});
  cpu_tensors(op, x.dtype, {{"y", &y}, {"x", &x}, {"g", &g}});
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
  op_checks::elementwise(op, "x", x, {{"dx", &dx}, {"dg", &dg}, {"dy", &dy}, {"g", &g}});
  cpu_tensors(op, x.dtype, {{"dx", &dx}, {"dg", &dg}, {"dy", &dy}, {"x", &x}, {"g", &g}});
  dispatch_float(x.dtype, op, [&](auto t) {
    using T = decltype(t);
    sigmoid_gate_backward_ref<T>(dx.ptr<T>(), dg.ptr<T>(), dy.ptr<T>(), x.ptr<T>(), g.ptr<T>(), x.numel());
  });
}

void residual_add(Context& ctx, const Tensor& y, const Tensor& a, const Tensor& b) {
  DT_CUDA_DISPATCH(residual_add, ctx, y, a, b);
  const char* op = "residual_add";
  require_cpu(ctx, op);
  op_checks::elementwise(op, "a", a, {{"y", &y}, {"b", &b}});
  cpu_tensors(op, a.dtype, {{"y", &y}, {"a", &a}, {"b", &b}});
  dispatch_float(a.dtype, op, [&](auto t) {
    using T = decltype(t);
    residual_add_ref<T>(y.ptr<T>(), a.ptr<T>(), b.ptr<T>(), a.numel());
  });
}

// ---- RoPE ----

namespace {

void rope_check(const char* op, const Tensor& y, const Tensor& x, int64_t rotary_dim, double theta) {
  op_checks::rope(op, y, x, rotary_dim, theta);
  cpu_tensors(op, x.dtype, {{"y", &y}, {"x", &x}});
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
  cpu_tensors(op, q.dtype, {{"o", &o}, {"lse", &lse}, {"q", &q}, {"k", &k}, {"v", &v}});
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
  cpu_tensors(op, q.dtype, {{"dq", &dq}, {"dk", &dk}, {"dv", &dv}, {"dout", &dout}});
  dispatch_float(q.dtype, op, [&](auto t) {
    using T = decltype(t);
    attention_backward_ref<T>(dq.ptr<T>(), dk.ptr<T>(), dv.ptr<T>(), dout.ptr<T>(), q.ptr<T>(), k.ptr<T>(),
                              v.ptr<T>(), o.ptr<T>(), lse.ptr<T>(), d.B, d.T, d.H, d.Hkv, d.Dqk, d.Dv, T(scale));
  });
}

// ---- per-head concat / split ----

namespace {

op_checks::HeadConcatDims head_concat_check(const char* op, const Tensor& x, const Tensor& a, const Tensor& b) {
  const op_checks::HeadConcatDims d = op_checks::head_concat(op, x, a, b);
  cpu_tensors(op, x.dtype, {{"x", &x}, {"a", &a}, {"b", &b}});
  return d;
}

}  // namespace

void head_concat_forward(Context& ctx, const Tensor& x, const Tensor& a, const Tensor& b) {
  DT_CUDA_DISPATCH(head_concat_forward, ctx, x, a, b);
  const char* op = "head_concat_forward";
  require_cpu(ctx, op);
  const op_checks::HeadConcatDims d = head_concat_check(op, x, a, b);
  dispatch_float(x.dtype, op, [&](auto t) {
    using T = decltype(t);
    head_concat_ref<T>(x.ptr<T>(), a.ptr<T>(), b.ptr<T>(), d.rows, d.H, d.da, d.db, d.shared());
  });
}

void head_concat_backward(Context& ctx, const Tensor& da, const Tensor& db, const Tensor& dx) {
  DT_CUDA_DISPATCH(head_concat_backward, ctx, da, db, dx);
  const char* op = "head_concat_backward";
  require_cpu(ctx, op);
  const op_checks::HeadConcatDims d = head_concat_check(op, dx, da, db);
  dispatch_float(dx.dtype, op, [&](auto t) {
    using T = decltype(t);
    head_split_ref<T>(da.ptr<T>(), db.ptr<T>(), dx.ptr<T>(), d.rows, d.H, d.da, d.db, d.shared());
  });
}

// ---- cross-entropy ----

namespace {

int64_t cross_entropy_check(const char* op, const Tensor& logits, const Tensor& lse, const Tensor& targets) {
  const int64_t vocab = op_checks::cross_entropy(op, logits, lse, targets).vocab;
  cpu_tensors(op, DType::kI32, {{"targets", &targets}});
  cpu_tensors(op, logits.dtype, {{"logits", &logits}, {"lse", &lse}});
  return vocab;
}

}  // namespace

void cross_entropy_forward(Context& ctx, const Tensor& losses, const Tensor& lse, const Tensor& logits,
                           const Tensor& targets) {
  DT_CUDA_DISPATCH(cross_entropy_forward, ctx, losses, lse, logits, targets);
  const char* op = "cross_entropy_forward";
  require_cpu(ctx, op);
  int64_t vocab = cross_entropy_check(op, logits, lse, targets);
  same_numel(op, "losses", losses, "targets", targets);
  cpu_tensors(op, logits.dtype, {{"losses", &losses}});
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
  same_numel(op, "dlogits", dlogits, "logits", logits);
  cpu_tensors(op, logits.dtype, {{"dlogits", &dlogits}});
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
  same_numel(op, "y", y, "x", x);
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
