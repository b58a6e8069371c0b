// The q and k l2norms taken inside the delta rule (GdnQkL2Norm) on the CPU, the layer's path: the
// un-normalised q, k in (column slices of the conv output), the normalised q, k and their r out,
// and in the backward dq, dk of the un-normalised inputs written straight into the conv output's
// gradient. Against the separate ops (gdn_l2norm_forward / _backward around the delta rule), bit
// for bit where the two compute the same numbers, and against finite differences in double.
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

// One problem laid out as the layer lays it out: q, k, v in the columns of qkv [B, T, C].
template <class T>
struct Fused {
  int B, Tn, Hk, Hv, dk, dv, kd, C;
  double q_scale;
  Buf<T> qkv, g, beta, S0, d_o, dS_out;
  Fused(int b, int t, int hk, int hv, int k_dim, int v_dim, std::mt19937_64& rng)
      : B(b), Tn(t), Hk(hk), Hv(hv), dk(k_dim), dv(v_dim), kd(hk * k_dim), C(2 * hk * k_dim + hv * v_dim),
        q_scale(1 / std::sqrt(double(k_dim))),
        qkv({b, t, C}), g({b, t, hv}), beta({b, t, hv}), S0({b, hv, k_dim, v_dim}), d_o({b, t, hv, v_dim}),
        dS_out({b, hv, k_dim, v_dim}) {
    fill_normal(qkv, rng);
    fill_uniform(g, rng, -0.9, -0.05);
    fill_uniform(beta, rng, 0.05, 0.95);
    fill_normal(S0, rng, 0.5), fill_normal(d_o, rng), fill_normal(dS_out, rng);
  }
  Shape qk() const { return {B, Tn, Hk, dk}; }
  Shape v_shape() const { return {B, Tn, Hv, dv}; }
  Shape rs() const { return {B, Tn, Hk}; }
  Shape state() const { return {B, Hv, dk, dv}; }
  Tensor q() const { return gdn_head_view(qkv, 0, Hk, dk); }
  Tensor k() const { return gdn_head_view(qkv, kd, Hk, dk); }
  Tensor v() const { return gdn_head_view(qkv, 2 * kd, Hv, dv); }
};

template <class T>
struct ForwardOut {
  Buf<T> o, S_out, q_hat, k_hat, q_r, k_r;
};
template <class T>
struct BackwardOut {
  Buf<T> d_qkv, dg, dbeta, dS0;
};

// chunk 0: the recurrent form.
template <class T>
void delta_forward(Context& ctx, const Fused<T>& p, ForwardOut<T>& f, const Tensor& q, const Tensor& k, int chunk,
                   const GdnQkL2Norm& l2) {
  if (chunk > 0) gdn_chunk_forward(ctx, f.o, f.S_out, q, k, p.v(), p.g, p.beta, p.S0, chunk, Tensor{}, l2);
  else gdn_recurrent_forward(ctx, f.o, f.S_out, q, k, p.v(), p.g, p.beta, p.S0, l2);
}

template <class T>
ForwardOut<T> new_forward_out(const Fused<T>& p) {
  ForwardOut<T> f{Buf<T>(p.v_shape()), Buf<T>(p.state()), Buf<T>(p.qk()), Buf<T>(p.qk()), Buf<T>(p.rs()),
                  Buf<T>(p.rs())};
  for (Buf<T>* b : {&f.o, &f.S_out, &f.q_hat, &f.k_hat, &f.q_r, &f.k_r}) poison(*b);
  return f;
}

template <class T>
GdnQkL2Norm l2_of(const Fused<T>& p, ForwardOut<T>& f, bool with_hat) {
  GdnQkL2Norm l2;
  if (with_hat) l2.q_hat = f.q_hat, l2.k_hat = f.k_hat;
  l2.q_rnorm = f.q_r, l2.k_rnorm = f.k_r, l2.q_scale = p.q_scale, l2.k_scale = 1.0;
  return l2;
}

// The layer's path: the l2norms inside.
template <class T>
ForwardOut<T> fused_forward(const Fused<T>& p, int chunk) {
  ForwardOut<T> f = new_forward_out(p);
  Context ctx;
  delta_forward(ctx, p, f, p.q(), p.k(), chunk, l2_of(p, f, true));
  return f;
}

