// Emulated-GPU checks of the GDN CUDA kernels against the double CPU references (GoogleTest; the
// chunked rule's cases are tests/gdn_cases.h, which the GPU tests run too).
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/gdn_chunk.h"
#include "kernels/cpu/gdn_conv.h"
#include "kernels/cpu/gdn_delta_rule.h"
#include "kernels/cpu/gdn_norm.h"
#include "kernels/cpu/gdn_l2norm.h"
#include "kernels/cpu/gdn_gates.h"
#include "core/error.h"
#include "kernels/gdn_cuda.h"
#include "kernels/cuda/gdn_plan.h"
#include "tests/gdn_cases.h"

using namespace dt;

static uint16_t f2b(float f) {
  uint32_t u; std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
static float b2f(uint16_t b) { uint32_t u = uint32_t(b) << 16; float f; std::memcpy(&f, &u, 4); return f; }

// D: the key head dim dk; Dv: the value head dim (0: = D).
// l2: also run the backward that takes the l2norms' backward (GdnCudaBackwardParams::q_rnorm).
struct Case { int64_t B = 1, T = 64, Hk = 1, Hv = 1, D = 64, Dv = 0; bool S0 = true, dS = true; int gates = 0; bool strided = false; uint64_t seed = 1; int cols = 0; bool l2 = false; bool misaligned = false; int persist = -1; };

static double rel(const std::vector<float>& got, const std::vector<double>& want, int64_t* nan) {
  double num = 0, den = 0; *nan = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) { ++*nan; continue; }
    num += (got[i] - want[i]) * (got[i] - want[i]); den += want[i] * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

static int failures = 0;
static void report(const char* what, const std::vector<float>& got, const std::vector<double>& want, double tol) {
  int64_t nan; double e = rel(got, want, &nan);
  bool ok = nan == 0 && e <= tol;
  if (!ok) ++failures;
  std::printf("  %-8s rel %.2e (tol %.0e) nan %ld %s\n", what, e, tol, (long)nan, ok ? "" : "  <-- FAIL");
}

static void run_case(const Case& c, GdnCudaImpl impl) {
  const int64_t B = c.B, T = c.T, Hk = c.Hk, Hv = c.Hv, D = c.D, Dv = c.Dv ? c.Dv : c.D, rows = B * T;
  std::mt19937_64 rng(c.seed);
  std::normal_distribution<double> nd;
  auto unit = [&](double scale) {
    std::vector<float> x(rows * Hk * D);
    for (int64_t r = 0; r < rows * Hk; ++r) {
      std::vector<double> t(D); double ss = 0;
      for (auto& e : t) e = nd(rng), ss += e * e;
      for (int64_t i = 0; i < D; ++i) x[r * D + i] = b2f(f2b(float(scale * t[i] / std::sqrt(ss + 1e-6))));
    }
    return x;
  };
  std::vector<float> q = unit(1 / std::sqrt(double(D))), k = unit(1), v(rows * Hv * Dv), dO(rows * Hv * Dv), g(rows * Hv), beta(rows * Hv);
  for (auto& e : v) e = b2f(f2b(float(nd(rng))));
  for (auto& e : dO) e = b2f(f2b(float(nd(rng))));
  for (int64_t i = 0; i < rows * Hv; ++i) {
    double a = nd(rng), b = nd(rng), gg = -std::log1p(std::exp(-a)), bb = 1 / (1 + std::exp(-b));
    if (c.gates == 1) gg = -1e-7 * std::fabs(a);
    if (c.gates == 2) gg = (i % 3 == 0) ? -80.0 - 20 * std::fabs(a) : gg;
    if (c.gates == 3) bb = (i % 2 == 0) ? 0.0 : 1.0;
    g[i] = float(gg), beta[i] = float(bb);
  }
  std::vector<float> S0(c.S0 ? B * Hv * D * Dv : 0), dSo(c.dS ? B * Hv * D * Dv : 0);
  for (auto& e : S0) e = float(0.3 * nd(rng));
  for (auto& e : dSo) e = float(0.3 * nd(rng));
  // reference in double
  auto dbl = [](const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); };
  std::vector<double> qd = dbl(q), kd = dbl(k), vd = dbl(v), dOd = dbl(dO), gd = dbl(g), bd = dbl(beta), S0d = dbl(S0), dSod = dbl(dSo);
  std::vector<double> o_r(rows * Hv * Dv), So_r(B * Hv * D * Dv), dq_r(rows * Hk * D), dk_r(rows * Hk * D), dv_r(rows * Hv * Dv), dg_r(rows * Hv), db_r(rows * Hv), dS0_r(B * Hv * D * Dv);
  GdnDims dims{B, T, Hk, Hv, D, Dv};
  {
    GdnForwardArgs<double> a; a.dims = dims;
    a.q = {qd.data(), Hk * D}; a.k = {kd.data(), Hk * D}; a.v = {vd.data(), Hv * Dv};
    a.g = gd.data(); a.beta = bd.data(); a.S0 = c.S0 ? S0d.data() : nullptr; a.o = {o_r.data(), Hv * Dv}; a.S_out = So_r.data();
    gdn_chunk_forward_ref<double>(a, 64);
    GdnBackwardArgs<double> b; b.dims = dims;
    b.q = a.q; b.k = a.k; b.v = a.v; b.g = a.g; b.beta = a.beta; b.S0 = a.S0;
    b.d_o = {dOd.data(), Hv * Dv}; b.dS_out = c.dS ? dSod.data() : nullptr;
    b.dq = {dq_r.data(), Hk * D}; b.dk = {dk_r.data(), Hk * D}; b.dv = {dv_r.data(), Hv * Dv};
    b.dg = dg_r.data(); b.dbeta = db_r.data(); b.dS0 = dS0_r.data();
    gdn_chunk_backward_ref<double>(b, 64);
  }
  // "device" run
  const int64_t W = c.strided ? 2 * Hk * D + Hv * Dv + 2 : 0;
  std::vector<uint16_t> qkv(rows * W, 0xFFFF), qb(q.size()), kb(k.size()), vb(v.size()), dOb(dO.size());
  for (size_t i = 0; i < q.size(); ++i) qb[i] = f2b(q[i]), kb[i] = f2b(k[i]);
  for (size_t i = 0; i < v.size(); ++i) vb[i] = f2b(v[i]), dOb[i] = f2b(dO[i]);
  GdnCudaForwardParams fp;
  fp.dims.B = B, fp.dims.T = T, fp.dims.Hk = Hk, fp.dims.Hv = Hv, fp.dims.dk = D, fp.dims.dv = Dv, fp.dims.chunk = 64, fp.dims.impl = impl;
  GdnPlanForcing force;
  force.state_cols = c.cols, force.qk_persist = c.persist;
  const GdnPlan plan = plan_gdn_for_testing(fp.dims, gdn_current_device(), force);
  if (c.strided) {
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(&qkv[r * W], &qb[r * Hk * D], Hk * D * 2);
      std::memcpy(&qkv[r * W + Hk * D], &kb[r * Hk * D], Hk * D * 2);
      std::memcpy(&qkv[r * W + 2 * Hk * D], &vb[r * Hv * Dv], Hv * Dv * 2);
    }
    fp.q = qkv.data(), fp.k = qkv.data() + Hk * D, fp.v = qkv.data() + 2 * Hk * D, fp.ld_q = fp.ld_k = fp.ld_v = W;
  } else {
    fp.q = qb.data(), fp.k = kb.data(), fp.v = vb.data(), fp.ld_q = fp.ld_k = Hk * D, fp.ld_v = Hv * Dv;
  }
  std::vector<uint16_t> ob(rows * Hv * Dv, 0xFFFF), dqb(rows * Hk * D, 0xFFFF), dkb(rows * Hk * D, 0xFFFF), dvb(rows * Hv * Dv, 0xFFFF);
  const float nanf = std::nanf("");
  std::vector<float> So(B * Hv * D * Dv, nanf), dgo(rows * Hv, nanf), dbo(rows * Hv, nanf), dS0o(B * Hv * D * Dv, nanf);
  fp.g = g.data(), fp.beta = beta.data(), fp.S0 = c.S0 ? S0.data() : nullptr, fp.o = ob.data(), fp.ld_o = Hv * Dv, fp.S_out = So.data();
  gdn_chunk_forward_cuda(fp, plan, nullptr);
  GdnCudaBackwardParams bp;
  bp.dims = fp.dims, bp.q = fp.q, bp.k = fp.k, bp.v = fp.v, bp.ld_q = fp.ld_q, bp.ld_k = fp.ld_k, bp.ld_v = fp.ld_v;
  bp.g = fp.g, bp.beta = fp.beta, bp.S0 = fp.S0, bp.d_o = dOb.data(), bp.ld_do = Hv * Dv, bp.dS_out = c.dS ? dSo.data() : nullptr;
  bp.dq = dqb.data(), bp.dk = dkb.data(), bp.dv = dvb.data(), bp.ld_dq = bp.ld_dk = Hk * D, bp.ld_dv = Hv * Dv;
  bp.dg = dgo.data(), bp.dbeta = dbo.data(), bp.dS0 = dS0o.data();
  gdn_chunk_backward_cuda(bp, plan, nullptr);
  // The forward's saved buffer handed to the backward must give the same bits as recomputing it.
  if (const int64_t sb = gdn_chunk_saved_bytes(fp.dims); sb > 0) {
    std::vector<uint8_t> saved_mem(sb + 256, 0xFF);
    void* saved = saved_mem.data() + (256 - reinterpret_cast<uintptr_t>(saved_mem.data()) % 256) % 256;
    std::vector<uint16_t> o2(ob.size(), 0xFFFF), dq2(dqb.size(), 0xFFFF), dk2(dkb.size(), 0xFFFF), dv2(dvb.size(), 0xFFFF);
    std::vector<float> dg2(dgo.size(), nanf), db2(dbo.size(), nanf), dS02(dS0o.size(), nanf);
    GdnCudaForwardParams f2 = fp;
    f2.o = o2.data(), f2.S_out = nullptr, f2.saved = saved;
    gdn_chunk_forward_cuda(f2, plan, nullptr);
    GdnCudaBackwardParams b2 = bp;
    b2.dq = dq2.data(), b2.dk = dk2.data(), b2.dv = dv2.data(), b2.dg = dg2.data(), b2.dbeta = db2.data(), b2.dS0 = dS02.data();
    b2.saved = saved;
    gdn_chunk_backward_cuda(b2, plan, nullptr);
    const bool same = o2 == ob && dq2 == dqb && dk2 == dkb && dv2 == dvb &&
                      std::memcmp(dg2.data(), dgo.data(), dg2.size() * 4) == 0 &&
                      std::memcmp(db2.data(), dbo.data(), db2.size() * 4) == 0 &&
                      std::memcmp(dS02.data(), dS0o.data(), dS02.size() * 4) == 0;
    if (!same) ++failures;
    std::printf("  saved    forward -> backward equals the recomputing path bitwise: %s\n", same ? "yes" : "NO  <-- FAIL");
  }
  if (c.misaligned) {  // o, dq, dk, dv 4 bytes past a 16-byte boundary: the 4-byte stores, not the whole rows, same bits
    std::vector<uint16_t> o3(ob.size() + 8, 0xFFFF), dq3(dqb.size() + 8, 0xFFFF), dk3(dkb.size() + 8, 0xFFFF), dv3(dvb.size() + 8, 0xFFFF);
    std::vector<float> dg3(dgo.size(), nanf), db3(dbo.size(), nanf), dS03(dS0o.size(), nanf);
    GdnCudaForwardParams f3 = fp;
    f3.o = o3.data() + 2, f3.S_out = nullptr;
    gdn_chunk_forward_cuda(f3, plan, nullptr);
    GdnCudaBackwardParams b3 = bp;
    b3.dq = dq3.data() + 2, b3.dk = dk3.data() + 2, b3.dv = dv3.data() + 2, b3.dg = dg3.data(), b3.dbeta = db3.data(), b3.dS0 = dS03.data();
    gdn_chunk_backward_cuda(b3, plan, nullptr);
    auto eq = [](const std::vector<uint16_t>& x, const std::vector<uint16_t>& want) { return std::equal(want.begin(), want.end(), x.begin() + 2); };
    const bool same = eq(o3, ob) && eq(dq3, dqb) && eq(dk3, dkb) && eq(dv3, dvb) && std::memcmp(dg3.data(), dgo.data(), dg3.size() * 4) == 0 &&
                      std::memcmp(db3.data(), dbo.data(), db3.size() * 4) == 0;
    if (!same) ++failures;
    std::printf("  outputs  4 bytes off 16: the same bits as whole-row stores: %s\n", same ? "yes" : "NO  <-- FAIL");
  }
  auto fl = [](const std::vector<uint16_t>& b) { std::vector<float> f(b.size()); for (size_t i = 0; i < b.size(); ++i) f[i] = b2f(b[i]); return f; };
  const char* name = impl == GdnCudaImpl::kSimt ? "simt" : impl == GdnCudaImpl::kAuto ? "auto" : "tc  ";
  std::printf("%s B=%ld T=%ld Hk=%ld Hv=%ld dk=%ld dv=%ld gates=%d S0=%d dS=%d strided=%d\n", name, (long)B, (long)T,
              (long)Hk, (long)Hv, (long)D, (long)Dv, c.gates, c.S0, c.dS, c.strided);
  if (std::getenv("EMU_DIGEST")) {  // one FNV-1a hash of every output's bytes: builds that give the same bits print the same
    uint64_t h = 1469598103934665603ull;
    auto mix = [&](const void* p, size_t n) { for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const unsigned char*>(p)[i]) * 1099511628211ull; };
    mix(ob.data(), ob.size() * 2), mix(So.data(), So.size() * 4), mix(dqb.data(), dqb.size() * 2), mix(dkb.data(), dkb.size() * 2);
    mix(dvb.data(), dvb.size() * 2), mix(dgo.data(), dgo.size() * 4), mix(dbo.data(), dbo.size() * 4), mix(dS0o.data(), dS0o.size() * 4);
    std::printf("  digest   %016llx\n", static_cast<unsigned long long>(h));
  }
  report("o", fl(ob), o_r, 5e-3);
  report("S_out", So, So_r, 5e-3);
  report("dq", fl(dqb), dq_r, 1e-2);
  report("dk", fl(dkb), dk_r, 1e-2);
  report("dv", fl(dvb), dv_r, 1e-2);
  report("dg", dgo, dg_r, 2e-2);
  report("dbeta", dbo, db_r, 2e-2);
  report("dS0", dS0o, dS0_r, 1e-2);
  if (c.l2) {  // the forward taking the l2norms of raw rows 2 q, 2 k (exact in bf16): y = q, k again
    std::vector<uint16_t> xq(qb.size()), xk(kb.size()), yq(qb.size(), 0xFFFF), yk(kb.size(), 0xFFFF), o4(ob.size(), 0xFFFF);
    for (size_t i = 0; i < qb.size(); ++i) xq[i] = f2b(2 * b2f(qb[i])), xk[i] = f2b(2 * b2f(kb[i]));
    std::vector<float> rq4(rows * Hk, nanf), rk4(rows * Hk, nanf);
    GdnCudaForwardParams f4 = fp;
    f4.q = xq.data(), f4.k = xk.data(), f4.ld_q = f4.ld_k = Hk * D, f4.o = o4.data(), f4.S_out = nullptr, f4.saved = nullptr;
    f4.q_hat = yq.data(), f4.k_hat = yk.data(), f4.ld_hat = Hk * D, f4.q_rnorm = rq4.data(), f4.k_rnorm = rk4.data();
    f4.q_scale = float(1 / std::sqrt(double(D))), f4.k_scale = 1.f;
    gdn_chunk_forward_cuda(f4, plan, nullptr);
    std::vector<double> rq_want(rows * Hk), rk_want(rows * Hk);
    for (int64_t r = 0; r < rows * Hk; ++r) {
      double sq = 0, sk = 0;
      for (int64_t i = 0; i < D; ++i) {
        const double a = b2f(xq[r * D + i]), b = b2f(xk[r * D + i]);
        sq += a * a, sk += b * b;
      }
      rq_want[r] = 1 / std::sqrt(sq + 1e-6), rk_want[r] = 1 / std::sqrt(sk + 1e-6);
    }
    report("l2 q_hat", fl(yq), qd, 5e-3);
    report("l2 k_hat", fl(yk), kd, 5e-3);
    report("l2 rq", rq4, rq_want, 1e-5);
    report("l2 rk", rk4, rk_want, 1e-5);
    report("l2 o", fl(o4), o_r, 5e-3);
  }
  if (c.l2) {  // q, k as l2norm outputs with r given: dx = s r dy - (r / s) y (y . dy), from this run's dq, dk
    std::uniform_real_distribution<double> ud(0.5, 2.0);
    std::vector<float> rq(rows * Hk), rk(rows * Hk);
    for (auto& e : rq) e = float(ud(rng));
    for (auto& e : rk) e = float(ud(rng));
    const float sq = float(1 / std::sqrt(double(D)));
    std::vector<uint16_t> dq3(dqb.size(), 0xFFFF), dk3(dkb.size(), 0xFFFF), dv3(dvb.size(), 0xFFFF);
    std::vector<float> dg3(dgo.size(), nanf), db3(dbo.size(), nanf), dS03(dS0o.size(), nanf);
    GdnCudaBackwardParams b3 = bp;
    b3.dq = dq3.data(), b3.dk = dk3.data(), b3.dv = dv3.data(), b3.dg = dg3.data(), b3.dbeta = db3.data(), b3.dS0 = dS03.data();
    b3.q_rnorm = rq.data(), b3.k_rnorm = rk.data(), b3.q_scale = sq, b3.k_scale = 1.f;
    gdn_chunk_backward_cuda(b3, plan, nullptr);
    auto want = [&](const std::vector<uint16_t>& y, int64_t ldy, const std::vector<uint16_t>& dy, const std::vector<float>& r, float s) {
      std::vector<double> dx(dy.size());
      for (int64_t row = 0; row < rows; ++row)
        for (int64_t h = 0; h < Hk; ++h) {
          const uint16_t* yr = y.data() + row * ldy + h * D;
          const uint16_t* dyr = dy.data() + (row * Hk + h) * D;
          double dot = 0;
          for (int64_t i = 0; i < D; ++i) dot += b2f(yr[i]) * b2f(dyr[i]);
          const double rr = r[row * Hk + h];
          for (int64_t i = 0; i < D; ++i) dx[(row * Hk + h) * D + i] = s * rr * b2f(dyr[i]) - rr / s * b2f(yr[i]) * dot;
        }
      return dx;
    };
    const std::vector<uint16_t>& ysrc = c.strided ? qkv : qb;
    const int64_t ldy = c.strided ? W : Hk * D;
    std::vector<uint16_t> kview(ysrc.begin() + (c.strided ? Hk * D : 0), ysrc.end());
    report("l2 dq", fl(dq3), want(c.strided ? qkv : qb, ldy, dqb, rq, sq), 1e-2);
    report("l2 dk", fl(dk3), want(c.strided ? kview : kb, ldy, dkb, rk, 1.f), 1e-2);
    report("l2 dv", fl(dv3), dv_r, 1e-2);
  }
  // The recurrent kernel (decode) on the same inputs, against the same references.
  std::vector<uint16_t> orb(rows * Hv * Dv, 0xFFFF);
  std::vector<float> Sor(B * Hv * D * Dv, nanf);
  fp.o = orb.data(), fp.S_out = Sor.data();
  gdn_recurrent_forward_cuda(fp, nullptr);
  report("rec o", fl(orb), o_r, 5e-3);
  report("rec S", Sor, So_r, 5e-3);
}

