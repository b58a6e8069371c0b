// The other GDN CUDA kernels against the CPU references run in double on the same bf16-rounded
// inputs: the l2norm (alone and taken inside the chunk kernels), the gates, the gated RMSNorm, the
// recurrent form (the decode step) and the causal conv. Every GPU output is poisoned with NaN
// before each run. Skips when there is no GPU.
#include <gtest/gtest.h>

#include "tests/gpu/gdn_cuda_test.h"

namespace dt {
namespace {

using namespace gdn_test;

// ---- pointwise ops: l2norm (bf16) and gates (fp32) ----

TEST(GdnCudaL2Norm, ForwardBackwardMatchReferenceOnStridedRows) {
  SKIP_WITHOUT_GPU();
  for (int64_t d : {16, 32, 48, 64, 128}) {
    const int64_t B = 2, T = 37, H = 3, rows = B * T, width = 2 * H * d + 4;  // x: columns [d, d + H*d)
    const double scale = 1 / std::sqrt(static_cast<double>(d));
    std::mt19937_64 rng(5 + d);
    std::normal_distribution<double> nd;
    std::vector<uint16_t> xb(rows * width), dyb(rows * H * d);
    for (auto& e : xb) e = f32_to_bf16(static_cast<float>(2 * nd(rng)));
    for (auto& e : dyb) e = f32_to_bf16(static_cast<float>(nd(rng)));
    // double reference on the same bf16 values
    std::vector<double> x(rows * H * d), dy(rows * H * d), y_ref(rows * H * d), dx_ref(rows * H * d);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < H * d; ++i) x[r * H * d + i] = bf16_to_f32(xb[r * width + d + i]);
    for (size_t i = 0; i < dy.size(); ++i) dy[i] = bf16_to_f32(dyb[i]);
    Context cpu;
    const Shape s{B, T, H, d};
    gdn_l2norm_forward(cpu, host_f64(y_ref, s), host_f64(x, s), scale);
    gdn_l2norm_backward(cpu, host_f64(dx_ref, s), host_f64(dy, s), host_f64(x, s), scale);

    Context ctx;
    ctx.device = Device::kCUDA;
    DevBuf xd(xb.size() * 2), dyd(dyb.size() * 2), yd(dyb.size() * 2), dxd(dyb.size() * 2);
    upload(xd, xb), upload(dyd, dyb);
    Tensor xt = gdn_head_view(Tensor(xd.p, DType::kBF16, Device::kCUDA, Shape{B, T, width}), d, H, d);
    Tensor yt(yd.p, DType::kBF16, Device::kCUDA, s), dyt(dyd.p, DType::kBF16, Device::kCUDA, s);
    Tensor dxt(dxd.p, DType::kBF16, Device::kCUDA, s);
    fill_cuda(yt, std::numeric_limits<double>::quiet_NaN(), nullptr);
    fill_cuda(dxt, std::numeric_limits<double>::quiet_NaN(), nullptr);
    gdn_l2norm_forward(ctx, yt, xt, scale);
    gdn_l2norm_backward(ctx, dxt, dyt, xt, scale);
    Case c;  // for the messages only
    c.D = d, c.T = T, c.B = B;
    expect_close("l2norm y", c, from_bf16(download<uint16_t>(yd, dyb.size())), y_ref, 5e-3);
    expect_close("l2norm dx", c, from_bf16(download<uint16_t>(dxd, dyb.size())), dx_ref, 1e-2);
  }
}

// The l2norms taken inside the chunk's forward and backward (GdnCudaForwardParams::q_hat,
// GdnCudaBackwardParams::q_rnorm): raw q, k (rows of different lengths) -> the chunk's forward,
// which also writes y = s x r and r -> its backward with r given -> dq, dk with respect to the raw
// rows; against the double chain l2norm -> chunk -> l2norm backward. The tensor-core kernels at
// Hv == Hk normalise the tiles they load and take the l2norm's backward as they store dq, dk;
// Hv > Hk and the SIMT kernels run the l2norms before and their backward after (from y and r).
// The shared cases (tests/gdn_cases.h) that say so (GdnCase::l2), with their forced plan; their
// strided rows are not taken here (q, k, v contiguous).
class GdnCudaL2NormCases : public ::testing::TestWithParam<gdn_cases::GdnCase> {};

std::vector<gdn_cases::GdnCase> l2_cases() {
  std::vector<gdn_cases::GdnCase> out;
  for (const gdn_cases::GdnCase& g : gdn_cases::all_cases())
    if (g.l2) out.push_back(g);
  return out;
}

TEST_P(GdnCudaL2NormCases, TakenInTheChunkForwardAndBackward) {
  SKIP_WITHOUT_GPU();
  const gdn_cases::GdnCase& gc = GetParam();
  ASSERT_TRUE(gc.S0 && gc.dS && gc.Dv == 0) << "the l2norm cases take S0, dS_out and dv = dk";
  const Case c = to_case(gc);
  SCOPED_TRACE(c.name() + (gc.impl == GdnCudaImpl::kSimt ? " (simt kernels)" : ""));
  const int64_t B = c.B, T = c.T, Hk = c.Hk, Hv = c.Hv, D = c.D, rows = B * T, nq = rows * Hk * D;
  const double qs = 1 / std::sqrt(static_cast<double>(D));
  Inputs in = make_inputs(c);
  std::mt19937_64 rng(c.seed + 1);
  std::normal_distribution<double> nd;
  std::vector<uint16_t> xqb(nq), xkb(nq);
  for (int64_t i = 0; i < nq; ++i) {
    const double len = 0.3 + (i / D) % 7;  // rows of different lengths
    xqb[i] = f32_to_bf16(static_cast<float>(len * nd(rng))), xkb[i] = f32_to_bf16(static_cast<float>(len * nd(rng)));
  }
  // double chain on the same bf16 values
  const Shape qsh{B, T, Hk, D}, vsh{B, T, Hv, D}, gsh{B, T, Hv}, ssh{B, Hv, D, D};
  std::vector<double> xq(nq), xk(nq), q(nq), k(nq), dqh(nq), dkh(nq), dxq_ref(nq), dxk_ref(nq);
  for (int64_t i = 0; i < nq; ++i) xq[i] = bf16_to_f32(xqb[i]), xk[i] = bf16_to_f32(xkb[i]);
  std::vector<double> v = to_double(in.v), g = to_double(in.g), beta = to_double(in.beta), S0 = to_double(in.S0),
                      d_o = to_double(in.d_o), dS_out = to_double(in.dS_out);
  std::vector<double> o(rows * Hv * D), S_out(B * Hv * D * D), dv(rows * Hv * D), dg(rows * Hv), db(rows * Hv),
      dS0(B * Hv * D * D);
  Context cpu;
  gdn_l2norm_forward(cpu, host_f64(q, qsh), host_f64(xq, qsh), qs);
  gdn_l2norm_forward(cpu, host_f64(k, qsh), host_f64(xk, qsh), 1.0);
  gdn_chunk_forward(cpu, host_f64(o, vsh), host_f64(S_out, ssh), host_f64(q, qsh), host_f64(k, qsh),
                    host_f64(v, vsh), host_f64(g, gsh), host_f64(beta, gsh), host_f64(S0, ssh), 64);
  gdn_chunk_backward(cpu, host_f64(dqh, qsh), host_f64(dkh, qsh), host_f64(dv, vsh), host_f64(dg, gsh),
                     host_f64(db, gsh), host_f64(dS0, ssh), host_f64(d_o, vsh), host_f64(dS_out, ssh),
                     host_f64(q, qsh), host_f64(k, qsh), host_f64(v, vsh), host_f64(g, gsh), host_f64(beta, gsh),
                     host_f64(S0, ssh), 64);
  gdn_l2norm_backward(cpu, host_f64(dxq_ref, qsh), host_f64(dqh, qsh), host_f64(xq, qsh), qs);
  gdn_l2norm_backward(cpu, host_f64(dxk_ref, qsh), host_f64(dkh, qsh), host_f64(xk, qsh), 1.0);
  std::vector<double> rq_ref(rows * Hk);
  for (int64_t r = 0; r < rows * Hk; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < D; ++i) ss += xq[r * D + i] * xq[r * D + i];
    rq_ref[r] = 1 / std::sqrt(ss + 1e-6);
  }

