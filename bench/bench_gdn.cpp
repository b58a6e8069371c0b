// The Gated DeltaNet chunk kernels on the GPU: forward and forward+backward, bf16 activations,
// fp32 gates and state, against ceilings measured in the same run (a large device-to-device
// cudaMemcpy for bandwidth, a large bf16 cuBLAS matmul for tensor-core throughput), and against
// fla's chunk_gated_delta_rule when its JSON (bench/bench_gdn_peers.py, same device call) is given.
//   bench_gdn [--shapes B,T,H,D;...] [--iters N] [--warmup N] [--json OUT] [--fla-json FLA.json]
//             [--impl tc|simt] [--no-ceilings] [--profile] [--digest]
// Times are medians, three ways: replays of a CUDA graph of 20 calls (GPU time only, L2 warm; the
// table's numbers, against fla replayed the same way), N runs launched one by one and timed with
// CUDA events, and N runs with L2 flushed before each (against fla under triton.testing.do_bench,
// which flushes L2 and includes Python's kernel launches: at 124M and mid, fla's host time).
// fwd and fwd+bwd include, as training runs them (layers/gdn.cpp): the q/k l2norms, taken inside the
// chunk kernels (GdnCudaForwardParams::q_hat, GdnCudaBackwardParams::q_rnorm; fla's timing
// includes its own l2norm), and the gates g, beta from a, b as separate kernels (fla takes g and beta
// precomputed). "chunk kernels alone" times the delta rule on normalised q, k. The options below
// sweep the kernels' choices; what they are and today's numbers: docs/gdn_kernels.md.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/cuda/gdn_plan.h"  // the options struct, parsed in any build
#include "kernels/gdn_cuda.h"

#ifdef DELTATRON_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "bench/bench_cuda.h"
#endif

#ifdef DELTATRON_HAVE_CUDA
namespace {

struct Shape4 {
  int64_t B, T, H, D;
  std::string key() const {
    return "B" + std::to_string(B) + "_T" + std::to_string(T) + "_H" + std::to_string(H) + "_D" + std::to_string(D);
  }
};

std::vector<Shape4> parse_shapes(const std::string& s) {
  std::vector<Shape4> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ';')) {
    Shape4 sh{};
    int used = 0;
    const bool ok = std::sscanf(item.c_str(), "%ld,%ld,%ld,%ld%n", &sh.B, &sh.T, &sh.H, &sh.D, &used) == 4 &&
                    used == static_cast<int>(item.size()) && sh.B > 0 && sh.T > 0 && sh.H > 0 && sh.D > 0;
    DT_CHECK(ok, "--shapes item '{}' is not B,T,H,D, four positive integers (e.g. 16,1024,12,64)", item);
    out.push_back(sh);
  }
  DT_CHECK(!out.empty(), "--shapes is empty (give B,T,H,D;..., e.g. 16,1024,12,64)");
  return out;
}

// Model FLOPs of the chunked rule per (batch, head, chunk of C), as matmuls (2 flops per MAC):
// forward K K^T, Q K^T (2 C^2 D each), W, U (C^2 D each, triangular), the solve (C^3 / 3),
// V' = U - W S, Q S, K^T V' (2 C D^2 each), M V' (C^2 D).
double flops_forward(const Shape4& s, int C) {
  const double nc = std::ceil(static_cast<double>(s.T) / C), D = static_cast<double>(s.D);
  return s.B * s.H * nc * (7.0 * C * C * D + 6.0 * C * D * D + C * C * C / 3.0);
}
// The backward recomputes the forward's state pass and does about twice its matmuls again.
double flops_backward(const Shape4& s, int C) { return 3.0 * flops_forward(s, C); }

// Compulsory traffic: q, k, v, (d_o) in bf16, g, beta in fp32, outputs likewise.
double bytes_forward(const Shape4& s) { return s.B * s.T * s.H * (4.0 * s.D * 2 + 8); }
double bytes_fwdbwd(const Shape4& s) { return bytes_forward(s) + s.B * s.T * s.H * (7.0 * s.D * 2 + 24); }

}  // namespace