// Gated RMSNorm of the output (rows x 3 heads of d), forward, then the backward onto a dw of 0.5,
// outputs poisoned before.
// off = 1: tensors 2 bytes past a 16-byte boundary (the 1-feature path).
static void norm_case(std::mt19937_64& rng, int64_t rows, int64_t d, int off) {
  std::normal_distribution<double> nd;
  const int64_t H = 3, n = rows * H * d;
  std::vector<uint16_t> ob(n + off), zb(n + off), dyb(n + off), yb(n + off, 0xFFFF), dob(n + off), dzb(n + off);
  std::vector<float> w(d), dw(d);
  for (size_t i = 0; i < ob.size(); ++i) ob[i] = f2b(float(nd(rng))), zb[i] = f2b(float(2 * nd(rng))), dyb[i] = f2b(float(nd(rng)));
  for (auto& e : w) e = float(1 + 0.3 * nd(rng));
  std::vector<double> o(n), z(n), dy(n), y(n), d_o(n), dz(n), wd(w.begin(), w.end()), dwr(d, 0.5);
  for (int64_t i = 0; i < n; ++i) o[i] = b2f(ob[off + i]), z[i] = b2f(zb[off + i]), dy[i] = b2f(dyb[off + i]);
  gdn_norm_forward_ref<double>(y.data(), o.data(), z.data(), wd.data(), rows, H, d, 1e-6);
  gdn_norm_backward_ref<double>(d_o.data(), dz.data(), dwr.data(), dy.data(), o.data(), z.data(), wd.data(), rows, H, d, 1e-6);
  GdnCudaNormParams p;
  p.rows = rows, p.H = H, p.d = d, p.eps = 1e-6f, p.o = ob.data() + off, p.z = zb.data() + off, p.w = w.data(), p.y = yb.data() + off;
  p.dy = dyb.data() + off, p.d_o = dob.data() + off, p.dz = dzb.data() + off, p.dw = dw.data();
  gdn_norm_forward_cuda(p, nullptr);
  auto fl = [off](const std::vector<uint16_t>& b) { std::vector<float> f(b.size() - off); for (size_t i = 0; i < f.size(); ++i) f[i] = b2f(b[off + i]); return f; };
  std::printf("norm d=%ld off=%d rows=%ld\n", (long)d, off, (long)rows);
  report("y", fl(yb), y, 5e-3);
  std::fill(dob.begin(), dob.end(), 0xFFFF), std::fill(dzb.begin(), dzb.end(), 0xFFFF), std::fill(dw.begin(), dw.end(), 0.5f);
  gdn_norm_backward_cuda(p, nullptr);
  report("d_o", fl(dob), d_o, 1e-2);
  report("dz", fl(dzb), dz, 1e-2);
  report("dw", dw, dwr, 1e-4);
}

