// The Tensor-level CUDA entry points (kernels/cuda_ops.h) of the elementwise dense ops: embedding,
// SwiGLU, sigmoid gate, residual add, RoPE, head concat/split, cast. Each checks the context, the
// shapes (kernels/op_checks.h, shared with the CPU path) and the GPU tensors (dtypes of kernels/ops.h,
// dense section: activations bf16, w/dw fp32; on the GPU, contiguous), then calls its launcher in
// kernels/cuda/*.cu (kernels/cuda/dense_elem.h). RMSNorm goes from kernels/ops_dense.cpp to its
// launchers directly.
#include <initializer_list>
#include <utility>

#include "kernels/cuda/dense_elem.h"
#include "kernels/cuda_context.h"
#include "kernels/cuda_ops.h"
#include "kernels/op_checks.h"

namespace dt::cuda {

namespace {

using op_checks::gpu_tensors;
using Named = op_checks::Named;

void check_context(const Context& ctx, const char* op) {
  DT_CHECK(ctx.device == Device::kCUDA, "{}: the CUDA path was called with a CPU context", op);
}

uint16_t* bf16(const Tensor& t) { return static_cast<uint16_t*>(t.data); }
float* f32(const Tensor& t) { return static_cast<float*>(t.data); }

}  // namespace

// ---- embedding ----

void embedding_forward(Context& ctx, const Tensor& y, const Tensor& ids, const Tensor& w) {
  const char* op = "embedding_forward";
  check_context(ctx, op);
  gpu_tensors(op, DType::kI32, {{"ids", &ids}});
  gpu_tensors(op, DType::kBF16, {{"y", &y}, {"w", &w}});
  const auto [n, vocab, dim] = op_checks::embedding(op, "y", y, ids, "weight", w);
  embedding_forward_launch(bf16(y), static_cast<const int32_t*>(ids.data), bf16(w), n, vocab, dim,
                           ctx.stream);
}

void embedding_backward(Context& ctx, const Tensor& dw, const Tensor& dy, const Tensor& ids) {
  const char* op = "embedding_backward";
  check_context(ctx, op);
  gpu_tensors(op, DType::kI32, {{"ids", &ids}});
  gpu_tensors(op, DType::kF32, {{"dw", &dw}});
  gpu_tensors(op, DType::kBF16, {{"dy", &dy}});
  const auto [n, vocab, dim] = op_checks::embedding(op, "dy", dy, ids, "dw", dw);
  // Scratch (sort keys and positions, CUB's temporary storage) comes from the context's scratch pool;
  // embedding_backward_scratch_bytes gives its size for a preallocated workspace.
  embedding_backward_launch(f32(dw), bf16(dy), static_cast<const int32_t*>(ids.data), n, vocab, dim,
                            nullptr, cuda_scratch_pool(ctx), ctx.stream);
}

// ---- elementwise: SwiGLU, sigmoid gate, residual add ----

void swiglu_forward(Context& ctx, const Tensor& h, const Tensor& gate, const Tensor& up) {
  const char* op = "swiglu_forward";
  check_context(ctx, op);
  gpu_tensors(op, DType::kBF16, {{"h", &h}, {"gate", &gate}, {"up", &up}});
  op_checks::elementwise(op, "gate", gate, {{"h", &h}, {"up", &up}});
  swiglu_forward_launch(bf16(h), bf16(gate), bf16(up), gate.numel(), ctx.stream);
}

void swiglu_backward(Context& ctx, const Tensor& dgate, const Tensor& dup, const Tensor& dh, const Tensor& gate,
                     const Tensor& up) {
  const char* op = "swiglu_backward";
  check_context(ctx, op);
  gpu_tensors(op, DType::kBF16, {{"dgate", &dgate}, {"dup", &dup}, {"dh", &dh}, {"gate", &gate}, {"up", &up}});
  op_checks::elementwise(op, "gate", gate, {{"dgate", &dgate}, {"dup", &dup}, {"dh", &dh}, {"up", &up}});
  swiglu_backward_launch(bf16(dgate), bf16(dup), bf16(dh), bf16(gate), bf16(up), gate.numel(),
                         ctx.stream);
}

void sigmoid_gate_forward(Context& ctx, const Tensor& y, const Tensor& x, const Tensor& g) {
  const char* op = "sigmoid_gate_forward";
  check_context(ctx, op);
  gpu_tensors(op, DType::kBF16, {{"y", &y}, {"x", &x}, {"g", &g}});
  op_checks::elementwise(op, "x", x, {{"y", &y}, {"g", &g}});
  sigmoid_gate_forward_launch(bf16(y), bf16(x), bf16(g), x.numel(), ctx.stream);
}

void sigmoid_gate_backward(Context& ctx, const Tensor& dx, const Tensor& dg, const Tensor& dy, const Tensor& x,
                           const Tensor& g) {
  const char* op = "sigmoid_gate_backward";
  check_context(ctx, op);
  gpu_tensors(op, DType::kBF16, {{"dx", &dx}, {"dg", &dg}, {"dy", &dy}, {"x", &x}, {"g", &g}});
  op_checks::elementwise(op, "x", x, {{"dx", &dx}, {"dg", &dg}, {"dy", &dy}, {"g", &g}});
  sigmoid_gate_backward_launch(bf16(dx), bf16(dg), bf16(dy), bf16(x), bf16(g), x.numel(), ctx.stream);
}

void residual_add(Context& ctx, const Tensor& y, const Tensor& a, const Tensor& b) {
  const char* op = "residual_add";
  check_context(ctx, op);
  gpu_tensors(op, DType::kBF16, {{"y", &y}, {"a", &a}, {"b", &b}});
  op_checks::elementwise(op, "a", a, {{"y", &y}, {"b", &b}});
  residual_add_launch(bf16(y), bf16(a), bf16(b), a.numel(), ctx.stream);
}

// ---- RoPE ----

namespace {

RopeParams rope_params(const char* op, const Tensor& y, const Tensor& x, int64_t rotary_dim, double theta,
                       bool interleaved) {
  gpu_tensors(op, DType::kBF16, {{"output", &y}, {"input", &x}});
  op_checks::rope(op, y, x, rotary_dim, theta);
  DT_CHECK(rotary_dim <= kRopeMaxRotaryDim, "{}: rotary_dim {} exceeds the GPU kernel's limit of {}", op,
           rotary_dim, kRopeMaxRotaryDim);
  RopeParams p;
  p.B = x.size(0), p.T = x.size(1), p.H = x.size(2), p.D = x.size(3);
  p.rotary_dim = rotary_dim, p.theta = theta, p.interleaved = interleaved;
  return p;
}

}  // namespace

void rope_forward(Context& ctx, const Tensor& y, const Tensor& x, int64_t rotary_dim, double theta, bool interleaved) {
  const char* op = "rope_forward";
  check_context(ctx, op);
  rope_forward_launch(bf16(y), bf16(x), rope_params(op, y, x, rotary_dim, theta, interleaved),
                      ctx.stream);
}

void rope_backward(Context& ctx, const Tensor& dx, const Tensor& dy, int64_t rotary_dim, double theta,
                   bool interleaved) {
  const char* op = "rope_backward";
  check_context(ctx, op);
  rope_backward_launch(bf16(dx), bf16(dy), rope_params(op, dx, dy, rotary_dim, theta, interleaved),
                       ctx.stream);
}

// ---- per-head concat / split ----

namespace {

HeadConcatParams head_concat_params(const char* op, const Tensor& x, const Tensor& a, const Tensor& b) {
  gpu_tensors(op, DType::kBF16, {{"x", &x}, {"a", &a}, {"b", &b}});
  const op_checks::HeadConcatDims d = op_checks::head_concat(op, x, a, b);
  HeadConcatParams p;
  p.rows = d.rows, p.H = d.H, p.Hb = d.Hb, p.da = d.da, p.db = d.db;
  return p;
}

}  // namespace

void head_concat_forward(Context& ctx, const Tensor& x, const Tensor& a, const Tensor& b) {
  const char* op = "head_concat_forward";
  check_context(ctx, op);
  head_concat_forward_launch(bf16(x), bf16(a), bf16(b), head_concat_params(op, x, a, b), ctx.stream);
}

void head_concat_backward(Context& ctx, const Tensor& da, const Tensor& db, const Tensor& dx) {
  const char* op = "head_concat_backward";
  check_context(ctx, op);
  head_concat_backward_launch(bf16(da), bf16(db), bf16(dx), head_concat_params(op, dx, da, db),
                              ctx.stream);
}

// ---- dtype conversion ----

void cast(Context& ctx, const Tensor& y, const Tensor& x) {
  const char* op = "cast";
  check_context(ctx, op);
  for (auto [name, t] : {Named{"y", &y}, {"x", &x}}) {
    DT_CHECK(t->dtype == DType::kF32 || t->dtype == DType::kBF16,
             "{}: {} is {}; the GPU converts between f32 and bf16 only", op, name, t->str());
    gpu_tensors(op, t->dtype, {{name, t}});
  }
  op_checks::same_numel(op, "y", y, "x", x);
  cast_launch(y.data, y.dtype == DType::kBF16, x.data, x.dtype == DType::kBF16, x.numel(), ctx.stream);
}

}  // namespace dt::cuda
