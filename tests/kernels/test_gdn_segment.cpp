// The segment scan of the chunk states (kernels/cpu/gdn_segment.h) against the sequential chunk
// pass, in double: every chunk's entering state and the final state, for segment lengths that do
// and do not divide the chunk count, a partial last chunk, dk != dv, GQA, with and without an
// initial state; and the final state against the recurrent form (an independent reference).
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
  std::vector<double> q, k, v, g, beta, S0;
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
  }
  GdnRows<const double> rows_q() const { return {q.data(), d.Hk * d.dk}; }
  GdnRows<const double> rows_k() const { return {k.data(), d.Hk * d.dk}; }
  GdnRows<const double> rows_v() const { return {v.data(), d.Hv * d.dv}; }
};

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
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.Hv; ++h) {
      const int64_t off = (b * d.Hv + h) * dk * dv;
      const double* S0 = with_S0 ? p.S0.data() + off : nullptr;
      // The sequential chunk pass's entering states.
      std::vector<double> want(nc * dk * dv), S(dk * dv, 0.0), Vp;
      if (S0) std::copy_n(S0, dk * dv, S.begin());
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
    }
}

TEST(GdnSegmentScan, ChunkStatesMatchTheSequentialPass) {
  const GdnDims d{2, 37, 1, 2, 8, 6};  // 5 chunks of 8 (the last of 5 rows), GQA, dk != dv
  for (int64_t seg : {1, 2, 3, 5, 7}) check(d, 8, seg, true, 11 + seg);
  check(d, 8, 2, false, 5);
}

TEST(GdnSegmentScan, LongerSequenceWithFullChunks) {
  check(GdnDims{1, 96, 1, 1, 4, 4}, 8, 4, true, 3);  // 12 chunks in 3 segments
}

}  // namespace
}  // namespace dt
