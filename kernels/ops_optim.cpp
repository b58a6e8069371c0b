// The optimizer ops of kernels/ops.h (optim section): the CPU loops here, the GPU's fused
// launches in kernels/cuda/ (kernels/cuda_ops.h). The CPU arithmetic is PyTorch's AdamW with
// the scalars and each update in double.
#include <cmath>

#include "kernels/ops_dispatch.h"

namespace dt {

namespace {

using ops_detail::require_cpu;

template <class T>
void adamw_update_ref(T* p, T* m, T* v, const T* g, int64_t n, double decay_factor, double b1, double b2,
                      double step_size, double bc2_sqrt, double eps, double grad_scale) {
  const bool scaled = grad_scale != 1.0;
  for (int64_t i = 0; i < n; ++i) {
    // The clipping factor folded in with scale_ref's rounding: T(g * grad_scale), the same bits
    // as scale_tensors then the update; g stays as it is.
    double gi = scaled ? static_cast<double>(static_cast<T>(g[i] * grad_scale)) : static_cast<double>(g[i]);
    m[i] = static_cast<T>(b1 * m[i] + (1.0 - b1) * gi);  // the update reads the stored moments
    v[i] = static_cast<T>(b2 * v[i] + (1.0 - b2) * gi * gi);
    double mi = m[i], vi = v[i];
    double pi = static_cast<double>(p[i]) * decay_factor;
    p[i] = static_cast<T>(pi - step_size * mi / (std::sqrt(vi) / bc2_sqrt + eps));
  }
}

template <class T>
double sum_squares_ref(const T* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

template <class T>
void scale_ref(T* x, int64_t n, double factor) {
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<T>(x[i] * factor);
}

void check_float(const char* op, const char* name, const Tensor& t) {
  DT_CHECK(t.dtype == DType::kF32 || t.dtype == DType::kF64, "{}: {} is {}; expected f32 or f64", op, name, t.str());
  DT_CHECK(t.is_contiguous(), "{}: {} {} must be contiguous", op, name, t.str());
}

}  // namespace

void adamw_update(Context& ctx, std::span<const AdamWTensor> tensors, double beta1, double beta2, double step_size,
                  double bc2_sqrt, double eps, double grad_scale) {
  const char* op = "adamw_update";
  DT_CHECK(std::isfinite(grad_scale), "{}: grad_scale is {}; the gradient scale (the clipping factor) must be finite",
           op, grad_scale);
  DT_CUDA_DISPATCH(adamw_update, ctx, tensors, beta1, beta2, step_size, bc2_sqrt, eps, grad_scale);
  require_cpu(ctx, op);
  for (const AdamWTensor& t : tensors) {
    check_float(op, "p", t.p);
    for (const Tensor* x : {&t.g, &t.m, &t.v}) {
      DT_CHECK(x->dtype == t.p.dtype && x->numel() == t.p.numel() && x->is_contiguous(),
               "{}: p {}, g {}, m {}, v {} must share dtype and size", op, t.p.str(), t.g.str(), t.m.str(),
               t.v.str());
    }
    DT_CHECK(!t.p_compute.defined(), "{}: p_compute is for the GPU; the CPU updates p only", op);
    if (t.p.dtype == DType::kF64)
      adamw_update_ref(t.p.ptr<double>(), t.m.ptr<double>(), t.v.ptr<double>(), t.g.ptr<double>(), t.p.numel(),
                       t.decay_factor, beta1, beta2, step_size, bc2_sqrt, eps, grad_scale);
    else
      adamw_update_ref(t.p.ptr<float>(), t.m.ptr<float>(), t.v.ptr<float>(), t.g.ptr<float>(), t.p.numel(),
                       t.decay_factor, beta1, beta2, step_size, bc2_sqrt, eps, grad_scale);
  }
}

double sum_squares(Context& ctx, std::span<const Tensor> xs) {
  DT_CUDA_DISPATCH(sum_squares, ctx, xs);
  require_cpu(ctx, "sum_squares");
  double s = 0;
  for (const Tensor& x : xs) {
    check_float("sum_squares", "x", x);
    s += x.dtype == DType::kF64 ? sum_squares_ref(x.ptr<double>(), x.numel()) : sum_squares_ref(x.ptr<float>(), x.numel());
  }
  return s;
}

void scale_tensors(Context& ctx, std::span<const Tensor> xs, double factor) {
  DT_CUDA_DISPATCH(scale_tensors, ctx, xs, factor);
  require_cpu(ctx, "scale_tensors");
  for (const Tensor& x : xs) {
    check_float("scale_tensors", "x", x);
    if (x.dtype == DType::kF64)
      scale_ref(x.ptr<double>(), x.numel(), factor);
    else
      scale_ref(x.ptr<float>(), x.numel(), factor);
  }
}

}  // namespace dt
