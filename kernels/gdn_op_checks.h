// The shape checks of the Gated DeltaNet ops (kernels/ops.h, gdn section) that the CPU dispatch
// (kernels/ops_gdn.cpp) and the CUDA one (kernels/cuda/gdn_ops.cpp) share: each backend checks
// dtypes and devices its own way, then turns the Tensors into its own arguments.
// Not part of the ops API.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "core/tensor.h"
#include "kernels/cpu/gdn_common.h"
#include "kernels/ops.h"

namespace dt::gdn_checks {

// The sizes of one delta-rule call, read from q [B, T, Hk, dk] and v [B, T, Hv, dv].
inline GdnDims delta_dims(const Tensor& q, const Tensor& v, const char* op) {
  DT_CHECK(q.ndim() == 4, "{}: q must be [B, T, Hk, dk], got {}", op, q.shape.str());
  DT_CHECK(v.ndim() == 4, "{}: v must be [B, T, Hv, dv], got {}", op, v.shape.str());
  GdnDims d{q.size(0), q.size(1), q.size(2), v.size(2), q.size(3), v.size(3)};
  DT_CHECK(v.size(0) == d.B && v.size(1) == d.T, "{}: v {} does not match q {} in [B, T]", op, v.shape.str(),
           q.shape.str());
  DT_CHECK(d.Hk > 0 && d.Hv % d.Hk == 0, "{}: value heads ({}) must be a multiple of key heads ({})", op, d.Hv,
           d.Hk);
  return d;
}

inline Shape qk_shape(const GdnDims& d) { return {d.B, d.T, d.Hk, d.dk}; }
inline Shape v_shape(const GdnDims& d) { return {d.B, d.T, d.Hv, d.dv}; }
inline Shape gate_shape(const GdnDims& d) { return {d.B, d.T, d.Hv}; }
inline Shape state_shape(const GdnDims& d) { return {d.B, d.Hv, d.dk, d.dv}; }
inline Shape rnorm_shape(const GdnDims& d) { return {d.B, d.T, d.Hk}; }

// The row stride of a [B, T, H, d] tensor of shape s whose (b, t) rows may be strided and whose
// heads are packed (a column slice of the conv output, gdn_head_view).
inline int64_t row_stride(const Tensor& t, const Shape& s, const char* op, const char* name) {
  DT_CHECK(t.shape == s, "{}: {} has shape {}, expected {}", op, name, t.shape.str(), s.str());
  const int64_t Tn = s[1], H = s[2], d = s[3];
  DT_CHECK((d <= 1 || t.stride[3] == 1) && (H <= 1 || t.stride[2] == d),
           "{}: {} {} must have packed heads (strides [.., .., {}, 1])", op, name, t.str(), d);
  DT_CHECK(s[0] <= 1 || Tn <= 1 || t.stride[0] == Tn * t.stride[1],
           "{}: {} {}: rows (b, t) must be evenly strided (stride[0] == T * stride[1])", op, name, t.str());
  const int64_t ld = Tn > 1 ? t.stride[1] : t.stride[0];
  DT_CHECK(s[0] * Tn <= 1 || ld >= H * d, "{}: {} {}: row stride {} is smaller than a row ({})", op, name, t.str(),
           ld, H * d);
  return std::max<int64_t>(ld, H * d);
}

inline void check_chunk(int chunk, const char* op) {
  DT_CHECK(chunk > 0, "{}: chunk size must be positive, got {} (0 selects the recurrent form in the layer)", op,
           chunk);
}

// The forward's GdnQkL2Norm: all four tensors or none. True when the l2norms are taken inside.
inline bool qk_l2norm_forward(const GdnQkL2Norm& l2, const char* op) {
  const int set = l2.q_hat.defined() + l2.k_hat.defined() + l2.q_rnorm.defined() + l2.k_rnorm.defined();
  DT_CHECK(set == 0 || set == 4, "{}: GdnQkL2Norm takes q_hat, k_hat, q_rnorm and k_rnorm together, got {} of 4", op,
           set);
  return set == 4;
}

// The backward's GdnQkL2Norm: q_rnorm and k_rnorm, both or neither (q_hat, k_hat unused).
inline bool qk_l2norm_backward(const GdnQkL2Norm& l2, const char* op) {
  DT_CHECK(l2.q_rnorm.defined() == l2.k_rnorm.defined(), "{}: GdnQkL2Norm takes q_rnorm and k_rnorm together", op);
  return l2.q_rnorm.defined();
}

inline void check_ndim(const Tensor& t, int ndim, const char* op, const char* name, const char* layout) {
  DT_CHECK(t.ndim() == ndim, "{}: {} must be {}, got {}", op, name, layout, t.shape.str());
}

// The conv's x [B, T, C] and w [C, 1, K] (or [C, K]).
struct ConvDims {
  int64_t B = 0, T = 0, C = 0, K = 0;
};
inline ConvDims conv_dims(const Tensor& x, const Tensor& w, const char* op) {
  check_ndim(x, 3, op, "x", "[B, T, C]");
  ConvDims c{x.size(0), x.size(1), x.size(2), 0};
  DT_CHECK((w.ndim() == 3 && w.size(1) == 1) || w.ndim() == 2, "{}: weight must be [C, 1, K], got {}", op,
           w.shape.str());
  DT_CHECK(w.size(0) == c.C, "{}: weight {} has {} channels, x {} has {}", op, w.shape.str(), w.size(0),
           x.shape.str(), c.C);
  c.K = w.size(-1);
  DT_CHECK(c.K >= 1, "{}: kernel size must be >= 1, weight {}", op, w.shape.str());
  DT_CHECK(w.is_contiguous(), "{}: weight must be contiguous", op);
  return c;
}

}  // namespace dt::gdn_checks