  std::vector<uint16_t> yq, yk, ob;  // y of the l2norms and o, from the last run
  auto gpu = [&](std::vector<uint16_t>& dxq, std::vector<uint16_t>& dxk, std::vector<float>& rq) {
    const size_t nv = rows * Hv * D, ng = rows * Hv, ns = B * Hv * D * D;
    DevBuf xqd(nq * 2), xkd(nq * 2), qd(nq * 2), kd(nq * 2), rqd(rows * Hk * 4), rkd(rows * Hk * 4), vd(nv * 2),
        gd(ng * 4), bd(ng * 4), S0d(ns * 4), dod(nv * 2), dSd(ns * 4), od(nv * 2), Soutd(ns * 4), dqd(nq * 2),
        dkd(nq * 2), dvd(nv * 2), dgd(ng * 4), dbd(ng * 4), dS0d(ns * 4);
    upload(xqd, xqb), upload(xkd, xkb), upload(vd, to_bf16(in.v)), upload(gd, in.g), upload(bd, in.beta);
    upload(S0d, in.S0), upload(dod, to_bf16(in.d_o)), upload(dSd, in.dS_out);
    for (DevBuf* b : {&qd, &kd, &rqd, &rkd, &dqd, &dkd})
      upload(*b, std::vector<uint16_t>(b->bytes / 2, 0xFFFF));  // NaN as bf16 and as fp32
    fill_cuda(Tensor(od.p, DType::kBF16, Device::kCUDA, vsh), std::numeric_limits<double>::quiet_NaN(), nullptr);
    GdnCudaDims d;
    d.B = B, d.T = T, d.Hk = Hk, d.Hv = Hv, d.dk = d.dv = D, d.chunk = 64, d.impl = gc.impl;
    GdnCudaForwardParams f;
    f.dims = d, f.q = static_cast<uint16_t*>(xqd.p), f.k = static_cast<uint16_t*>(xkd.p);
    f.q_hat = static_cast<uint16_t*>(qd.p), f.k_hat = static_cast<uint16_t*>(kd.p), f.ld_hat = Hk * D;
    f.q_rnorm = static_cast<float*>(rqd.p), f.k_rnorm = static_cast<float*>(rkd.p);
    f.q_scale = static_cast<float>(qs), f.k_scale = 1.f;
    f.v = static_cast<uint16_t*>(vd.p), f.ld_q = f.ld_k = Hk * D, f.ld_v = Hv * D;
    f.g = static_cast<float*>(gd.p), f.beta = static_cast<float*>(bd.p), f.S0 = static_cast<float*>(S0d.p);
    f.o = static_cast<uint16_t*>(od.p), f.ld_o = Hv * D, f.S_out = static_cast<float*>(Soutd.p);
    GdnPlanForcing force;
    force.state_cols = gc.state_cols, force.qk_persist = gc.qk_persist;
    const GdnPlan plan = plan_gdn_for_testing(d, gdn_current_device(), force);
    gdn_chunk_forward_cuda(f, plan, nullptr);
    GdnCudaBackwardParams b;
    b.dims = d, b.q = f.q_hat, b.k = f.k_hat, b.v = f.v, b.ld_q = b.ld_k = f.ld_hat, b.ld_v = f.ld_v;
    b.g = f.g, b.beta = f.beta, b.S0 = f.S0, b.d_o = static_cast<uint16_t*>(dod.p), b.ld_do = Hv * D;
    b.dS_out = static_cast<float*>(dSd.p);
    b.dq = static_cast<uint16_t*>(dqd.p), b.dk = static_cast<uint16_t*>(dkd.p), b.dv = static_cast<uint16_t*>(dvd.p);
    b.ld_dq = b.ld_dk = Hk * D, b.ld_dv = Hv * D;
    b.dg = static_cast<float*>(dgd.p), b.dbeta = static_cast<float*>(dbd.p), b.dS0 = static_cast<float*>(dS0d.p);
    b.q_rnorm = static_cast<float*>(rqd.p), b.k_rnorm = static_cast<float*>(rkd.p);
    b.q_scale = static_cast<float>(qs), b.k_scale = 1.f;
    gdn_chunk_backward_cuda(b, plan, nullptr);
    dxq = download<uint16_t>(dqd, nq), dxk = download<uint16_t>(dkd, nq), rq = download<float>(rqd, rows * Hk);
    yq = download<uint16_t>(qd, nq), yk = download<uint16_t>(kd, nq), ob = download<uint16_t>(od, nv);
  };
  std::vector<uint16_t> dxq, dxk, dxq2, dxk2;
  std::vector<float> rq, rq2;
  gpu(dxq, dxk, rq);
  expect_close("rnorm", c, rq, rq_ref, 1e-5);
  expect_close("q_hat", c, from_bf16(yq), q, 5e-3);
  expect_close("k_hat", c, from_bf16(yk), k, 5e-3);
  expect_close("o", c, from_bf16(ob), o, 5e-3);
  expect_close("dx_q", c, from_bf16(dxq), dxq_ref, 1e-2);
  expect_close("dx_k", c, from_bf16(dxk), dxk_ref, 1e-2);
  gpu(dxq2, dxk2, rq2);
  EXPECT_EQ(dxq, dxq2) << "dx_q differs between two runs";
  EXPECT_EQ(dxk, dxk2) << "dx_k differs between two runs";
}

