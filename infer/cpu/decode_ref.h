// CPU references of infer/decode_ops.h, templated on float and double; plain loops, one sequence
// and head at a time (decode does O(len) work per head, no T x T products).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/fp8.h"
#include "infer/gemv_input.h"
#include "kernels/cpu/gdn_common.h"
#include "kernels/cpu/gdn_delta_rule.h"
#include "kernels/cpu/gdn_gates.h"
#include "kernels/cpu/gdn_l2norm.h"
#include "kernels/cpu/gdn_norm.h"
#include "kernels/cpu/rmsnorm.h"

namespace dt {

// out[n] = the first index of the largest of logits[n, 0 .. V) (rows ld apart); NaN never wins, and
// a row of NaN gives 0. Greedy decoding's choice (infer/sampler.h samples with the same rule).
template <class T>
void decode_argmax_ref(int32_t* out, const T* logits, int64_t N, int64_t V, int64_t ld) {
  for (int64_t n = 0; n < N; ++n) {
    const T* row = logits + n * ld;
    int64_t best = -1;
    for (int64_t i = 0; i < V; ++i)
      if (!std::isnan(row[i]) && (best < 0 || row[i] > row[best])) best = i;
    out[n] = static_cast<int32_t>(std::max<int64_t>(best, 0));
  }
}

// The fused GEMV of infer/cuda/decode_fused.cu: y[n, r] = sum_c w[r, c] x'[n, c] (+ residual[n, r]),
// x' the input taken as `in` says (infer/gemv_input.h; x, x2 [N, C] rows ldx apart, norm_w [C]);
// w [rows, C]; y, residual [N, rows] (residual may be null).
template <class T>
void decode_gemv_ref(T* y, const T* w, GemvInput in, const T* x, const T* x2, const T* norm_w, T eps,
                     bool zero_centered, const T* residual, int64_t N, int64_t C, int64_t ldx, int64_t rows) {
  std::vector<T> xin(static_cast<size_t>(C)), rstd(1);
  for (int64_t n = 0; n < N; ++n) {
    const T* xr = x + n * ldx;
    switch (in) {
      case GemvInput::kPlain: std::copy(xr, xr + C, xin.begin()); break;
      case GemvInput::kSwiGLU:
        for (int64_t c = 0; c < C; ++c) xin[c] = xr[c] * gdn_sigmoid(xr[c]) * x2[n * ldx + c];
        break;
      case GemvInput::kGate:
        for (int64_t c = 0; c < C; ++c) xin[c] = xr[c] * gdn_sigmoid(x2[n * ldx + c]);
        break;
      case GemvInput::kRmsNorm: rmsnorm_forward_ref<T>(xin.data(), rstd.data(), xr, norm_w, 1, C, eps, zero_centered); break;
    }
    for (int64_t r = 0; r < rows; ++r) {
      T acc = 0;
      for (int64_t c = 0; c < C; ++c) acc += w[r * C + c] * xin[c];
      y[n * rows + r] = acc + (residual ? residual[n * rows + r] : T(0));
    }
  }
}

// The fused GDN token after the conv (infer/cuda/decode_fused.cu), for N sequences: q, k, v from
// qkv [N, ld_qkv] (q at 0, k at Hk dk, v at 2 Hk dk), l2-normalised (q scaled by q_scale), the gates
// from a, b [N, Hv], one step of the delta rule on state [N, Hv, dk, dv] in place, then the gated
// norm with z [N, Hv dv] and norm_w [dv]: y [N, Hv dv]. The composition of kernels/cpu's
// gdn_l2norm, gdn_gates, gdn_recurrent and gdn_norm references.
template <class T>
void gdn_decode_step_ref(T* y, T* state, const T* qkv, const T* z, const T* a, const T* b, const T* A_log,
                         const T* dt_bias, const T* norm_w, int64_t N, int64_t Hk, int64_t Hv, int64_t dk, int64_t dv,
                         int64_t ld_qkv, T q_scale, T eps) {
  std::vector<T> q(static_cast<size_t>(N * Hk * dk)), k(q.size()), g(static_cast<size_t>(N * Hv)), beta(g.size());
  std::vector<T> o(static_cast<size_t>(N * Hv * dv));
  gdn_l2norm_forward_ref<T>({q.data(), Hk * dk}, {qkv, ld_qkv}, N, Hk, dk, q_scale);
  gdn_l2norm_forward_ref<T>({k.data(), Hk * dk}, {qkv + Hk * dk, ld_qkv}, N, Hk, dk, T(1));
  gdn_gates_forward_ref<T>(g.data(), beta.data(), a, b, A_log, dt_bias, N, Hv);
  GdnForwardArgs<T> args;
  args.dims = {N, 1, Hk, Hv, dk, dv};
  args.q = {q.data(), Hk * dk}, args.k = {k.data(), Hk * dk}, args.v = {qkv + 2 * Hk * dk, ld_qkv};
  args.g = g.data(), args.beta = beta.data(), args.S0 = state, args.o = {o.data(), Hv * dv};
  std::vector<T> S(static_cast<size_t>(N * Hv * dk * dv));
  args.S_out = S.data();
  gdn_recurrent_forward_ref<T>(args);
  std::copy(S.begin(), S.end(), state);
  gdn_norm_forward_ref<T>(y, o.data(), z, norm_w, N, Hv, dv, eps);
}

// x, y [N, C]; tail [N, K-1, C]; w [C, K].
template <class T>
void decode_conv_step_ref(T* y, T* tail, const T* x, const T* w, int64_t N, int64_t C, int64_t K) {
  for (int64_t n = 0; n < N; ++n) {
    T* tl = tail + n * (K - 1) * C;
    for (int64_t c = 0; c < C; ++c) {
      // The same order of terms as gdn_conv_forward_ref: oldest input first.
      T u = 0;
      for (int64_t i = 0; i < K - 1; ++i) u += w[c * K + i] * tl[i * C + c];
      u += w[c * K + K - 1] * x[n * C + c];
      y[n * C + c] = gdn_silu(u);
    }
    if (K > 1) {
      std::copy(tl + C, tl + (K - 1) * C, tl);
      std::copy(x + n * C, x + (n + 1) * C, tl + (K - 2) * C);
    }
  }
}

// x [N, H, D] in place; the angle as rope_detail::tables computes it (in T).
template <class T>
void decode_rope_ref(T* x, int64_t N, int64_t H, int64_t D, int64_t pos, int64_t rot, double theta, bool interleaved) {
  const int64_t half = rot / 2;
  std::vector<T> c(half), s(half), tmp(rot);
  for (int64_t i = 0; i < half; ++i) {
    T inv_freq = T(1) / std::pow(T(theta), T(2 * i) / T(rot));
    T angle = T(pos) * inv_freq;
    c[i] = std::cos(angle);
    s[i] = std::sin(angle);
  }
  for (int64_t r = 0; r < N * H; ++r) {
    T* xr = x + r * D;
    std::copy(xr, xr + rot, tmp.begin());
    for (int64_t i = 0; i < half; ++i) {
      T x1 = interleaved ? tmp[2 * i] : tmp[i];
      T x2 = interleaved ? tmp[2 * i + 1] : tmp[half + i];
      xr[i] = x1 * c[i] - x2 * s[i];
      xr[half + i] = x2 * c[i] + x1 * s[i];
    }
  }
}

// In place over p[0, len): p = softmax(p).
template <class T>
void decode_softmax_ref(T* p, int64_t len) {
  T mx = -std::numeric_limits<T>::infinity();
  for (int64_t t = 0; t < len; ++t) mx = std::max(mx, p[t]);
  T sum = 0;
  for (int64_t t = 0; t < len; ++t) sum += std::exp(p[t] - mx);
  const T l = mx + std::log(sum);
  for (int64_t t = 0; t < len; ++t) p[t] = std::exp(p[t] - l);
}

template <class T>
void decode_attention_ref(T* o, const T* q, const T* k, const T* v, int64_t N, int64_t cap, int64_t H, int64_t Hkv,
                          int64_t Dqk, int64_t Dv, int64_t len, T scale) {
  const int64_t rep = H / Hkv;
  std::vector<T> p(len);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t hk = h / rep;
      const T* qr = q + (n * H + h) * Dqk;
      for (int64_t t = 0; t < len; ++t) {
        const T* kr = k + ((n * cap + t) * Hkv + hk) * Dqk;
        T acc = 0;
        for (int64_t d = 0; d < Dqk; ++d) acc += qr[d] * kr[d];
        p[t] = scale * acc;
      }
      decode_softmax_ref(p.data(), len);
      T* orow = o + (n * H + h) * Dv;
      std::fill(orow, orow + Dv, T(0));
      for (int64_t t = 0; t < len; ++t) {
        const T* vr = v + ((n * cap + t) * Hkv + hk) * Dv;
        for (int64_t d = 0; d < Dv; ++d) orow[d] += p[t] * vr[d];
      }
    }
}

