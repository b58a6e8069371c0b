// Shared pieces of the Gated DeltaNet CPU references (kernels/cpu/gdn_*.h): strided row
// pointers, the problem sizes, and the scalar activations with their derivatives.
//
// Layout: a GDN activation is [B, T, H, d]. Its (b, t) rows may be strided (q, k and v are
// column slices of the conv output [B, T, 2*Hk*dk + Hv*dv]); inside a row the H heads of d
// features are packed. Row r = b*T + t starts at ptr + r*ld.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace dt {

// A [rows, width] matrix whose rows start `ld` elements apart (ld >= width).
template <class T>
struct GdnRows {
  T* ptr = nullptr;
  int64_t ld = 0;
  T* row(int64_t r) const { return ptr + r * ld; }
};

// Sizes of a delta-rule problem. Value head h reads key head h / (Hv / Hk)
// (torch: q.repeat_interleave(Hv // Hk, dim=2)).
struct GdnDims {
  int64_t B = 0, T = 0, Hk = 0, Hv = 0, dk = 0, dv = 0;
  int64_t key_head(int64_t h) const { return h / (Hv / Hk); }
};

// The l2norms of q and k taken inside the delta rule (kernels/cpu/gdn_l2norm.h), as the GPU
// takes them (GdnQkL2Norm in kernels/ops.h). Unset (q_rnorm null): q and k come normalised.
//   forward:  q, k are the l2norms' inputs x; q_hat, k_hat [B*T, Hk*dk] receive y = scale x r and
//             q_rnorm, k_rnorm [B*T, Hk] r = 1 / sqrt(sum x^2 + 1e-6); the rule then reads the y.
//   backward: q, k are those y, q_rnorm, k_rnorm their r (q_hat, k_hat unused); dq, dk come out as
//             the gradients with respect to x.
template <class T>
struct GdnQkL2NormArgs {
  GdnRows<T> q_hat, k_hat;
  T* q_rnorm = nullptr;
  T* k_rnorm = nullptr;
  T q_scale = 1, k_scale = 1;
};

// The delta rule's tensors (recurrent and chunked forms take the same arguments).
//   q, k: [B*T, Hk*dk]  (q l2-normalised and scaled by dk^-1/2, k l2-normalised; or, with l2,
//                        the l2norms' inputs)
//   v, o: [B*T, Hv*dv]   g, beta: [B*T, Hv] contiguous   states: [B, Hv, dk, dv] contiguous
template <class T>
struct GdnForwardArgs {
  GdnDims dims;
  GdnRows<const T> q, k, v;
  const T* g = nullptr;
  const T* beta = nullptr;
  const T* S0 = nullptr;  // initial state; null: zero
  GdnRows<T> o;
  T* S_out = nullptr;  // final state; null: not wanted
  GdnQkL2NormArgs<T> l2;
};

// Backward: every gradient is WRITTEN. dq and dk sum over the Hv / Hk value heads that read
// each key head.
template <class T>
struct GdnBackwardArgs {
  GdnDims dims;
  GdnRows<const T> q, k, v;
  const T* g = nullptr;
  const T* beta = nullptr;
  const T* S0 = nullptr;      // null: zero
  GdnRows<const T> d_o;
  const T* dS_out = nullptr;  // gradient of the final state; null: zero
  GdnRows<T> dq, dk, dv;
  T* dg = nullptr;
  T* dbeta = nullptr;
  T* dS0 = nullptr;           // null: not wanted
  GdnQkL2NormArgs<T> l2;
};

// 1 / (1 + e^-x), never exp of a positive number, exact 0 and 1 at -inf and +inf.
template <class T>
T gdn_sigmoid(T x) {
  if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
  T e = std::exp(x);
  return e / (T(1) + e);
}

// log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|).
template <class T>
T gdn_softplus(T x) {
  return std::max(x, T(0)) + std::log1p(std::exp(-std::fabs(x)));
}

// silu(x) = x sigmoid(x); silu'(x) = s (1 + x (1 - s)).
template <class T>
T gdn_silu(T x) {
  return x * gdn_sigmoid(x);
}
template <class T>
T gdn_silu_grad(T x) {
  T s = gdn_sigmoid(x);
  return s * (T(1) + x * (T(1) - s));
}

}  // namespace dt
