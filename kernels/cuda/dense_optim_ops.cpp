// The Tensor-level CUDA entry points (kernels/cuda_ops.h) of the optimizer ops: AdamW, the global
// sum of squares, scaling. Each checks every tensor (on the GPU, fp32, contiguous, sizes) and
// hands one table of all of them to a single launch in kernels/cuda/optim.cu.
#include <vector>

#include "kernels/cuda/dense_elem.h"
#include "kernels/cuda_context.h"
#include "kernels/cuda_ops.h"

namespace dt::cuda {

namespace {

void check_context(const Context& ctx, const char* op) {
  DT_CHECK(ctx.device == Device::kCUDA, "{}: the CUDA path was called with a CPU context", op);
}

// Tensor `index` of the list, field `name`: defined, on the GPU, of `dtype`, contiguous.
void check_member(const char* op, size_t index, const char* name, const Tensor& t, DType dtype) {
  DT_CHECK(t.defined(), "{}: tensor {} of the list: {} is undefined", op, index, name);
  DT_CHECK(t.device == Device::kCUDA, "{}: tensor {} of the list: {} {} is on the CPU; the CUDA path needs it on the GPU",
           op, index, name, t.str());
  DT_CHECK(t.dtype == dtype, "{}: tensor {} of the list: {} is {}, expected {} on the GPU", op, index, name, t.str(),
           dtype_name(dtype));
  DT_CHECK(t.is_contiguous(), "{}: tensor {} of the list: {} {} must be contiguous", op, index, name, t.str());
}

}  // namespace

void adamw_update(Context& ctx, std::span<const AdamWTensor> tensors, double beta1, double beta2, double step_size,
                  double bc2_sqrt, double eps, double grad_scale) {
  const char* op = "adamw_update";
  check_context(ctx, op);
  std::vector<AdamWSlot> slots;
  slots.reserve(tensors.size());
  for (size_t k = 0; k < tensors.size(); ++k) {
    const AdamWTensor& t = tensors[k];
    check_member(op, k, "p", t.p, DType::kF32);
    check_member(op, k, "g", t.g, DType::kF32);
    check_member(op, k, "m", t.m, DType::kF32);
    check_member(op, k, "v", t.v, DType::kF32);
    const int64_t n = t.p.numel();
    DT_CHECK(t.g.numel() == n && t.m.numel() == n && t.v.numel() == n,
             "{}: tensor {} of the list: p {}, g {}, m {}, v {} must have the same number of elements", op, k,
             t.p.shape.str(), t.g.shape.str(), t.m.shape.str(), t.v.shape.str());
    if (t.p_compute.defined()) {
      check_member(op, k, "p_compute", t.p_compute, DType::kBF16);
      DT_CHECK(t.p_compute.numel() == n, "{}: tensor {} of the list: p_compute {} must match p {}", op, k,
               t.p_compute.shape.str(), t.p.shape.str());
    }
    AdamWSlot s;
    s.p = static_cast<float*>(t.p.data), s.g = static_cast<const float*>(t.g.data);
    s.m = static_cast<float*>(t.m.data), s.v = static_cast<float*>(t.v.data);
    s.pc = t.p_compute.defined() ? static_cast<uint16_t*>(t.p_compute.data) : nullptr;
    s.n = n, s.decay_factor = t.decay_factor;
    slots.push_back(s);
  }
  adamw_update_launch(slots.data(), static_cast<int64_t>(slots.size()), beta1, beta2, step_size, bc2_sqrt,
                      eps, grad_scale, cuda_scratch_pool(ctx), ctx.stream);
}

namespace {

void tensor_list(const char* op, std::span<const Tensor> xs, std::vector<float*>& ptrs, std::vector<int64_t>& ns) {
  for (size_t k = 0; k < xs.size(); ++k) {
    check_member(op, k, "x", xs[k], DType::kF32);
    ptrs.push_back(static_cast<float*>(xs[k].data));
    ns.push_back(xs[k].numel());
  }
}

}  // namespace

double sum_squares(Context& ctx, std::span<const Tensor> xs) {
  const char* op = "sum_squares";
  check_context(ctx, op);
  std::vector<float*> ptrs;
  std::vector<int64_t> ns;
  tensor_list(op, xs, ptrs, ns);
  return sum_squares_launch(ptrs.data(), ns.data(), static_cast<int64_t>(ptrs.size()), cuda_scratch_pool(ctx), ctx.stream);
}

void scale_tensors(Context& ctx, std::span<const Tensor> xs, double factor) {
  const char* op = "scale_tensors";
  check_context(ctx, op);
  std::vector<float*> ptrs;
  std::vector<int64_t> ns;
  tensor_list(op, xs, ptrs, ns);
  scale_tensors_launch(ptrs.data(), ns.data(), static_cast<int64_t>(ptrs.size()), factor, cuda_scratch_pool(ctx),
                       ctx.stream);
}

}  // namespace dt::cuda
