// The chunk states of the gated delta rule by a scan over segments (GDN_MATH.md, "When batch x
// heads cannot fill the GPU"): the reference for a state pass that runs a long sequence's segments
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
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/gdn_chunk.h"

namespace dt {

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
  std::vector<T> S(dk * dv, T(0)), next(dk * dv);
  if (S0) std::copy_n(S0, dk * dv, S.begin());
  std::vector<std::vector<T>> S_in(n_seg);
  for (int64_t p = 0; p < n_seg; ++p) {
    S_in[p] = S;
    for (int64_t x = 0; x < dk; ++x)
      for (int64_t y = 0; y < dv; ++y) {
        T acc = Psi[p][x * dv + y];
        for (int64_t z = 0; z < dk; ++z) acc += Phi[p][x * dk + z] * S[z * dv + y];
        next[x * dv + y] = acc;
      }
    S.swap(next);
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

}  // namespace dt