INSTANTIATE_TEST_SUITE_P(Cases, GdnCudaL2NormCases, ::testing::ValuesIn(l2_cases()), case_param_name);

// The second size takes the backward's CTAs past one element a thread (more than 2048 x 21 rows).
TEST(GdnCudaGates, ForwardBackwardMatchReference) {
  SKIP_WITHOUT_GPU();
  for (const auto& [B, T, H] : {std::array<int64_t, 3>{3, 101, 4}, std::array<int64_t, 3>{4, 12289, 12}}) {
    const int64_t n = B * T * H;
    std::mt19937_64 rng(9 + H);
    std::normal_distribution<double> nd;
    std::vector<float> a(n), b(n), dg(n), dbeta(n), A_log(H), dt_bias(H), dA_log0(H, 0.5f), ddt0(H, -0.25f);
    for (int64_t i = 0; i < n; ++i) a[i] = static_cast<float>(3 * nd(rng)), b[i] = static_cast<float>(3 * nd(rng)),
                                    dg[i] = static_cast<float>(nd(rng)), dbeta[i] = static_cast<float>(nd(rng));
    a[0] = 40.f, a[1] = -40.f, b[2] = 60.f, b[3] = -60.f;  // saturated softplus and sigmoid
    for (int64_t h = 0; h < H; ++h) A_log[h] = static_cast<float>(0.5 * nd(rng)), dt_bias[h] = static_cast<float>(nd(rng));
    std::vector<double> ad = to_double(a), bd = to_double(b), dgd = to_double(dg), dbd = to_double(dbeta),
                        Ad = to_double(A_log), dtd = to_double(dt_bias), g_ref(n), beta_ref(n), da_ref(n), db_ref(n),
                        dA_ref = to_double(dA_log0), ddt_ref = to_double(ddt0);
    const Shape s{B, T, H}, hs{H};
    Context cpu;
    gdn_gates_forward(cpu, host_f64(g_ref, s), host_f64(beta_ref, s), host_f64(ad, s), host_f64(bd, s),
                      host_f64(Ad, hs), host_f64(dtd, hs));
    gdn_gates_backward(cpu, host_f64(da_ref, s), host_f64(db_ref, s), host_f64(dA_ref, hs), host_f64(ddt_ref, hs),
                       host_f64(dgd, s), host_f64(dbd, s), host_f64(ad, s), host_f64(bd, s), host_f64(Ad, hs),
                       host_f64(dtd, hs));

    Context ctx;
    ctx.device = Device::kCUDA;
    auto dev = [&](const std::vector<float>& h) {
      auto p = std::make_unique<DevBuf>(h.size() * 4);
      upload(*p, h);
      return p;
    };
    auto A = dev(a), Bb = dev(b), DG = dev(dg), DB = dev(dbeta), AL = dev(A_log), DT = dev(dt_bias), DAL = dev(dA_log0),
         DDT = dev(ddt0);
    DevBuf G(n * 4), BE(n * 4), DA(n * 4), DBo(n * 4);
    auto t = [&](void* p, const Shape& sh) { return Tensor(p, DType::kF32, Device::kCUDA, sh); };
    for (void* p : {G.p, BE.p, DA.p, DBo.p}) fill_cuda(t(p, s), std::numeric_limits<double>::quiet_NaN(), nullptr);
    gdn_gates_forward(ctx, t(G.p, s), t(BE.p, s), t(A->p, s), t(Bb->p, s), t(AL->p, hs), t(DT->p, hs));
    gdn_gates_backward(ctx, t(DA.p, s), t(DBo.p, s), t(DAL->p, hs), t(DDT->p, hs), t(DG->p, s), t(DB->p, s), t(A->p, s),
                       t(Bb->p, s), t(AL->p, hs), t(DT->p, hs));
    Case c;  // for the messages only
    c.B = B, c.T = T, c.Hv = H;
    expect_close("gates g", c, download<float>(G, n), g_ref, 1e-5);
    expect_close("gates beta", c, download<float>(BE, n), beta_ref, 1e-5);
    expect_close("gates da", c, download<float>(DA, n), da_ref, 1e-5);
    expect_close("gates db", c, download<float>(DBo, n), db_ref, 1e-5);
    expect_close("gates dA_log (accumulated onto 0.5)", c, download<float>(*DAL, H), dA_ref, 1e-4);
    expect_close("gates ddt_bias (accumulated onto -0.25)", c, download<float>(*DDT, H), ddt_ref, 1e-4);
  }
}

