// The gated delta rule: recurrent form against a naive loop written here, chunked form against
// the recurrent one (forward and every gradient, any T), both against finite differences in
// double, and the edge gates (no decay, decays that underflow to 0, beta exactly 0 and 1).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "core/error.h"
#include "kernels/ops.h"
#include "tests/layers/gdn_gradcheck.h"

namespace dt {
namespace {

using namespace gdn_test;  // the GDN tests' buffers, fills and gradient checks

struct Dims {
  int B, T, Hk, Hv, dk, dv;
};

// Inputs of one delta-rule call: q, k l2-normalised per head (q also scaled by dk^-1/2, as
// the layer feeds them), random v, log decays g in [g_lo, g_hi], beta in (0, 1), an initial
// state and the two upstream gradients.
template <class T>
struct Problem {
  Dims d;
  Buf<T> q, k, v, g, beta, S0, d_o, dS_out;
  Problem(Dims dims, std::mt19937_64& rng, double g_lo = -0.6, double g_hi = -0.01)
      : d(dims),
        q({d.B, d.T, d.Hk, d.dk}),
        k({d.B, d.T, d.Hk, d.dk}),
        v({d.B, d.T, d.Hv, d.dv}),
        g({d.B, d.T, d.Hv}),
        beta({d.B, d.T, d.Hv}),
        S0({d.B, d.Hv, d.dk, d.dv}),
        d_o({d.B, d.T, d.Hv, d.dv}),
        dS_out({d.B, d.Hv, d.dk, d.dv}) {
    fill_normal(q, rng), fill_normal(k, rng), fill_normal(v, rng);
    normalise(q, 1 / std::sqrt(double(d.dk)));
    normalise(k, 1.0);
    fill_uniform(g, rng, g_lo, g_hi);
    fill_uniform(beta, rng, 0.05, 0.95);
    fill_normal(S0, rng, 0.5), fill_normal(d_o, rng), fill_normal(dS_out, rng);
  }
  void normalise(Buf<T>& x, double scale) {
    for (int64_t r = 0; r < x.size() / d.dk; ++r) {
      double ss = 0;
      for (int i = 0; i < d.dk; ++i) ss += double(x[r * d.dk + i]) * x[r * d.dk + i];
      for (int i = 0; i < d.dk; ++i) x[r * d.dk + i] = T(x[r * d.dk + i] * scale / std::sqrt(ss));
    }
  }
};

template <class T>
struct Outputs {
  Buf<T> o, S_out;
};
template <class T>
struct Grads {
  Buf<T> dq, dk, dv, dg, dbeta, dS0;
};

// chunk == 0: the recurrent form.
template <class T>
Outputs<T> run_forward(const Problem<T>& p, int chunk) {
  const Dims& d = p.d;
  Outputs<T> out{Buf<T>({d.B, d.T, d.Hv, d.dv}), Buf<T>({d.B, d.Hv, d.dk, d.dv})};
  poison(out.o), poison(out.S_out);
  Context ctx;
  if (chunk > 0) gdn_chunk_forward(ctx, out.o, out.S_out, p.q, p.k, p.v, p.g, p.beta, p.S0, chunk);
  else gdn_recurrent_forward(ctx, out.o, out.S_out, p.q, p.k, p.v, p.g, p.beta, p.S0);
  return out;
}

template <class T>
Grads<T> run_backward(const Problem<T>& p, int chunk) {
  const Dims& d = p.d;
  Grads<T> gr{Buf<T>(p.q.t.shape), Buf<T>(p.k.t.shape), Buf<T>(p.v.t.shape),
              Buf<T>(p.g.t.shape), Buf<T>(p.beta.t.shape), Buf<T>(p.S0.t.shape)};
  for (Buf<T>* b : {&gr.dq, &gr.dk, &gr.dv, &gr.dg, &gr.dbeta, &gr.dS0}) poison(*b);
  (void)d;
  Context ctx;
  if (chunk > 0)
    gdn_chunk_backward(ctx, gr.dq, gr.dk, gr.dv, gr.dg, gr.dbeta, gr.dS0, p.d_o, p.dS_out, p.q, p.k, p.v, p.g,
                       p.beta, p.S0, chunk);
  else
    gdn_recurrent_backward(ctx, gr.dq, gr.dk, gr.dv, gr.dg, gr.dbeta, gr.dS0, p.d_o, p.dS_out, p.q, p.k, p.v, p.g,
                           p.beta, p.S0);
  return gr;
}

template <class T>
void expect_outputs_close(const Outputs<T>& a, const Outputs<T>& ref, double tol, const std::string& what) {
  EXPECT_LT(rel_diff(a.o, ref.o), tol) << what << ": o";
  EXPECT_LT(rel_diff(a.S_out, ref.S_out), tol) << what << ": S_out";
}

template <class T>
void expect_grads_close(const Grads<T>& a, const Grads<T>& ref, double tol, const std::string& what) {
  EXPECT_LT(rel_diff(a.dq, ref.dq), tol) << what << ": dq";
  EXPECT_LT(rel_diff(a.dk, ref.dk), tol) << what << ": dk";
  EXPECT_LT(rel_diff(a.dv, ref.dv), tol) << what << ": dv";
  EXPECT_LT(rel_diff(a.dg, ref.dg), tol) << what << ": dg";
  EXPECT_LT(rel_diff(a.dbeta, ref.dbeta), tol) << what << ": dbeta";
  EXPECT_LT(rel_diff(a.dS0, ref.dS0), tol) << what << ": dS0";
}

template <class T>
void expect_all_finite(const Outputs<T>& o, const Grads<T>& g, const std::string& what) {
  EXPECT_TRUE(gdn_test::all_finite(o.o) && gdn_test::all_finite(o.S_out)) << what << ": outputs not finite";
  for (const Buf<T>* b : {&g.dq, &g.dk, &g.dv, &g.dg, &g.dbeta, &g.dS0})
    EXPECT_TRUE(gdn_test::all_finite(*b)) << what << ": gradient not finite";
}

// The recurrence written out with whole matrices, independently of the library:
//   S <- e^g S + beta k (v - e^g S^T k)^T,  o = S^T q,  value head h reading key head h / (Hv/Hk).
Outputs<double> naive_forward(const Problem<double>& p) {
  const Dims& d = p.d;
  Outputs<double> out{Buf<double>({d.B, d.T, d.Hv, d.dv}), Buf<double>({d.B, d.Hv, d.dk, d.dv})};
  const int group = d.Hv / d.Hk;
  for (int b = 0; b < d.B; ++b)
    for (int h = 0; h < d.Hv; ++h) {
      std::vector<double> S(&p.S0[(b * d.Hv + h) * d.dk * d.dv], &p.S0[(b * d.Hv + h) * d.dk * d.dv] + d.dk * d.dv);
      for (int t = 0; t < d.T; ++t) {
        const double* q = &p.q[((b * d.T + t) * d.Hk + h / group) * d.dk];
        const double* k = &p.k[((b * d.T + t) * d.Hk + h / group) * d.dk];
        const double* v = &p.v[((b * d.T + t) * d.Hv + h) * d.dv];
        double decay = std::exp(p.g[(b * d.T + t) * d.Hv + h]), beta = p.beta[(b * d.T + t) * d.Hv + h];
        std::vector<double> recall(d.dv, 0.0);  // e^g S^T k
        for (int j = 0; j < d.dv; ++j)
          for (int i = 0; i < d.dk; ++i) recall[j] += decay * S[i * d.dv + j] * k[i];
        for (int i = 0; i < d.dk; ++i)
          for (int j = 0; j < d.dv; ++j)
            S[i * d.dv + j] = decay * S[i * d.dv + j] + beta * k[i] * (v[j] - recall[j]);
        for (int j = 0; j < d.dv; ++j) {
          double acc = 0;
          for (int i = 0; i < d.dk; ++i) acc += S[i * d.dv + j] * q[i];
          out.o[((b * d.T + t) * d.Hv + h) * d.dv + j] = acc;
        }
      }
      std::copy(S.begin(), S.end(), &out.S_out[(b * d.Hv + h) * d.dk * d.dv]);
    }
  return out;
}

template <class T>
Problem<float> to_float(const Problem<T>& p) {
  std::mt19937_64 unused(0);
  Problem<float> f(p.d, unused);
  f.q = gdn_test::to_float(p.q), f.k = gdn_test::to_float(p.k), f.v = gdn_test::to_float(p.v);
  f.g = gdn_test::to_float(p.g), f.beta = gdn_test::to_float(p.beta), f.S0 = gdn_test::to_float(p.S0);
  f.d_o = gdn_test::to_float(p.d_o), f.dS_out = gdn_test::to_float(p.dS_out);
  return f;
}

const Dims kOdd{2, 0, 2, 4, 5, 7};  // Hv = 2 Hk, odd head sizes; T set per test

Dims with_t(Dims d, int T) {
  d.T = T;
  return d;
}

TEST(GdnDeltaRule, RecurrentMatchesNaiveLoop) {
  std::mt19937_64 rng(11);
  for (int T : {1, 2, 17}) {
    Problem<double> p(with_t(kOdd, T), rng);
    expect_outputs_close(run_forward(p, 0), naive_forward(p), 1e-13, "T=" + std::to_string(T));
  }
}

TEST(GdnDeltaRule, ChunkedMatchesRecurrentForwardAndBackward) {
  std::mt19937_64 rng(12);
  struct Case {
    int T, C;
  };
  for (Case c : {Case{1, 64}, {15, 64}, {63, 64}, {64, 64}, {65, 64}, {300, 64}, {1, 8}, {7, 8}, {9, 8}, {37, 8},
                 {16, 8}}) {
    const std::string what = "T=" + std::to_string(c.T) + " C=" + std::to_string(c.C);
    Problem<double> p(with_t(kOdd, c.T), rng);
    expect_outputs_close(run_forward(p, c.C), run_forward(p, 0), 1e-10, what);
    expect_grads_close(run_backward(p, c.C), run_backward(p, 0), 1e-10, what);
  }
}

TEST(GdnDeltaRule, WithoutInitialOrFinalState) {
  std::mt19937_64 rng(13);
  Problem<double> p(with_t(kOdd, 20), rng);
  std::fill(p.S0.v.begin(), p.S0.v.end(), 0.0);
  std::fill(p.dS_out.v.begin(), p.dS_out.v.end(), 0.0);
  Outputs<double> ref = run_forward(p, 0);
  Grads<double> gref = run_backward(p, 0);
  const Dims& d = p.d;
  for (int chunk : {0, 8}) {
    Buf<double> o({d.B, d.T, d.Hv, d.dv});
    Grads<double> gr{Buf<double>(p.q.t.shape), Buf<double>(p.k.t.shape), Buf<double>(p.v.t.shape),
                     Buf<double>(p.g.t.shape), Buf<double>(p.beta.t.shape), Buf<double>()};
    poison(o), poison(gr.dq), poison(gr.dk), poison(gr.dv), poison(gr.dg), poison(gr.dbeta);
    Context ctx;
    if (chunk) {
      gdn_chunk_forward(ctx, o, Tensor{}, p.q, p.k, p.v, p.g, p.beta, Tensor{}, chunk);
      gdn_chunk_backward(ctx, gr.dq, gr.dk, gr.dv, gr.dg, gr.dbeta, Tensor{}, p.d_o, Tensor{}, p.q, p.k, p.v, p.g,
                         p.beta, Tensor{}, chunk);
    } else {
      gdn_recurrent_forward(ctx, o, Tensor{}, p.q, p.k, p.v, p.g, p.beta, Tensor{});
      gdn_recurrent_backward(ctx, gr.dq, gr.dk, gr.dv, gr.dg, gr.dbeta, Tensor{}, p.d_o, Tensor{}, p.q, p.k, p.v,
                             p.g, p.beta, Tensor{});
    }
    EXPECT_LT(rel_diff(o, ref.o), 1e-12);
    EXPECT_LT(rel_diff(gr.dq, gref.dq), 1e-10);
    EXPECT_LT(rel_diff(gr.dk, gref.dk), 1e-10);
    EXPECT_LT(rel_diff(gr.dv, gref.dv), 1e-10);
    EXPECT_LT(rel_diff(gr.dg, gref.dg), 1e-10);
    EXPECT_LT(rel_diff(gr.dbeta, gref.dbeta), 1e-10);
  }
}

// Finite differences of L = <o, d_o> + <S_out, dS_out> for every input of the op.
void check_fd(int chunk, int T, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Problem<double> p(Dims{2, T, 1, 2, 3, 4}, rng, -0.9, -0.05);
  Grads<double> gr = run_backward(p, chunk);
  auto loss = [&] {
    Outputs<double> out = run_forward(p, chunk);
    return dot(out.o, p.d_o) + dot(out.S_out, p.dS_out);
  };
  const std::string form = chunk ? "chunk C=" + std::to_string(chunk) : "recurrent";
  expect_grad_matches(form + " dq", p.q, gr.dq, loss, rng);
  expect_grad_matches(form + " dk", p.k, gr.dk, loss, rng);
  expect_grad_matches(form + " dv", p.v, gr.dv, loss, rng);
  expect_grad_matches(form + " dg", p.g, gr.dg, loss, rng);
  expect_grad_matches(form + " dbeta", p.beta, gr.dbeta, loss, rng);
  expect_grad_matches(form + " dS0", p.S0, gr.dS0, loss, rng);
}

TEST(GdnDeltaRule, RecurrentBackwardMatchesFiniteDifferences) { check_fd(0, 9, 14); }

TEST(GdnDeltaRule, ChunkedBackwardMatchesFiniteDifferences) {
  check_fd(4, 11, 15);  // two full chunks and a partial one of 3 rows
  check_fd(16, 5, 16);  // one partial chunk
}

// Decays that underflow to exactly 0: each step forgets the past, so S_t = beta_t k_t v_t^T
// and o_t = (q_t . k_t) beta_t v_t, whatever S0 was.
TEST(GdnDeltaRule, HugeDecayResetsTheStateWithoutNaN) {
  std::mt19937_64 rng(17);
  Problem<double> p(with_t(kOdd, 70), rng, -1e4, -1e4);
  const Dims& d = p.d;
  Outputs<double> rec = run_forward(p, 0);
  Grads<double> grec = run_backward(p, 0);
  for (int C : {64, 8}) {
    Outputs<double> ch = run_forward(p, C);
    Grads<double> gch = run_backward(p, C);
    expect_all_finite(ch, gch, "chunked, g = -1e4");
    expect_outputs_close(ch, rec, 1e-12, "g = -1e4");
    expect_grads_close(gch, grec, 1e-10, "g = -1e4");
  }
  expect_all_finite(rec, grec, "recurrent, g = -1e4");
  const int group = d.Hv / d.Hk;
  for (int b = 0; b < d.B; ++b)
    for (int t = 0; t < d.T; ++t)
      for (int h = 0; h < d.Hv; ++h) {
        const int r = b * d.T + t, kh = h / group;
        double qk = 0;
        for (int i = 0; i < d.dk; ++i) qk += p.q[(r * d.Hk + kh) * d.dk + i] * p.k[(r * d.Hk + kh) * d.dk + i];
        for (int j = 0; j < d.dv; ++j)
          EXPECT_NEAR(rec.o[(r * d.Hv + h) * d.dv + j], qk * p.beta[r * d.Hv + h] * p.v[(r * d.Hv + h) * d.dv + j],
                      1e-14);
      }
  for (double x : grec.dS0.v) EXPECT_EQ(x, 0.0);  // the initial state is forgotten at once
}

TEST(GdnDeltaRule, HugeDecayStaysFiniteInFloat) {
  std::mt19937_64 rng(24);
  Problem<double> p(with_t(kOdd, 70), rng, -1e4, -1e4);
  Problem<float> pf = to_float(p);
  Outputs<double> ref = run_forward(p, 0);
  Grads<double> gref = run_backward(p, 0);
  for (int chunk : {0, 64, 8}) {
    Outputs<float> o = run_forward(pf, chunk);
    Grads<float> gr = run_backward(pf, chunk);
    expect_all_finite(o, gr, "float, g = -1e4, chunk " + std::to_string(chunk));
    EXPECT_LT(rel_diff(o.o, ref.o), 1e-6) << chunk;
    EXPECT_LT(rel_diff(gr.dg, gref.dg), 1e-5) << chunk;
  }
}

TEST(GdnDeltaRule, NoDecayMatches) {
  std::mt19937_64 rng(18);
  Problem<double> p(with_t(kOdd, 40), rng, 0.0, 0.0);
  Outputs<double> rec = run_forward(p, 0);
  Grads<double> grec = run_backward(p, 0);
  Outputs<double> ch = run_forward(p, 8);
  Grads<double> gch = run_backward(p, 8);
  expect_all_finite(ch, gch, "g = 0");
  expect_outputs_close(ch, rec, 1e-10, "g = 0");
  expect_grads_close(gch, grec, 1e-10, "g = 0");
}

// beta = 0: nothing is written, the state only decays: o_t = e^{G_t} S0^T q_t, S_out = e^{G_T} S0.
TEST(GdnDeltaRule, BetaZeroOnlyDecaysTheState) {
  std::mt19937_64 rng(19);
  Problem<double> p(with_t(kOdd, 21), rng);
  std::fill(p.beta.v.begin(), p.beta.v.end(), 0.0);
  const Dims& d = p.d;
  Outputs<double> rec = run_forward(p, 0);
  Grads<double> grec = run_backward(p, 0);
  Outputs<double> ch = run_forward(p, 8);
  Grads<double> gch = run_backward(p, 8);
  expect_all_finite(ch, gch, "beta = 0");
  expect_outputs_close(ch, rec, 1e-10, "beta = 0");
  expect_grads_close(gch, grec, 1e-10, "beta = 0");
  for (double x : grec.dv.v) EXPECT_EQ(x, 0.0);
  const int group = d.Hv / d.Hk;
  for (int b = 0; b < d.B; ++b)
    for (int h = 0; h < d.Hv; ++h) {
      const double* S0 = &p.S0[(b * d.Hv + h) * d.dk * d.dv];
      double G = 0;
      for (int t = 0; t < d.T; ++t) {
        const int r = b * d.T + t;
        G += p.g[r * d.Hv + h];
        for (int j = 0; j < d.dv; ++j) {
          double want = 0;
          for (int i = 0; i < d.dk; ++i) want += std::exp(G) * S0[i * d.dv + j] * p.q[(r * d.Hk + h / group) * d.dk + i];
          EXPECT_NEAR(rec.o[(r * d.Hv + h) * d.dv + j], want, 1e-13);
        }
      }
      for (int i = 0; i < d.dk * d.dv; ++i)
        EXPECT_NEAR(rec.S_out[(b * d.Hv + h) * d.dk * d.dv + i], std::exp(G) * S0[i], 1e-13);
    }
}

TEST(GdnDeltaRule, BetaOneMatches) {
  std::mt19937_64 rng(20);
  Problem<double> p(with_t(kOdd, 33), rng);
  std::fill(p.beta.v.begin(), p.beta.v.end(), 1.0);
  Outputs<double> rec = run_forward(p, 0);
  Grads<double> grec = run_backward(p, 0);
  Outputs<double> ch = run_forward(p, 8);
  Grads<double> gch = run_backward(p, 8);
  expect_all_finite(ch, gch, "beta = 1");
  expect_outputs_close(ch, rec, 1e-10, "beta = 1");
  expect_grads_close(gch, grec, 1e-10, "beta = 1");
}

TEST(GdnDeltaRule, FloatAgreesWithDouble) {
  std::mt19937_64 rng(21);
  Problem<double> p(with_t(kOdd, 130), rng);
  Problem<float> pf = to_float(p);
  Outputs<double> ref = run_forward(p, 0);
  Grads<double> gref = run_backward(p, 0);
  for (int chunk : {0, 64}) {
    const std::string what = chunk ? "float chunked" : "float recurrent";
    Outputs<float> o = run_forward(pf, chunk);
    Grads<float> gr = run_backward(pf, chunk);
    EXPECT_LT(rel_diff(o.o, ref.o), 2e-5) << what;
    EXPECT_LT(rel_diff(o.S_out, ref.S_out), 2e-5) << what;
    EXPECT_LT(rel_diff(gr.dq, gref.dq), 5e-5) << what;
    EXPECT_LT(rel_diff(gr.dk, gref.dk), 5e-5) << what;
    EXPECT_LT(rel_diff(gr.dv, gref.dv), 5e-5) << what;
    EXPECT_LT(rel_diff(gr.dg, gref.dg), 5e-5) << what;
    EXPECT_LT(rel_diff(gr.dbeta, gref.dbeta), 5e-5) << what;
    EXPECT_LT(rel_diff(gr.dS0, gref.dS0), 5e-5) << what;
  }
}

// q, k, v as column slices of one conv output, dv written into a slice of its gradient:
// the same numbers as contiguous tensors, and the other columns untouched.
TEST(GdnDeltaRule, StridedViewsGiveTheSameResult) {
  std::mt19937_64 rng(22);
  Problem<double> p(with_t(kOdd, 13), rng);
  const Dims& d = p.d;
  const int kd = d.Hk * d.dk, C = 2 * kd + d.Hv * d.dv;
  Buf<double> qkv({d.B, d.T, C}), dqkv({d.B, d.T, C});
  for (int r = 0; r < d.B * d.T; ++r) {
    std::copy_n(&p.q[r * kd], kd, &qkv[r * C]);
    std::copy_n(&p.k[r * kd], kd, &qkv[r * C + kd]);
    std::copy_n(&p.v[r * d.Hv * d.dv], d.Hv * d.dv, &qkv[r * C + 2 * kd]);
  }
  Tensor q = gdn_head_view(qkv, 0, d.Hk, d.dk), k = gdn_head_view(qkv, kd, d.Hk, d.dk);
  Tensor v = gdn_head_view(qkv, 2 * kd, d.Hv, d.dv), dv = gdn_head_view(dqkv, 2 * kd, d.Hv, d.dv);
  for (int chunk : {0, 8}) {
    Outputs<double> ref = run_forward(p, chunk);
    Grads<double> gref = run_backward(p, chunk);
    Buf<double> o({d.B, d.T, d.Hv, d.dv}), S_out(p.S0.t.shape), dq(p.q.t.shape), dk(p.k.t.shape), dg(p.g.t.shape),
        dbeta(p.beta.t.shape), dS0(p.S0.t.shape);
    std::fill(dqkv.v.begin(), dqkv.v.end(), 3.0);
    Context ctx;
    if (chunk) {
      gdn_chunk_forward(ctx, o, S_out, q, k, v, p.g, p.beta, p.S0, chunk);
      gdn_chunk_backward(ctx, dq, dk, dv, dg, dbeta, dS0, p.d_o, p.dS_out, q, k, v, p.g, p.beta, p.S0, chunk);
    } else {
      gdn_recurrent_forward(ctx, o, S_out, q, k, v, p.g, p.beta, p.S0);
      gdn_recurrent_backward(ctx, dq, dk, dv, dg, dbeta, dS0, p.d_o, p.dS_out, q, k, v, p.g, p.beta, p.S0);
    }
    EXPECT_EQ(rel_diff(o, ref.o), 0.0);
    EXPECT_EQ(rel_diff(dq, gref.dq), 0.0);
    EXPECT_EQ(rel_diff(dg, gref.dg), 0.0);
    for (int r = 0; r < d.B * d.T; ++r)
      for (int c = 0; c < C; ++c) {
        if (c < 2 * kd) {
          EXPECT_EQ(dqkv[r * C + c], 3.0);
        } else {
          EXPECT_EQ(dqkv[r * C + c], gref.dv[r * d.Hv * d.dv + c - 2 * kd]);
        }
      }
  }
}

TEST(GdnDeltaRule, RejectsBadShapes) {
  std::mt19937_64 rng(23);
  Problem<double> p(Dims{1, 4, 2, 3, 3, 3}, rng);  // Hv = 3 is not a multiple of Hk = 2
  Buf<double> o({1, 4, 3, 3});
  Context ctx;
  EXPECT_THROW(gdn_recurrent_forward(ctx, o, Tensor{}, p.q, p.k, p.v, p.g, p.beta, Tensor{}), Error);
  Problem<double> ok(Dims{1, 4, 1, 2, 3, 3}, rng);
  Buf<double> o_ok({1, 4, 2, 3}), wrong_state({1, 2, 3, 4});
  EXPECT_THROW(gdn_chunk_forward(ctx, o_ok, Tensor{}, ok.q, ok.k, ok.v, ok.g, ok.beta, Tensor{}, 0), Error);
  EXPECT_THROW(gdn_chunk_forward(ctx, o_ok, Tensor{}, ok.q, ok.k, ok.v, ok.g, ok.beta, wrong_state, 4), Error);
  EXPECT_THROW(gdn_chunk_forward(ctx, o_ok, Tensor{}, ok.q, ok.k, o, ok.g, ok.beta, Tensor{}, 4), Error);
  EXPECT_NO_THROW(gdn_chunk_forward(ctx, o_ok, Tensor{}, ok.q, ok.k, ok.v, ok.g, ok.beta, Tensor{}, 4));
}

}  // namespace
}  // namespace dt
