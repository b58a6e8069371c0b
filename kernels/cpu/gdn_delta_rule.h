// The gated delta rule, token by token: the reference every other form must match.
// Per (batch, value head), S: dk x dv, a_t = exp(g_t):
//   S~_t = a_t S_{t-1}
//   u_t  = S~_t^T k_t                    (what the state recalls for k_t)
//   d_t  = beta_t (v_t - u_t)            (the delta)
//   S_t  = S~_t + k_t d_t^T
//   o_t  = S_t^T q_t
// (torch_recurrent_gated_delta_rule in HF modeling_qwen3_5.py, with q already scaled.)
//
// Backward, t = T-1 .. 0, with dS the gradient of S_t (dS_out at the end):
//   dS += q_t do_t^T;  dq_t = S_t do_t
//   dd = dS^T k_t;     dk_t = dS d_t
//   dbeta_t = dd . (v_t - u_t);  dv_t = beta_t dd;  du = -beta_t dd
//   dS~ = dS + k_t du^T;  dk_t += S~_t du
//   dg_t = <dS~, S~_t>;   dS = a_t dS~         (the gradient of S_{t-1})
// The states S_0 .. S_T of one (batch, head) are kept for the backward. With a.l2 set, the
// l2norms of q and k run before the forward and after the backward (kernels/cpu/gdn_l2norm.h).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/gdn_common.h"
#include "kernels/cpu/gdn_l2norm.h"

namespace dt {

template <class T>
void gdn_recurrent_forward_ref(const GdnForwardArgs<T>& args) {
  const GdnForwardArgs<T> a = gdn_qk_l2norm_forward_ref(args);
  const GdnDims& d = a.dims;
  const int64_t dk = d.dk, dv = d.dv;
  std::vector<T> S(static_cast<size_t>(dk * dv)), u(static_cast<size_t>(dv));
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.Hv; ++h) {
      const int64_t kh = d.key_head(h);
      const T* S0 = a.S0 ? a.S0 + (b * d.Hv + h) * dk * dv : nullptr;
      for (int64_t i = 0; i < dk * dv; ++i) S[i] = S0 ? S0[i] : T(0);
      for (int64_t t = 0; t < d.T; ++t) {
        const int64_t r = b * d.T + t;
        const T* q = a.q.row(r) + kh * dk;
        const T* k = a.k.row(r) + kh * dk;
        const T* v = a.v.row(r) + h * dv;
        const T decay = std::exp(a.g[r * d.Hv + h]);
        const T beta = a.beta[r * d.Hv + h];
        for (int64_t i = 0; i < dk * dv; ++i) S[i] *= decay;
        std::fill(u.begin(), u.end(), T(0));
        for (int64_t i = 0; i < dk; ++i)
          for (int64_t j = 0; j < dv; ++j) u[j] += S[i * dv + j] * k[i];
        for (int64_t j = 0; j < dv; ++j) u[j] = beta * (v[j] - u[j]);  // u now holds the delta
        for (int64_t i = 0; i < dk; ++i)
          for (int64_t j = 0; j < dv; ++j) S[i * dv + j] += k[i] * u[j];
        T* o = a.o.row(r) + h * dv;
        for (int64_t j = 0; j < dv; ++j) {
          T acc = 0;
          for (int64_t i = 0; i < dk; ++i) acc += S[i * dv + j] * q[i];
          o[j] = acc;
        }
      }
      if (a.S_out) std::copy(S.begin(), S.end(), a.S_out + (b * d.Hv + h) * dk * dv);
    }
}