// ---- gated RMSNorm of the output (bf16 o, z, y; fp32 w, dw) ----

TEST(GdnCudaNorm, ForwardBackwardMatchReferenceAndDwIsDeterministic) {
  SKIP_WITHOUT_GPU();
  for (int64_t d : {16, 48, 64, 128}) {
    const int64_t B = 2, T = 37, H = 3, n = B * T * H * d;
    const double eps = 1e-6;
    std::mt19937_64 rng(40 + d);
    std::normal_distribution<double> nd;
    std::vector<uint16_t> ob(n), zb(n), dyb(n);
    for (auto& e : ob) e = f32_to_bf16(static_cast<float>(0.3 * nd(rng)));
    for (auto& e : zb) e = f32_to_bf16(static_cast<float>(2 * nd(rng)));
    for (auto& e : dyb) e = f32_to_bf16(static_cast<float>(nd(rng)));
    std::vector<float> w(d), dw0(d, 0.3f);
    for (auto& e : w) e = static_cast<float>(1 + 0.2 * nd(rng));
    std::vector<double> o = to_double(from_bf16(ob)), z = to_double(from_bf16(zb)), dy = to_double(from_bf16(dyb)),
                        wd = to_double(w), y_ref(n), do_ref(n), dz_ref(n), dw_ref = to_double(dw0);
    const Shape s{B, T, H, d}, ws{d};
    Context cpu;
    gdn_norm_forward(cpu, host_f64(y_ref, s), host_f64(o, s), host_f64(z, s), host_f64(wd, ws), eps);
    gdn_norm_backward(cpu, host_f64(do_ref, s), host_f64(dz_ref, s), host_f64(dw_ref, ws), host_f64(dy, s),
                      host_f64(o, s), host_f64(z, s), host_f64(wd, ws), eps);

    Context ctx;
    ctx.device = Device::kCUDA;
    DevBuf od(n * 2), zd(n * 2), dyd(n * 2), yd(n * 2), dod(n * 2), dzd(n * 2), wdv(d * 4), dw1(d * 4), dw2(d * 4);
    upload(od, ob), upload(zd, zb), upload(dyd, dyb), upload(wdv, w), upload(dw1, dw0), upload(dw2, dw0);
    auto bf = [&](DevBuf& b) { return Tensor(b.p, DType::kBF16, Device::kCUDA, s); };
    auto f32 = [&](DevBuf& b) { return Tensor(b.p, DType::kF32, Device::kCUDA, ws); };
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (DevBuf* b : {&yd, &dod, &dzd}) fill_cuda(bf(*b), nan, nullptr);
    gdn_norm_forward(ctx, bf(yd), bf(od), bf(zd), f32(wdv), eps);
    gdn_norm_backward(ctx, bf(dod), bf(dzd), f32(dw1), bf(dyd), bf(od), bf(zd), f32(wdv), eps);
    Case c;  // for the messages only
    c.B = B, c.T = T, c.Hv = H, c.D = d;
    expect_close("norm y", c, from_bf16(download<uint16_t>(yd, n)), y_ref, 5e-3);
    expect_close("norm d_o", c, from_bf16(download<uint16_t>(dod, n)), do_ref, 1e-2);
    expect_close("norm dz", c, from_bf16(download<uint16_t>(dzd, n)), dz_ref, 1e-2);
    const std::vector<float> dw_a = download<float>(dw1, d);
    expect_close("norm dw (accumulated onto 0.3)", c, dw_a, dw_ref, 1e-3);
    gdn_norm_backward(ctx, bf(dod), bf(dzd), f32(dw2), bf(dyd), bf(od), bf(zd), f32(wdv), eps);
    EXPECT_EQ(0, std::memcmp(dw_a.data(), download<float>(dw2, d).data(), d * 4)) << "norm dw differs between runs";
  }
}

