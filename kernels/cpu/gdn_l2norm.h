// Per-head L2 normalisation of q and k, as Hugging Face / fla do it (eps inside the root):
//   y = scale * x / sqrt(sum_d x_d^2 + eps)         eps = 1e-6
// torch: scale * x * torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6)
// q uses scale = dk^-1/2 (the attention scale, applied after the norm), k uses 1.
// Backward, with x^ = x / sqrt(sum x^2 + eps) and r = 1 / sqrt(sum x^2 + eps):
//   dx = scale * r * (dy - x^ (x^ . dy))
// The delta rule may take both l2norms inside (GdnQkL2NormArgs): the forward keeps r, and the
// backward starts from y and r, x^ = y (1 / scale), as the GPU kernels do.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cpu/gdn_common.h"

namespace dt {

inline constexpr double kGdnL2NormEps = 1e-6;

// x, y: [rows, H*d] (strided rows), normalised per head of d features. rnorm (optional, [rows, H]
// contiguous) receives r.
template <class T>
void gdn_l2norm_forward_ref(GdnRows<T> y, GdnRows<const T> x, int64_t rows, int64_t H, int64_t d, T scale,
                            T* rnorm = nullptr) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < H; ++h) {
      const T* xr = x.row(r) + h * d;
      T* yr = y.row(r) + h * d;
      T ss = 0;
      for (int64_t i = 0; i < d; ++i) ss += xr[i] * xr[i];
      T inv = T(1) / std::sqrt(ss + T(kGdnL2NormEps));
      for (int64_t i = 0; i < d; ++i) yr[i] = scale * xr[i] * inv;
      if (rnorm) rnorm[r * H + h] = inv;
    }
}

// dx written (it may be a column slice of a wider gradient buffer).
template <class T>
void gdn_l2norm_backward_ref(GdnRows<T> dx, GdnRows<const T> dy, GdnRows<const T> x, int64_t rows, int64_t H,
                             int64_t d, T scale) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < H; ++h) {
      const T* xr = x.row(r) + h * d;
      const T* dyr = dy.row(r) + h * d;
      T* dxr = dx.row(r) + h * d;
      T ss = 0;
      for (int64_t i = 0; i < d; ++i) ss += xr[i] * xr[i];
      T inv = T(1) / std::sqrt(ss + T(kGdnL2NormEps));
      T dot = 0;  // x^ . dy
      for (int64_t i = 0; i < d; ++i) dot += xr[i] * inv * dyr[i];
      for (int64_t i = 0; i < d; ++i) dxr[i] = scale * inv * (dyr[i] - xr[i] * inv * dot);
    }
}

// The backward from the forward's output y and its r ([rows, H] contiguous): x^ = y (1 / scale).
// dx may be dy (in place).
template <class T>
void gdn_l2norm_backward_from_y_ref(GdnRows<T> dx, GdnRows<const T> dy, GdnRows<const T> y, const T* rnorm,
                                    int64_t rows, int64_t H, int64_t d, T scale) {
  const T xs = T(1) / scale;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < H; ++h) {
      const T* yr = y.row(r) + h * d;
      const T* dyr = dy.row(r) + h * d;
      T* dxr = dx.row(r) + h * d;
      const T inv = rnorm[r * H + h];
      T dot = 0;  // x^ . dy
      for (int64_t i = 0; i < d; ++i) dot += yr[i] * xs * dyr[i];
      for (int64_t i = 0; i < d; ++i) dxr[i] = scale * inv * (dyr[i] - yr[i] * xs * dot);
    }
}

// The delta rule's l2norms of q and k, when a.l2 is set: writes q_hat, k_hat and their r, and
// returns the arguments with q, k reading q_hat, k_hat (a itself when unset).
template <class T>
GdnForwardArgs<T> gdn_qk_l2norm_forward_ref(GdnForwardArgs<T> a) {
  if (!a.l2.q_rnorm) return a;
  const GdnDims& d = a.dims;
  gdn_l2norm_forward_ref(a.l2.q_hat, a.q, d.B * d.T, d.Hk, d.dk, a.l2.q_scale, a.l2.q_rnorm);
  gdn_l2norm_forward_ref(a.l2.k_hat, a.k, d.B * d.T, d.Hk, d.dk, a.l2.k_scale, a.l2.k_rnorm);
  a.q = GdnRows<const T>{a.l2.q_hat.ptr, a.l2.q_hat.ld};
  a.k = GdnRows<const T>{a.l2.k_hat.ptr, a.l2.k_hat.ld};
  a.l2 = {};
  return a;
}

// After the delta rule's backward, when a.l2 is set: dq, dk (the gradients of q_hat, k_hat)
// become those of the l2norms' inputs, in place.
template <class T>
void gdn_qk_l2norm_backward_ref(const GdnBackwardArgs<T>& a) {
  if (!a.l2.q_rnorm) return;
  const GdnDims& d = a.dims;
  const GdnRows<const T> dq{a.dq.ptr, a.dq.ld}, dk{a.dk.ptr, a.dk.ld};
  gdn_l2norm_backward_from_y_ref(a.dq, dq, a.q, a.l2.q_rnorm, d.B * d.T, d.Hk, d.dk, a.l2.q_scale);
  gdn_l2norm_backward_from_y_ref(a.dk, dk, a.k, a.l2.k_rnorm, d.B * d.T, d.Hk, d.dk, a.l2.k_scale);
}

}  // namespace dt
