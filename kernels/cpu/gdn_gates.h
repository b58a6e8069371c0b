// GDN gates from the per-head projections a = in_proj_a(x), b = in_proj_b(x):
//   g    = -exp(A_log) * softplus(a + dt_bias)       log decay per step, <= 0
//   beta = sigmoid(b)                                 write strength, in [0, 1]
// torch: g = -A_log.float().exp() * F.softplus(a.float() + dt_bias); beta = b.sigmoid()
// (F.softplus returns x itself above 20; the stable form here differs from it by < 2e-9 there.)
// Backward:
//   da = -dg exp(A_log) sigmoid(a + dt_bias)      ddt_bias += sum_{b,t} da
//   dA_log += sum_{b,t} dg g                       db = dbeta beta (1 - beta)
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cpu/gdn_common.h"

namespace dt {

// a, b, g, beta: [rows, H] contiguous; A_log, dt_bias: [H].
template <class T>
void gdn_gates_forward_ref(T* g, T* beta, const T* a, const T* b, const T* A_log, const T* dt_bias, int64_t rows,
                           int64_t H) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < H; ++h) {
      int64_t i = r * H + h;
      g[i] = -std::exp(A_log[h]) * gdn_softplus(a[i] + dt_bias[h]);
      beta[i] = gdn_sigmoid(b[i]);
    }
}

// da, db written; dA_log, ddt_bias accumulated (+=). The forward is recomputed from a, b.
template <class T>
void gdn_gates_backward_ref(T* da, T* db, T* dA_log, T* ddt_bias, const T* dg, const T* dbeta, const T* a,
                            const T* b, const T* A_log, const T* dt_bias, int64_t rows, int64_t H) {
  for (int64_t h = 0; h < H; ++h) {
    T decay_rate = std::exp(A_log[h]);
    T sum_da = 0, sum_dA = 0;
    for (int64_t r = 0; r < rows; ++r) {
      int64_t i = r * H + h;
      T x = a[i] + dt_bias[h];
      T g = -decay_rate * gdn_softplus(x);
      da[i] = -dg[i] * decay_rate * gdn_sigmoid(x);
      sum_da += da[i];
      sum_dA += dg[i] * g;
      T s = gdn_sigmoid(b[i]);
      db[i] = dbeta[i] * s * (T(1) - s);
    }
    dA_log[h] += sum_dA;
    ddt_bias[h] += sum_da;
  }
}

}  // namespace dt