// The backward (kernels/cuda/gdn_norm.cu) through the launcher: odd item counts, the 1-feature path
// (off = 1: every bf16 tensor 2 bytes past a 16-byte boundary), and sizes at which the pipelined
// kernel's one-wave grid gives each CTA several warp steps and the last CTA a partial one (T 4501 x
// 3 heads of 64; T 2731 x 3 heads of 128). Outputs poisoned before each run; dw accumulated onto
// 0.3; a second run gives the same dw bits.
TEST(GdnCudaNorm, BackwardMatchesReferenceOnEveryPath) {
  SKIP_WITHOUT_GPU();
  struct NormCase {
    int64_t B, T, H, d;
    int off;
  };
  const NormCase cases[] = {{2, 37, 3, 16, 0}, {2, 37, 3, 48, 0}, {2, 37, 3, 64, 0},   {2, 37, 3, 128, 0},
                            {1, 45, 3, 256, 0}, {2, 37, 3, 64, 1}, {1, 45, 3, 48, 1}, {1, 4501, 3, 64, 0},
                            {1, 2731, 3, 128, 0}};
  for (const NormCase& nc : cases) {
    const int64_t B = nc.B, T = nc.T, H = nc.H, d = nc.d, n = B * T * H * d, off = nc.off;
    const double eps = 1e-6;
    std::mt19937_64 rng(60 + d + T + off);
    std::normal_distribution<double> nd;
    std::vector<uint16_t> ob(n + off), zb(n + off), dyb(n + off);
    for (auto& e : ob) e = f32_to_bf16(static_cast<float>(0.3 * nd(rng)));
    for (auto& e : zb) e = f32_to_bf16(static_cast<float>(2 * nd(rng)));
    for (auto& e : dyb) e = f32_to_bf16(static_cast<float>(nd(rng)));
    std::vector<float> w(d), dw0(d, 0.3f);
    for (auto& e : w) e = static_cast<float>(1 + 0.2 * nd(rng));
    auto tail = [&](const std::vector<uint16_t>& b) {  // the n values past the offset, as doubles
      const std::vector<float> f = from_bf16(b);
      return std::vector<double>(f.begin() + off, f.end());
    };
    std::vector<double> o = tail(ob), z = tail(zb), dy = tail(dyb), wd = to_double(w), y_ref(n), do_ref(n), dz_ref(n),
                        dw_ref = to_double(dw0);
    const Shape s{B, T, H, d}, ws{d};
    Context cpu;
    gdn_norm_forward(cpu, host_f64(y_ref, s), host_f64(o, s), host_f64(z, s), host_f64(wd, ws), eps);
    gdn_norm_backward(cpu, host_f64(do_ref, s), host_f64(dz_ref, s), host_f64(dw_ref, ws), host_f64(dy, s),
                      host_f64(o, s), host_f64(z, s), host_f64(wd, ws), eps);

    DevBuf od((n + off) * 2), zd((n + off) * 2), dyd((n + off) * 2), yd((n + off) * 2), dod((n + off) * 2),
        dzd((n + off) * 2), wdv(d * 4), dw1(d * 4), dw2(d * 4);
    upload(od, ob), upload(zd, zb), upload(dyd, dyb), upload(wdv, w);
    auto bits = [&](DevBuf& b) { return static_cast<uint16_t*>(b.p) + off; };
    auto poison = [&](DevBuf& b) {
      fill_cuda(Tensor(b.p, DType::kBF16, Device::kCUDA, Shape{n + off}), std::numeric_limits<double>::quiet_NaN(),
                nullptr);
    };
    auto got = [&](DevBuf& b) {  // the n outputs past the offset
      std::vector<uint16_t> h = download<uint16_t>(b, n + off);
      h.erase(h.begin(), h.begin() + off);
      return from_bf16(h);
    };
    GdnCudaNormParams p;
    p.rows = B * T, p.H = H, p.d = d, p.eps = static_cast<float>(eps);
    p.o = bits(od), p.z = bits(zd), p.w = static_cast<const float*>(wdv.p), p.y = bits(yd);
    p.dy = bits(dyd), p.d_o = bits(dod), p.dz = bits(dzd);
    Case c;  // for the messages only
    c.B = B, c.T = T, c.Hv = H, c.D = d;
    poison(yd);
    gdn_norm_forward_cuda(p, nullptr);
    SCOPED_TRACE("off=" + std::to_string(off));
    expect_close("norm y", c, got(yd), y_ref, 5e-3);
    poison(dod), poison(dzd), upload(dw1, dw0), upload(dw2, dw0);
    p.dw = static_cast<float*>(dw1.p);
    gdn_norm_backward_cuda(p, nullptr);
    expect_close("norm d_o", c, got(dod), do_ref, 1e-2);
    expect_close("norm dz", c, got(dzd), dz_ref, 1e-2);
    const std::vector<float> dw_a = download<float>(dw1, d);
    expect_close("norm dw (accumulated onto 0.3)", c, dw_a, dw_ref, 1e-3);
    p.dw = static_cast<float*>(dw2.p);
    gdn_norm_backward_cuda(p, nullptr);
    EXPECT_EQ(0, std::memcmp(dw_a.data(), download<float>(dw2, d).data(), d * 4)) << "norm dw differs between runs";
  }
}

