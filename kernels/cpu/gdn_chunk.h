// The gated delta rule in chunks of C tokens (the WY form, written out below), the
// reference for the CUDA chunk kernels. Per (batch, value head), one chunk of n <= C rows
// (the last chunk of a sequence may be partial), S the state entering the chunk:
//   G    = cumsum(g)                         within the chunk
//   Gam  = exp(G_i - G_j)                     only where i >= j, so every exponent is <= 0
//   A    = strict_lower( diag(beta) (K K^T) o Gam )
//   Tm   = (I + A)^-1                         unit lower triangular: forward substitution
//   Kb   = diag(beta) (K o e^G)    Vb = diag(beta) V
//   W    = Tm Kb                   U  = Tm Vb
//   V'   = U - W S
//   M    = lower( Q K^T o Gam )               (diagonal included)
//   O    = (Q o e^G) S + M V'
//   D_i  = exp(G_n - G_i)
//   S'   = e^{G_n} S + (K o D)^T V'            the state leaving the chunk
// The backward visits the chunks in reverse with dS (the gradient of the state leaving the
// chunk) and follows docs/model.md, "Backward of one chunk", line by line; the entering states are
// recomputed by a forward state pass first. With a.l2 set, the l2norms of q and k run before the
// forward and after the backward (kernels/cpu/gdn_l2norm.h).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/gdn_common.h"
#include "kernels/cpu/gdn_l2norm.h"

namespace dt {

// Everything about one chunk that does not depend on the entering state. Matrices are
// row-major: n x n, n x dk, n x dv.
template <class T>
struct GdnChunkTerms {
  int64_t n = 0, dk = 0, dv = 0;
  std::vector<T> Q, K, V, beta, G, eG, D;  // eG_i = e^{G_i}, D_i = exp(G_n - G_i)
  std::vector<T> Gam, KK, QK;              // Gam: lower only (0 above the diagonal)
  std::vector<T> Tm, Kb, Vb, W, U;
};

// Fills `c` with rows [t0, t0 + n) of (batch b, value head h).
template <class T>
void gdn_chunk_terms(GdnChunkTerms<T>& c, const GdnDims& d, GdnRows<const T> q, GdnRows<const T> k,
                     GdnRows<const T> v, const T* g, const T* beta, int64_t b, int64_t h, int64_t t0, int64_t n) {
  const int64_t dk = d.dk, dv = d.dv, kh = d.key_head(h);
  c.n = n, c.dk = dk, c.dv = dv;
  c.Q.assign(n * dk, T(0)), c.K.assign(n * dk, T(0)), c.V.assign(n * dv, T(0));
  c.beta.assign(n, T(0)), c.G.assign(n, T(0)), c.eG.assign(n, T(0)), c.D.assign(n, T(0));
  T G = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = b * d.T + t0 + i;
    std::copy_n(q.row(r) + kh * dk, dk, &c.Q[i * dk]);
    std::copy_n(k.row(r) + kh * dk, dk, &c.K[i * dk]);
    std::copy_n(v.row(r) + h * dv, dv, &c.V[i * dv]);
    c.beta[i] = beta[r * d.Hv + h];
    G += g[r * d.Hv + h];
    c.G[i] = G;
    c.eG[i] = std::exp(G);
  }
  for (int64_t i = 0; i < n; ++i) c.D[i] = std::exp(c.G[n - 1] - c.G[i]);
  c.Gam.assign(n * n, T(0)), c.KK.assign(n * n, T(0)), c.QK.assign(n * n, T(0));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      T kk = 0, qk = 0;
      for (int64_t x = 0; x < dk; ++x) {
        kk += c.K[i * dk + x] * c.K[j * dk + x];
        qk += c.Q[i * dk + x] * c.K[j * dk + x];
      }
      c.KK[i * n + j] = kk, c.QK[i * n + j] = qk;
      if (j <= i) c.Gam[i * n + j] = std::exp(c.G[i] - c.G[j]);
    }
  // Tm = (I + A)^-1 by forward substitution, row by row: Tm_i = e_i - sum_{j<i} A_ij Tm_j.
  c.Tm.assign(n * n, T(0));
  for (int64_t i = 0; i < n; ++i) {
    c.Tm[i * n + i] = 1;
    for (int64_t j = 0; j < i; ++j) {
      T Aij = c.beta[i] * c.KK[i * n + j] * c.Gam[i * n + j];
      for (int64_t m = 0; m <= j; ++m) c.Tm[i * n + m] -= Aij * c.Tm[j * n + m];
    }
  }
  c.Kb.assign(n * dk, T(0)), c.Vb.assign(n * dv, T(0)), c.W.assign(n * dk, T(0)), c.U.assign(n * dv, T(0));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t x = 0; x < dk; ++x) c.Kb[i * dk + x] = c.beta[i] * c.K[i * dk + x] * c.eG[i];
    for (int64_t y = 0; y < dv; ++y) c.Vb[i * dv + y] = c.beta[i] * c.V[i * dv + y];
  }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t m = 0; m <= i; ++m) {
      T t = c.Tm[i * n + m];
      for (int64_t x = 0; x < dk; ++x) c.W[i * dk + x] += t * c.Kb[m * dk + x];
      for (int64_t y = 0; y < dv; ++y) c.U[i * dv + y] += t * c.Vb[m * dv + y];
    }
}

