// RMSNorm reference, per row of `dim` features.
//   rstd = 1 / sqrt(mean(x^2) + eps)          (saved for backward)
//   y    = x * rstd * g,   g = w (plain) or 1 + w (zero-centred, Qwen3.5)
// torch: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1 + w)
//
// Backward, with xhat = x * rstd:
//   dw += sum_rows dy * xhat
//   dx  = rstd * (dy*g - xhat * mean(dy*g*xhat))
//   dx  = residual + rstd * (...)  when a residual gradient is given (a pre-norm block's skip path:
//         torch: dx = residual + d(norm)/dx); one rounding of the sum, the same bits as writing dx
//         and adding the residual after it, since each is a single T operation.
#pragma once

#include <cmath>
#include <cstdint>

namespace dt {

template <class T>
void rmsnorm_forward_ref(T* y, T* rstd, const T* x, const T* w, int64_t rows, int64_t dim, T eps,
                         bool zero_centered) {
  const T one = zero_centered ? T(1) : T(0);
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * dim;
    T* yr = y + r * dim;
    T ss = 0;
    for (int64_t d = 0; d < dim; ++d) ss += xr[d] * xr[d];
    T rs = T(1) / std::sqrt(ss / T(dim) + eps);
    rstd[r] = rs;
    for (int64_t d = 0; d < dim; ++d) yr[d] = xr[d] * rs * (one + w[d]);
  }
}

// dx may alias dy. dw may be null (frozen weight). residual may be null (none) or alias dx or dy:
// each element of residual and dy is read before dx is written at that element.
template <class T>
void rmsnorm_backward_ref(T* dx, T* dw, const T* dy, const T* x, const T* w, const T* rstd, int64_t rows,
                          int64_t dim, bool zero_centered, const T* residual = nullptr) {
  const T one = zero_centered ? T(1) : T(0);
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * dim;
    const T* dyr = dy + r * dim;
    T* dxr = dx + r * dim;
    const T* resr = residual ? residual + r * dim : nullptr;
    T rs = rstd[r];
    T dot = 0;  // sum(dy * g * xhat)
    for (int64_t d = 0; d < dim; ++d) {
      T xhat = xr[d] * rs;
      dot += dyr[d] * (one + w[d]) * xhat;
      if (dw) dw[d] += dyr[d] * xhat;
    }
    T mean_dot = dot / T(dim);
    for (int64_t d = 0; d < dim; ++d) {
      const T g = rs * (dyr[d] * (one + w[d]) - xr[d] * rs * mean_dot);
      dxr[d] = resr ? resr[d] + g : g;
    }
  }
}

}  // namespace dt