// One sequence of mla_decode_attention_ref: q_nope [H, dn], q_pe [H, dr], o [H, dv], c [len, kvr],
// pe [len, dr]; w [H (dn + dv), kvr].
template <class T>
void mla_decode_attention_seq_ref(T* o, const T* q_nope, const T* q_pe, const T* w, const T* c, const T* pe, int64_t H,
                                  int64_t dn, int64_t dr, int64_t dv, int64_t kvr, int64_t len, T scale) {
  std::vector<T> q_lat(kvr), o_lat(kvr), p(len);
  for (int64_t h = 0; h < H; ++h) {
    const T* w_kb = w + h * (dn + dv) * kvr;
    const T* w_vb = w_kb + dn * kvr;
    const T* qn = q_nope + h * dn;
    const T* qp = q_pe + h * dr;
    std::fill(q_lat.begin(), q_lat.end(), T(0));
    for (int64_t i = 0; i < dn; ++i)
      for (int64_t j = 0; j < kvr; ++j) q_lat[j] += qn[i] * w_kb[i * kvr + j];
    for (int64_t t = 0; t < len; ++t) {
      const T* ct = c + t * kvr;
      const T* pt = pe + t * dr;
      T acc = 0;
      for (int64_t j = 0; j < kvr; ++j) acc += q_lat[j] * ct[j];
      for (int64_t d = 0; d < dr; ++d) acc += qp[d] * pt[d];
      p[t] = scale * acc;
    }
    decode_softmax_ref(p.data(), len);
    std::fill(o_lat.begin(), o_lat.end(), T(0));
    for (int64_t t = 0; t < len; ++t) {
      const T* ct = c + t * kvr;
      for (int64_t j = 0; j < kvr; ++j) o_lat[j] += p[t] * ct[j];
    }
    T* orow = o + h * dv;
    for (int64_t i = 0; i < dv; ++i) {
      T acc = 0;
      for (int64_t j = 0; j < kvr; ++j) acc += w_vb[i * kvr + j] * o_lat[j];
      orow[i] = acc;
    }
  }
}