// V' = U - W S   (n x dv), S: dk x dv.
template <class T>
void gdn_chunk_vnew(std::vector<T>& Vp, const GdnChunkTerms<T>& c, const T* S) {
  Vp = c.U;
  for (int64_t i = 0; i < c.n; ++i)
    for (int64_t x = 0; x < c.dk; ++x) {
      T w = c.W[i * c.dk + x];
      for (int64_t y = 0; y < c.dv; ++y) Vp[i * c.dv + y] -= w * S[x * c.dv + y];
    }
}

// S <- e^{G_n} S + (K o D)^T V'
template <class T>
void gdn_chunk_advance_state(T* S, const GdnChunkTerms<T>& c, const std::vector<T>& Vp) {
  const T decay = c.eG[c.n - 1];
  for (int64_t x = 0; x < c.dk; ++x)
    for (int64_t y = 0; y < c.dv; ++y) {
      T acc = decay * S[x * c.dv + y];
      for (int64_t i = 0; i < c.n; ++i) acc += c.K[i * c.dk + x] * c.D[i] * Vp[i * c.dv + y];
      S[x * c.dv + y] = acc;
    }
}

template <class T>
void gdn_chunk_forward_ref(const GdnForwardArgs<T>& args, int64_t chunk) {
  const GdnForwardArgs<T> a = gdn_qk_l2norm_forward_ref(args);
  const GdnDims& d = a.dims;
  const int64_t dk = d.dk, dv = d.dv;
  GdnChunkTerms<T> c;
  std::vector<T> S(dk * dv), Vp;
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.Hv; ++h) {
      const int64_t state_off = (b * d.Hv + h) * dk * dv;
      for (int64_t i = 0; i < dk * dv; ++i) S[i] = a.S0 ? a.S0[state_off + i] : T(0);
      for (int64_t t0 = 0; t0 < d.T; t0 += chunk) {
        const int64_t n = std::min(chunk, d.T - t0);
        gdn_chunk_terms(c, d, a.q, a.k, a.v, a.g, a.beta, b, h, t0, n);
        gdn_chunk_vnew(Vp, c, S.data());
        // O = (Q o e^G) S + M V'
        for (int64_t i = 0; i < n; ++i) {
          T* o = a.o.row(b * d.T + t0 + i) + h * dv;
          for (int64_t y = 0; y < dv; ++y) {
            T acc = 0;
            for (int64_t x = 0; x < dk; ++x) acc += c.Q[i * dk + x] * c.eG[i] * S[x * dv + y];
            for (int64_t j = 0; j <= i; ++j) acc += c.QK[i * n + j] * c.Gam[i * n + j] * Vp[j * dv + y];
            o[y] = acc;
          }
        }
        gdn_chunk_advance_state(S.data(), c, Vp);
      }
      if (a.S_out) std::copy(S.begin(), S.end(), a.S_out + state_off);
    }
}