// The separate ops: gdn_l2norm_forward (r kept), then the delta rule on its outputs.
template <class T>
ForwardOut<T> separate_forward(const Fused<T>& p, int chunk) {
  ForwardOut<T> f = new_forward_out(p);
  Context ctx;
  gdn_l2norm_forward(ctx, f.q_hat, p.q(), p.q_scale, f.q_r);
  gdn_l2norm_forward(ctx, f.k_hat, p.k(), 1.0, f.k_r);
  delta_forward(ctx, p, f, f.q_hat, f.k_hat, chunk, GdnQkL2Norm{});
  return f;
}

template <class T>
BackwardOut<T> new_backward_out(const Fused<T>& p) {
  BackwardOut<T> b{Buf<T>(p.qkv.t.shape), Buf<T>(p.g.t.shape), Buf<T>(p.beta.t.shape), Buf<T>(p.state())};
  for (Buf<T>* x : {&b.d_qkv, &b.dg, &b.dbeta, &b.dS0}) poison(*x);
  return b;
}

template <class T>
void delta_backward(Context& ctx, const Fused<T>& p, const ForwardOut<T>& f, BackwardOut<T>& b, const Tensor& dq,
                    const Tensor& dk, int chunk, const GdnQkL2Norm& l2) {
  const Tensor dv = gdn_head_view(b.d_qkv, 2 * p.kd, p.Hv, p.dv);
  if (chunk > 0)
    gdn_chunk_backward(ctx, dq, dk, dv, b.dg, b.dbeta, b.dS0, p.d_o, p.dS_out, f.q_hat, f.k_hat, p.v(), p.g, p.beta,
                       p.S0, chunk, Tensor{}, l2);
  else
    gdn_recurrent_backward(ctx, dq, dk, dv, b.dg, b.dbeta, b.dS0, p.d_o, p.dS_out, f.q_hat, f.k_hat, p.v(), p.g,
                           p.beta, p.S0, l2);
}

// The layer's path: dq, dk of the raw q, k straight into d_qkv.
template <class T>
BackwardOut<T> fused_backward(const Fused<T>& p, ForwardOut<T>& f, int chunk) {
  BackwardOut<T> b = new_backward_out(p);
  Context ctx;
  delta_backward(ctx, p, f, b, gdn_head_view(b.d_qkv, 0, p.Hk, p.dk), gdn_head_view(b.d_qkv, p.kd, p.Hk, p.dk),
                 chunk, l2_of(p, f, false));
  return b;
}

// The separate ops: the delta rule's dq, dk of the normalised q, k, then gdn_l2norm_backward.
template <class T>
BackwardOut<T> separate_backward(const Fused<T>& p, const ForwardOut<T>& f, int chunk) {
  BackwardOut<T> b = new_backward_out(p);
  Buf<T> dq_hat(p.qk()), dk_hat(p.qk());
  Context ctx;
  delta_backward(ctx, p, f, b, dq_hat, dk_hat, chunk, GdnQkL2Norm{});
  gdn_l2norm_backward(ctx, gdn_head_view(b.d_qkv, 0, p.Hk, p.dk), dq_hat, p.q(), p.q_scale);
  gdn_l2norm_backward(ctx, gdn_head_view(b.d_qkv, p.kd, p.Hk, p.dk), dk_hat, p.k(), 1.0);
  return b;
}

// Columns [c0, c1) of every row of a [B, T, C] buffer.
template <class T>
std::vector<T> columns(const Fused<T>& p, const Buf<T>& buf, int c0, int c1) {
  std::vector<T> out;
  for (int r = 0; r < p.B * p.Tn; ++r)
    for (int c = c0; c < c1; ++c) out.push_back(buf[r * p.C + c]);
  return out;
}

template <class T>
double col_diff(const Fused<T>& p, const Buf<T>& a, const Buf<T>& b, int c0, int c1) {
  std::vector<T> x = columns(p, a, c0, c1), y = columns(p, b, c0, c1);
  return rel_diff(x.data(), y.data(), static_cast<int64_t>(x.size()));
}

