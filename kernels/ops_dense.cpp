// CPU dispatch of the dense ops (kernels/ops.h) to the references in kernels/cpu/.
#include "kernels/cpu/linear.h"
#include "kernels/ops.h"

namespace dt {

namespace {

void require_cpu(const Context& ctx, const char* op) {
  DT_CHECK(ctx.device == Device::kCPU, "{}: the CUDA backend for this op is not built yet", op);
}

// Calls f(T{}) with T = float or double by the tensor's dtype.
template <class F>
void dispatch_float(DType t, const char* op, F&& f) {
  if (t == DType::kF32) return f(float{});
  if (t == DType::kF64) return f(double{});
  DT_FAIL("{}: dtype {} not supported on the CPU (f32 or f64)", op, dtype_name(t));
}

}  // namespace

void linear_forward(Context& ctx, const Tensor& y, const Tensor& x, const Tensor& w) {
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
                     const Tensor& w) {
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
                           dy.ptr<T>(), x.ptr<T>(), w.ptr<T>(), rows, in, out);
  });
}

}  // namespace dt
