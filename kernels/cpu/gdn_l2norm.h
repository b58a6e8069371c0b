// Per-head L2 normalisation of q and k, as Hugging Face / fla do it (eps inside the root):
//   y = scale * x / sqrt(sum_d x_d^2 + eps)         eps = 1e-6
// torch: scale * x * torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6)
// q uses scale = dk^-1/2 (the attention scale, applied after the norm), k uses 1.
// Backward, with x^ = x / sqrt(sum x^2 + eps) and r = 1 / sqrt(sum x^2 + eps):
//   dx = scale * r * (dy - x^ (x^ . dy))
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cpu/gdn_common.h"

namespace dt {

inline constexpr double kGdnL2NormEps = 1e-6;

// x, y: [rows, H*d] (strided rows), normalised per head of d features.
template <class T>
void gdn_l2norm_forward_ref(GdnRows<T> y, GdnRows<const T> x, int64_t rows, int64_t H, int64_t d, T scale) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < H; ++h) {
      const T* xr = x.row(r) + h * d;
      T* yr = y.row(r) + h * d;
      T ss = 0;
      for (int64_t i = 0; i < d; ++i) ss += xr[i] * xr[i];
      T inv = T(1) / std::sqrt(ss + T(kGdnL2NormEps));
      for (int64_t i = 0; i < d; ++i) yr[i] = scale * xr[i] * inv;
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

}  // namespace dt
