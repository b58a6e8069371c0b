// The chunk states of the gated delta rule by a scan over segments (docs/model.md, "Segments: the
// chunk map is affine"): the reference for a state pass that runs a long sequence's segments
// in parallel. One chunk maps its entering state affinely,
//   S' = Phi S + Psi,   Phi = e^{G_n} I - (K o D)^T W  (dk x dk),   Psi = (K o D)^T U  (dk x dv),
// and maps compose: (Phi2, Psi2) o (Phi1, Psi1) = (Phi2 Phi1, Phi2 Psi1 + Psi2). With the chunks of
// a (batch, value head) cut into segments of L chunks:
//   1. every segment, in parallel: Psi_p = its leaving state from S = 0 (the usual pass), Phi_p = the
//      same pass on a dk x dk "state" from S = I with U = 0 (V' = -W X, X' = e^{G_n} X + (K o D)^T V');
//   2. in order over the segments: S_{p+1} = Phi_p S_p + Psi_p (S_0 = the initial state);
//   3. every segment, in parallel: the usual pass from its true entering state, which gives every
//      chunk's entering state (what the output and the backward read).
// Step 1 costs dk / dv times a pass more work; at one 32K-token sequence with 16 heads it turns 16
// sequential passes of 512 chunks into 16 x P passes of 512 / P.
// The backward's reverse pass is affine in the same way, with Phi transposed:
//   dS = Phi^T dS' + Theta,   Theta = (Q o e^G)^T dO - W^T (M^T dO)   (dk x dv)
// (from dS = e^{G_n} dS' + (Q o e^G)^T dO - W^T dV' and dV' = M^T dO + (K o D) dS'), so the same
// three steps run over the segments in reverse order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/gdn_chunk.h"