// The forward writes what the separate ops write, bit for bit: the same code computes y and r.
template <class T>
void check_forward_bits(int dk, const std::string& what) {
  std::mt19937_64 rng(31 + dk);
  for (int chunk : {0, 4}) {
    Fused<T> p(2, 11, 2, 4, dk, 3, rng);
    ForwardOut<T> a = fused_forward(p, chunk), b = separate_forward(p, chunk);
    const std::string w = what + " chunk " + std::to_string(chunk);
    EXPECT_EQ(rel_diff(a.o, b.o), 0.0) << w;
    EXPECT_EQ(rel_diff(a.S_out, b.S_out), 0.0) << w;
    EXPECT_EQ(rel_diff(a.q_hat, b.q_hat), 0.0) << w;
    EXPECT_EQ(rel_diff(a.k_hat, b.k_hat), 0.0) << w;
    EXPECT_EQ(rel_diff(a.q_r, b.q_r), 0.0) << w;
    EXPECT_EQ(rel_diff(a.k_r, b.k_r), 0.0) << w;
  }
}

TEST(GdnQkL2Norm, ForwardWritesWhatTheSeparateOpsWrite) {
  check_forward_bits<double>(5, "double dk 5");
  check_forward_bits<float>(5, "float dk 5");
  check_forward_bits<float>(8, "float dk 8");
}

TEST(GdnQkL2Norm, RnormIsTheReciprocalNorm) {
  std::mt19937_64 rng(32);
  Fused<double> p(2, 5, 2, 2, 6, 4, rng);
  ForwardOut<double> f = fused_forward(p, 4);
  for (int r = 0; r < p.B * p.Tn; ++r)
    for (int h = 0; h < p.Hk; ++h)
      for (int which = 0; which < 2; ++which) {
        const double* x = &p.qkv[r * p.C + which * p.kd + h * p.dk];
        double ss = 0;
        for (int i = 0; i < p.dk; ++i) ss += x[i] * x[i];
        const double want = 1 / std::sqrt(ss + 1e-6), scale = which ? 1.0 : p.q_scale;
        EXPECT_NEAR((which ? f.k_r : f.q_r)[r * p.Hk + h], want, 1e-15 * want);
        for (int i = 0; i < p.dk; ++i)
          EXPECT_NEAR((which ? f.k_hat : f.q_hat)[(r * p.Hk + h) * p.dk + i], scale * x[i] * want, 1e-15);
      }
}

// The backward against the separate ops. k (scale 1) and v, g, beta, S0 agree bit for bit; so does q
// when its scale is a power of two (dk = 4, 16, 64): x^ = y (1 / scale) is then exactly x r. Other
// scales differ by the rounding of that product.
template <class T>
void check_backward(int dk, double q_tol, const std::string& what) {
  std::mt19937_64 rng(41 + dk);
  for (int chunk : {0, 4}) {
    Fused<T> p(2, 11, 2, 4, dk, 3, rng);
    ForwardOut<T> f = fused_forward(p, chunk);
    BackwardOut<T> a = fused_backward(p, f, chunk), b = separate_backward(p, f, chunk);
    const std::string w = what + " chunk " + std::to_string(chunk);
    if (q_tol == 0) {
      EXPECT_EQ(col_diff(p, a.d_qkv, b.d_qkv, 0, p.kd), 0.0) << w << ": dq";
    } else {
      EXPECT_LT(col_diff(p, a.d_qkv, b.d_qkv, 0, p.kd), q_tol) << w << ": dq";
    }
    EXPECT_EQ(col_diff(p, a.d_qkv, b.d_qkv, p.kd, 2 * p.kd), 0.0) << w << ": dk";
    EXPECT_EQ(col_diff(p, a.d_qkv, b.d_qkv, 2 * p.kd, p.C), 0.0) << w << ": dv";
    EXPECT_EQ(rel_diff(a.dg, b.dg), 0.0) << w;
    EXPECT_EQ(rel_diff(a.dbeta, b.dbeta), 0.0) << w;
    EXPECT_EQ(rel_diff(a.dS0, b.dS0), 0.0) << w;
  }
}

TEST(GdnQkL2Norm, BackwardMatchesTheSeparateOps) {
  check_backward<double>(4, 0.0, "double dk 4");
  check_backward<float>(16, 0.0, "float dk 16");
  check_backward<double>(5, 1e-15, "double dk 5");
  check_backward<float>(8, 1e-6, "float dk 8");
}

