// The segment scan of the chunk states (kernels/cpu/gdn_segment.h) against the sequential chunk
// pass, in double: every chunk's entering state and the final state, for segment lengths that do
// and do not divide the chunk count, a partial last chunk, dk != dv, GQA, with and without an
// initial state; and the final state against the recurrent form (an independent reference). The
// same for the backward's reverse pass: every chunk's dS' against the sequential reverse steps, and
// dS0 against gdn_chunk_backward_ref and the recurrent backward.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/gdn_chunk.h"
#include "kernels/cpu/gdn_delta_rule.h"
#include "kernels/cpu/gdn_segment.h"

namespace dt {
namespace {

struct Problem {
  GdnDims d;
  std::vector<double> q, k, v, g, beta, S0, d_o, dS_out;
  Problem(GdnDims dims, uint64_t seed) : d(dims) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> n(0, 1);
    std::uniform_real_distribution<double> u(0, 1);
    auto unit_rows = [&](std::vector<double>& x, int64_t rows, int64_t dim, double scale) {
      x.resize(rows * dim);
      for (int64_t r = 0; r < rows; ++r) {
        double ss = 0;
        for (int64_t i = 0; i < dim; ++i) x[r * dim + i] = n(rng), ss += x[r * dim + i] * x[r * dim + i];
        for (int64_t i = 0; i < dim; ++i) x[r * dim + i] *= scale / std::sqrt(ss);
      }
    };
    unit_rows(q, d.B * d.T * d.Hk, d.dk, 1 / std::sqrt(double(d.dk)));
    unit_rows(k, d.B * d.T * d.Hk, d.dk, 1.0);
    v.resize(d.B * d.T * d.Hv * d.dv), g.resize(d.B * d.T * d.Hv), beta.resize(g.size());
    S0.resize(d.B * d.Hv * d.dk * d.dv);
    for (double& x : v) x = n(rng);
    for (double& x : g) x = -0.01 - 0.5 * u(rng);
    for (double& x : beta) x = 0.05 + 0.9 * u(rng);
    for (double& x : S0) x = 0.5 * n(rng);
    d_o.resize(v.size()), dS_out.resize(S0.size());
    for (double& x : d_o) x = n(rng);
    for (double& x : dS_out) x = n(rng);
  }
  GdnRows<const double> rows_q() const { return {q.data(), d.Hk * d.dk}; }
  GdnRows<const double> rows_k() const { return {k.data(), d.Hk * d.dk}; }
  GdnRows<const double> rows_v() const { return {v.data(), d.Hv * d.dv}; }
};

// f(b, h, offset of (b, h)'s dk x dv state) for every batch and value head.
template <class F>
void for_each_head(const GdnDims& d, F f) {
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.Hv; ++h) f(b, h, (b * d.Hv + h) * d.dk * d.dv);
}

// A (b, h) state from a [B, Hv, dk, dv] buffer when `use`, else zeros.
std::vector<double> state_of(const std::vector<double>& all, bool use, int64_t off, int64_t n) {
  if (!use) return std::vector<double>(n, 0.0);
  return {all.begin() + off, all.begin() + off + n};
}

double max_rel(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num = std::max(num, std::fabs(got[i] - want[i]));  // NaN: fails below (the comparison is false)
    den = std::max(den, std::fabs(want[i]));
    if (!std::isfinite(got[i])) return INFINITY;
  }
  return num / std::max(den, 1e-300);
}

void check(GdnDims d, int64_t chunk, int64_t seg_chunks, bool with_S0, uint64_t seed) {
  SCOPED_TRACE("T " + std::to_string(d.T) + " chunk " + std::to_string(chunk) + " segment " +
               std::to_string(seg_chunks) + " chunks" + (with_S0 ? ", S0" : ""));
  const Problem p(d, seed);
  const int64_t dk = d.dk, dv = d.dv, nc = (d.T + chunk - 1) / chunk;
  // The recurrent form's final states (independent of the chunked code).
  std::vector<double> o_rec(d.B * d.T * d.Hv * dv), S_rec(d.B * d.Hv * dk * dv);
  GdnForwardArgs<double> a;
  a.dims = d, a.q = p.rows_q(), a.k = p.rows_k(), a.v = p.rows_v(), a.g = p.g.data(), a.beta = p.beta.data();
  a.S0 = with_S0 ? p.S0.data() : nullptr, a.o = {o_rec.data(), d.Hv * dv}, a.S_out = S_rec.data();
  gdn_recurrent_forward_ref(a);
  for_each_head(d, [&](int64_t b, int64_t h, int64_t off) {
      const double* S0 = with_S0 ? p.S0.data() + off : nullptr;
      std::vector<double> want(nc * dk * dv), S = state_of(p.S0, with_S0, off, dk * dv), Vp;  // sequential
      GdnChunkTerms<double> c;
      for (int64_t ci = 0; ci < nc; ++ci) {
        std::copy(S.begin(), S.end(), want.begin() + ci * dk * dv);
        gdn_chunk_terms(c, d, p.rows_q(), p.rows_k(), p.rows_v(), p.g.data(), p.beta.data(), b, h, ci * chunk,
                        std::min(chunk, d.T - ci * chunk));
        gdn_chunk_vnew(Vp, c, S.data());
        gdn_chunk_advance_state(S.data(), c, Vp);
      }
      std::vector<double> got, S_final;
      gdn_chunk_states_segmented_ref(got, S_final, d, p.rows_q(), p.rows_k(), p.rows_v(), p.g.data(), p.beta.data(),
                                     S0, b, h, chunk, seg_chunks);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_LT(max_rel(got, want), 1e-12) << "chunk states, b " << b << " h " << h;
      EXPECT_LT(max_rel(S_final, S), 1e-12) << "final state against the sequential chunks, b " << b << " h " << h;
      const std::vector<double> rec(S_rec.begin() + off, S_rec.begin() + off + dk * dv);
      EXPECT_LT(max_rel(S_final, rec), 1e-10) << "final state against the recurrent form, b " << b << " h " << h;
    });
}

