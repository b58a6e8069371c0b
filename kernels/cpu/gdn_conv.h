// Causal depthwise conv1d + SiLU, the GDN short convolution over the q, k, v channels.
//   u[b,t,c] = sum_{i<K} w[c,i] x[b, t-K+1+i, c]      (x = 0 before t = 0: left zero padding)
//   y[b,t,c] = silu(u[b,t,c])
// torch: F.silu(F.conv1d(x.transpose(1,2), w, padding=K-1, groups=C)[..., :T]).transpose(1,2),
// w the conv1d.weight [C, 1, K] (no bias); w[c, K-1] multiplies the current token.
// Backward (u recomputed from x):
//   du = dy silu'(u)
//   dx[b,s,c] = sum_i w[c,i] du[b, s+K-1-i, c]          (the same convolution, transposed in time)
//   dw[c,i]  += sum_{b,t} du[b,t,c] x[b, t-K+1+i, c]
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/gdn_common.h"

namespace dt {

// x, y: [B, T, C] contiguous; w: [C, K].
template <class T>
void gdn_conv_forward_ref(T* y, const T* x, const T* w, int64_t B, int64_t Tn, int64_t C, int64_t K) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < Tn; ++t) {
      T* yr = y + (b * Tn + t) * C;
      for (int64_t c = 0; c < C; ++c) {
        T u = 0;
        for (int64_t i = 0; i < K; ++i) {
          int64_t s = t - K + 1 + i;
          if (s >= 0) u += w[c * K + i] * x[(b * Tn + s) * C + c];
        }
        yr[c] = gdn_silu(u);
      }
    }
}

// dx written; dw accumulated (+=).
template <class T>
void gdn_conv_backward_ref(T* dx, T* dw, const T* dy, const T* x, const T* w, int64_t B, int64_t Tn, int64_t C,
                           int64_t K) {
  std::vector<T> du(static_cast<size_t>(Tn * C));
  for (int64_t b = 0; b < B; ++b) {
    const T* xb = x + b * Tn * C;
    for (int64_t t = 0; t < Tn; ++t)
      for (int64_t c = 0; c < C; ++c) {
        T u = 0;
        for (int64_t i = 0; i < K; ++i) {
          int64_t s = t - K + 1 + i;
          if (s >= 0) u += w[c * K + i] * xb[s * C + c];
        }
        du[t * C + c] = dy[(b * Tn + t) * C + c] * gdn_silu_grad(u);
      }
    for (int64_t s = 0; s < Tn; ++s)
      for (int64_t c = 0; c < C; ++c) {
        T acc = 0;
        for (int64_t i = 0; i < K; ++i) {
          int64_t t = s + K - 1 - i;
          if (t < Tn) acc += w[c * K + i] * du[t * C + c];
        }
        dx[(b * Tn + s) * C + c] = acc;
      }
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < K; ++i) {
        T acc = 0;
        for (int64_t t = 0; t < Tn; ++t) {
          int64_t s = t - K + 1 + i;
          if (s >= 0) acc += du[t * C + c] * xb[s * C + c];
        }
        dw[c * K + i] += acc;
      }
  }
}

}  // namespace dt