// Finite differences of L = <o, d_o> + <S_out, dS_out> with respect to the raw q and k (and every
// other input): the l2norms inside, both forms.
void check_fd(int chunk, int T, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Fused<double> p(2, T, 1, 2, 3, 4, rng);
  ForwardOut<double> f = fused_forward(p, chunk);
  BackwardOut<double> b = fused_backward(p, f, chunk);
  auto loss = [&] {
    ForwardOut<double> out = fused_forward(p, chunk);
    return dot(out.o, p.d_o) + dot(out.S_out, p.dS_out);
  };
  const std::string form = chunk ? "chunk C=" + std::to_string(chunk) : "recurrent";
  // d_qkv holds dq | dk | dv in the columns of qkv: the whole buffer, then along a direction inside
  // each block.
  expect_grad_matches(form + " d_qkv", p.qkv, b.d_qkv, loss, rng, 1e-6, 8);
  const char* names[] = {"dq", "dk", "dv"};
  for (int blk = 0; blk < 3; ++blk) {
    const int c0 = blk * p.kd, c1 = blk < 2 ? c0 + p.kd : p.C;
    std::vector<double> u(p.qkv.size(), 0.0);
    std::normal_distribution<double> nd;
    double un = 0, an = 0;
    for (int r = 0; r < p.B * p.Tn; ++r)
      for (int c = c0; c < c1; ++c) u[r * p.C + c] = nd(rng), un += u[r * p.C + c] * u[r * p.C + c];
    for (int64_t i = 0; i < p.qkv.size(); ++i) u[i] /= std::sqrt(un), an += b.d_qkv[i] * u[i];
    const double fd = gdn_test::fd_directional(p.qkv.data(), u, 1e-4, loss);
    EXPECT_LE(std::fabs(fd - an), 1e-6 * std::max(std::fabs(fd), std::fabs(an)) + 1e-12)
        << form << " " << names[blk] << ": finite difference " << fd << ", analytic " << an;
  }
  expect_grad_matches(form + " dg", p.g, b.dg, loss, rng);
  expect_grad_matches(form + " dbeta", p.beta, b.dbeta, loss, rng);
  expect_grad_matches(form + " dS0", p.S0, b.dS0, loss, rng);
}

TEST(GdnQkL2Norm, RecurrentBackwardMatchesFiniteDifferences) { check_fd(0, 9, 51); }

TEST(GdnQkL2Norm, ChunkedBackwardMatchesFiniteDifferences) {
  check_fd(4, 11, 52);  // two full chunks and a partial one
  check_fd(16, 5, 53);  // one partial chunk
}

TEST(GdnQkL2Norm, RefusesIncompleteOrMisshapenArguments) {
  std::mt19937_64 rng(61);
  Fused<double> p(1, 4, 1, 2, 4, 3, rng);
  ForwardOut<double> f = fused_forward(p, 4);
  Context ctx;
  auto expect_error = [](auto call, const char* want) {
    try {
      call();
      ADD_FAILURE() << "no error; expected one naming " << want;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  GdnQkL2Norm three = l2_of(p, f, true);
  three.k_rnorm = Tensor{};
  expect_error([&] { delta_forward(ctx, p, f, p.q(), p.k(), 4, three); }, "together");
  expect_error([&] { delta_forward(ctx, p, f, p.q(), p.k(), 0, three); }, "together");
  BackwardOut<double> b = new_backward_out(p);
  const Tensor dq = gdn_head_view(b.d_qkv, 0, p.Hk, p.dk), dk = gdn_head_view(b.d_qkv, p.kd, p.Hk, p.dk);
  GdnQkL2Norm q_only = l2_of(p, f, false);
  q_only.k_rnorm = Tensor{};
  expect_error([&] { delta_backward(ctx, p, f, b, dq, dk, 4, q_only); }, "together");
  Buf<double> wrong_r({1, 4, 2});
  GdnQkL2Norm bad = l2_of(p, f, true);
  bad.q_rnorm = wrong_r;
  expect_error([&] { delta_forward(ctx, p, f, p.q(), p.k(), 4, bad); }, "q_rnorm");
  expect_error([&] { delta_backward(ctx, p, f, b, dq, dk, 0, bad); }, "q_rnorm");
  Buf<float> float_hat(p.qk());
  GdnQkL2Norm wrong_dtype = l2_of(p, f, true);
  wrong_dtype.k_hat = float_hat;
  expect_error([&] { delta_forward(ctx, p, f, p.q(), p.k(), 4, wrong_dtype); }, "k_hat");
}

}  // namespace
}  // namespace dt