void check_backward(GdnDims d, int64_t chunk, int64_t seg_chunks, bool with_dS_out, uint64_t seed) {
  SCOPED_TRACE("backward: T " + std::to_string(d.T) + " chunk " + std::to_string(chunk) + " segment " +
               std::to_string(seg_chunks) + " chunks" + (with_dS_out ? ", dS_out" : ""));
  const Problem p(d, seed);
  const int64_t dk = d.dk, dv = d.dv, nc = (d.T + chunk - 1) / chunk, nq = d.B * d.T * d.Hk * dk;
  // dS0 from the whole chunked backward and from the recurrent one (independent of the scan).
  std::vector<double> dq(nq), dkk(nq), dvv(p.v.size()), dg(p.g.size()), dbeta(p.g.size());
  std::vector<double> dS0_chunk(p.S0.size()), dS0_rec(p.S0.size());
  GdnBackwardArgs<double> a;
  a.dims = d, a.q = p.rows_q(), a.k = p.rows_k(), a.v = p.rows_v(), a.g = p.g.data(), a.beta = p.beta.data();
  a.S0 = p.S0.data(), a.d_o = {p.d_o.data(), d.Hv * dv}, a.dS_out = with_dS_out ? p.dS_out.data() : nullptr;
  a.dq = {dq.data(), d.Hk * dk}, a.dk = {dkk.data(), d.Hk * dk}, a.dv = {dvv.data(), d.Hv * dv};
  a.dg = dg.data(), a.dbeta = dbeta.data(), a.dS0 = dS0_chunk.data();
  gdn_chunk_backward_ref(a, chunk);
  a.dS0 = dS0_rec.data();
  gdn_recurrent_backward_ref(a);
  const GdnRows<const double> rows_do{p.d_o.data(), d.Hv * dv};
  for_each_head(d, [&](int64_t b, int64_t h, int64_t off) {
      const double* dS_out = with_dS_out ? p.dS_out.data() + off : nullptr;
      std::vector<double> want(nc * dk * dv), G = state_of(p.dS_out, with_dS_out, off, dk * dv), dO;  // sequential
      GdnChunkTerms<double> c;
      for (int64_t ci = nc - 1; ci >= 0; --ci) {
        const int64_t t0 = ci * chunk, n = std::min(chunk, d.T - t0);
        std::copy(G.begin(), G.end(), want.begin() + ci * dk * dv);
        gdn_chunk_terms(c, d, p.rows_q(), p.rows_k(), p.rows_v(), p.g.data(), p.beta.data(), b, h, t0, n);
        dO.resize(n * dv);
        for (int64_t i = 0; i < n; ++i) std::copy_n(rows_do.row(b * d.T + t0 + i) + h * dv, dv, &dO[i * dv]);
        gdn_chunk_dstate_step(G, c, dO.data(), dv);
      }
      std::vector<double> got, dS0;
      gdn_chunk_dstates_segmented_ref(got, dS0, d, p.rows_q(), p.rows_k(), p.rows_v(), p.g.data(), p.beta.data(),
                                      rows_do, dS_out, b, h, chunk, seg_chunks);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_LT(max_rel(got, want), 1e-12) << "chunk state gradients, b " << b << " h " << h;
      const std::vector<double> ref_chunk(dS0_chunk.begin() + off, dS0_chunk.begin() + off + dk * dv);
      const std::vector<double> ref_rec(dS0_rec.begin() + off, dS0_rec.begin() + off + dk * dv);
      EXPECT_LT(max_rel(dS0, ref_chunk), 1e-12) << "dS0 against gdn_chunk_backward_ref, b " << b << " h " << h;
      EXPECT_LT(max_rel(dS0, ref_rec), 1e-10) << "dS0 against the recurrent backward, b " << b << " h " << h;
    });
}

TEST(GdnSegmentScan, ChunkStatesMatchTheSequentialPass) {
  const GdnDims d{2, 37, 1, 2, 8, 6};  // 5 chunks of 8 (the last of 5 rows), GQA, dk != dv
  for (int64_t seg : {1, 2, 3, 5, 7}) check(d, 8, seg, true, 11 + seg);
  check(d, 8, 2, false, 5);
}

TEST(GdnSegmentScan, LongerSequenceWithFullChunks) {
  check(GdnDims{1, 96, 1, 1, 4, 4}, 8, 4, true, 3);  // 12 chunks in 3 segments
}

TEST(GdnSegmentScan, StateGradientsMatchTheSequentialReversePass) {
  const GdnDims d{2, 37, 1, 2, 8, 6};
  for (int64_t seg : {1, 2, 3, 5, 7}) check_backward(d, 8, seg, true, 21 + seg);
  check_backward(d, 8, 2, false, 6);
  check_backward(GdnDims{1, 96, 1, 1, 4, 4}, 8, 4, true, 4);
}

}  // namespace
}  // namespace dt
