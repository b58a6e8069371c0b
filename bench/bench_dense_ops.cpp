// The dense matmul-class GPU ops at the 124M model's shapes (B 16, T 1024, C 768, H 12, D 64, F 2048,
// V 50304): cuBLASLt linear forward and backward, cuDNN SDPA forward and backward (GQA-free 124M heads
// and one MLA head-dim pair), cross-entropy forward, backward and fused; plus one large square GEMM as
// the tensor-core ceiling measured in the same run.
//   bench_dense_ops [--iters N] [--warmup N] [--json OUT]
// Times are medians over N runs, each timed with CUDA events on the context's stream. FLOPs count
// 2 per multiply-add (causal attention: half the square); cross-entropy reports bytes moved
// (forward reads the logits once; backward and fused read and write them once). Cross-entropy forward
// and fused are timed per kernel variant ("cross_entropy fused (tma)", through the context's
// test-only override), then under the plan's own choice (the rows without a suffix).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/philox.h"

#ifdef DELTATRON_HAVE_CUDA
#include <cuda_runtime.h>

#include "bench/bench_cuda.h"
#include "kernels/cuda_ops.h"
#include "kernels/cuda_context.h"
#include "kernels/ops.h"
#endif

#ifdef DELTATRON_HAVE_CUDA
namespace {

// A device buffer, freed on scope exit.
struct Buf {
  void* p = nullptr;
  size_t bytes = 0;
  explicit Buf(size_t n) : bytes(n) { p = dt::device_alloc(n, dt::Device::kCUDA); }
  ~Buf() { dt::device_free(p, dt::Device::kCUDA); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
};

// Fills a bf16 buffer with normal values times `scale`: one random 1 Mi-element block, tiled.
void fill_bf16(Buf& b, double scale, uint64_t stream) {
  const size_t n = b.bytes / 2, block = std::min<size_t>(n, size_t{1} << 20);
  std::vector<uint16_t> h(block);
  for (size_t i = 0; i < block; ++i) h[i] = dt::f32_to_bf16(static_cast<float>(scale * dt::philox_normal(7, stream, i)));
  for (size_t off = 0; off < n; off += block)
    dt::device_copy(static_cast<uint16_t*>(b.p) + off, dt::Device::kCUDA, h.data(), dt::Device::kCPU,
                    std::min(block, n - off) * 2);
}

double median_ms(dt::Context& ctx, int warmup, int iters, const std::function<void()>& fn) {
  return dt_bench::median_ms(fn, warmup, iters, static_cast<cudaStream_t>(ctx.stream));
}

struct Row {
  std::string op, shape;
  double ms = 0, tflops = 0, gbps = 0;
};

dt::Tensor t2(Buf& b, dt::DType t, int64_t r, int64_t c) { return dt::Tensor(b.p, t, dt::Device::kCUDA, dt::Shape{r, c}); }

}  // namespace
#endif

int main(int argc, char** argv) {
  CLI::App app{"bench_dense_ops: cuBLASLt linear, cuDNN attention, cross-entropy at the 124M shapes"};
  int iters = 20, warmup = 3;
  std::string json_out;
  app.add_option("--iters", iters, "timed runs per op (median)");
  app.add_option("--warmup", warmup, "untimed runs first (the first builds the cuBLASLt / cuDNN plans)");
  app.add_option("--json", json_out, "write the results here");
  CLI11_PARSE(app, argc, argv);
#ifndef DELTATRON_HAVE_CUDA
  std::printf("bench_dense_ops: this build has no CUDA backend\n");
  return 0;
#else
  try {
    if (dt::cuda_device_count() == 0) {
      std::printf("bench_dense_ops: no CUDA device\n");
      return 0;
    }
    auto gpu = dt::make_cuda_context(0);
    dt::Context& ctx = gpu->context();
    using dt::DType;
    const int64_t B = 16, T = 1024, C = 768, H = 12, D = 64, F = 2048, V = 50304, R = B * T;
    std::vector<Row> rows;

    // ---- linear: forward y = x w^T, backward dx = dy w and dw += dy^T x ----
    struct Lin {
      const char* name;
      int64_t rows, in, out;
    };
    const Lin lins[] = {{"qkv_proj", R, C, 3 * C},   {"o_proj", R, C, C},       {"mlp gate/up", R, C, F},
                        {"mlp down", R, F, C},       {"lm_head", R, C, V},      {"ceiling 8192^3", 8192, 8192, 8192}};
    for (const Lin& l : lins) {
      Buf x(l.rows * l.in * 2), w(l.out * l.in * 2), y(l.rows * l.out * 2), dx(l.rows * l.in * 2), dw(l.out * l.in * 4);
      fill_bf16(x, 1.0, 1), fill_bf16(w, 0.02, 2), fill_bf16(y, 1.0, 3);
      BENCH_CUDA(cudaMemset(dw.p, 0, dw.bytes));
      const dt::Tensor xt = t2(x, DType::kBF16, l.rows, l.in), wt = t2(w, DType::kBF16, l.out, l.in),
                       yt = t2(y, DType::kBF16, l.rows, l.out), dxt = t2(dx, DType::kBF16, l.rows, l.in),
                       dwt = t2(dw, DType::kF32, l.out, l.in);
      const std::string shape = std::to_string(l.rows) + "x" + std::to_string(l.in) + " -> " + std::to_string(l.out);
      const double flops = 2.0 * l.rows * l.in * l.out;
      double ms = median_ms(ctx, warmup, iters, [&] { dt::linear_forward(ctx, yt, xt, wt); });
      rows.push_back({std::string("linear fwd ") + l.name, shape, ms, flops / ms * 1e-9, 0});
      if (l.rows == 8192 && l.in == 8192) continue;
      ms = median_ms(ctx, warmup, iters, [&] { dt::linear_backward(ctx, dxt, dwt, yt, xt, wt, 1.0); });
      rows.push_back({std::string("linear bwd ") + l.name, shape, ms, 2 * flops / ms * 1e-9, 0});
    }

    // ---- attention: causal SDPA, [B, T, H, D] bf16, lse fp32 ----
    struct Att {
      const char* name;
      int64_t H, Hkv, Dqk, Dv;
    };
    const Att atts[] = {{"124M", H, H, D, D}, {"MLA 192/128", H, H, 192, 128}};
    for (const Att& a : atts) {
      Buf q(R * a.H * a.Dqk * 2), k(R * a.Hkv * a.Dqk * 2), v(R * a.Hkv * a.Dv * 2), o(R * a.H * a.Dv * 2),
          lse(B * a.H * T * 4), dq(q.bytes), dk(k.bytes), dv(v.bytes), dout(o.bytes);
      fill_bf16(q, 1.0, 4), fill_bf16(k, 1.0, 5), fill_bf16(v, 1.0, 6), fill_bf16(dout, 1.0, 7);
      auto t4 = [&](Buf& b, int64_t h, int64_t d) {
        return dt::Tensor(b.p, DType::kBF16, dt::Device::kCUDA, dt::Shape{B, T, h, d});
      };
      const dt::Tensor qt = t4(q, a.H, a.Dqk), kt = t4(k, a.Hkv, a.Dqk), vt = t4(v, a.Hkv, a.Dv), ot = t4(o, a.H, a.Dv),
                       dqt = t4(dq, a.H, a.Dqk), dkt = t4(dk, a.Hkv, a.Dqk), dvt = t4(dv, a.Hkv, a.Dv),
                       dot = t4(dout, a.H, a.Dv);
      const dt::Tensor lt(lse.p, DType::kF32, dt::Device::kCUDA, dt::Shape{B, a.H, T});
      const double scale = 1 / std::sqrt(static_cast<double>(a.Dqk));
      const std::string shape = "B" + std::to_string(B) + " T" + std::to_string(T) + " H" + std::to_string(a.H) +
                                " Dqk" + std::to_string(a.Dqk) + " Dv" + std::to_string(a.Dv);
      const double sq = 0.5 * B * a.H * static_cast<double>(T) * T;  // causal: half the scores
      double ms = median_ms(ctx, warmup, iters, [&] { dt::attention_forward(ctx, ot, lt, qt, kt, vt, scale); });
      rows.push_back({std::string("attention fwd ") + a.name, shape, ms, sq * 2 * (a.Dqk + a.Dv) / ms * 1e-9, 0});
      ms = median_ms(ctx, warmup, iters,
                     [&] { dt::attention_backward(ctx, dqt, dkt, dvt, dot, qt, kt, vt, ot, lt, scale); });
      rows.push_back({std::string("attention bwd ") + a.name, shape, ms, sq * 2 * (3 * a.Dqk + 2 * a.Dv) / ms * 1e-9, 0});
    }

    // ---- cross-entropy over [R, V] bf16 logits ----
    {
      Buf logits(R * V * 2), dlogits(R * V * 2), targets(R * 4), losses(R * 4), lse(R * 4);
      fill_bf16(logits, 2.0, 8);
      std::vector<int32_t> th(R);
      for (int64_t i = 0; i < R; ++i) th[i] = static_cast<int32_t>(dt::philox4x32(7, 9, i).v[0] % V);
      dt::device_copy(targets.p, dt::Device::kCUDA, th.data(), dt::Device::kCPU, R * 4);
      const dt::Tensor xt = t2(logits, DType::kBF16, R, V), dxt = t2(dlogits, DType::kBF16, R, V);
      const dt::Tensor tt(targets.p, DType::kI32, dt::Device::kCUDA, dt::Shape{R});
      const dt::Tensor losst(losses.p, DType::kF32, dt::Device::kCUDA, dt::Shape{R});
      const dt::Tensor lset(lse.p, DType::kF32, dt::Device::kCUDA, dt::Shape{R});
      const std::string shape = std::to_string(R) + "x" + std::to_string(V);
      const double bytes = 2.0 * R * V;
      // Forward and fused per kernel variant (cross_entropy.cu), then the rows under their plain names
      // for the default one (what training runs); the backward does not depend on the variant. The
      // fused runs in place: each run overwrites the logits with their gradient, which is as good an
      // input; each variant starts from the same logits (restored from `pristine`).
      Buf pristine(logits.bytes);
      BENCH_CUDA(cudaMemcpy(pristine.p, logits.p, logits.bytes, cudaMemcpyDeviceToDevice));
      auto time_variant = [&](const std::string& suffix) {
        BENCH_CUDA(cudaMemcpy(logits.p, pristine.p, logits.bytes, cudaMemcpyDeviceToDevice));
        double ms = median_ms(ctx, warmup, iters, [&] { dt::cross_entropy_forward(ctx, losst, lset, xt, tt); });
        rows.push_back({"cross_entropy fwd" + suffix, shape, ms, 0, bytes / ms * 1e-6});
        if (suffix.empty()) {
          ms = median_ms(ctx, warmup, iters, [&] { dt::cross_entropy_backward(ctx, dxt, xt, lset, tt, 1.0 / R); });
          rows.push_back({"cross_entropy bwd", shape, ms, 0, 2 * bytes / ms * 1e-6});
        }
        ms = median_ms(ctx, warmup, iters, [&] { dt::cross_entropy_fused(ctx, losst, lset, xt, tt, 1.0 / R); });
        rows.push_back({"cross_entropy fused" + suffix, shape, ms, 0, 2 * bytes / ms * 1e-6});
      };
      for (const auto v : dt::cuda::kCrossEntropyVariants) {
        dt::cuda::set_cross_entropy_variant_for_testing(ctx, v);
        time_variant(std::string(" (") + dt::cuda::cross_entropy_variant_name(v) + ")");
      }
      dt::cuda::set_cross_entropy_variant_for_testing(ctx, std::nullopt);
      time_variant("");
    }

    const std::string device = dt::cuda_device_name(0);
    std::printf("bench_dense_ops on %s, cuDNN %d, median of %d runs\n", device.c_str(), dt::cudnn_runtime_version(),
                iters);
    std::printf("%-28s %-30s %10s %10s %10s\n", "op", "shape", "ms", "TFLOP/s", "GB/s");
    nlohmann::json out;
    out["device"] = device;
    out["cudnn"] = dt::cudnn_runtime_version();
    out["iters"] = iters;
    for (const Row& r : rows) {
      std::printf("%-28s %-30s %10.4f %10.1f %10.1f\n", r.op.c_str(), r.shape.c_str(), r.ms, r.tflops, r.gbps);
      out["results"].push_back({{"op", r.op}, {"shape", r.shape}, {"ms", r.ms}, {"tflops", r.tflops}, {"gbps", r.gbps}});
    }
    if (!json_out.empty()) std::ofstream(json_out) << out.dump(1) << "\n";
    return 0;
  } catch (const dt::Error& e) {
    std::fprintf(stderr, "bench_dense_ops: error: %s\n", e.what());
    return 1;
  }
#endif
}
