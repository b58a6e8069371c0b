// The GDN gated RMSNorm kernels on the GPU (kernels/cuda/gdn_norm.cu): the forward and the backward
// at the model's shapes, against a device copy's bandwidth measured in the same run.
//   bench_gdn_norm [--shapes ROWS,H,D;...] [--iters N] [--warmup N] [--json OUT] [--no-ceiling]
// Default shapes: the 124M hybrid (16 x 1024 tokens, 12 value heads of 64) and the mid one
// (4 x 4096 tokens, 16 heads of 128). Times are medians over N runs, each timed with CUDA events.
// Bytes counted per element: forward reads o, z and writes y (6 B of bf16); backward reads o, z, dy
// and writes d_o, dz (10 B); w, dw and the backward's dw partials are negligible.
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

#ifdef DELTATRON_HAVE_CUDA
#include <cuda_runtime.h>

#include "bench/bench_cuda.h"
#include "kernels/gdn_cuda.h"

namespace {

struct NormShape {
  int64_t rows, H, d;
  std::string key() const {
    return "rows" + std::to_string(rows) + "_H" + std::to_string(H) + "_D" + std::to_string(d);
  }
  double elems() const { return static_cast<double>(rows) * H * d; }
};

std::vector<NormShape> parse_shapes(const std::string& s) {
  std::vector<NormShape> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ';')) {
    NormShape sh{};
    DT_CHECK(std::sscanf(item.c_str(), "%ld,%ld,%ld", &sh.rows, &sh.H, &sh.d) == 3,
             "bench_gdn_norm: --shapes item '{}' is not ROWS,H,D (e.g. 16384,12,64)", item);
    out.push_back(sh);
  }
  return out;
}

// A device allocation, freed on scope exit.
struct DevMem {
  void* p = nullptr;
  explicit DevMem(size_t bytes) { BENCH_CUDA(cudaMalloc(&p, bytes)); }
  ~DevMem() { cudaFree(p); }
  DevMem(const DevMem&) = delete;
  DevMem& operator=(const DevMem&) = delete;
  uint16_t* bf16() const { return static_cast<uint16_t*>(p); }
  float* f32() const { return static_cast<float*>(p); }
};

struct Timing {
  std::string kernel;
  double us, gbs;
};

std::vector<Timing> bench_shape(const NormShape& s, int warmup, int iters) {
  const size_t n = static_cast<size_t>(s.rows * s.H * s.d);
  std::mt19937_64 rng(1);
  std::normal_distribution<float> nd;
  // One random 1 Mi-element block per input, tiled (the values only need to be typical).
  auto upload = [&](DevMem& m, float scale) {
    const size_t block = std::min<size_t>(n, size_t{1} << 20);
    std::vector<uint16_t> h(block);
    for (auto& e : h) e = dt::f32_to_bf16(scale * nd(rng));
    for (size_t off = 0; off < n; off += block)
      BENCH_CUDA(cudaMemcpy(m.bf16() + off, h.data(), std::min(block, n - off) * 2, cudaMemcpyHostToDevice));
  };
  DevMem o(n * 2), z(n * 2), dy(n * 2), y(n * 2), d_o(n * 2), dz(n * 2), w(s.d * 4), dw(s.d * 4);
  upload(o, 1.f), upload(z, 2.f), upload(dy, 1.f);
  std::vector<float> wh(s.d);
  for (auto& e : wh) e = 1.f + 0.2f * nd(rng);
  BENCH_CUDA(cudaMemcpy(w.p, wh.data(), s.d * 4, cudaMemcpyHostToDevice));
  BENCH_CUDA(cudaMemset(dw.p, 0, s.d * 4));

  dt::GdnCudaNormParams p;
  p.rows = s.rows, p.H = s.H, p.d = s.d, p.eps = 1e-6f;
  p.o = o.bf16(), p.z = z.bf16(), p.w = w.f32(), p.y = y.bf16();
  p.dy = dy.bf16(), p.d_o = d_o.bf16(), p.dz = dz.bf16(), p.dw = dw.f32();
  std::vector<Timing> out;
  const double fwd_ms = dt_bench::median_ms([&] { dt::gdn_norm_forward_cuda(p, nullptr); }, warmup, iters);
  out.push_back({"forward", fwd_ms * 1e3, 6.0 * s.elems() / (fwd_ms * 1e-3) / 1e9});
  const double bwd_ms = dt_bench::median_ms([&] { dt::gdn_norm_backward_cuda(p, nullptr); }, warmup, iters);
  out.push_back({"backward", bwd_ms * 1e3, 10.0 * s.elems() / (bwd_ms * 1e-3) / 1e9});
  return out;
}

}  // namespace
#endif

int main(int argc, char** argv) {
  CLI::App app{"bench_gdn_norm: the GDN gated RMSNorm forward and backward (CUDA)"};
  std::string shapes = "16384,12,64;16384,16,128";
  std::string json_out;
  int iters = 50, warmup = 10;
  bool no_ceiling = false;
  app.add_option("--shapes", shapes, "ROWS,H,D;... (ROWS = batch x tokens)");
  app.add_option("--iters", iters, "timed runs per measurement (median)")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "untimed runs first")->check(CLI::NonNegativeNumber);
  app.add_option("--json", json_out, "write the results here");
  app.add_flag("--no-ceiling", no_ceiling, "skip the device copy ceiling");
  CLI11_PARSE(app, argc, argv);
#ifndef DELTATRON_HAVE_CUDA
  std::fprintf(stderr, "bench_gdn_norm: built without the CUDA backend; nothing to time\n");
  return 1;
#else
  try {
    int n_dev = 0;
    if (cudaGetDeviceCount(&n_dev) != cudaSuccess || n_dev == 0) {
      std::fprintf(stderr, "bench_gdn_norm: no CUDA device\n");
      return 1;
    }
    cudaDeviceProp prop{};
    BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
    const double copy_gbs = no_ceiling ? NAN : dt_bench::copy_gbs(size_t(1) << 30, warmup, iters);
    std::printf("device: %s\nceiling (this run): device copy %.0f GB/s\n", prop.name, copy_gbs);
    std::printf("%-24s %-12s %9s %9s %8s\n", "shape", "kernel", "us", "GB/s", "of copy");
    nlohmann::json out;
    out["device"] = prop.name;
    out["copy_GBps"] = copy_gbs;
    out["note"] = "bytes: forward 6 per element (o, z in; y out), backward 10 (o, z, dy in; d_o, dz out), bf16";
    for (const NormShape& s : parse_shapes(shapes)) {
      for (const Timing& t : bench_shape(s, warmup, iters)) {
        std::printf("%-24s %-12s %9.1f %9.0f %7.0f%%\n", s.key().c_str(), t.kernel.c_str(), t.us, t.gbs,
                    100 * t.gbs / copy_gbs);
        out["shapes"][s.key()][t.kernel] = {{"us", t.us}, {"GBps", t.gbs}, {"frac_of_copy", t.gbs / copy_gbs}};
      }
    }
    if (!json_out.empty()) std::ofstream(json_out) << out.dump(1) << "\n";
  } catch (const dt::Error& e) {
    std::fprintf(stderr, "bench_gdn_norm: error: %s\n", e.what());
    return 1;
  }
  return 0;
#endif
}