static void pointwise() {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> nd;
  for (int64_t d : {16, 32, 48, 64, 128}) {
    const int64_t rows = d == 64 ? 301 : 37, H = 3, W = 2 * H * d + 8;  // strided rows, 16-byte aligned when off = 0
    std::vector<uint16_t> xb(rows * W), dyb(rows * H * d), yb(rows * H * d, 0xFFFF), dxb(rows * H * d, 0xFFFF);
    for (auto& e : xb) e = f2b(float(2 * nd(rng)));
    for (auto& e : dyb) e = f2b(float(nd(rng)));
    std::vector<double> x(rows * H * d), dy(rows * H * d), y(rows * H * d), dx(rows * H * d);
    for (int64_t r = 0; r < rows; ++r) for (int64_t i = 0; i < H * d; ++i) x[r * H * d + i] = b2f(xb[r * W + d + i]);
    for (size_t i = 0; i < dy.size(); ++i) dy[i] = b2f(dyb[i]);
    const double sc = 1 / std::sqrt(double(d));
    gdn_l2norm_forward_ref<double>({y.data(), H * d}, {x.data(), H * d}, rows, H, d, sc);
    gdn_l2norm_backward_ref<double>({dx.data(), H * d}, {dy.data(), H * d}, {x.data(), H * d}, rows, H, d, sc);
    for (int off : {0, 1}) {  // off = 0: 16-byte accesses; 1: rows not 4-byte aligned (1-feature path)
      GdnCudaL2NormParams p;
      std::vector<uint16_t> xs(rows * (W + 1));
      for (int64_t r = 0; r < rows; ++r) for (int64_t i = 0; i < W; ++i) xs[r * (W + off) + i] = xb[r * W + i];
      p.rows = rows, p.H = H, p.d = d, p.scale = float(sc), p.x = xs.data() + d, p.ld_x = W + off, p.y = yb.data(), p.ld_y = H * d;
      gdn_l2norm_forward_cuda(p, nullptr);
      p.dy = dyb.data(), p.ld_dy = H * d, p.y = dxb.data();
      gdn_l2norm_backward_cuda(p, nullptr);
      std::vector<float> yf(yb.size()), dxf(dxb.size());
      for (size_t i = 0; i < yb.size(); ++i) yf[i] = b2f(yb[i]), dxf[i] = b2f(dxb[i]);
      std::printf("l2norm d=%ld off=%d\n", (long)d, off);
      report("y", yf, y, 5e-3);
      report("dx", dxf, dx, 1e-2);
    }
  }
  for (int64_t d : {16, 48, 64, 96, 256})  // gated RMSNorm of the output, per value head
    for (int off : {0, 1}) norm_case(rng, d == 64 ? 301 : 45, d, off);  // off = 1: the 1-feature path
  {
    const int64_t rows = 303, H = 12, n = rows * H;
    std::vector<float> a(n), b(n), dg(n), db(n), Al(H), dt(H), g(n), beta(n), da(n), dbo(n), dA(H, 0.5f), ddt(H, -0.25f);
    for (int64_t i = 0; i < n; ++i) a[i] = float(3 * nd(rng)), b[i] = float(3 * nd(rng)), dg[i] = float(nd(rng)), db[i] = float(nd(rng));
    for (int64_t h = 0; h < H; ++h) Al[h] = float(0.5 * nd(rng)), dt[h] = float(nd(rng));
    auto D = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
    std::vector<double> ad = D(a), bd = D(b), dgd = D(dg), dbd = D(db), Ald = D(Al), dtd = D(dt), gr(n), br(n), dar(n), dbr(n), dAr = D(dA), ddtr = D(ddt);
    gdn_gates_forward_ref<double>(gr.data(), br.data(), ad.data(), bd.data(), Ald.data(), dtd.data(), rows, H);
    gdn_gates_backward_ref<double>(dar.data(), dbr.data(), dAr.data(), ddtr.data(), dgd.data(), dbd.data(), ad.data(), bd.data(), Ald.data(), dtd.data(), rows, H);
    GdnCudaGatesParams p;
    p.rows = rows, p.H = H, p.a = a.data(), p.b = b.data(), p.A_log = Al.data(), p.dt_bias = dt.data(), p.g = g.data(), p.beta = beta.data();
    p.dg = dg.data(), p.dbeta = db.data(), p.da = da.data(), p.db = dbo.data(), p.dA_log = dA.data(), p.ddt_bias = ddt.data();
    gdn_gates_forward_cuda(p, nullptr);
    gdn_gates_backward_cuda(p, nullptr);
    std::printf("gates\n");
    report("g", g, gr, 1e-5); report("beta", beta, br, 1e-5); report("da", da, dar, 1e-5); report("db", dbo, dbr, 1e-5);
    report("dA_log", dA, dAr, 1e-4); report("ddt_bias", ddt, ddtr, 1e-4);
  }
}

