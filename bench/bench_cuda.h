// Shared by the CUDA benchmarks (bench_gdn, bench_gdn_norm, bench_dense_ops): a CUDA-call check, the
// median event time of a callable, and the device-copy ceiling measured in the same run.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "core/error.h"

#define BENCH_CUDA(call)                                                                                  \
  do {                                                                                                    \
    cudaError_t e_ = (call);                                                                              \
    DT_CHECK(e_ == cudaSuccess, "{}: {} failed at line {}: {}", __FILE__, #call, __LINE__,                \
             cudaGetErrorString(e_));                                                                     \
  } while (0)

namespace dt_bench {

// Median milliseconds of `runs` runs of run() on `stream`, each timed with CUDA events and divided
// by `per`; before() goes first each time, untimed.
template <class Before, class Run>
double events_median_ms(cudaStream_t stream, int runs, Before&& before, Run&& run, double per = 1.0) {
  cudaEvent_t a, b;
  BENCH_CUDA(cudaEventCreate(&a));
  BENCH_CUDA(cudaEventCreate(&b));
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    before(i);
    BENCH_CUDA(cudaEventRecord(a, stream));
    run();
    BENCH_CUDA(cudaEventRecord(b, stream));
    BENCH_CUDA(cudaEventSynchronize(b));
    float t = 0;
    BENCH_CUDA(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t / per);
  }
  BENCH_CUDA(cudaEventDestroy(a));
  BENCH_CUDA(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Median milliseconds of f() over `iters` runs on `stream`, after `warmup` runs. With `flush`, a
// 256 MB buffer is written before each timed run (outside the events), so that f starts with a
// cold L2 as under triton.testing.do_bench, which the peer scripts use.
template <class F>
double median_ms(F&& f, int warmup, int iters, cudaStream_t stream = nullptr, bool flush = false) {
  for (int i = 0; i < warmup; ++i) f();
  BENCH_CUDA(cudaDeviceSynchronize());
  constexpr size_t kFlushBytes = size_t(256) << 20;
  void* scratch = nullptr;
  if (flush) BENCH_CUDA(cudaMalloc(&scratch, kFlushBytes));
  const double ms = events_median_ms(
      stream, iters, [&](int i) { if (flush) BENCH_CUDA(cudaMemsetAsync(scratch, i & 0xff, kFlushBytes, stream)); },
      f);
  if (scratch) BENCH_CUDA(cudaFree(scratch));
  return ms;
}

// Median milliseconds of one f() call (f launching on `stream`, a non-default stream), replayed
// from a CUDA graph of `calls` calls: GPU time only, L2 warm, as bench_gdn_peers.py times fla.
template <class F>
double graph_ms(F&& f, cudaStream_t stream, int calls = 20, int reps = 10) {
  f();
  BENCH_CUDA(cudaStreamSynchronize(stream));
  cudaGraph_t graph;
  BENCH_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < calls; ++i) f();
  BENCH_CUDA(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  BENCH_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  BENCH_CUDA(cudaGraphLaunch(exec, stream));
  BENCH_CUDA(cudaStreamSynchronize(stream));
  const double ms = events_median_ms(
      stream, reps, [](int) {}, [&] { BENCH_CUDA(cudaGraphLaunch(exec, stream)); }, calls);
  BENCH_CUDA(cudaGraphExecDestroy(exec));
  BENCH_CUDA(cudaGraphDestroy(graph));
  return ms;
}

// Device-to-device copy bandwidth of `bytes` (read + write counted), GB/s.
inline double copy_gbs(size_t bytes, int warmup, int iters) {
  void *a = nullptr, *b = nullptr;
  BENCH_CUDA(cudaMalloc(&a, bytes));
  BENCH_CUDA(cudaMalloc(&b, bytes));
  const double ms =
      median_ms([&] { BENCH_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice)); }, warmup, iters);
  BENCH_CUDA(cudaFree(a));
  BENCH_CUDA(cudaFree(b));
  return 2.0 * static_cast<double>(bytes) / (ms * 1e-3) / 1e9;
}

}  // namespace dt_bench