// ---- the recurrent form (decode step) ----

TEST(GdnCudaRecurrent, MatchesReferenceAndDecodesInPlace) {
  SKIP_WITHOUT_GPU();
  // (D, Dv): the tensor-core sizes, and small and unequal head dims (8-, 16- and 32-column tiles).
  for (auto [D, Dv] : {std::pair<int64_t, int64_t>{64, 64}, {128, 128}, {16, 16}, {32, 32}, {48, 48}, {32, 64},
                       {64, 40}})
    for (int64_t T : {1, 7, 130}) {
      Case c;
      c.B = 2, c.T = T, c.Hk = 1, c.Hv = 2, c.D = D, c.Dv = Dv, c.seed = 300 + T + D + Dv;
      SCOPED_TRACE(c.name());
      const Inputs in = make_inputs(c);
      const int64_t B = c.B, Hk = c.Hk, Hv = c.Hv, rows = B * T;
      const Shape qs{B, T, Hk, D}, vs{B, T, Hv, Dv}, gs{B, T, Hv}, ss{B, Hv, D, Dv};
      std::vector<double> q = to_double(in.q), k = to_double(in.k), v = to_double(in.v), g = to_double(in.g),
                          beta = to_double(in.beta), S0 = to_double(in.S0), o_ref(rows * Hv * Dv),
                          S_ref(B * Hv * D * Dv);
      Context cpu;
      gdn_recurrent_forward(cpu, host_f64(o_ref, vs), host_f64(S_ref, ss), host_f64(q, qs), host_f64(k, qs),
                            host_f64(v, vs), host_f64(g, gs), host_f64(beta, gs), host_f64(S0, ss));
      Context ctx;
      ctx.device = Device::kCUDA;
      DevBuf qd(q.size() * 2), kd(k.size() * 2), vd(v.size() * 2), gd(g.size() * 4), bd(g.size() * 4),
          Sd(S0.size() * 4), od(o_ref.size() * 2);
      upload(qd, to_bf16(in.q)), upload(kd, to_bf16(in.k)), upload(vd, to_bf16(in.v));
      upload(gd, in.g), upload(bd, in.beta), upload(Sd, in.S0);
      Tensor o(od.p, DType::kBF16, Device::kCUDA, vs), S(Sd.p, DType::kF32, Device::kCUDA, ss);
      fill_cuda(o, std::numeric_limits<double>::quiet_NaN(), nullptr);
      // S0 and S_out are the same buffer: the decode cache updated in place.
      gdn_recurrent_forward(ctx, o, S, Tensor(qd.p, DType::kBF16, Device::kCUDA, qs),
                            Tensor(kd.p, DType::kBF16, Device::kCUDA, qs), Tensor(vd.p, DType::kBF16, Device::kCUDA, vs),
                            Tensor(gd.p, DType::kF32, Device::kCUDA, gs), Tensor(bd.p, DType::kF32, Device::kCUDA, gs), S);
      expect_close("recurrent o", c, from_bf16(download<uint16_t>(od, o_ref.size())), o_ref, 5e-3);
      expect_close("recurrent S_out (in place)", c, download<float>(Sd, S_ref.size()), S_ref, 5e-3);
    }
}