// Causal depthwise conv + SiLU against the double reference: odd C (the 2-byte path), a misaligned
// base pointer (also 2-byte), T around the segment lengths (32 forward, 64 backward, 8 per CTA),
// K = 1..8, B > 1; dw accumulated onto a non-zero start.
static void conv() {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> nd;
  struct Shape { int64_t B, T, C, K; int off; };
  const Shape shapes[] = {{1, 1, 6, 4, 0},   {2, 63, 37, 4, 0},  {1, 65, 40, 4, 0},  {2, 130, 66, 4, 0},
                          {3, 33, 64, 1, 0},  {1, 70, 34, 2, 0},  {2, 29, 35, 3, 0},  {1, 97, 24, 5, 0},
                          {1, 40, 10, 8, 0},  {2, 65, 40, 4, 1},  {1, 2, 4, 4, 0},    {1, 600, 66, 4, 0}};
  for (const Shape& sh : shapes) {
    const int64_t B = sh.B, T = sh.T, C = sh.C, K = sh.K, n = B * T * C;
    std::vector<uint16_t> xb(n + 1), dyb(n + 1), yb(n + 1, 0xFFFF), dxb(n + 1, 0xFFFF);
    std::vector<float> w(C * K), dw(C * K);
    for (auto& e : xb) e = f2b(float(nd(rng)));
    for (auto& e : dyb) e = f2b(float(nd(rng)));
    for (auto& e : w) e = float(0.5 * nd(rng));
    for (auto& e : dw) e = float(0.1 * nd(rng));
    const int off = sh.off;  // 1: tensors start 2 bytes past a 4-byte boundary
    std::vector<double> x(n), dy(n), y(n), dx(n), wd(w.begin(), w.end()), dwr(dw.begin(), dw.end());
    for (int64_t i = 0; i < n; ++i) x[i] = b2f(xb[off + i]), dy[i] = b2f(dyb[off + i]);
    gdn_conv_forward_ref<double>(y.data(), x.data(), wd.data(), B, T, C, K);
    gdn_conv_backward_ref<double>(dx.data(), dwr.data(), dy.data(), x.data(), wd.data(), B, T, C, K);
    GdnCudaConvParams p;
    p.B = B, p.T = T, p.C = C, p.K = K, p.x = xb.data() + off, p.w = w.data(), p.y = yb.data() + off;
    p.dy = dyb.data() + off, p.dx = dxb.data() + off, p.dw = dw.data();
    gdn_conv_forward_cuda(p, nullptr);
    gdn_conv_backward_cuda(p, nullptr);
    std::vector<float> yf(n), dxf(n);
    for (int64_t i = 0; i < n; ++i) yf[i] = b2f(yb[off + i]), dxf[i] = b2f(dxb[off + i]);
    std::printf("conv B=%ld T=%ld C=%ld K=%ld off=%d\n", (long)B, (long)T, (long)C, (long)K, off);
    report("y", yf, y, 5e-3);
    report("dx", dxf, dx, 1e-2);
    report("dw", dw, dwr, 1e-4);
    // Run-to-run: a second backward onto the same start gives the same bits.
    std::vector<float> dw2(C * K);
    for (size_t i = 0; i < dw2.size(); ++i) dw2[i] = float(dwr[i]);  // any start; compare two runs from it
    std::vector<float> dw3 = dw2;
    p.dw = dw2.data(), gdn_conv_backward_cuda(p, nullptr);
    p.dw = dw3.data(), gdn_conv_backward_cuda(p, nullptr);
    const bool same = std::memcmp(dw2.data(), dw3.data(), dw2.size() * 4) == 0;
    if (!same) ++failures;
    std::printf("  dw repeat bitwise %s\n", same ? "same" : "DIFFERENT  <-- FAIL");
  }
}

