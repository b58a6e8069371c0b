// Shared by the kernels/ops_*.cpp dispatchers only (not part of the ops API): the GPU branch of an
// op, the CPU-only guard and the float/double dispatch of the CPU references.
#pragma once

#include "core/error.h"
#include "kernels/ops.h"

#ifdef DELTATRON_HAVE_CUDA
#include "kernels/cuda_ops.h"
// The GPU path of an op: kernels/cuda_ops.h, same name and arguments.
#define DT_CUDA_DISPATCH(fn, ...) \
  if (ctx.device == Device::kCUDA) return cuda::fn(__VA_ARGS__)
#else
#define DT_CUDA_DISPATCH(fn, ...) (void)0
#endif

namespace dt::ops_detail {

// Past the GPU branch: a CUDA context here means the op has no GPU implementation (a CUDA build)
// or this build has no CUDA backend at all.
inline void require_cpu(const Context& ctx, const char* op) {
#ifdef DELTATRON_HAVE_CUDA
  DT_CHECK(ctx.device == Device::kCPU, "{}: this op has no GPU implementation, only the CPU one (run with --device cpu)",
           op);
#else
  DT_CHECK(ctx.device == Device::kCPU, "{}: this build has no CUDA backend (nvcc was not found at configure time)",
           op);
#endif
}

// Calls f(T{}) with T = float or double by the tensor's dtype.
template <class F>
void dispatch_float(DType t, const char* op, F&& f) {
  if (t == DType::kF32) return f(float{});
  if (t == DType::kF64) return f(double{});
  DT_FAIL("{}: dtype {} not supported on the CPU (f32 or f64)", op, dtype_name(t));
}

}  // namespace dt::ops_detail
