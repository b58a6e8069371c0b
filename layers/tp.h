// Tensor parallelism inside the layers (docs/parallel.md, "TP mappings" and "Tensor parallelism in
// the layers"): each layer is built for a TpLayout (its local head counts size its buffers) and
// reaches its TP group through Context::tp. The two mappings every sharded layer uses, no-ops at
// tp = 1 (a single process runs no collective):
//   entering column-parallel projections   copy_to_tp_region:     identity / dx summed over TP
//   leaving a row-parallel projection      reduce_from_tp_region: y summed over TP / identity
#pragma once

#include <cstring>

#ifdef DELTATRON_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "core/context.h"
#include "core/error.h"
#include "layers/params.h"
#include "parallel/communicator.h"
#include "parallel/tp_mappings.h"

namespace dt {

// The TP communicator of ctx, checked against the layout the layer `who` was built for.
inline Communicator& tp_group(const Context& ctx, const TpLayout& tp, const std::string& who) {
  DT_CHECK(ctx.tp && ctx.tp->size() == tp.size && ctx.tp->rank() == tp.rank,
           "{}: built for tensor-parallel rank {} of {}, but the context's TP group is {}; set Context::tp to the "
           "rank's TP communicator (parallel/process_groups.h)",
           who, tp.rank, tp.size,
           ctx.tp ? fmt::format("rank {} of {}", ctx.tp->rank(), ctx.tp->size()) : std::string("missing"));
  return *ctx.tp;
}

// Forward of reduce_from_tp_region after a row-parallel projection: y = sum over TP of partial y.
inline void tp_reduce_output(Context& ctx, const TpLayout& tp, const Tensor& y, const std::string& who) {
  if (tp.size > 1) reduce_from_tp_region_forward(tp_group(ctx, tp, who), y);
}

// Backward of copy_to_tp_region before column-parallel projections: dx = sum over TP of partial dx.
inline void tp_reduce_input_grad(Context& ctx, const TpLayout& tp, const Tensor& dx, const std::string& who) {
  if (tp.size > 1) copy_to_tp_region_backward(tp_group(ctx, tp, who), dx);
}

// n / tp.size, with a clear error when it does not divide (the config check should have caught it).
inline int64_t tp_local(int64_t n, const TpLayout& tp, const std::string& what) {
  DT_CHECK(n % tp.size == 0, "{} = {} does not divide by the tensor-parallel size {}; choose sizes that divide by "
           "parallel.tp", what, n, tp.size);
  return n / tp.size;
}

// ---- Stream-ordered staging copies (the vocab-parallel embedding and LM head) ----
// On the GPU each goes on ctx.stream (cudaMemcpyAsync / cudaMemcpy2DAsync / cudaMemsetAsync): after
// the kernels queued before it, before those queued after, with no device-wide sync. On the CPU they
// are plain copies. Device pointers are on ctx.device; host pointers are pageable host memory.

#ifdef DELTATRON_HAVE_CUDA
inline void tp_cuda_check(cudaError_t e, const char* what) {
  DT_CHECK(e == cudaSuccess, "tensor-parallel staging copy ({}) failed: {}", what, cudaGetErrorString(e));
}
#endif

// dst = src, `bytes` bytes, both on ctx.device.
inline void tp_copy(Context& ctx, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (ctx.device == Device::kCPU) {
    std::memmove(dst, src, bytes);
    return;
  }
#ifdef DELTATRON_HAVE_CUDA
  tp_cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(ctx.stream)),
                "cudaMemcpyAsync");
#else
  DT_FAIL("a GPU tensor in a build without CUDA");
#endif
}

// `rows` rows of `width` bytes: row i of dst (at i * dst_pitch) = row i of src (at i * src_pitch), on
// ctx.device. torch: dst[:, :w] = src[:, :w] for byte views.
inline void tp_copy_rows(Context& ctx, void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width,
                         int64_t rows) {
  if (rows == 0 || width == 0) return;
  if (ctx.device == Device::kCPU) {
    for (int64_t i = 0; i < rows; ++i)
      std::memcpy(static_cast<char*>(dst) + i * dst_pitch, static_cast<const char*>(src) + i * src_pitch, width);
    return;
  }
#ifdef DELTATRON_HAVE_CUDA
  tp_cuda_check(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, static_cast<size_t>(rows),
                                  cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(ctx.stream)),
                "cudaMemcpy2DAsync");
#else
  DT_FAIL("a GPU tensor in a build without CUDA");
#endif
}

// `bytes` bytes at p (on ctx.device) = `value`.
inline void tp_memset(Context& ctx, void* p, int value, size_t bytes) {
  if (bytes == 0) return;
  if (ctx.device == Device::kCPU) {
    std::memset(p, value, bytes);
    return;
  }
#ifdef DELTATRON_HAVE_CUDA
  tp_cuda_check(cudaMemsetAsync(p, value, bytes, static_cast<cudaStream_t>(ctx.stream)), "cudaMemsetAsync");
#else
  DT_FAIL("a GPU tensor in a build without CUDA");
#endif
}

// dst (on ctx.device) = host. The driver stages a pageable source before returning, so `host` may
// change or die right after.
inline void tp_upload(Context& ctx, void* dst, const void* host, size_t bytes) {
  if (bytes == 0) return;
  if (ctx.device == Device::kCPU) {
    std::memcpy(dst, host, bytes);
    return;
  }
#ifdef DELTATRON_HAVE_CUDA
  tp_cuda_check(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(ctx.stream)),
                "cudaMemcpyAsync to the GPU");
#else
  DT_FAIL("a GPU tensor in a build without CUDA");
#endif
}

// host = src (on ctx.device), once the work queued on ctx.stream before it is done: waits for that
// stream only (the host needs the values), never for the whole device.
inline void tp_download(Context& ctx, void* host, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (ctx.device == Device::kCPU) {
    std::memcpy(host, src, bytes);
    return;
  }
#ifdef DELTATRON_HAVE_CUDA
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  tp_cuda_check(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync to the host");
  tp_cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
#else
  DT_FAIL("a GPU tensor in a build without CUDA");
#endif
}

}  // namespace dt