// The l2norm options of the launchers given something wrong: each call must throw dt::Error whose
// message holds `want`, before any kernel runs.
static void l2norm_rejects() {
  const int64_t D = 64;
  std::vector<uint16_t> x(D, f2b(1.f)), y(D), o(D), d(D);
  std::vector<float> g(1, -0.1f), beta(1, 0.5f), r(1), dg(1), db(1);
  GdnCudaForwardParams f;
  f.dims.B = f.dims.T = f.dims.Hk = f.dims.Hv = 1, f.dims.dk = f.dims.dv = D, f.dims.chunk = 64;
  f.q = f.k = f.v = x.data(), f.ld_q = f.ld_k = f.ld_v = f.ld_o = D, f.g = g.data(), f.beta = beta.data();
  f.o = o.data(), f.q_hat = f.k_hat = y.data(), f.ld_hat = D, f.q_rnorm = f.k_rnorm = r.data();
  GdnCudaBackwardParams b;
  b.dims = f.dims, b.q = b.k = b.v = b.d_o = x.data(), b.ld_q = b.ld_k = b.ld_v = b.ld_do = D;
  b.g = g.data(), b.beta = beta.data(), b.dq = b.dk = b.dv = d.data(), b.ld_dq = b.ld_dk = b.ld_dv = D;
  b.dg = dg.data(), b.dbeta = db.data(), b.q_rnorm = b.k_rnorm = r.data();
  auto expect = [](const char* what, const char* want, auto call) {
    std::string got = "(no error)";
    try {
      call();
    } catch (const dt::Error& e) {
      got = e.what();
    }
    const bool ok = got.find(want) != std::string::npos;
    if (!ok) ++failures;
    std::printf("  rejects %-30s %s%s\n", what, ok ? "ok: " : "WRONG: ", got.c_str());
  };
  std::printf("l2norm options given something wrong\n");
  GdnCudaForwardParams f1 = f;
  f1.k_rnorm = nullptr;
  expect("forward, 3 of the 4", "come together", [&] { gdn_chunk_forward_cuda(f1, nullptr); });
  f1 = f, f1.ld_hat = D - 8;
  expect("forward, ld_hat too small", "ld_hat", [&] { gdn_chunk_forward_cuda(f1, nullptr); });
  f1 = f, f1.q_scale = 0.f;
  expect("forward, q_scale 0", "must be > 0", [&] { gdn_chunk_forward_cuda(f1, nullptr); });
  GdnCudaBackwardParams b1 = b;
  b1.k_rnorm = nullptr;
  expect("backward, q_rnorm alone", "come together", [&] { gdn_chunk_backward_cuda(b1, nullptr); });
  b1 = b, b1.k_scale = -1.f;
  expect("backward, k_scale -1", "must be > 0", [&] { gdn_chunk_backward_cuda(b1, nullptr); });
  b1 = b, b1.dims.impl = GdnCudaImpl::kSimt, b1.q_rnorm = nullptr;
  expect("backward (simt), k_rnorm alone", "come together", [&] { gdn_chunk_backward_cuda(b1, nullptr); });
}