namespace dt {

// X <- A X + B: one step of the scan over segments (A: r x r, X and B: r x cols).
template <class T>
void gdn_segment_scan_step(std::vector<T>& X, const std::vector<T>& A, const std::vector<T>& B, int64_t r,
                           int64_t cols) {
  std::vector<T> next(r * cols);
  for (int64_t x = 0; x < r; ++x)
    for (int64_t y = 0; y < cols; ++y) {
      T acc = B[x * cols + y];
      for (int64_t z = 0; z < r; ++z) acc += A[x * r + z] * X[z * cols + y];
      next[x * cols + y] = acc;
    }
  X.swap(next);
}

// The state entering every chunk of (batch b, value head h), states[c * dk * dv + x * dv + y], and
// the final state, by the segment scan with `seg_chunks` chunks per segment (>= 1; the last segment
// may be shorter). S0: the initial state of (b, h) (dk x dv), null for zero.
template <class T>
void gdn_chunk_states_segmented_ref(std::vector<T>& states, std::vector<T>& S_final, const GdnDims& d,
                                    GdnRows<const T> q, GdnRows<const T> k, GdnRows<const T> v, const T* g,
                                    const T* beta, const T* S0, int64_t b, int64_t h, int64_t chunk,
                                    int64_t seg_chunks) {
  const int64_t dk = d.dk, dv = d.dv, nc = (d.T + chunk - 1) / chunk;
  const int64_t n_seg = (nc + seg_chunks - 1) / seg_chunks;
  states.assign(nc * dk * dv, T(0));
  std::vector<GdnChunkTerms<T>> terms(nc);
  for (int64_t c = 0; c < nc; ++c)
    gdn_chunk_terms(terms[c], d, q, k, v, g, beta, b, h, c * chunk, std::min(chunk, d.T - c * chunk));
  // 1. (Phi_p, Psi_p) per segment, each from its own start (independent of the other segments).
  std::vector<std::vector<T>> Phi(n_seg), Psi(n_seg);
  std::vector<T> Vp;
  for (int64_t p = 0; p < n_seg; ++p) {
    Psi[p].assign(dk * dv, T(0));
    Phi[p].assign(dk * dk, T(0));
    for (int64_t x = 0; x < dk; ++x) Phi[p][x * dk + x] = 1;
    for (int64_t c = p * seg_chunks; c < std::min(nc, (p + 1) * seg_chunks); ++c) {
      gdn_chunk_vnew(Vp, terms[c], Psi[p].data());
      gdn_chunk_advance_state(Psi[p].data(), terms[c], Vp);
      GdnChunkTerms<T> phi = terms[c];  // the chunk's map on dk columns with U = 0
      phi.dv = dk;
      phi.U.assign(phi.n * dk, T(0));
      gdn_chunk_vnew(Vp, phi, Phi[p].data());
      gdn_chunk_advance_state(Phi[p].data(), phi, Vp);
    }
  }
  // 2. The entering state of every segment, in order.
  std::vector<T> S(dk * dv, T(0));
  if (S0) std::copy_n(S0, dk * dv, S.begin());
  std::vector<std::vector<T>> S_in(n_seg);
  for (int64_t p = 0; p < n_seg; ++p) {
    S_in[p] = S;
    gdn_segment_scan_step(S, Phi[p], Psi[p], dk, dv);
  }
  S_final = S;
  // 3. Every segment from its true entering state: the chunks' entering states.
  for (int64_t p = 0; p < n_seg; ++p) {
    std::vector<T> X = S_in[p];
    for (int64_t c = p * seg_chunks; c < std::min(nc, (p + 1) * seg_chunks); ++c) {
      std::copy(X.begin(), X.end(), states.begin() + c * dk * dv);
      gdn_chunk_vnew(Vp, terms[c], X.data());
      gdn_chunk_advance_state(X.data(), terms[c], Vp);
    }
  }
}

// One chunk of the reverse state pass: dS' (the gradient of the state leaving the chunk, dk x cols)
// becomes dS (entering). With dO (n x cols) it is the backward's step, dS = Phi^T dS' + Theta; with
// dO null, Phi^T dS' alone (cols = dk, the segment's map).
template <class T>
void gdn_chunk_dstate_step(std::vector<T>& dS, const GdnChunkTerms<T>& c, const T* dO, int64_t cols) {
  const int64_t n = c.n, dk = c.dk;
  std::vector<T> dVp(n * cols, T(0)), out(dk * cols);
  for (int64_t j = 0; j < n; ++j)  // dV' = M^T dO + (K o D) dS'
    for (int64_t y = 0; y < cols; ++y) {
      T acc = 0;
      if (dO)
        for (int64_t i = j; i < n; ++i) acc += c.QK[i * n + j] * c.Gam[i * n + j] * dO[i * cols + y];
      for (int64_t x = 0; x < dk; ++x) acc += c.K[j * dk + x] * c.D[j] * dS[x * cols + y];
      dVp[j * cols + y] = acc;
    }
  for (int64_t x = 0; x < dk; ++x)  // dS = e^{G_n} dS' + (Q o e^G)^T dO - W^T dV'
    for (int64_t y = 0; y < cols; ++y) {
      T acc = c.eG[n - 1] * dS[x * cols + y];
      for (int64_t i = 0; i < n; ++i) {
        if (dO) acc += c.Q[i * dk + x] * c.eG[i] * dO[i * cols + y];
        acc -= c.W[i * dk + x] * dVp[i * cols + y];
      }
      out[x * cols + y] = acc;
    }
  dS.swap(out);
}

// The gradient of the state leaving every chunk of (batch b, value head h), dstates[c * dk * dv +
// x * dv + y], and the gradient of the initial state, by the segment scan in reverse (segments of
// `seg_chunks` chunks from the start, as the forward's). dS_out: the gradient of the final state
// of (b, h) (dk x dv), null for zero.
template <class T>
void gdn_chunk_dstates_segmented_ref(std::vector<T>& dstates, std::vector<T>& dS0, const GdnDims& d,
                                     GdnRows<const T> q, GdnRows<const T> k, GdnRows<const T> v, const T* g,
                                     const T* beta, GdnRows<const T> d_o, const T* dS_out, int64_t b, int64_t h,
                                     int64_t chunk, int64_t seg_chunks) {
  const int64_t dk = d.dk, dv = d.dv, nc = (d.T + chunk - 1) / chunk;
  const int64_t n_seg = (nc + seg_chunks - 1) / seg_chunks;
  dstates.assign(nc * dk * dv, T(0));
  std::vector<GdnChunkTerms<T>> terms(nc);
  std::vector<std::vector<T>> dO(nc);
  for (int64_t c = 0; c < nc; ++c) {
    const int64_t t0 = c * chunk, n = std::min(chunk, d.T - t0);
    gdn_chunk_terms(terms[c], d, q, k, v, g, beta, b, h, t0, n);
    dO[c].resize(n * dv);
    for (int64_t i = 0; i < n; ++i) std::copy_n(d_o.row(b * d.T + t0 + i) + h * dv, dv, &dO[c][i * dv]);
  }
  auto first = [&](int64_t p) { return p * seg_chunks; };
  auto last = [&](int64_t p) { return std::min(nc, (p + 1) * seg_chunks) - 1; };
  // 1. Per segment, from its own end: Theta_p (from dS' = 0) and Phi_p^T (from dS' = I, dO = 0).
  std::vector<std::vector<T>> PhiT(n_seg), Theta(n_seg);
  for (int64_t p = 0; p < n_seg; ++p) {
    Theta[p].assign(dk * dv, T(0));
    PhiT[p].assign(dk * dk, T(0));
    for (int64_t x = 0; x < dk; ++x) PhiT[p][x * dk + x] = 1;
    for (int64_t c = last(p); c >= first(p); --c) {
      gdn_chunk_dstate_step(Theta[p], terms[c], dO[c].data(), dv);
      gdn_chunk_dstate_step(PhiT[p], terms[c], static_cast<const T*>(nullptr), dk);
    }
  }
  // 2. The gradient leaving every segment, from the last segment back.
  std::vector<T> G(dk * dv, T(0));
  if (dS_out) std::copy_n(dS_out, dk * dv, G.begin());
  std::vector<std::vector<T>> G_out(n_seg);
  for (int64_t p = n_seg - 1; p >= 0; --p) {
    G_out[p] = G;
    gdn_segment_scan_step(G, PhiT[p], Theta[p], dk, dv);
  }
  dS0 = G;
  // 3. Every segment from its true leaving gradient: every chunk's dS'.
  for (int64_t p = 0; p < n_seg; ++p) {
    std::vector<T> X = G_out[p];
    for (int64_t c = last(p); c >= first(p); --c) {
      std::copy(X.begin(), X.end(), dstates.begin() + c * dk * dv);
      gdn_chunk_dstate_step(X, terms[c], dO[c].data(), dv);
    }
  }
}

}  // namespace dt
