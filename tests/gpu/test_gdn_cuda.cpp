// The CUDA chunked gated delta rule against the CPU reference (gdn_chunk_*_ref) run in double on
// the same bf16-rounded inputs: through kernels/ops.h (the tensor-core kernels,
// kernels/cuda/gdn_tc_*.cu) and, for some cases, the plain fp32 kernels (kernels/cuda/gdn_chunk.cu,
// GdnCudaImpl::kSimt) through kernels/gdn_cuda.h. Every GPU output is poisoned with NaN before
// each run; two runs must give identical bits. Skips when there is no GPU.
//
// The cases against the reference are tests/gdn_cases.h's (GdnCudaCases, shared with the emulator):
// head dims dk = dv in {64, 128} (the tensor-core kernels) and small or unequal ones (16, 32, 48;
// dk 32 with dv 64, ...), which run the SIMT kernels. The tests after them check paths that must give
// the same bits (the saved buffer, chasing, prep beside, the persistent grad_qk, CUDA graphs).
// Tolerances (relative RMS error, sqrt(sum (x - ref)^2 / sum ref^2)): o and S_out 5e-3;
// dq, dk, dv, dS0 1e-2; dbeta, dg 2e-2.
#include <gtest/gtest.h>

#include "tests/gpu/gdn_cuda_test.h"