// The plan refusing forced choices that have no kernel (plan_gdn_for_testing), for one chunk of the
// tensor-core kernels at head dim 64.
static void plan_rejects() {
  auto expect = [](const char* what, const char* needle, auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      if (std::string(e.what()).find(needle) != std::string::npos) return;
      std::printf("  %s: wrong message: %s  <-- FAIL\n", what, e.what());
      ++failures;
      return;
    }
    std::printf("  %s: no error  <-- FAIL\n", what);
    ++failures;
  };
  auto forward_with = [](auto&& set) {
    GdnCudaDims d;
    d.B = 1, d.T = 64, d.Hk = d.Hv = 1, d.dk = d.dv = 64;
    d.impl = GdnCudaImpl::kTensorCore;
    GdnPlanForcing f;
    set(f);
    plan_gdn_for_testing(d, GdnDevice{}, f);  // an H200's: 132 SMs, programmatic dependent launch
  };
  std::printf("plan options given something wrong\n");
  expect("overlap 2", "overlap must be -1 (the default), 0 (off) or 1 (on)",
         [&] { forward_with([](GdnPlanForcing& d) { d.overlap = 2; }); });
  expect("state_cols 32 at head dim 64", "state_cols 32 is not available for head dim 64",
         [&] { forward_with([](GdnPlanForcing& d) { d.state_cols = 32; }); });
  expect("overlap 0 at head dim 64", "overlap 0 takes head dim 128",
         [&] { forward_with([](GdnPlanForcing& d) { d.overlap = 0; }); });
  expect("chase_prep 2", "chase_prep must be -1 (by the sizes), 0 (off) or 1 (on)",
         [&] { forward_with([](GdnPlanForcing& d) { d.chase_prep = 2; }); });
  expect("chase_prep 1 at head dim 64", "chase_prep 1 takes head dim 128",
         [&] { forward_with([](GdnPlanForcing& d) { d.chase_prep = 1; }); });
  expect("chase_prep 1 without programmatic dependent launch", "chase_prep 1 needs kernels of one stream running",
         [] {
           GdnCudaDims d;
           d.B = 1, d.T = 64, d.Hk = d.Hv = 1, d.dk = d.dv = 128;
           d.impl = GdnCudaImpl::kTensorCore;
           GdnPlanForcing f;
           f.chase_prep = 1;
           GdnDevice no_pdl;
           no_pdl.dependent_launch = false;
           plan_gdn_for_testing(d, no_pdl, f);
         });
  expect("qk_persist 2", "qk_persist must be -1 (by the sizes), 0 (off) or 1 (on)",
         [&] { forward_with([](GdnPlanForcing& d) { d.qk_persist = 2; }); });
  expect("qk_persist 1 at head dim 64", "qk_persist 1 takes head dim 128",
         [&] { forward_with([](GdnPlanForcing& d) { d.qk_persist = 1; }); });
}

