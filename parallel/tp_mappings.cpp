#include "parallel/tp_mappings.h"

#include <cstring>

#include "core/device.h"
#include "core/error.h"

#ifdef DELTATRON_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace dt {

// rows x width bytes from src (rows src_pitch apart) to dst (rows dst_pitch apart).
// On the GPU a synchronous cudaMemcpy2D for now; a kernel on the compute stream can replace it
// once the layers shard (the all-gather before it has been waited for on the host anyway).
void copy_strided_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, int64_t rows,
                       Device device) {
  if (rows == 0 || width == 0) return;
  if (device == Device::kCPU) {
    for (int64_t i = 0; i < rows; ++i)
      std::memcpy(static_cast<char*>(dst) + i * dst_pitch, static_cast<const char*>(src) + i * src_pitch, width);
    return;
  }
#ifdef DELTATRON_HAVE_CUDA
  cudaError_t e = cudaMemcpy2D(dst, dst_pitch, src, src_pitch, width, static_cast<size_t>(rows), cudaMemcpyDefault);
  DT_CHECK(e == cudaSuccess, "TP mapping copy: cudaMemcpy2D failed: {}", cudaGetErrorString(e));
#else
  DT_FAIL("TP mapping of a GPU tensor in a build without CUDA");
#endif
}

namespace {

// A temporary buffer on `device`, freed on scope exit.
struct Scratch {
  void* p;
  Device device;
  Scratch(size_t bytes, Device d) : p(device_alloc(bytes, d)), device(d) {}
  ~Scratch() { device_free(p, device); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};

// Checks that whole [..., size * n_local] and part [..., n_local] match; returns n_local.
int64_t check_split(const char* mapping, const Communicator& tp, const Tensor& whole, const Tensor& part) {
  DT_CHECK(whole.ndim() >= 1 && whole.ndim() == part.ndim(),
           "{}: the whole tensor {} and the rank's part {} must have the same number of dimensions (at least 1)",
           mapping, whole.str(), part.str());
  for (int i = 0; i + 1 < whole.ndim(); ++i)
    DT_CHECK(whole.size(i) == part.size(i), "{}: dimension {} differs between the whole tensor {} and the part {}",
             mapping, i, whole.str(), part.str());
  DT_CHECK(whole.size(-1) == part.size(-1) * tp.size(),
           "{}: the last dimension of {} must be the TP size {} times that of the part {}; the feature count "
           "must divide by the TP size",
           mapping, whole.str(), tp.size(), part.str());
  DT_CHECK(whole.dtype == part.dtype && whole.device == part.device, "{}: {} and {} differ in dtype or device",
           mapping, whole.str(), part.str());
  DT_CHECK(whole.is_contiguous() && part.is_contiguous(), "{}: {} and {} must be contiguous", mapping, whole.str(),
           part.str());
  return part.size(-1);
}

// whole[..., r*n_local : (r+1)*n_local] = the ranks' parts.
void gather_last_dim(const char* mapping, Communicator& tp, const Tensor& whole, const Tensor& part) {
  const int64_t n_local = check_split(mapping, tp, whole, part);
  const int n = tp.size();
  const size_t es = dtype_size(part.dtype), width = static_cast<size_t>(n_local) * es;
  const int64_t rows = n_local == 0 ? 0 : part.numel() / n_local;
  if (n == 1) {
    if (whole.data != part.data) device_copy(whole.data, whole.device, part.data, part.device, part.bytes());
    return;
  }
  // All-gather into [n, rows, n_local], then interleave the ranks' blocks along the last dim.
  Scratch buf(part.bytes() * n, part.device);
  Tensor gathered(buf.p, part.dtype, part.device, {static_cast<int64_t>(n) * part.numel()});
  tp.all_gather(gathered, part);
  for (int r = 0; r < n; ++r)
    copy_strided_rows(static_cast<char*>(whole.data) + r * width, width * n, static_cast<char*>(buf.p) + r * part.bytes(),
              width, width, rows, part.device);
}

// part = whole[..., rank*n_local : (rank+1)*n_local].
void slice_last_dim(const char* mapping, Communicator& tp, const Tensor& part, const Tensor& whole) {
  const int64_t n_local = check_split(mapping, tp, whole, part);
  const size_t es = dtype_size(part.dtype), width = static_cast<size_t>(n_local) * es;
  const int64_t rows = n_local == 0 ? 0 : part.numel() / n_local;
  copy_strided_rows(part.data, width, static_cast<const char*>(whole.data) + tp.rank() * width, width * tp.size(), width,
            rows, part.device);
}

}  // namespace

void copy_to_tp_region_backward(Communicator& tp, const Tensor& dx) { tp.all_reduce(dx, ReduceOp::kSum); }

void reduce_from_tp_region_forward(Communicator& tp, const Tensor& y) { tp.all_reduce(y, ReduceOp::kSum); }

void gather_from_tp_region_forward(Communicator& tp, const Tensor& y, const Tensor& x_local) {
  gather_last_dim("gather_from_tp_region forward", tp, y, x_local);
}

void gather_from_tp_region_backward(Communicator& tp, const Tensor& dx_local, const Tensor& dy) {
  slice_last_dim("gather_from_tp_region backward", tp, dx_local, dy);
}

void scatter_to_tp_region_forward(Communicator& tp, const Tensor& x_local, const Tensor& x) {
  slice_last_dim("scatter_to_tp_region forward", tp, x_local, x);
}

void scatter_to_tp_region_backward(Communicator& tp, const Tensor& dx, const Tensor& dx_local) {
  gather_last_dim("scatter_to_tp_region backward", tp, dx, dx_local);
}

}  // namespace dt