namespace dt {
namespace {

using namespace gdn_test;

// Every output of two runs, bit for bit.
void expect_same_bits(const GpuRun& a, const GpuRun& b) {
  EXPECT_EQ(a.o_bits, b.o_bits);
  EXPECT_EQ(a.dq_bits, b.dq_bits);
  EXPECT_EQ(a.dk_bits, b.dk_bits);
  EXPECT_EQ(a.dv_bits, b.dv_bits);
  EXPECT_EQ(0, std::memcmp(a.dg.data(), b.dg.data(), a.dg.size() * 4));
  EXPECT_EQ(0, std::memcmp(a.dbeta.data(), b.dbeta.data(), a.dbeta.size() * 4));
  EXPECT_EQ(0, std::memcmp(a.S_out.data(), b.S_out.data(), a.S_out.size() * 4));
  EXPECT_EQ(0, std::memcmp(a.dS0.data(), b.dS0.data(), a.dS0.size() * 4));
}

// The shared cases (tests/gdn_cases.h; the emulator runs them too): against the reference, bitwise
// repeatable; where the case says so, outputs 4 bytes off a 16-byte boundary give the same bits (the
// launchers, tensor-core kernels). The l2norms inside: test_gdn_cuda_ops.cpp.
class GdnCudaCases : public ::testing::TestWithParam<gdn_cases::GdnCase> {};

TEST_P(GdnCudaCases, ChunkMatchesReference) {
  SKIP_WITHOUT_GPU();
  const gdn_cases::GdnCase& g = GetParam();
  Case c = to_case(g);
  const Kernels kn = kernels_of(g);
  check_case(c, kn);
  if (g.misaligned) {
    Kernels tc = kn;
    tc.impl = GdnCudaImpl::kTensorCore;
    const Inputs in = make_inputs(c);
    const GpuRun aligned = run_gpu(c, in, tc);
    c.out_offset = 2;
    SCOPED_TRACE(c.name() + tc.name());
    expect_same_bits(aligned, run_gpu(c, in, tc));
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, GdnCudaCases, ::testing::ValuesIn(gdn_cases::all_cases()), case_param_name);

// The forward's saved buffer (WY factors, states per chunk) handed to the backward gives exactly the
// bits of the backward that recomputes them; the tensor-core shapes (the SIMT kernels keep nothing).
TEST(GdnCuda, SavedForwardStateGivesTheSameBitsAsRecomputing) {
  SKIP_WITHOUT_GPU();
  Case cases[3];
  cases[0].T = 300, cases[0].B = 2, cases[0].Hk = 1, cases[0].Hv = 2, cases[0].D = 64, cases[0].seed = 71;
  cases[1].T = 65, cases[1].B = 1, cases[1].Hk = 2, cases[1].Hv = 2, cases[1].D = 128, cases[1].seed = 72;
  cases[2].T = 1, cases[2].B = 3, cases[2].Hk = 1, cases[2].Hv = 1, cases[2].D = 64, cases[2].seed = 73;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name());
    ASSERT_GT(gdn_chunk_saved_elems(Device::kCUDA, c.B, c.T, c.Hk, c.Hv, c.D, c.dv(), 64), 0);
    const Inputs in = make_inputs(c);
    const GpuRun a = run_gpu(c, in), b = run_gpu(c, in, {}, /*use_saved=*/true);
    expect_same_bits(a, b);
  }
}

// o, dq, dk and dv 4 bytes past a 16-byte boundary: the kernels store them with 4-byte stores from
// their accumulators instead of whole rows through shared memory (TcArgs::vec16_*), and must give
// the same bits. Head dims 64 and 128, a partial chunk, GQA (dq, dk summed over value heads after),
// the dvl producer at 32 columns, grad_qk chasing and not.
TEST(GdnCuda, OutputsOffA16ByteBoundaryGiveTheSameBits) {
  SKIP_WITHOUT_GPU();
  struct Run { int64_t T, B, Hk, Hv, D; Kernels kn; };
  const Run runs[] = {{300, 2, 1, 1, 64, {.impl = GdnCudaImpl::kTensorCore}},
                      {130, 1, 2, 2, 128, {.impl = GdnCudaImpl::kTensorCore, .overlap = 0}},
                      {65, 1, 1, 2, 128, {.impl = GdnCudaImpl::kTensorCore}},
                      {200, 1, 2, 2, 128, {.impl = GdnCudaImpl::kTensorCore, .state_cols = 32, .overlap = 1}}};
  uint64_t seed = 190;
  for (const Run& r : runs) {
    Case c;
    c.T = r.T, c.B = r.B, c.Hk = r.Hk, c.Hv = r.Hv, c.D = r.D, c.seed = seed++;
    const Inputs in = make_inputs(c);
    const GpuRun aligned = run_gpu(c, in, r.kn);
    c.out_offset = 2;
    SCOPED_TRACE(c.name() + r.kn.name());
    expect_same_bits(aligned, run_gpu(c, in, r.kn));
  }
}

// The forward and backward captured into a CUDA graph (as a training step may be) give the bits of
// the same launches run directly: the workspace's stream-ordered allocations become the graph's
// memory nodes (the pool's release threshold is not touched while capturing). Both kernel sets.
TEST(GdnCuda, CapturedInACudaGraphGivesTheSameBits) {
  SKIP_WITHOUT_GPU();
  Case c;
  c.T = 130, c.B = 2, c.Hk = 1, c.Hv = 2, c.D = 128, c.seed = 81;
  c.with_S0 = true, c.with_dS_out = true;
  const Inputs in = make_inputs(c);
  for (GdnCudaImpl impl : {GdnCudaImpl::kTensorCore, GdnCudaImpl::kSimt}) {
    SCOPED_TRACE(impl == GdnCudaImpl::kSimt ? "simt kernels" : "tensor-core kernels");
    const GpuRun a = run_gpu(c, in, {.impl = impl}), b = run_gpu(c, in, {.impl = impl}, false, /*graph=*/true);
    expect_same_bits(a, b);
  }
}

// The forward's output kernel and the backward's grad_qk chasing the state passes
// (GdnPlan::chase_output, chase_grad_qk) give the bits of the kernels run one after the other at
// head dim 128: the mma.sync state passes at 16 and 32 columns and the column-warp forward one at
// 64, many chunks and heads (more CTAs than fit beside the state passes'), a partial last chunk, one
// chunk. At head dim 64 the kernels always chase: there many chunks and heads in a CUDA graph against
// plain launches. Out of range is refused.
TEST(GdnCuda, ChasingTheStatePassesGivesTheSameBits) {
  SKIP_WITHOUT_GPU();
  struct Run { Case c; int cols; };
  Run runs[5];
  runs[0].c.T = 4000, runs[0].c.B = 2, runs[0].c.Hk = 2, runs[0].c.Hv = 4, runs[0].c.D = 128, runs[0].cols = 16;
  runs[1].c = runs[0].c, runs[1].cols = 64;
  runs[2].c.T = 40, runs[2].c.B = 3, runs[2].c.Hk = 1, runs[2].c.Hv = 2, runs[2].c.D = 128, runs[2].cols = 64;
  runs[3].c = runs[0].c, runs[3].cols = 32;  // few heads' default at head dim 128
  runs[4].c.T = 3000, runs[4].c.B = 3, runs[4].c.Hk = 2, runs[4].c.Hv = 4, runs[4].c.D = 128, runs[4].cols = 64;
  uint64_t seed = 87;
  for (Run& r : runs) {
    r.c.seed = seed++;
    SCOPED_TRACE(r.c.name() + " state_cols " + std::to_string(r.cols));
    const Inputs in = make_inputs(r.c);
    const Kernels on{.impl = GdnCudaImpl::kTensorCore, .state_cols = r.cols, .overlap = 1};
    Kernels off = on;
    off.overlap = 0;
    expect_same_bits(run_gpu(r.c, in, off), run_gpu(r.c, in, on));
  }
  {  // head dim 64 in a CUDA graph against plain launches
    Case c;
    c.T = 1500, c.B = 16, c.Hk = 6, c.Hv = 6, c.D = 64, c.seed = seed++;
    const Inputs in = make_inputs(c);
    expect_same_bits(run_gpu(c, in, {.impl = GdnCudaImpl::kTensorCore}),
                     run_gpu(c, in, {.impl = GdnCudaImpl::kTensorCore}, false, /*graph=*/true));
  }
  Case c;
  const Inputs in = make_inputs(c);
  try {
    run_gpu(c, in, {.impl = GdnCudaImpl::kTensorCore, .overlap = 2});
    FAIL() << "overlap 2 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("overlap must be -1"), std::string::npos) << e.what();
  }
}

// One case's kernels: from the saved forward the same bits as recomputing it; also against the
// reference (reference) and captured in a CUDA graph (graph). With an option (not null): `kn`
// against `kn` with the option 0 as well.
void expect_option_keeps_bits(const Case& c, const Kernels& on, int Kernels::*option, bool reference, bool graph) {
  if (reference) check_case(c, on);
  SCOPED_TRACE(c.name() + on.name());
  const Inputs in = make_inputs(c);
  const GpuRun a = run_gpu(c, in, on);
  if (option) {
    Kernels off = on;
    off.*option = 0;
    expect_same_bits(run_gpu(c, in, off), a);
  }
  expect_same_bits(a, run_gpu(c, in, on, /*use_saved=*/true));
  if (graph) expect_same_bits(a, run_gpu(c, in, on, false, /*graph=*/true));
}

// The cases of the tests above: sizes, gates (Case::Gates), S0 and dS_out or neither.
Case option_case(int64_t T, int64_t B, int64_t Hk, int64_t Hv, int64_t D, int gates, bool S0, uint64_t seed) {
  Case c;
  c.T = T, c.B = B, c.Hk = Hk, c.Hv = Hv, c.D = D, c.gates = static_cast<Case::Gates>(gates);
  c.with_S0 = c.with_dS_out = S0, c.seed = seed;
  return c;
}

// The launchers refuse these options with a message containing `want`.
void expect_refused(const Case& c, const Inputs& in, const Kernels& kn, const char* want) {
  try {
    run_gpu(c, in, kn);
    ADD_FAILURE() << "accepted:" << kn.name();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

// dv_local's work in the reverse state pass (GdnPlan::dvl_fused, head dim 128): at 16, 32 and 64
// columns, more chunks than the ring's stages, partial chunks, one row, GQA, edge gates, no S0 /
// dS_out, with and without grad_qk chasing, from the saved forward and recomputing it (the output
// kernel then makes M alone), in a CUDA graph, against the reference.
TEST(GdnCuda, DvlFusedIntoTheReversePassMatchesReference) {
  SKIP_WITHOUT_GPU();
  struct Run { int64_t T, B, Hk, Hv; int cols, gates, overlap; bool S0; };
  const Run runs[] = {{300, 1, 1, 1, 16, 0, -1, true}, {130, 2, 1, 2, 32, 2, 0, true}, {1, 1, 1, 1, 32, 0, -1, true},
                      {65, 1, 2, 2, 32, 1, 1, true},   {200, 1, 1, 1, 16, 3, -1, false}, {4000, 2, 2, 4, 32, 0, 1, true},
                      {3001, 1, 8, 8, 16, 0, -1, true}, {300, 1, 1, 1, 64, 0, -1, true}, {1000, 2, 1, 2, 64, 2, 0, true},
                      {65, 1, 2, 2, 64, 1, 1, true},   {1, 1, 1, 1, 64, 0, -1, false}};
  uint64_t seed = 160;
  for (const Run& r : runs) {
    const Kernels on{.impl = GdnCudaImpl::kTensorCore, .state_cols = r.cols, .overlap = r.overlap};
    // against the reference where dg has more than one row a head (at T = 1 its relative RMS is one
    // number's error: 2.6e-2 on the H200)
    expect_option_keeps_bits(option_case(r.T, r.B, r.Hk, r.Hv, 128, r.gates, r.S0, seed++), on, nullptr,
                             r.T > 1 && r.T <= 300, r.T == 130);
  }
}

// prep beside the forward state pass (GdnPlan::prep_beside; launched after the state pass,
// which waits for each chunk) gives the bits of prep run first: head dim 128 at 16 and 32 columns,
// with the dvl producer's saved M, partial and single chunks,
// fewer chunks than the pass's ring, GQA, several sequences, edge gates, no S0 or dS_out; from the
// saved forward and recomputing it; in a CUDA graph; against the reference. Where the kernels it
// needs are not the ones taken, 1 is refused.
TEST(GdnCuda, PrepBesideTheStatePassGivesTheSameBits) {
  SKIP_WITHOUT_GPU();
  struct Run { int64_t T, B, Hk, Hv; int cols, gates; bool S0; };
  const Run runs[] = {{300, 1, 1, 1, 32, 0, true},   {130, 2, 1, 2, 16, 2, true},   {1, 1, 1, 1, 32, 0, true},
                      {65, 1, 2, 2, 32, 1, true},    {200, 1, 1, 1, 16, 3, false},  {4000, 2, 2, 4, 32, 0, true},
                      {3001, 1, 8, 8, 16, 0, true},  {5000, 1, 4, 4, 32, 0, true}};
  uint64_t seed = 190;
  for (const Run& r : runs) {
    const Kernels on{.impl = GdnCudaImpl::kTensorCore, .state_cols = r.cols, .chase_prep = 1};
    expect_option_keeps_bits(option_case(r.T, r.B, r.Hk, r.Hv, 128, r.gates, r.S0, seed++), on, &Kernels::chase_prep,
                             r.T > 1 && r.T <= 300, r.T == 130);
  }
  Case c;
  c.D = 128;
  const Inputs in = make_inputs(c);
  for (const Kernels& kn : {Kernels{.impl = GdnCudaImpl::kTensorCore, .state_cols = 64, .chase_prep = 1},
                            Kernels{.impl = GdnCudaImpl::kTensorCore, .overlap = 0, .chase_prep = 1}})
    expect_refused(c, in, kn, "chase_prep 1 takes the mma.sync forward state pass");
  expect_refused(c, in, {.impl = GdnCudaImpl::kTensorCore, .chase_prep = 2}, "chase_prep must be -1");
}

// grad_qk persistent (GdnPlan::qk_persist; chunks by ticket, the next chunk's Q, K, dO copied
// during this one) gives the bits of one CTA a chunk: head dim 128 at 32 and 16 columns, with the
// dvl producer, fewer chunks than SMs and many more (several per CTA), partial and single
// chunks, GQA, several sequences, edge gates, no S0 or dS_out; from the saved forward and recomputing
// it; in a CUDA graph (the ticket is zeroed in it); against the reference. Where grad_qk does not chase
// the reverse pass, or at head dim 64, 1 is refused.
TEST(GdnCuda, PersistentGradQkGivesTheSameBits) {
  SKIP_WITHOUT_GPU();
  struct Run { int64_t T, B, Hk, Hv; int cols, gates; bool S0; };
  const Run runs[] = {{300, 1, 1, 1, 32, 0, true},  {130, 2, 1, 2, 16, 2, true}, {1, 1, 1, 1, 32, 0, true},
                      {65, 1, 2, 2, 32, 1, true},   {200, 1, 1, 1, 16, 3, false}, {4000, 2, 2, 4, 32, 0, true},
                      {9001, 1, 8, 8, 32, 0, true}, {5000, 1, 4, 4, 16, 0, true}};
  uint64_t seed = 210;
  for (const Run& r : runs) {
    const Kernels on{.impl = GdnCudaImpl::kTensorCore, .state_cols = r.cols, .overlap = 1, .qk_persist = 1};
    expect_option_keeps_bits(option_case(r.T, r.B, r.Hk, r.Hv, 128, r.gates, r.S0, seed++), on, &Kernels::qk_persist,
                             r.T > 1 && r.T <= 300, r.T == 130 || r.T == 9001);
  }
  Case c;
  c.D = 128;
  const Inputs in = make_inputs(c);
  const char* needs = "qk_persist 1 takes head dim 128";
  expect_refused(c, in, {.impl = GdnCudaImpl::kTensorCore, .overlap = 0, .qk_persist = 1}, needs);
  expect_refused(c, in, {.impl = GdnCudaImpl::kTensorCore, .qk_persist = 2}, "qk_persist must be -1");
  c.D = 64;
  expect_refused(c, make_inputs(c), {.impl = GdnCudaImpl::kTensorCore, .qk_persist = 1}, needs);
}

// The per-CTA timeline (gdn_cuda_timeline; docs/gdn_kernels.md, "Measuring"), in a build configured with
// -DDELTATRON_GDN_TIMELINE=ON: one stamp per CTA (prep, the output kernel and grad_wy run a CTA per
// chunk), each with its kernel's name, an SM the device has, and times and cycles in order; the
// outputs keep their bits. Other builds refuse the stamps with a message naming the option.
TEST(GdnCuda, TimelineStampsEachCtaAndKeepsTheBits) {
  SKIP_WITHOUT_GPU();
  DevBuf count(sizeof(unsigned));
  if (!gdn_cuda_timeline_built()) {
    try {
      gdn_cuda_timeline(static_cast<GdnCudaStamp*>(count.p), static_cast<unsigned*>(count.p), 1);
      ADD_FAILURE() << "stamps accepted by a build without the timeline";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("-DDELTATRON_GDN_TIMELINE=ON"), std::string::npos) << e.what();
    }
    GTEST_SKIP() << "built without -DDELTATRON_GDN_TIMELINE=ON (its refusal checked)";
  }
  for (int64_t D : {64, 128}) {
    const Case c = option_case(300, 2, 2, 2, D, 0, true, 220 + D);
    SCOPED_TRACE(c.name());
    const Inputs in = make_inputs(c);
    // from the saved forward, so that the backward runs no prep or output kernel of its own
    const GpuRun plain = run_gpu(c, in, {}, /*use_saved=*/true);
    constexpr unsigned kCap = 4096;
    DevBuf stamps(kCap * sizeof(GdnCudaStamp));
    ASSERT_EQ(cudaMemset(count.p, 0, sizeof(unsigned)), cudaSuccess);
    gdn_cuda_timeline(static_cast<GdnCudaStamp*>(stamps.p), static_cast<unsigned*>(count.p), kCap);
    GpuRun stamped;
    try {
      stamped = run_gpu(c, in, {}, /*use_saved=*/true);
    } catch (...) {
      gdn_cuda_timeline(nullptr, nullptr, 0);
      throw;
    }
    gdn_cuda_timeline(nullptr, nullptr, 0);
    expect_same_bits(plain, stamped);
    unsigned n = 0;
    ASSERT_EQ(cudaMemcpy(&n, count.p, sizeof(unsigned), cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_GT(n, 0u);
    ASSERT_LE(n, kCap);
    std::vector<GdnCudaStamp> got(n);
    ASSERT_EQ(cudaMemcpy(got.data(), stamps.p, n * sizeof(GdnCudaStamp), cudaMemcpyDeviceToHost), cudaSuccess);
    int sms = 0;
    ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
    std::map<std::string, int> ctas;
    for (const GdnCudaStamp& x : got) {
      ++ctas[gdn_cuda_timeline_kernel(x.kernel)];
      EXPECT_LT(x.sm, static_cast<uint32_t>(sms));
      EXPECT_LE(x.t0, x.t1);
      EXPECT_LE(x.c0, x.c1);
    }
    const int chunks = static_cast<int>(c.B * c.Hv * ((c.T + 63) / 64));
    EXPECT_EQ(ctas["prep"] + ctas["prep_fed"], chunks);
    EXPECT_EQ(ctas["output"], chunks);
    EXPECT_EQ(ctas["grad_wy"], chunks);
    EXPECT_EQ(ctas.count("?"), 0u);
  }
}

TEST(GdnCuda, RejectsWrongDtypeAndDevice) {
  SKIP_WITHOUT_GPU();
  Context ctx;
  ctx.device = Device::kCUDA;
  const Shape qs{1, 8, 1, 64}, gs{1, 8, 1};
  DevBuf a(8 * 64 * 4), b(8 * 64 * 4), gb(8 * 4);
  Tensor q32(a.p, DType::kF32, Device::kCUDA, qs);  // f32 activations: the CUDA path takes bf16
  Tensor q(b.p, DType::kBF16, Device::kCUDA, qs), g(gb.p, DType::kF32, Device::kCUDA, gs);
  try {
    gdn_chunk_forward(ctx, q, Tensor(), q32, q, q, g, g, Tensor(), 64);
    FAIL() << "f32 q accepted on the CUDA path";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q is f32"), std::string::npos) << e.what();
  }
  std::vector<float> host(8);
  Tensor g_cpu(host.data(), DType::kF32, Device::kCPU, gs);
  EXPECT_THROW(gdn_chunk_forward(ctx, q, Tensor(), q, q, q, g_cpu, g, Tensor(), 64), Error);
  EXPECT_THROW(gdn_chunk_forward(ctx, q, Tensor(), q, q, q, g, g, Tensor(), 65), Error);  // chunk > 64
}

TEST(GdnCuda, RejectsHeadDimsTheKernelsDoNotTake) {
  SKIP_WITHOUT_GPU();
  Context ctx;
  ctx.device = Device::kCUDA;
  const Shape qs{1, 8, 1, 20}, gs{1, 8, 1};  // 20: not a multiple of 8
  DevBuf a(8 * 20 * 2), gb(8 * 4);
  Tensor q(a.p, DType::kBF16, Device::kCUDA, qs), g(gb.p, DType::kF32, Device::kCUDA, gs);
  try {
    gdn_chunk_forward(ctx, q, Tensor(), q, q, q, g, g, Tensor(), 64);
    FAIL() << "head dim 20 accepted on the CUDA path";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("multiples of 8"), std::string::npos) << e.what();
  }
  // The tensor-core kernels asked for explicitly with dims they do not take.
  DevBuf qb(8 * 32 * 2), ob(8 * 32 * 2);
  GdnCudaForwardParams f;
  f.dims.B = 1, f.dims.T = 8, f.dims.Hk = 1, f.dims.Hv = 1, f.dims.dk = 32, f.dims.dv = 32;
  f.dims.impl = GdnCudaImpl::kTensorCore;
  f.q = f.k = f.v = static_cast<const uint16_t*>(qb.p), f.ld_q = f.ld_k = f.ld_v = 32;
  f.g = f.beta = static_cast<const float*>(gb.p), f.o = static_cast<uint16_t*>(ob.p), f.ld_o = 32;
  EXPECT_THROW(gdn_chunk_forward_cuda(f, nullptr), Error);
  // State-pass tiles without a kernel: the message names the valid ones.
  f.dims.dk = f.dims.dv = 64;
  for (int cols : {16, 32}) {
    GdnPlanForcing force;
    force.state_cols = cols;
    try {
      plan_gdn_for_testing(f.dims, gdn_current_device(), force);
      FAIL() << "state_cols " << cols << " accepted at head dim 64";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("is not available for head dim 64"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace dt