// w [H (dn + dv), kvr]; c [N, cap, kvr]; pe [N, cap, dr].
template <class T>
void mla_decode_attention_ref(T* o, const T* q_nope, const T* q_pe, const T* w, const T* c, const T* pe, int64_t N,
                              int64_t cap, int64_t H, int64_t dn, int64_t dr, int64_t dv, int64_t kvr, int64_t len,
                              T scale) {
  for (int64_t n = 0; n < N; ++n)
    mla_decode_attention_seq_ref<T>(o + n * H * dv, q_nope + n * H * dn, q_pe + n * H * dr, w, c + n * cap * kvr,
                                    pe + n * cap * dr, H, dn, dr, dv, kvr, len, scale);
}

// The same over the fp8 latent cache: cq e4m3 [N, cap, kvr] with scales cs fp32 [N, cap, kvr / kFp8Block]
// (core/fp8.h), each position's latent read back exactly (e4m3 value times its block's scale) as T.
template <class T>
void mla_decode_attention_fp8_ref(T* o, const T* q_nope, const T* q_pe, const T* w, const uint8_t* cq,
                                  const float* cs, const T* pe, int64_t N, int64_t cap, int64_t H, int64_t dn,
                                  int64_t dr, int64_t dv, int64_t kvr, int64_t len, T scale) {
  std::vector<T> c(static_cast<size_t>(len * kvr));
  const int64_t nb = kvr / kFp8Block;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t t = 0; t < len; ++t)
      e4m3_dequantize_row<T>(cq + (n * cap + t) * kvr, cs + (n * cap + t) * nb, kvr, c.data() + t * kvr);
    mla_decode_attention_seq_ref<T>(o + n * H * dv, q_nope + n * H * dn, q_pe + n * H * dr, w, c.data(),
                                    pe + n * cap * dr, H, dn, dr, dv, kvr, len, scale);
  }
}

}  // namespace dt
