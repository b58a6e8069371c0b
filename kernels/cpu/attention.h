// Causal softmax attention reference with grouped KV heads (GQA), and the per-head
// concat/split used to assemble heads (MLA's [q_nope | q_rope], Qwen3.5's [q_h | gate_h]).
//
// Layout: q[B, S, H, Dqk], k[B, S, Hkv, Dqk], v[B, S, Hkv, Dv], o[B, S, H, Dv], lse[B, H, S].
// Query head h reads KV head h / (H / Hkv) (HF repeat_kv). Dv may differ from Dqk (MLA).
//   s_ij  = scale * q_i . k_j  (j <= i),   lse_i = log sum_j exp(s_ij),   p_ij = exp(s_ij - lse_i)
//   o_i   = sum_j p_ij v_j
// torch: softmax(q @ k.T * scale + causal_mask) @ v
// Backward (FlashAttention's form, from the saved lse):
//   dp_ij = do_i . v_j,   D_i = do_i . o_i,   ds_ij = p_ij (dp_ij - D_i)
//   dq_i  = scale sum_j ds_ij k_j,   dk_j = scale sum_i ds_ij q_i,   dv_j = sum_i p_ij do_i
// The S x S products go through BLAS (gemm_ref), one (batch, head) at a time.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu/linear.h"

namespace dt {

template <class T>
void attention_forward_ref(T* o, T* lse, const T* q, const T* k, const T* v, int64_t B, int64_t S, int64_t H,
                           int64_t Hkv, int64_t Dqk, int64_t Dv, T scale) {
  if (B == 0 || S == 0 || H == 0) return;
  const int64_t rep = H / Hkv;
  std::vector<T> p(S * S);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t hk = h / rep;
      const T* qb = q + (b * S * H + h) * Dqk;
      const T* kb = k + (b * S * Hkv + hk) * Dqk;
      const T* vb = v + (b * S * Hkv + hk) * Dv;
      T* ob = o + (b * S * H + h) * Dv;
      T* lb = lse + (b * H + h) * S;
      gemm_ref(false, true, S, S, Dqk, scale, qb, H * Dqk, kb, Hkv * Dqk, T(0), p.data(), S);
      for (int64_t i = 0; i < S; ++i) {
        T* row = p.data() + i * S;
        T mx = -std::numeric_limits<T>::infinity();
        for (int64_t j = 0; j <= i; ++j) mx = std::max(mx, row[j]);
        T sum = 0;
        for (int64_t j = 0; j <= i; ++j) sum += std::exp(row[j] - mx);
        T l = mx + std::log(sum);
        lb[i] = l;
        for (int64_t j = 0; j <= i; ++j) row[j] = std::exp(row[j] - l);
        for (int64_t j = i + 1; j < S; ++j) row[j] = 0;
      }
      gemm_ref(false, false, S, Dv, S, T(1), p.data(), S, vb, Hkv * Dv, T(0), ob, H * Dv);
    }
}

// dq, dk, dv are written.
template <class T>
void attention_backward_ref(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* o,
                            const T* lse, int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t Dqk, int64_t Dv,
                            T scale) {
  std::fill(dk, dk + B * S * Hkv * Dqk, T(0));
  std::fill(dv, dv + B * S * Hkv * Dv, T(0));
  if (B == 0 || S == 0 || H == 0) return;
  const int64_t rep = H / Hkv;
  std::vector<T> p(S * S), ds(S * S);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t hk = h / rep;
      const T* qb = q + (b * S * H + h) * Dqk;
      const T* kb = k + (b * S * Hkv + hk) * Dqk;
      const T* vb = v + (b * S * Hkv + hk) * Dv;
      const T* ob = o + (b * S * H + h) * Dv;
      const T* dob = dout + (b * S * H + h) * Dv;
      const T* lb = lse + (b * H + h) * S;
      T* dqb = dq + (b * S * H + h) * Dqk;
      T* dkb = dk + (b * S * Hkv + hk) * Dqk;
      T* dvb = dv + (b * S * Hkv + hk) * Dv;
      gemm_ref(false, true, S, S, Dqk, scale, qb, H * Dqk, kb, Hkv * Dqk, T(0), p.data(), S);
      gemm_ref(false, true, S, S, Dv, T(1), dob, H * Dv, vb, Hkv * Dv, T(0), ds.data(), S);  // dp
      for (int64_t i = 0; i < S; ++i) {
        T* prow = p.data() + i * S;
        T* drow = ds.data() + i * S;
        T di = 0;
        for (int64_t d = 0; d < Dv; ++d) di += dob[i * H * Dv + d] * ob[i * H * Dv + d];
        for (int64_t j = 0; j <= i; ++j) {
          prow[j] = std::exp(prow[j] - lb[i]);
          drow[j] = prow[j] * (drow[j] - di);
        }
        for (int64_t j = i + 1; j < S; ++j) prow[j] = drow[j] = 0;
      }
      gemm_ref(false, false, S, Dqk, S, scale, ds.data(), S, kb, Hkv * Dqk, T(0), dqb, H * Dqk);
      gemm_ref(true, false, S, Dqk, S, scale, ds.data(), S, qb, H * Dqk, T(1), dkb, Hkv * Dqk);
      gemm_ref(true, false, S, Dv, S, T(1), p.data(), S, dob, H * Dv, T(1), dvb, Hkv * Dv);
    }
}

// x[r, h, :] = [a[r, h, :] | b[r, hb, :]] with hb = h, or hb = 0 when b has one head shared by all
// (torch.cat((a, b.expand(...)), -1); MLA's k_rope).
template <class T>
void head_concat_ref(T* x, const T* a, const T* b, int64_t rows, int64_t H, int64_t da, int64_t db, bool b_shared) {
  const int64_t hb_n = b_shared ? 1 : H;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < H; ++h) {
      T* xr = x + (r * H + h) * (da + db);
      const T* ar = a + (r * H + h) * da;
      const T* br = b + (r * hb_n + (b_shared ? 0 : h)) * db;
      for (int64_t d = 0; d < da; ++d) xr[d] = ar[d];
      for (int64_t d = 0; d < db; ++d) xr[da + d] = br[d];
    }
}

// The reverse: a[r, h, :] = x[r, h, :da]; b[r, h, :] = x[r, h, da:], or, when b is shared,
// b[r, 0, :] = sum_h x[r, h, da:] (the gradient of the broadcast). Both written.
// torch: a, b = torch.split(x, [da, db], dim=-1)
template <class T>
void head_split_ref(T* a, T* b, const T* x, int64_t rows, int64_t H, int64_t da, int64_t db, bool b_shared) {
  const int64_t hb_n = b_shared ? 1 : H;
  for (int64_t r = 0; r < rows; ++r) {
    if (b_shared) std::fill(b + r * db, b + (r + 1) * db, T(0));
    for (int64_t h = 0; h < H; ++h) {
      const T* xr = x + (r * H + h) * (da + db);
      T* ar = a + (r * H + h) * da;
      T* br = b + (r * hb_n + (b_shared ? 0 : h)) * db;
      for (int64_t d = 0; d < da; ++d) ar[d] = xr[d];
      for (int64_t d = 0; d < db; ++d) br[d] = b_shared ? br[d] + xr[da + d] : xr[da + d];
    }
  }
}

}  // namespace dt