// ---- the tests ----

// The chunked rule's cases (tests/gdn_cases.h, shared with the GPU tests): Ci/* in ctest, ByHand/*
// by hand. EMU_SIMT=1 runs them on the SIMT kernels.
class EmuGdn : public ::testing::TestWithParam<gdn_cases::GdnCase> {};

TEST_P(EmuGdn, ChunkMatchesReference) {
  const gdn_cases::GdnCase& g = GetParam();
  Case c;
  c.B = g.B, c.T = g.T, c.Hk = g.Hk, c.Hv = g.Hv, c.D = g.D, c.Dv = g.Dv, c.S0 = g.S0, c.dS = g.dS;
  c.gates = static_cast<int>(g.gates), c.strided = g.strided, c.seed = g.seed, c.cols = g.state_cols;
  c.persist = g.qk_persist, c.l2 = g.l2, c.misaligned = g.misaligned;
  const char* simt = std::getenv("EMU_SIMT");
  const int before = failures;
  run_case(c, simt && std::string(simt) == "1" ? GdnCudaImpl::kSimt : g.impl);
  EXPECT_EQ(failures, before) << "see the lines marked FAIL above";
}

std::string case_param_name(const ::testing::TestParamInfo<gdn_cases::GdnCase>& info) {
  return gdn_cases::case_name(info.param);
}