namespace {

void* dev_alloc(size_t bytes) {
  void* p = nullptr;
  BENCH_CUDA(cudaMalloc(&p, bytes));
  return p;
}

// bf16 GEMM throughput (fp32 accumulate), TFLOP/s, n x n x n.
double measure_gemm_tflops(int warmup, int iters) {
  const int n = 8192;
  cublasHandle_t h;
  DT_CHECK(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS, "bench_gdn: cublasCreate failed");
  void* A = dev_alloc(size_t(n) * n * 2);
  void* B = dev_alloc(size_t(n) * n * 2);
  void* Cm = dev_alloc(size_t(n) * n * 2);
  BENCH_CUDA(cudaMemset(A, 0x3c, size_t(n) * n * 2));  // small finite bf16 values
  BENCH_CUDA(cudaMemset(B, 0x3c, size_t(n) * n * 2));
  const float one = 1.f, zero = 0.f;
  const double ms = dt_bench::median_ms(
      [&] {
        DT_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, A, CUDA_R_16BF, n, B, CUDA_R_16BF, n, &zero,
                              Cm, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS,
                 "bench_gdn: cublasGemmEx failed");
      },
      warmup, iters);
  BENCH_CUDA(cudaFree(A));
  BENCH_CUDA(cudaFree(B));
  BENCH_CUDA(cudaFree(Cm));
  cublasDestroy(h);
  return 2.0 * n * n * n / (ms * 1e-3) / 1e12;
}

struct Result {
  double core_fwd_ms = 0, core_bwd_ms = 0;  // the chunk kernels alone
  double fwd_ms = 0, fwdbwd_ms = 0;  // with gates and l2norm, back to back (L2 warm)
  double fwd_cold_ms = 0, fwdbwd_cold_ms = 0;  // the same, L2 flushed before each run (do_bench's way)
  double fwd_graph_ms = 0, fwdbwd_graph_ms = 0;  // the same, replayed from a CUDA graph (GPU time only)
  std::string digest;  // --digest: a hash of each output of one forward + backward (same bits, same hash)
  std::vector<dt::GdnCudaStamp> stamps;  // --timeline: each CTA of one forward + backward
};

// One forward + backward's per-CTA stamps (gdn_cuda_timeline): f captured in a graph, replayed twice;
// the second replay's stamps (the first warms the caches and the code).
template <class F>
std::vector<dt::GdnCudaStamp> timeline(F&& f, cudaStream_t st) {
  constexpr unsigned kCap = 1u << 20;
  dt::GdnCudaStamp* stamps = nullptr;
  unsigned* n = nullptr;
  BENCH_CUDA(cudaMalloc(&stamps, kCap * sizeof(dt::GdnCudaStamp)));
  BENCH_CUDA(cudaMalloc(&n, sizeof(unsigned)));
  dt::gdn_cuda_timeline(stamps, n, kCap);
  cudaGraph_t graph;
  BENCH_CUDA(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  f();
  BENCH_CUDA(cudaStreamEndCapture(st, &graph));
  dt::gdn_cuda_timeline(nullptr, nullptr, 0);
  cudaGraphExec_t exec;
  BENCH_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 2; ++i) {
    BENCH_CUDA(cudaMemsetAsync(n, 0, sizeof(unsigned), st));
    BENCH_CUDA(cudaGraphLaunch(exec, st));
  }
  BENCH_CUDA(cudaStreamSynchronize(st));
  unsigned count = 0;
  BENCH_CUDA(cudaMemcpy(&count, n, sizeof(unsigned), cudaMemcpyDeviceToHost));
  if (count > kCap) std::fprintf(stderr, "bench_gdn: timeline: %u CTAs, only the first %u kept\n", count, kCap);
  std::vector<dt::GdnCudaStamp> out(std::min(count, kCap));
  BENCH_CUDA(cudaMemcpy(out.data(), stamps, out.size() * sizeof(dt::GdnCudaStamp), cudaMemcpyDeviceToHost));
  BENCH_CUDA(cudaGraphExecDestroy(exec));
  BENCH_CUDA(cudaGraphDestroy(graph));
  BENCH_CUDA(cudaFree(stamps));
  BENCH_CUDA(cudaFree(n));
  return out;
}

