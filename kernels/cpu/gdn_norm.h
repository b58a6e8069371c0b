// Gated RMSNorm of the GDN output, per value head of dv features (Qwen3_5RMSNormGated: norm
// first, then the gate):
//   n = o / sqrt(mean(o^2) + eps)        y = n * w * silu(z)
// torch: (o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + eps)) * w * F.silu(z)
// Backward, with r = 1 / sqrt(mean(o^2) + eps) and dn = dy * w * silu(z):
//   do = r (dn - n mean(dn n))      dz = dy n w silu'(z)      dw += sum dy n silu(z)
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cpu/gdn_common.h"

namespace dt {

// o, z, y: [rows, H*dv] contiguous; w: [dv], shared by the heads.
template <class T>
void gdn_norm_forward_ref(T* y, const T* o, const T* z, const T* w, int64_t rows, int64_t H, int64_t dv, T eps) {
  for (int64_t r = 0; r < rows * H; ++r) {
    const T* orow = o + r * dv;
    const T* zrow = z + r * dv;
    T* yrow = y + r * dv;
    T ss = 0;
    for (int64_t i = 0; i < dv; ++i) ss += orow[i] * orow[i];
    T inv = T(1) / std::sqrt(ss / T(dv) + eps);
    for (int64_t i = 0; i < dv; ++i) yrow[i] = orow[i] * inv * w[i] * gdn_silu(zrow[i]);
  }
}

// d_o, dz written; dw accumulated (+=).
template <class T>
void gdn_norm_backward_ref(T* d_o, T* dz, T* dw, const T* dy, const T* o, const T* z, const T* w, int64_t rows,
                           int64_t H, int64_t dv, T eps) {
  for (int64_t r = 0; r < rows * H; ++r) {
    const T* orow = o + r * dv;
    const T* zrow = z + r * dv;
    const T* dyrow = dy + r * dv;
    T ss = 0;
    for (int64_t i = 0; i < dv; ++i) ss += orow[i] * orow[i];
    T inv = T(1) / std::sqrt(ss / T(dv) + eps);
    T mean_dn_n = 0;
    for (int64_t i = 0; i < dv; ++i) {
      T n = orow[i] * inv;
      T gate = gdn_silu(zrow[i]);
      mean_dn_n += dyrow[i] * w[i] * gate * n;
      dz[r * dv + i] = dyrow[i] * n * w[i] * gdn_silu_grad(zrow[i]);
      dw[i] += dyrow[i] * n * gate;
    }
    mean_dn_n /= T(dv);
    for (int64_t i = 0; i < dv; ++i) {
      T dn = dyrow[i] * w[i] * gdn_silu(zrow[i]);
      d_o[r * dv + i] = inv * (dn - orow[i] * inv * mean_dn_n);
    }
  }
}

}  // namespace dt
