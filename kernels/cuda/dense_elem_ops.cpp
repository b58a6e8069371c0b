// The Tensor-level CUDA entry points (kernels/cuda_ops.h) of the elementwise dense ops: embedding,
// RMSNorm, SwiGLU, sigmoid gate, residual add, RoPE, head concat/split, cast. Each checks the
// context, devices, dtypes (kernels/ops.h, dense section: activations bf16, w/dw/rstd fp32),
// shapes and contiguity, then calls its launcher in kernels/cuda/*.cu (kernels/cuda/dense_elem.h).
#include <initializer_list>
#include <utility>

#include "kernels/cuda/dense_elem.h"
#include "kernels/cuda_context.h"
#include "kernels/cuda_ops.h"

namespace dt::cuda {

namespace {

using Named = std::pair<const char*, const Tensor*>;

void check_context(const Context& ctx, const char* op) {
  DT_CHECK(ctx.device == Device::kCUDA, "{}: the CUDA path was called with a CPU context", op);
}

// Each (name, tensor) must be defined, on the GPU, of `dtype` and contiguous.
void check_gpu(const char* op, DType dtype, std::initializer_list<Named> ts) {
  for (auto [name, t] : ts) {
    DT_CHECK(t->defined(), "{}: {} is undefined (a null tensor)", op, name);
    DT_CHECK(t->device == Device::kCUDA, "{}: {} {} is on the CPU; the CUDA path needs every tensor on the GPU", op,
             name, t->str());
    DT_CHECK(t->dtype == dtype, "{}: {} is {}, expected {} on the GPU (kernels/ops.h, dense section)", op, name,
             t->str(), dtype_name(dtype));
    DT_CHECK(t->is_contiguous(), "{}: {} {} must be contiguous", op, name, t->str());
  }
}

void check_same_numel(const char* op, const char* a_name, const Tensor& a, const char* b_name, const Tensor& b) {
  DT_CHECK(a.numel() == b.numel(), "{}: {} {} and {} {} must have the same number of elements", op, a_name,
           a.shape.str(), b_name, b.shape.str());
}

uint16_t* bf16(const Tensor& t) { return static_cast<uint16_t*>(t.data); }
float* f32(const Tensor& t) { return static_cast<float*>(t.data); }

}  // namespace

// ---- embedding ----

void embedding_forward(Context& ctx, const Tensor& y, const Tensor& ids, const Tensor& w) {
  const char* op = "embedding_forward";
  check_context(ctx, op);
  check_gpu(op, DType::kI32, {{"ids", &ids}});
  check_gpu(op, DType::kBF16, {{"y", &y}, {"w", &w}});
  DT_CHECK(w.ndim() == 2, "{}: weight must be [vocab, dim], got {}", op, w.shape.str());
  const int64_t vocab = w.size(0), dim = w.size(1), n = ids.numel();
  DT_CHECK(y.size(-1) == dim && y.numel() == n * dim, "{}: y {} does not match ids {} and weight {}", op,
           y.shape.str(), ids.shape.str(), w.shape.str());
  embedding_forward_launch(bf16(y), static_cast<const int32_t*>(ids.data), bf16(w), n, vocab, dim,
                                       ctx.stream);
}

void embedding_backward(Context& ctx, const Tensor& dw, const Tensor& dy, const Tensor& ids) {
  const char* op = "embedding_backward";
  check_context(ctx, op);
  check_gpu(op, DType::kI32, {{"ids", &ids}});
  check_gpu(op, DType::kF32, {{"dw", &dw}});
  check_gpu(op, DType::kBF16, {{"dy", &dy}});
  DT_CHECK(dw.ndim() == 2, "{}: dw must be [vocab, dim], got {}", op, dw.shape.str());
  const int64_t vocab = dw.size(0), dim = dw.size(1), n = ids.numel();
  DT_CHECK(dy.size(-1) == dim && dy.numel() == n * dim, "{}: dy {} does not match ids {} and dw {}", op,
           dy.shape.str(), ids.shape.str(), dw.shape.str());
  // Scratch (sort keys and positions, CUB's temporary storage) comes from the context's scratch pool;
  // embedding_backward_scratch_bytes gives its size for a preallocated workspace.
  embedding_backward_launch(f32(dw), bf16(dy), static_cast<const int32_t*>(ids.data), n, vocab, dim,
                                        nullptr, cuda_scratch_pool(ctx), ctx.stream);
}

// ---- RMSNorm ----

namespace {

RmsNormParams rmsnorm_params(const char* op, const Tensor& x, const Tensor& w, const Tensor& rstd) {
  DT_CHECK(w.ndim() == 1 && x.ndim() >= 1 && x.size(-1) == w.size(0), "{}: weight {} does not match x {}", op,
           w.shape.str(), x.shape.str());
  RmsNormParams p;
  p.dim = w.size(0);
  p.rows = p.dim > 0 ? x.numel() / p.dim : 0;
  DT_CHECK(rstd.numel() == p.rows, "{}: rstd {} must have one entry per row of x {} ({} rows)", op,
           rstd.shape.str(), x.shape.str(), p.rows);
  p.x = bf16(x), p.w = f32(w), p.rstd = f32(rstd);
  return p;
}

}  // namespace

void rmsnorm_forward(Context& ctx, const Tensor& y, const Tensor& rstd, const Tensor& x, const Tensor& w, double eps,
                     bool zero_centered) {
  const char* op = "rmsnorm_forward";
  check_context(ctx, op);
  check_gpu(op, DType::kBF16, {{"y", &y}, {"x", &x}});
  check_gpu(op, DType::kF32, {{"w", &w}, {"rstd", &rstd}});
  check_same_numel(op, "y", y, "x", x);
  RmsNormParams p = rmsnorm_params(op, x, w, rstd);
  p.eps = static_cast<float>(eps), p.zero_centered = zero_centered, p.y = bf16(y);
  rmsnorm_forward_launch(p, ctx.stream);
}

void rmsnorm_backward(Context& ctx, const Tensor& dx, const Tensor& dw, const Tensor& dy, const Tensor& x,
                      const Tensor& w, const Tensor& rstd, bool zero_centered, const Tensor& residual) {
  const char* op = "rmsnorm_backward";
  check_context(ctx, op);
  check_gpu(op, DType::kBF16, {{"dx", &dx}, {"dy", &dy}, {"x", &x}});
  check_gpu(op, DType::kF32, {{"w", &w}, {"rstd", &rstd}});
  check_same_numel(op, "dx", dx, "x", x);
  check_same_numel(op, "dy", dy, "x", x);
  if (residual.defined()) {
    check_gpu(op, DType::kBF16, {{"residual", &residual}});
    check_same_numel(op, "residual", residual, "x", x);
  }
  if (dw.defined()) {
    check_gpu(op, DType::kF32, {{"dw", &dw}});
    DT_CHECK(dw.shape == w.shape, "{}: dw {} vs w {}", op, dw.shape.str(), w.shape.str());
  }
  RmsNormParams p = rmsnorm_params(op, x, w, rstd);
  p.zero_centered = zero_centered, p.dy = bf16(dy), p.dx = bf16(dx), p.dw = dw.defined() ? f32(dw) : nullptr;
  p.residual = residual.defined() ? bf16(residual) : nullptr;
  // dw's per-chunk partials (rmsnorm_backward_scratch_bytes) come from the context's scratch pool.
  rmsnorm_backward_launch(p, nullptr, cuda_scratch_pool(ctx), ctx.stream);
}

// ---- elementwise: SwiGLU, sigmoid gate, residual add ----

void swiglu_forward(Context& ctx, const Tensor& h, const Tensor& gate, const Tensor& up) {
  const char* op = "swiglu_forward";
  check_context(ctx, op);
  check_gpu(op, DType::kBF16, {{"h", &h}, {"gate", &gate}, {"up", &up}});
  check_same_numel(op, "h", h, "gate", gate);
  check_same_numel(op, "up", up, "gate", gate);
  swiglu_forward_launch(bf16(h), bf16(gate), bf16(up), gate.numel(), ctx.stream);
}

void swiglu_backward(Context& ctx, const Tensor& dgate, const Tensor& dup, const Tensor& dh, const Tensor& gate,
                     const Tensor& up) {
  const char* op = "swiglu_backward";
  check_context(ctx, op);
  check_gpu(op, DType::kBF16, {{"dgate", &dgate}, {"dup", &dup}, {"dh", &dh}, {"gate", &gate}, {"up", &up}});
  for (auto [name, t] : {Named{"dgate", &dgate}, {"dup", &dup}, {"dh", &dh}, {"up", &up}})
    check_same_numel(op, name, *t, "gate", gate);
  swiglu_backward_launch(bf16(dgate), bf16(dup), bf16(dh), bf16(gate), bf16(up), gate.numel(),
                                     ctx.stream);
}

void sigmoid_gate_forward(Context& ctx, const Tensor& y, const Tensor& x, const Tensor& g) {
  const char* op = "sigmoid_gate_forward";
  check_context(ctx, op);
  check_gpu(op, DType::kBF16, {{"y", &y}, {"x", &x}, {"g", &g}});
  check_same_numel(op, "y", y, "x", x);
  check_same_numel(op, "g", g, "x", x);
  sigmoid_gate_forward_launch(bf16(y), bf16(x), bf16(g), x.numel(), ctx.stream);
}

void sigmoid_gate_backward(Context& ctx, const Tensor& dx, const Tensor& dg, const Tensor& dy, const Tensor& x,
                           const Tensor& g) {
  const char* op = "sigmoid_gate_backward";
  check_context(ctx, op);
  check_gpu(op, DType::kBF16, {{"dx", &dx}, {"dg", &dg}, {"dy", &dy}, {"x", &x}, {"g", &g}});
  for (auto [name, t] : {Named{"dx", &dx}, {"dg", &dg}, {"dy", &dy}, {"g", &g}}) check_same_numel(op, name, *t, "x", x);
  sigmoid_gate_backward_launch(bf16(dx), bf16(dg), bf16(dy), bf16(x), bf16(g), x.numel(), ctx.stream);
}

void residual_add(Context& ctx, const Tensor& y, const Tensor& a, const Tensor& b) {
  const char* op = "residual_add";
  check_context(ctx, op);
  check_gpu(op, DType::kBF16, {{"y", &y}, {"a", &a}, {"b", &b}});
  check_same_numel(op, "y", y, "a", a);
  check_same_numel(op, "b", b, "a", a);
  residual_add_launch(bf16(y), bf16(a), bf16(b), a.numel(), ctx.stream);
}

// ---- RoPE ----

namespace {

RopeParams rope_params(const char* op, const Tensor& y, const Tensor& x, int64_t rotary_dim, double theta,
                                   bool interleaved) {
  check_gpu(op, DType::kBF16, {{"output", &y}, {"input", &x}});
  DT_CHECK(x.ndim() == 4, "{}: input must be [B, T, H, D], got {}", op, x.shape.str());
  DT_CHECK(y.shape == x.shape, "{}: output {} must match input {}", op, y.shape.str(), x.shape.str());
  DT_CHECK(rotary_dim >= 0 && rotary_dim % 2 == 0 && rotary_dim <= x.size(3),
           "{}: rotary_dim {} must be even and at most the head dim {}", op, rotary_dim, x.size(3));
  DT_CHECK(rotary_dim <= kRopeMaxRotaryDim, "{}: rotary_dim {} exceeds the GPU kernel's limit of {}", op,
           rotary_dim, kRopeMaxRotaryDim);
  DT_CHECK(theta > 0, "{}: rope theta must be positive, got {}", op, theta);
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
  check_gpu(op, DType::kBF16, {{"x", &x}, {"a", &a}, {"b", &b}});
  DT_CHECK(x.ndim() >= 2 && a.ndim() == x.ndim() && b.ndim() == x.ndim(),
           "{}: x {}, a {}, b {} must all be [..., heads, dim]", op, x.shape.str(), a.shape.str(), b.shape.str());
  HeadConcatParams p;
  p.H = x.size(-2), p.Hb = b.size(-2), p.da = a.size(-1), p.db = b.size(-1);
  DT_CHECK(a.size(-2) == p.H && (p.Hb == p.H || p.Hb == 1) && p.da + p.db == x.size(-1),
           "{}: x {} is not the per-head concat of a {} and b {} (b has H heads or 1 shared head)", op,
           x.shape.str(), a.shape.str(), b.shape.str());
  const int64_t per_row = x.size(-1) * x.size(-2);
  p.rows = per_row > 0 ? x.numel() / per_row : 0;
  DT_CHECK(a.numel() == p.rows * p.H * p.da && b.numel() == p.rows * p.Hb * p.db,
           "{}: leading dims of x {}, a {}, b {} differ", op, x.shape.str(), a.shape.str(), b.shape.str());
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
    check_gpu(op, t->dtype, {{name, t}});
  }
  check_same_numel(op, "y", y, "x", x);
  cast_launch(y.data, y.dtype == DType::kBF16, x.data, x.dtype == DType::kBF16, x.numel(), ctx.stream);
}

}  // namespace dt::cuda