// FNV-1a over a device buffer's bytes.
uint64_t device_fnv1a(const void* p, size_t bytes) {
  std::vector<unsigned char> h(bytes);
  BENCH_CUDA(cudaMemcpy(h.data(), p, bytes, cudaMemcpyDeviceToHost));
  uint64_t x = 1469598103934665603ull;
  for (unsigned char c : h) x = (x ^ c) * 1099511628211ull;
  return x;
}

// profile: one pass of each timing launched directly, none from a graph or after an L2 flush (for ncu).
// impl, opts: the kernels' options from the command line (the plan's forced choices).
// digest: Result::digest, after the timings; with_timeline: Result::stamps.
Result bench_shape(const Shape4& s, int warmup, int iters, dt::GdnCudaImpl impl, const dt::GdnPlanForcing& opts, bool recompute, bool profile,
                   bool digest, bool with_timeline) {
  const int64_t rows = s.B * s.T, n_act = rows * s.H * s.D, n_gate = rows * s.H;
  std::mt19937_64 rng(1);
  std::normal_distribution<float> nd;
  // q, k: unit rows (q scaled by D^-1/2), as the l2norm would leave them; v, d_o normal.
  auto unit = [&](float scale) {
    std::vector<uint16_t> h(n_act);
    for (int64_t r = 0; r < rows * s.H; ++r) {
      std::vector<float> t(s.D);
      double ss = 0;
      for (auto& e : t) e = nd(rng), ss += double(e) * e;
      for (int64_t i = 0; i < s.D; ++i) h[r * s.D + i] = dt::f32_to_bf16(float(scale * t[i] / std::sqrt(ss)));
    }
    return h;
  };
  auto normal = [&] {
    std::vector<uint16_t> h(n_act);
    for (auto& e : h) e = dt::f32_to_bf16(nd(rng));
    return h;
  };
  std::vector<float> g(n_gate), beta(n_gate);
  for (int64_t i = 0; i < n_gate; ++i) {
    g[i] = -std::log1p(std::exp(-nd(rng)));  // logsigmoid, as the peer script
    beta[i] = 1.f / (1.f + std::exp(-nd(rng)));
  }
  auto up16 = [&](const std::vector<uint16_t>& h) {
    void* p = dev_alloc(h.size() * 2);
    BENCH_CUDA(cudaMemcpy(p, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
    return static_cast<uint16_t*>(p);
  };
  auto up32 = [&](const std::vector<float>& h) {
    void* p = dev_alloc(h.size() * 4);
    BENCH_CUDA(cudaMemcpy(p, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    return static_cast<float*>(p);
  };
  uint16_t *q = up16(unit(1.f / std::sqrt(float(s.D)))), *k = up16(unit(1.f)), *v = up16(normal()),
           *d_o = up16(normal());
  float *gd = up32(g), *bd = up32(beta);
  auto* o = static_cast<uint16_t*>(dev_alloc(n_act * 2));
  auto* dq = static_cast<uint16_t*>(dev_alloc(n_act * 2));
  auto* dk = static_cast<uint16_t*>(dev_alloc(n_act * 2));
  auto* dv = static_cast<uint16_t*>(dev_alloc(n_act * 2));
  auto* dg = static_cast<float*>(dev_alloc(n_gate * 4));
  auto* dbeta = static_cast<float*>(dev_alloc(n_gate * 4));

  dt::GdnCudaDims d;
  d.B = s.B, d.T = s.T, d.Hk = s.H, d.Hv = s.H, d.dk = s.D, d.dv = s.D, d.chunk = 64, d.impl = impl;
  const dt::GdnPlan plan = dt::plan_gdn_for_testing(d, dt::gdn_current_device(), opts);
  dt::GdnCudaForwardParams fp;
  fp.dims = d, fp.q = q, fp.k = k, fp.v = v, fp.ld_q = fp.ld_k = fp.ld_v = fp.ld_o = s.H * s.D;
  fp.g = gd, fp.beta = bd, fp.o = o;
  dt::GdnCudaBackwardParams bp;
  bp.dims = d, bp.q = q, bp.k = k, bp.v = v, bp.ld_q = bp.ld_k = bp.ld_v = bp.ld_do = s.H * s.D;
  bp.ld_dq = bp.ld_dk = bp.ld_dv = s.H * s.D;
  bp.g = gd, bp.beta = bd, bp.d_o = d_o, bp.dq = dq, bp.dk = dk, bp.dv = dv, bp.dg = dg, bp.dbeta = dbeta;
  // As in training (layers/gdn.cpp): the forward keeps the WY factors and states for the backward,
  // unless --recompute (the backward then recomputes them, as fla does).
  const int64_t saved_bytes = recompute ? 0 : dt::gdn_chunk_saved_bytes(d);
  void* saved = saved_bytes > 0 ? dev_alloc(static_cast<size_t>(saved_bytes)) : nullptr;
  fp.saved = saved, bp.saved = saved;

  // The layer around the core: q, k are l2-normalised from raw projections (qn, kn in place of the
  // q, k above), g and beta come from a, b through the gates.
  uint16_t *q_raw = up16(normal()), *k_raw = up16(normal());
  std::vector<float> ab(n_gate), Ah(s.H, 0.f), dth(s.H, 0.f);
  for (auto& e : ab) e = nd(rng);
  float *a = up32(ab), *b = up32(ab), *A_log = up32(Ah), *dt_bias = up32(dth);
  auto* da = static_cast<float*>(dev_alloc(n_gate * 4));
  auto* db = static_cast<float*>(dev_alloc(n_gate * 4));
  float *dA_log = up32(Ah), *ddt_bias = up32(dth);
  auto* dq_raw = static_cast<uint16_t*>(dev_alloc(n_act * 2));
  auto* dk_raw = static_cast<uint16_t*>(dev_alloc(n_act * 2));
  dt::GdnCudaGatesParams gp;
  gp.rows = rows, gp.H = s.H, gp.a = a, gp.b = b, gp.A_log = A_log, gp.dt_bias = dt_bias, gp.g = gd, gp.beta = bd;
  gp.dg = dg, gp.dbeta = dbeta, gp.da = da, gp.db = db, gp.dA_log = dA_log, gp.ddt_bias = ddt_bias;
  // As training does: the chunk's forward takes the l2norms on load (writing q, k normalised and r
  // per row), its backward their backward (dq, dk with respect to the raw rows).
  auto* rq = static_cast<float*>(dev_alloc(rows * s.H * 4));
  auto* rk = static_cast<float*>(dev_alloc(rows * s.H * 4));
  const float qscale = 1.f / std::sqrt(float(s.D));
  dt::GdnCudaForwardParams fp_layer = fp;
  fp_layer.q = q_raw, fp_layer.k = k_raw, fp_layer.q_hat = q, fp_layer.k_hat = k, fp_layer.ld_hat = s.H * s.D;
  fp_layer.q_rnorm = rq, fp_layer.k_rnorm = rk, fp_layer.q_scale = qscale, fp_layer.k_scale = 1.f;
  dt::GdnCudaBackwardParams bp_layer = bp;
  bp_layer.dq = dq_raw, bp_layer.dk = dk_raw, bp_layer.q_rnorm = rq, bp_layer.k_rnorm = rk;
  bp_layer.q_scale = qscale, bp_layer.k_scale = 1.f;
  cudaStream_t st;  // not the default stream, so that the calls can be captured in a graph
  BENCH_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  auto layer_forward = [&] {
    dt::gdn_gates_forward_cuda(gp, st);
    dt::gdn_chunk_forward_cuda(fp_layer, plan, st);
  };
  Result r;
  r.core_fwd_ms = dt_bench::median_ms([&] { dt::gdn_chunk_forward_cuda(fp, plan, st); }, warmup, iters, st);
  r.core_bwd_ms = dt_bench::median_ms([&] { dt::gdn_chunk_backward_cuda(bp, plan, st); }, warmup, iters, st);
  auto layer_fwdbwd = [&] {
    layer_forward();
    dt::gdn_chunk_backward_cuda(bp_layer, plan, st);  // dq, dk through the l2norms too
    dt::gdn_gates_backward_cuda(gp, st);
  };
  r.fwd_ms = dt_bench::median_ms(layer_forward, warmup, iters, st);
  r.fwdbwd_ms = dt_bench::median_ms(layer_fwdbwd, warmup, iters, st);
  if (profile) {
    r.fwd_cold_ms = r.fwdbwd_cold_ms = r.fwd_graph_ms = r.fwdbwd_graph_ms = NAN;
  } else {
    r.fwd_cold_ms = dt_bench::median_ms(layer_forward, warmup, iters, st, true);
    r.fwdbwd_cold_ms = dt_bench::median_ms(layer_fwdbwd, warmup, iters, st, true);
    r.fwd_graph_ms = dt_bench::graph_ms(layer_forward, st);
    r.fwdbwd_graph_ms = dt_bench::graph_ms(layer_fwdbwd, st);
  }
  if (digest) {  // the inputs are seeded: two builds whose kernels give the same bits print the same hashes
    layer_fwdbwd();
    BENCH_CUDA(cudaStreamSynchronize(st));
    const std::pair<const char*, std::pair<const void*, size_t>> outs[] = {
        {"o", {o, n_act * 2}},         {"q", {q, n_act * 2}},       {"k", {k, n_act * 2}},
        {"dq", {dq_raw, n_act * 2}},   {"dk", {dk_raw, n_act * 2}}, {"dv", {dv, n_act * 2}},
        {"da", {da, n_gate * 4}},      {"db", {db, n_gate * 4}},    {"dA_log", {dA_log, size_t(s.H) * 4}},
        {"ddt_bias", {ddt_bias, size_t(s.H) * 4}}};
    for (const auto& [name, buf] : outs)
      r.digest += fmt::format("{}{} {:016x}", r.digest.empty() ? "" : ", ", name, device_fnv1a(buf.first, buf.second));
  }
  if (with_timeline) r.stamps = timeline(layer_fwdbwd, st);
  BENCH_CUDA(cudaStreamDestroy(st));
  for (void* p : {static_cast<void*>(q_raw), static_cast<void*>(k_raw), static_cast<void*>(a), static_cast<void*>(b),
                  static_cast<void*>(A_log), static_cast<void*>(dt_bias), static_cast<void*>(da),
                  static_cast<void*>(db), static_cast<void*>(dA_log), static_cast<void*>(ddt_bias),
                  static_cast<void*>(dq_raw), static_cast<void*>(dk_raw), static_cast<void*>(rq),
                  static_cast<void*>(rk), saved})
    if (p) BENCH_CUDA(cudaFree(p));
  for (void* p : {static_cast<void*>(q), static_cast<void*>(k), static_cast<void*>(v), static_cast<void*>(d_o),
                  static_cast<void*>(gd), static_cast<void*>(bd), static_cast<void*>(o), static_cast<void*>(dq),
                  static_cast<void*>(dk), static_cast<void*>(dv), static_cast<void*>(dg), static_cast<void*>(dbeta)})
    BENCH_CUDA(cudaFree(p));
  return r;
}

}  // namespace
#endif  // DELTATRON_HAVE_CUDA

int main(int argc, char** argv) {
  CLI::App app{"bench_gdn: GDN chunk kernels (CUDA) vs ceilings and fla"};
  std::string shapes = "16,1024,12,64;4,4096,16,128;1,32768,16,128";
  std::string json_out, fla_json, timeline_csv;
  int iters = 30, warmup = 5;
  std::string impl = "tc";
  dt::GdnPlanForcing opts;  // the kernels' options (plan_gdn's unless given); the sizes come per shape
  bool no_ceilings = false, recompute = false, profile = false, digest = false;
  app.add_option("--shapes", shapes, "B,T,H,D;... (dk = dv = D, Hk = Hv = H)");
  app.add_option("--iters", iters, "timed runs per measurement (median)")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "untimed runs first")->check(CLI::NonNegativeNumber);
  app.add_option("--json", json_out, "write the results here");
  app.add_option("--timeline", timeline_csv,
                 "write one forward + backward's per-CTA stamps here (CSV: shape, kernel, sm, start and end in us, "
                 "cycles; tools/dev/gdn_timeline.py plots them; needs a build with -DDELTATRON_GDN_TIMELINE=ON)");
  app.add_option("--fla-json", fla_json, "fla_kernels.json from bench/bench_gdn_peers.py, same device");
  app.add_option("--impl", impl, "tc: tensor-core kernels (default), simt: the plain fp32 ones")
      ->check(CLI::IsMember({"tc", "simt"}));
  app.add_option("--state-cols", opts.state_cols,
                 "tensor-core state passes: columns of S per CTA (0: by size; D 64: 64; D 128: 16, 32, 64)");
  app.add_flag("--no-ceilings", no_ceilings, "skip the copy and GEMM ceilings");
  app.add_flag("--profile", profile,
               "for a profiler: no ceilings, and only the runs launched one by one (no L2-flushed or graph timings); "
               "--chase-prep 0 unless given (ncu runs kernels one at a time, and the state pass would wait for "
               "prep, launched after it)");
  app.add_option("--overlap", opts.overlap,
                 "the output kernel and grad_qk chasing the state passes: -1 by the kernels (default), 0 off, 1 on")
      ->check(CLI::Range(-1, 1));
  app.add_option("--chase-prep", opts.chase_prep,
                 "prep beside the forward state pass, which waits for its chunks: -1 by the sizes (default), 0 off, "
                 "1 on")
      ->check(CLI::Range(-1, 1));
  app.add_option("--qk-persist", opts.qk_persist,
                 "grad_qk persistent where it chases the reverse state pass: -1 by the sizes (default), 0 off, 1 on")
      ->check(CLI::Range(-1, 1));
  app.add_flag("--digest", digest,
               "print a hash of each output of one forward + backward (seeded inputs): builds that give the same "
               "bits print the same hashes");
  app.add_flag("--recompute", recompute, "the backward recomputes the forward's WY factors and states (no saved buffer)");
  CLI11_PARSE(app, argc, argv);
  if (profile && opts.chase_prep == -1) opts.chase_prep = 0;
#ifndef DELTATRON_HAVE_CUDA
  std::fprintf(stderr, "bench_gdn: built without the CUDA backend; nothing to time\n");
  return 1;
#else
  const dt::GdnCudaImpl impl_kind = impl == "simt" ? dt::GdnCudaImpl::kSimt : dt::GdnCudaImpl::kAuto;
  try {
    const std::vector<Shape4> shape_list = parse_shapes(shapes);  // before the device: bad input fails anywhere
    if (!timeline_csv.empty() && !dt::gdn_cuda_timeline_built()) {
      std::fprintf(stderr, "bench_gdn: --timeline needs a build configured with -DDELTATRON_GDN_TIMELINE=ON\n");
      return 2;
    }
    int n_dev = 0;
    if (cudaGetDeviceCount(&n_dev) != cudaSuccess || n_dev == 0) {
      std::fprintf(stderr, "bench_gdn: no CUDA device\n");
      return 1;
    }
    cudaDeviceProp prop{};
    BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
    nlohmann::json fla;
    if (!fla_json.empty()) {
      std::ifstream f(fla_json);
      DT_CHECK(f.good(), "bench_gdn: cannot read --fla-json {}", fla_json);
      fla = nlohmann::json::parse(f);
    }
    if (profile) no_ceilings = true;
    const double copy_gbs = no_ceilings ? NAN : dt_bench::copy_gbs(size_t(2) << 30, warmup, iters);
    const double gemm_tflops = no_ceilings ? NAN : measure_gemm_tflops(warmup, iters);
    std::printf("device: %s\nceilings (this run): copy %.0f GB/s, bf16 GEMM %.0f TFLOP/s\n", prop.name, copy_gbs,
                gemm_tflops);
    std::printf("%s\n", profile ? "--profile: ours launched one by one (one run each), against fla's graph time"
                                 : "GPU time: ours and fla's each replayed from a CUDA graph of 20 calls (L2 warm, "
                                   "no host between kernels)");
    std::printf("%-22s %9s %9s %8s %8s %9s %9s %9s %8s %8s %9s\n", "shape", "fwd ms", "fla fwd", "ratio", "TFLOP/s",
                "GB/s", "f+b ms", "fla f+b", "ratio", "TFLOP/s", "GB/s");
    nlohmann::json out;
    out["device"] = prop.name;
    out["copy_GBps"] = copy_gbs;
    out["gemm_bf16_TFLOPs"] = gemm_tflops;
    out["note"] = "fwd, fwdbwd include gates (separate kernels) and q/k l2norm (inside the chunk kernels); "
                  "chunk 64; kernels: " + impl +
                  "; state_cols " + std::to_string(opts.state_cols) +
                  (recompute ? "; backward recomputes the forward's factors" : "; forward saves its factors for the backward") +
                  (opts.overlap < 0 ? "" : fmt::format("; overlap {}", opts.overlap)) +
                  (opts.chase_prep < 0 ? "" : fmt::format("; chase_prep {}", opts.chase_prep)) +
                  (opts.qk_persist < 0 ? "" : fmt::format("; qk_persist {}", opts.qk_persist));
    std::string timeline_rows;  // --timeline's CSV rows
    for (const Shape4& s : shape_list) {
      const Result r = bench_shape(s, warmup, iters, impl_kind, opts, recompute, profile, digest, !timeline_csv.empty());
      if (!r.stamps.empty()) {
        uint64_t t_first = r.stamps[0].t0;
        for (const dt::GdnCudaStamp& x : r.stamps) t_first = std::min(t_first, x.t0);
        for (const dt::GdnCudaStamp& x : r.stamps)
          timeline_rows += fmt::format("{},{},{},{:.3f},{:.3f},{}\n", s.key(), dt::gdn_cuda_timeline_kernel(x.kernel),
                                       x.sm, (x.t0 - t_first) * 1e-3, (x.t1 - t_first) * 1e-3, x.c1 - x.c0);
      }
      const double ff = flops_forward(s, 64), fb = ff + flops_backward(s, 64);
      // fla's fastest sample over the peer script's processes (bench_gdn_peers.py keeps the minimum)
      double fla_f = NAN, fla_fb = NAN, fla_f_cold = NAN, fla_fb_cold = NAN;
      if (fla.contains(s.key())) {
        fla_f = fla[s.key()].value("fla_gdn_fwd_graph_ms", NAN);
        fla_fb = fla[s.key()].value("fla_gdn_fwdbwd_graph_ms", NAN);
        fla_f_cold = fla[s.key()].value("fla_gdn_fwd_ms", NAN);
        fla_fb_cold = fla[s.key()].value("fla_gdn_fwdbwd_ms", NAN);
      }
      // the table: graph replays; under --profile (no graphs) the runs launched one by one
      const double f_ms = profile ? r.fwd_ms : r.fwd_graph_ms, fb_ms = profile ? r.fwdbwd_ms : r.fwdbwd_graph_ms;
      const double tf_f = ff / (f_ms * 1e-3) / 1e12, tf_fb = fb / (fb_ms * 1e-3) / 1e12;
      const double gb_f = bytes_forward(s) / (f_ms * 1e-3) / 1e9, gb_fb = bytes_fwdbwd(s) / (fb_ms * 1e-3) / 1e9;
      std::printf("%-22s %9.3f %9.3f %8.2f %8.1f %9.0f %9.3f %9.3f %8.2f %8.1f %9.0f\n", s.key().c_str(), f_ms, fla_f,
                  f_ms / fla_f, tf_f, gb_f, fb_ms, fla_fb, fb_ms / fla_fb, tf_fb, gb_fb);
      std::printf("%-22s launched one by one (events): fwd %.3f ms, f+b %.3f ms; chunk kernels alone: fwd %.3f, "
                  "bwd %.3f\n",
                  "", r.fwd_ms, r.fwdbwd_ms, r.core_fwd_ms, r.core_bwd_ms);
      std::printf("%-22s L2 cold (flushed before each run), fla by do_bench: fwd %.3f / %.3f = %.2f, "
                  "f+b %.3f / %.3f = %.2f\n",
                  "", r.fwd_cold_ms, fla_f_cold, r.fwd_cold_ms / fla_f_cold, r.fwdbwd_cold_ms, fla_fb_cold,
                  r.fwdbwd_cold_ms / fla_fb_cold);
      if (digest) std::printf("%-22s bits: %s\n", "", r.digest.c_str());
      out["shapes"][s.key()] = {{"core_fwd_ms", r.core_fwd_ms},
                                {"core_bwd_ms", r.core_bwd_ms},
                                {"fwd_ms", r.fwd_ms},
                                {"fwdbwd_ms", r.fwdbwd_ms},
                                {"fwd_cold_ms", r.fwd_cold_ms},
                                {"fwd_graph_ms", r.fwd_graph_ms},
                                {"fwdbwd_graph_ms", r.fwdbwd_graph_ms},
                                {"fwdbwd_cold_ms", r.fwdbwd_cold_ms},
                                {"fla_fwd_graph_ms", fla_f},
                                {"fla_fwdbwd_graph_ms", fla_fb},
                                {"fla_fwd_do_bench_ms", fla_f_cold},
                                {"fla_fwdbwd_do_bench_ms", fla_fb_cold},
                                {"fwd_graph_over_fla_graph", f_ms / fla_f},
                                {"fwdbwd_graph_over_fla_graph", fb_ms / fla_fb},
                                {"fwd_cold_over_fla_do_bench", r.fwd_cold_ms / fla_f_cold},
                                {"fwdbwd_cold_over_fla_do_bench", r.fwdbwd_cold_ms / fla_fb_cold},
                                {"fwd_TFLOPs", tf_f},
                                {"fwdbwd_TFLOPs", tf_fb},
                                {"fwd_GBps", gb_f},
                                {"fwdbwd_GBps", gb_fb},
                                {"fwd_frac_of_gemm", tf_f / gemm_tflops},
                                {"fwd_frac_of_copy", gb_f / copy_gbs}};
    }
    std::printf("ratio = ours / fla, GPU time (below 1: faster than fla)\n");
    if (!json_out.empty()) std::ofstream(json_out) << out.dump(1) << "\n";
    if (!timeline_csv.empty())
      std::ofstream(timeline_csv) << "shape,kernel,sm,start_us,end_us,cycles\n" << timeline_rows;
  } catch (const dt::Error& e) {
    std::fprintf(stderr, "bench_gdn: error: %s\n", e.what());
    return 1;
  }
  return 0;
#endif
}