template <class T>
void gdn_recurrent_backward_ref(const GdnBackwardArgs<T>& a) {
  const GdnDims& d = a.dims;
  const int64_t dk = d.dk, dv = d.dv, n = dk * dv;
  for (int64_t r = 0; r < d.B * d.T; ++r) {
    std::fill_n(a.dq.row(r), d.Hk * dk, T(0));
    std::fill_n(a.dk.row(r), d.Hk * dk, T(0));
  }
  std::vector<T> states(static_cast<size_t>((d.T + 1) * n));  // S_0 .. S_T
  std::vector<T> dS(static_cast<size_t>(n)), St(static_cast<size_t>(n));
  std::vector<T> u(static_cast<size_t>(dv)), delta(static_cast<size_t>(dv)), dd(static_cast<size_t>(dv));
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.Hv; ++h) {
      const int64_t kh = d.key_head(h);
      const int64_t state_off = (b * d.Hv + h) * n;
      for (int64_t i = 0; i < n; ++i) states[i] = a.S0 ? a.S0[state_off + i] : T(0);
      // Forward again, keeping every state.
      for (int64_t t = 0; t < d.T; ++t) {
        const int64_t r = b * d.T + t;
        const T* k = a.k.row(r) + kh * dk;
        const T* v = a.v.row(r) + h * dv;
        const T decay = std::exp(a.g[r * d.Hv + h]);
        const T beta = a.beta[r * d.Hv + h];
        const T* prev = &states[t * n];
        T* cur = &states[(t + 1) * n];
        for (int64_t i = 0; i < n; ++i) cur[i] = decay * prev[i];
        std::fill(u.begin(), u.end(), T(0));
        for (int64_t i = 0; i < dk; ++i)
          for (int64_t j = 0; j < dv; ++j) u[j] += cur[i * dv + j] * k[i];
        for (int64_t i = 0; i < dk; ++i)
          for (int64_t j = 0; j < dv; ++j) cur[i * dv + j] += k[i] * beta * (v[j] - u[j]);
      }
      for (int64_t i = 0; i < n; ++i) dS[i] = a.dS_out ? a.dS_out[state_off + i] : T(0);
      for (int64_t t = d.T - 1; t >= 0; --t) {
        const int64_t r = b * d.T + t;
        const T* q = a.q.row(r) + kh * dk;
        const T* k = a.k.row(r) + kh * dk;
        const T* v = a.v.row(r) + h * dv;
        const T* d_o = a.d_o.row(r) + h * dv;
        const T decay = std::exp(a.g[r * d.Hv + h]);
        const T beta = a.beta[r * d.Hv + h];
        const T* S = &states[(t + 1) * n];
        T* dq = a.dq.row(r) + kh * dk;
        T* dkr = a.dk.row(r) + kh * dk;
        // S~_t = a_t S_{t-1}, and u_t, delta_t from it.
        for (int64_t i = 0; i < n; ++i) St[i] = decay * states[t * n + i];
        std::fill(u.begin(), u.end(), T(0));
        for (int64_t i = 0; i < dk; ++i)
          for (int64_t j = 0; j < dv; ++j) u[j] += St[i * dv + j] * k[i];
        for (int64_t j = 0; j < dv; ++j) delta[j] = beta * (v[j] - u[j]);
        // o_t = S_t^T q_t
        for (int64_t i = 0; i < dk; ++i) {
          T acc = 0;
          for (int64_t j = 0; j < dv; ++j) {
            acc += S[i * dv + j] * d_o[j];
            dS[i * dv + j] += q[i] * d_o[j];
          }
          dq[i] += acc;
        }
        // S_t = S~_t + k_t delta_t^T
        std::fill(dd.begin(), dd.end(), T(0));
        for (int64_t i = 0; i < dk; ++i) {
          T acc = 0;
          for (int64_t j = 0; j < dv; ++j) {
            dd[j] += dS[i * dv + j] * k[i];
            acc += dS[i * dv + j] * delta[j];
          }
          dkr[i] += acc;
        }
        // delta_t = beta_t (v_t - S~_t^T k_t)
        T dbeta = 0;
        T* dvr = a.dv.row(r) + h * dv;
        for (int64_t j = 0; j < dv; ++j) {
          dbeta += dd[j] * (v[j] - u[j]);
          dvr[j] = beta * dd[j];
          dd[j] *= -beta;  // dd now holds du
        }
        a.dbeta[r * d.Hv + h] = dbeta;
        T dg = 0;
        for (int64_t i = 0; i < dk; ++i) {
          T acc = 0;
          for (int64_t j = 0; j < dv; ++j) {
            dS[i * dv + j] += k[i] * dd[j];
            acc += St[i * dv + j] * dd[j];
            dg += dS[i * dv + j] * St[i * dv + j];
          }
          dkr[i] += acc;
        }
        a.dg[r * d.Hv + h] = dg;
        // S~_t = a_t S_{t-1}
        for (int64_t i = 0; i < n; ++i) dS[i] *= decay;
      }
      if (a.dS0) std::copy(dS.begin(), dS.end(), a.dS0 + state_off);
    }
  gdn_qk_l2norm_backward_ref(a);
}

}  // namespace dt