// ---- causal depthwise conv + SiLU ----

// Shapes around the kernels' segment lengths (forward 32 rows, backward 64, 8 segments per CTA):
// T = 1, 63, 65, 130, 600; odd C (the 2-byte path), K = 1..4 and 8, B > 1. dw accumulates onto 0.1
// and a second backward gives the same bits (fixed-order reduction).
TEST(GdnCudaConv, ForwardBackwardMatchReference) {
  SKIP_WITHOUT_GPU();
  struct ConvShape { int64_t B, T, C, K; };
  const ConvShape shapes[] = {{2, 37, 40, 4},  {1, 1, 6, 4},   {2, 63, 37, 4}, {1, 65, 40, 4}, {2, 130, 66, 4},
                              {3, 33, 64, 1},  {1, 70, 34, 2}, {2, 29, 35, 3}, {1, 40, 10, 8}, {2, 600, 130, 4},
                              {2, 1024, 768, 4}};
  for (const ConvShape& sh : shapes) {
    const int64_t B = sh.B, T = sh.T, C = sh.C, K = sh.K, n = B * T * C;
    SCOPED_TRACE("conv B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" + std::to_string(C) +
                 " K=" + std::to_string(K));
    std::mt19937_64 rng(17 + T + C);
    std::normal_distribution<double> nd;
    std::vector<uint16_t> xb(n), dyb(n);
    for (auto& e : xb) e = f32_to_bf16(static_cast<float>(nd(rng)));
    for (auto& e : dyb) e = f32_to_bf16(static_cast<float>(nd(rng)));
    std::vector<float> w(C * K), dw0(C * K, 0.1f);
    for (auto& e : w) e = static_cast<float>(0.5 * nd(rng));
    std::vector<double> x(n), dy(n), y_ref(n), dx_ref(n), wd = to_double(w), dw_ref = to_double(dw0);
    for (int64_t i = 0; i < n; ++i) x[i] = bf16_to_f32(xb[i]), dy[i] = bf16_to_f32(dyb[i]);
    const Shape s{B, T, C}, ws{C, 1, K};
    Context cpu;
    gdn_conv_forward(cpu, host_f64(y_ref, s), host_f64(x, s), host_f64(wd, ws));
    gdn_conv_backward(cpu, host_f64(dx_ref, s), host_f64(dw_ref, ws), host_f64(dy, s), host_f64(x, s),
                      host_f64(wd, ws));

    Context ctx;
    ctx.device = Device::kCUDA;
    DevBuf xd(n * 2), dyd(n * 2), yd(n * 2), dxd(n * 2), wdv(C * K * 4), dwd(C * K * 4);
    upload(xd, xb), upload(dyd, dyb), upload(wdv, w), upload(dwd, dw0);
    Tensor xt(xd.p, DType::kBF16, Device::kCUDA, s), yt(yd.p, DType::kBF16, Device::kCUDA, s);
    Tensor dyt(dyd.p, DType::kBF16, Device::kCUDA, s), dxt(dxd.p, DType::kBF16, Device::kCUDA, s);
    Tensor wt(wdv.p, DType::kF32, Device::kCUDA, ws), dwt(dwd.p, DType::kF32, Device::kCUDA, ws);
    fill_cuda(yt, std::numeric_limits<double>::quiet_NaN(), nullptr);
    fill_cuda(dxt, std::numeric_limits<double>::quiet_NaN(), nullptr);
    gdn_conv_forward(ctx, yt, xt, wt);
    gdn_conv_backward(ctx, dxt, dwt, dyt, xt, wt);
    Case c;  // for the messages only
    c.B = B, c.T = T;
    expect_close("conv y", c, from_bf16(download<uint16_t>(yd, n)), y_ref, 5e-3);
    expect_close("conv dx", c, from_bf16(download<uint16_t>(dxd, n)), dx_ref, 1e-2);
    const std::vector<float> dw1 = download<float>(dwd, C * K);
    expect_close("conv dw (accumulated onto 0.1)", c, dw1, dw_ref, 1e-4);
    // Run to run: the same start and inputs give the same bits (dx and dw).
    const std::vector<uint16_t> dx1 = download<uint16_t>(dxd, n);
    upload(dwd, dw0);
    fill_cuda(dxt, std::numeric_limits<double>::quiet_NaN(), nullptr);
    gdn_conv_backward(ctx, dxt, dwt, dyt, xt, wt);
    const std::vector<float> dw2 = download<float>(dwd, C * K);
    EXPECT_EQ(std::memcmp(dw1.data(), dw2.data(), dw1.size() * sizeof(float)), 0) << "conv dw differs run to run";
    EXPECT_EQ(download<uint16_t>(dxd, n), dx1) << "conv dx differs run to run";
  }
}

}  // namespace
}  // namespace dt