template <class T>
void gdn_chunk_backward_ref(const GdnBackwardArgs<T>& a, int64_t chunk) {
  const GdnDims& d = a.dims;
  const int64_t dk = d.dk, dv = d.dv, ns = dk * dv;
  for (int64_t r = 0; r < d.B * d.T; ++r) {
    std::fill_n(a.dq.row(r), d.Hk * dk, T(0));
    std::fill_n(a.dk.row(r), d.Hk * dk, T(0));
  }
  const int64_t n_chunks = (d.T + chunk - 1) / chunk;
  GdnChunkTerms<T> c;
  std::vector<T> entering(n_chunks * ns), S(ns), dS(ns), dS_in(ns), Vp;
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.Hv; ++h) {
      const int64_t state_off = (b * d.Hv + h) * ns;
      const int64_t kh = d.key_head(h);
      // Forward state pass: the state entering every chunk.
      for (int64_t i = 0; i < ns; ++i) S[i] = a.S0 ? a.S0[state_off + i] : T(0);
      for (int64_t ci = 0; ci < n_chunks; ++ci) {
        const int64_t t0 = ci * chunk, n = std::min(chunk, d.T - t0);
        std::copy(S.begin(), S.end(), entering.begin() + ci * ns);
        gdn_chunk_terms(c, d, a.q, a.k, a.v, a.g, a.beta, b, h, t0, n);
        gdn_chunk_vnew(Vp, c, S.data());
        gdn_chunk_advance_state(S.data(), c, Vp);
      }
      for (int64_t i = 0; i < ns; ++i) dS[i] = a.dS_out ? a.dS_out[state_off + i] : T(0);
      for (int64_t ci = n_chunks - 1; ci >= 0; --ci) {
        const int64_t t0 = ci * chunk, n = std::min(chunk, d.T - t0);
        const T* Se = &entering[ci * ns];
        gdn_chunk_terms(c, d, a.q, a.k, a.v, a.g, a.beta, b, h, t0, n);
        gdn_chunk_vnew(Vp, c, Se);
        std::vector<T> dO(n * dv), dQ(n * dk, T(0)), dK(n * dk, T(0)), dG(n, T(0)), dbeta(n, T(0));
        for (int64_t i = 0; i < n; ++i) std::copy_n(a.d_o.row(b * d.T + t0 + i) + h * dv, dv, &dO[i * dv]);
        auto M = [&](int64_t i, int64_t j) { return j <= i ? c.QK[i * n + j] * c.Gam[i * n + j] : T(0); };

        // dV' = M^T dO + (K o D) dS'
        std::vector<T> dVp(n * dv, T(0));
        for (int64_t j = 0; j < n; ++j)
          for (int64_t y = 0; y < dv; ++y) {
            T acc = 0;
            for (int64_t i = j; i < n; ++i) acc += M(i, j) * dO[i * dv + y];
            for (int64_t x = 0; x < dk; ++x) acc += c.K[j * dk + x] * c.D[j] * dS[x * dv + y];
            dVp[j * dv + y] = acc;
          }
        // dS_in = (Q o e^G)^T dO + e^{G_n} dS' - W^T dV'
        for (int64_t x = 0; x < dk; ++x)
          for (int64_t y = 0; y < dv; ++y) {
            T acc = c.eG[n - 1] * dS[x * dv + y];
            for (int64_t i = 0; i < n; ++i)
              acc += c.Q[i * dk + x] * c.eG[i] * dO[i * dv + y] - c.W[i * dk + x] * dVp[i * dv + y];
            dS_in[x * dv + y] = acc;
          }
        // dG_n += e^{G_n} <dS', S>
        {
          T acc = 0;
          for (int64_t i = 0; i < ns; ++i) acc += dS[i] * Se[i];
          dG[n - 1] += c.eG[n - 1] * acc;
        }
        // P = dO S^T: dQ += P o e^G, dG_i += e^{G_i} sum_x P_ix Q_ix
        // R = V' dS'^T: dK += R o D, r_i = D_i sum_x R_ix K_ix: dG_i -= r_i, dG_n += r_i
        for (int64_t i = 0; i < n; ++i) {
          T pq = 0, rk = 0;
          for (int64_t x = 0; x < dk; ++x) {
            T P = 0, R = 0;
            for (int64_t y = 0; y < dv; ++y) {
              P += dO[i * dv + y] * Se[x * dv + y];
              R += Vp[i * dv + y] * dS[x * dv + y];
            }
            dQ[i * dk + x] += P * c.eG[i];
            pq += P * c.Q[i * dk + x];
            dK[i * dk + x] += R * c.D[i];
            rk += R * c.K[i * dk + x];
          }
          dG[i] += c.eG[i] * pq;
          dG[i] -= c.D[i] * rk;
          dG[n - 1] += c.D[i] * rk;
        }
        // dM = lower(dO V'^T): dQ += (dM o Gam) K, dK += (dM o Gam)^T Q,
        // X = dM o QK^T o Gam: dG_i += sum_j X_ij - sum_j X_ji
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j <= i; ++j) {
            T dM = 0;
            for (int64_t y = 0; y < dv; ++y) dM += dO[i * dv + y] * Vp[j * dv + y];
            T dMG = dM * c.Gam[i * n + j];
            for (int64_t x = 0; x < dk; ++x) {
              dQ[i * dk + x] += dMG * c.K[j * dk + x];
              dK[j * dk + x] += dMG * c.Q[i * dk + x];
            }
            T X = dMG * c.QK[i * n + j];
            dG[i] += X;
            dG[j] -= X;
          }
        // dW = -dV' S^T, dU = dV'; dT = dW Kb^T + dU Vb^T (lower part; Tm is lower)
        std::vector<T> dW(n * dk, T(0)), dT(n * n, T(0));
        for (int64_t i = 0; i < n; ++i)
          for (int64_t x = 0; x < dk; ++x) {
            T acc = 0;
            for (int64_t y = 0; y < dv; ++y) acc -= dVp[i * dv + y] * Se[x * dv + y];
            dW[i * dk + x] = acc;
          }
        for (int64_t i = 0; i < n; ++i)
          for (int64_t m = 0; m <= i; ++m) {
            T acc = 0;
            for (int64_t x = 0; x < dk; ++x) acc += dW[i * dk + x] * c.Kb[m * dk + x];
            for (int64_t y = 0; y < dv; ++y) acc += dVp[i * dv + y] * c.Vb[m * dv + y];
            dT[i * n + m] = acc;
          }
        // dKb = Tm^T dW, dVb = Tm^T dU
        std::vector<T> dKb(n * dk, T(0)), dVb(n * dv, T(0));
        for (int64_t m = 0; m < n; ++m)
          for (int64_t i = m; i < n; ++i) {
            T t = c.Tm[i * n + m];
            for (int64_t x = 0; x < dk; ++x) dKb[m * dk + x] += t * dW[i * dk + x];
            for (int64_t y = 0; y < dv; ++y) dVb[m * dv + y] += t * dVp[i * dv + y];
          }
        // dA = -strict_lower(Tm^T dT Tm^T), since d(Tm) = -Tm dA Tm
        std::vector<T> tmp(n * n, T(0)), dA(n * n, T(0));
        for (int64_t i = 0; i < n; ++i)  // tmp = Tm^T dT
          for (int64_t m = 0; m < n; ++m) {
            T acc = 0;
            for (int64_t p = std::max(i, m); p < n; ++p) acc += c.Tm[p * n + i] * dT[p * n + m];
            tmp[i * n + m] = acc;
          }
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < i; ++j) {
            T acc = 0;
            for (int64_t m = 0; m <= j; ++m) acc += tmp[i * n + m] * c.Tm[j * n + m];
            dA[i * n + j] = -acc;
          }
        // A_ij = beta_i (k_i . k_j) Gam_ij, j < i
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < i; ++j) {
            T dAij = dA[i * n + j];
            dbeta[i] += dAij * c.KK[i * n + j] * c.Gam[i * n + j];
            T Pp = c.beta[i] * dAij * c.Gam[i * n + j];
            for (int64_t x = 0; x < dk; ++x) {
              dK[i * dk + x] += Pp * c.K[j * dk + x];
              dK[j * dk + x] += Pp * c.K[i * dk + x];
            }
            T Y = Pp * c.KK[i * n + j];
            dG[i] += Y;
            dG[j] -= Y;
          }
        // Kb_i = beta_i k_i e^{G_i};  Vb_i = beta_i v_i
        for (int64_t i = 0; i < n; ++i) {
          T s = 0;
          for (int64_t x = 0; x < dk; ++x) {
            s += dKb[i * dk + x] * c.K[i * dk + x];
            dK[i * dk + x] += c.beta[i] * c.eG[i] * dKb[i * dk + x];
          }
          dbeta[i] += s * c.eG[i];
          dG[i] += c.beta[i] * c.eG[i] * s;
          T sv = 0;
          T* dvr = a.dv.row(b * d.T + t0 + i) + h * dv;
          for (int64_t y = 0; y < dv; ++y) {
            sv += dVb[i * dv + y] * c.V[i * dv + y];
            dvr[y] = c.beta[i] * dVb[i * dv + y];
          }
          dbeta[i] += sv;
        }
        // dg = reverse_cumsum(dG), since G = cumsum(g) within the chunk.
        T acc = 0;
        for (int64_t i = n - 1; i >= 0; --i) {
          const int64_t r = b * d.T + t0 + i;
          acc += dG[i];
          a.dg[r * d.Hv + h] = acc;
          a.dbeta[r * d.Hv + h] = dbeta[i];
          T* dq = a.dq.row(r) + kh * dk;
          T* dkr = a.dk.row(r) + kh * dk;
          for (int64_t x = 0; x < dk; ++x) {
            dq[x] += dQ[i * dk + x];
            dkr[x] += dK[i * dk + x];
          }
        }
        std::swap(dS, dS_in);
      }
      if (a.dS0) std::copy(dS.begin(), dS.end(), a.dS0 + state_off);
    }
  gdn_qk_l2norm_backward_ref(a);
}

}  // namespace dt