INSTANTIATE_TEST_SUITE_P(Ci, EmuGdn, ::testing::ValuesIn(gdn_cases::emu_cases(gdn_cases::Emu::kCi)), case_param_name);
INSTANTIATE_TEST_SUITE_P(ByHand, EmuGdn, ::testing::ValuesIn(gdn_cases::emu_cases(gdn_cases::Emu::kByHand)),
                         case_param_name);

// The other GDN kernels, and the refusals.
TEST(EmuGdnOps, L2NormGatesNormRecurrent) {
  const int before = failures;
  pointwise();
  EXPECT_EQ(failures, before);
}

TEST(EmuGdnOps, Conv) {
  const int before = failures;
  conv();
  EXPECT_EQ(failures, before);
}

// The gated norm at sizes where its CTAs take several warp steps (slow: by hand, with
// --gtest_also_run_disabled_tests).
TEST(EmuGdnOps, DISABLED_NormLarge) {
  const int before = failures;
  std::mt19937_64 rng(9);
  norm_case(rng, 4501, 64, 0), norm_case(rng, 2731, 128, 0);
  EXPECT_EQ(failures, before);
}

TEST(EmuGdnRejects, L2NormOptionsAndPlanForcing) {
  const int before = failures;
  l2norm_rejects();
  plan_rejects();
  EXPECT_EQ(failures, before);
}
