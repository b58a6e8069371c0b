// The argument checks of the dense ops (kernels/ops.h), shared by their CPU path (kernels/ops_dense.cpp)
// and their CUDA path (kernels/cuda/*_ops.cpp), so that each check is written once:
//   - the shape checks of each op, returning the sizes the backends need;
//   - the tensor checks of each backend: cpu_tensors (every tensor of one float dtype, contiguous) and
//     gpu_tensors (defined, on the GPU, of the dtype kernels/ops.h gives the GPU, contiguous).
// Every failure throws dt::Error naming the op and the offending tensors.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <utility>

#include "core/error.h"
#include "core/tensor.h"

namespace dt::op_checks {

using Named = std::pair<const char*, const Tensor*>;

// ---- tensors ----

// The CPU path: each defined tensor holds `dtype` and is contiguous (undefined ones are optional).
inline void cpu_tensors(const char* op, DType dtype, std::initializer_list<Named> ts) {
  for (auto [name, t] : ts) {
    if (!t->defined()) continue;
    DT_CHECK(t->dtype == dtype, "{}: {} is {}, expected {}", op, name, t->str(), dtype_name(dtype));
    DT_CHECK(t->is_contiguous(), "{}: {} {} must be contiguous", op, name, t->str());
  }
}

// The CUDA path: each tensor is defined, on the GPU, holds `dtype` and is contiguous.
inline void gpu_tensors(const char* op, DType dtype, std::initializer_list<Named> ts) {
  for (auto [name, t] : ts) {
    DT_CHECK(t->defined(), "{}: {} is undefined (a null tensor)", op, name);
    DT_CHECK(t->device == Device::kCUDA, "{}: {} {} is on the CPU; the CUDA path needs every tensor on the GPU", op,
             name, t->str());
    DT_CHECK(t->dtype == dtype, "{}: {} is {}, expected {} on the GPU (kernels/ops.h, dense section)", op, name,
             t->str(), dtype_name(dtype));
    DT_CHECK(t->is_contiguous(), "{}: {} {} must be contiguous", op, name, t->str());
  }
}

inline void same_numel(const char* op, const char* a_name, const Tensor& a, const char* b_name, const Tensor& b) {
  DT_CHECK(a.numel() == b.numel(), "{}: {} {} and {} {} must have the same number of elements", op, a_name,
           a.shape.str(), b_name, b.shape.str());
}

// ---- embedding ----

struct EmbeddingDims {
  int64_t n = 0, vocab = 0, dim = 0;
};

// rows [n, dim] (y or dy) against ids [n] and the table [vocab, dim] (w or dw).
inline EmbeddingDims embedding(const char* op, const char* rows_name, const Tensor& rows, const Tensor& ids,
                               const char* table_name, const Tensor& table) {
  DT_CHECK(table.ndim() == 2, "{}: {} must be [vocab, dim], got {}", op, table_name, table.shape.str());
  const EmbeddingDims d{ids.numel(), table.size(0), table.size(1)};
  DT_CHECK(rows.size(-1) == d.dim && rows.numel() == d.n * d.dim, "{}: {} {} does not match ids {} and {} {}", op,
           rows_name, rows.shape.str(), ids.shape.str(), table_name, table.shape.str());
  return d;
}

// ---- RMSNorm ----

struct RmsNormDims {
  int64_t rows = 0, dim = 0;
};

inline RmsNormDims rmsnorm_rows(const char* op, const Tensor& x, const Tensor& w, const Tensor& rstd) {
  DT_CHECK(w.ndim() == 1 && x.ndim() >= 1 && x.size(-1) == w.size(0), "{}: weight {} does not match x {}", op,
           w.shape.str(), x.shape.str());
  RmsNormDims d;
  d.dim = w.size(0);
  d.rows = d.dim > 0 ? x.numel() / d.dim : 0;
  DT_CHECK(rstd.numel() == d.rows, "{}: rstd {} must have one entry per row of x {} ({} rows)", op,
           rstd.shape.str(), x.shape.str(), d.rows);
  return d;
}

inline RmsNormDims rmsnorm_forward(const char* op, const Tensor& y, const Tensor& rstd, const Tensor& x,
                                   const Tensor& w) {
  const RmsNormDims d = rmsnorm_rows(op, x, w, rstd);
  same_numel(op, "y", y, "x", x);
  return d;
}

// dw and residual are optional (undefined).
inline RmsNormDims rmsnorm_backward(const char* op, const Tensor& dx, const Tensor& dw, const Tensor& dy,
                                    const Tensor& x, const Tensor& w, const Tensor& rstd, const Tensor& residual) {
  const RmsNormDims d = rmsnorm_rows(op, x, w, rstd);
  same_numel(op, "dx", dx, "x", x);
  same_numel(op, "dy", dy, "x", x);
  if (residual.defined()) same_numel(op, "residual", residual, "x", x);
  if (dw.defined()) DT_CHECK(dw.shape == w.shape, "{}: dw {} vs w {}", op, dw.shape.str(), w.shape.str());
  return d;
}

// ---- elementwise ----

// Every tensor of `ts` has as many elements as `ref`.
inline void elementwise(const char* op, const char* ref_name, const Tensor& ref, std::initializer_list<Named> ts) {
  for (auto [name, t] : ts) same_numel(op, name, *t, ref_name, ref);
}

// ---- RoPE ----

// x, y [B, T, H, D] (y may be x); an even rotary_dim up to D; theta > 0.
inline void rope(const char* op, const Tensor& y, const Tensor& x, int64_t rotary_dim, double theta) {
  DT_CHECK(x.ndim() == 4, "{}: x must be [B, T, H, D], got {}", op, x.shape.str());
  DT_CHECK(y.shape == x.shape, "{}: output {} must match input {}", op, y.shape.str(), x.shape.str());
  DT_CHECK(rotary_dim >= 0 && rotary_dim % 2 == 0 && rotary_dim <= x.size(3),
           "{}: rotary_dim {} must be even and at most the head dim {}", op, rotary_dim, x.size(3));
  DT_CHECK(theta > 0, "{}: rope theta must be positive, got {}", op, theta);
}

// ---- per-head concat / split ----

struct HeadConcatDims {
  int64_t rows = 0, H = 0, Hb = 0, da = 0, db = 0;
  bool shared() const { return Hb != H; }  // b is one head shared by all
};

// x [..., H, da + db] = [a [..., H, da] | b [..., Hb, db]], Hb = H or 1.
inline HeadConcatDims head_concat(const char* op, const Tensor& x, const Tensor& a, const Tensor& b) {
  DT_CHECK(x.ndim() >= 2 && a.ndim() == x.ndim() && b.ndim() == x.ndim(),
           "{}: x {}, a {}, b {} must all be [..., heads, dim]", op, x.shape.str(), a.shape.str(), b.shape.str());
  HeadConcatDims d;
  d.H = x.size(-2), d.Hb = b.size(-2), d.da = a.size(-1), d.db = b.size(-1);
  DT_CHECK(a.size(-2) == d.H && (d.Hb == d.H || d.Hb == 1) && d.da + d.db == x.size(-1),
           "{}: x {} is not the per-head concat of a {} and b {} (b has H heads or 1 shared head)", op,
           x.shape.str(), a.shape.str(), b.shape.str());
  const int64_t per_row = x.size(-1) * x.size(-2);
  d.rows = per_row > 0 ? x.numel() / per_row : 0;
  DT_CHECK(a.numel() == d.rows * d.H * d.da && b.numel() == d.rows * d.Hb * d.db,
           "{}: leading dims of x {}, a {}, b {} differ", op, x.shape.str(), a.shape.str(), b.shape.str());
  return d;
}

// ---- cross-entropy ----

struct CrossEntropyDims {
  int64_t n = 0, vocab = 0;
};

// logits [..., vocab] with one row per target; lse one value per target.
inline CrossEntropyDims cross_entropy(const char* op, const Tensor& logits, const Tensor& lse,
                                      const Tensor& targets) {
  DT_CHECK(logits.ndim() >= 1 && logits.size(-1) > 0, "{}: logits {} must be [..., vocab]", op, logits.shape.str());
  const CrossEntropyDims d{targets.numel(), logits.size(-1)};
  DT_CHECK(logits.numel() == d.n * d.vocab, "{}: logits {} do not match targets {}", op, logits.shape.str(),
           targets.shape.str());
  DT_CHECK(lse.numel() == d.n, "{}: lse {} must hold one value per target ({})", op, lse.shape.str(), d.n);
  return d;
}

}  // namespace dt::op_checks
