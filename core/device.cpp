#include "core/device.h"

#include <cstdlib>
#include <cstring>

#include "core/error.h"

#ifdef DELTATRON_HAVE_CUDA
#include "core/cuda_check.h"
#define DT_CUDA_CHECK(call) DT_CUDA_OK(call, "device")
#endif

namespace dt {

int cuda_device_count() {
#ifdef DELTATRON_HAVE_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: not an error, just no GPU
    return 0;
  }
  return n;
#else
  return 0;
#endif
}

std::string cuda_device_name(int index) {
#ifdef DELTATRON_HAVE_CUDA
  cudaDeviceProp prop{};
  DT_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  return prop.name;
#else
  (void)index;
  return "";
#endif
}

void* device_alloc(size_t bytes, Device device) {
  if (bytes == 0) bytes = 1;
  if (device == Device::kCPU) {
    size_t rounded = (bytes + 255) / 256 * 256;
    void* p = std::aligned_alloc(256, rounded);
    DT_CHECK(p != nullptr, "out of host memory allocating {} bytes", bytes);
    return p;
  }
#ifdef DELTATRON_HAVE_CUDA
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // the failed allocation leaves the device usable; clear its error
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    DT_FAIL("out of GPU memory: {:.2f} GiB asked for, {:.2f} GiB of {:.2f} GiB free; use less (for generate: "
            "fewer sequences with --batch or a shorter prompt; for train: a smaller train.batch_size or "
            "train.seq_len)",
            bytes / 1073741824.0, free_b / 1073741824.0, total_b / 1073741824.0);
  }
  DT_CUDA_CHECK(err);
  return p;
#else
  DT_FAIL("this build has no CUDA backend; rebuild with nvcc on PATH or use --device cpu");
#endif
}

void device_free(void* p, Device device) {
  if (!p) return;
  if (device == Device::kCPU) {
    std::free(p);
    return;
  }
#ifdef DELTATRON_HAVE_CUDA
  cudaFree(p);
#endif
}

void device_memset(void* p, int value, size_t bytes, Device device) {
  if (device == Device::kCPU) {
    std::memset(p, value, bytes);
    return;
  }
#ifdef DELTATRON_HAVE_CUDA
  DT_CUDA_CHECK(cudaMemset(p, value, bytes));
#else
  DT_FAIL("this build has no CUDA backend");
#endif
}

void device_copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) {
  if (dst_dev == Device::kCPU && src_dev == Device::kCPU) {
    std::memcpy(dst, src, bytes);
    return;
  }
#ifdef DELTATRON_HAVE_CUDA
  DT_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
#else
  DT_FAIL("this build has no CUDA backend");
#endif
}

void device_synchronize() {
#ifdef DELTATRON_HAVE_CUDA
  if (cuda_device_count() > 0) DT_CUDA_CHECK(cudaDeviceSynchronize());
#endif
}

size_t device_memory_used() {
#ifdef DELTATRON_HAVE_CUDA
  if (cuda_device_count() == 0) return 0;
  size_t free_b = 0, total_b = 0;
  DT_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return total_b - free_b;
#else
  return 0;
#endif
}

size_t device_memory_free() {
#ifdef DELTATRON_HAVE_CUDA
  if (cuda_device_count() == 0) return 0;
  size_t free_b = 0, total_b = 0;
  DT_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return free_b;
#else
  return 0;
#endif
}

void device_copy_async(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes, void* stream) {
  if (dst_dev == Device::kCPU && src_dev == Device::kCPU) {
    std::memcpy(dst, src, bytes);
    return;
  }
#ifdef DELTATRON_HAVE_CUDA
  DT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)));
#else
  (void)stream;
  DT_FAIL("this build has no CUDA backend");
#endif
}

PinnedBuffer::PinnedBuffer(size_t bytes, Device device) : device_(device), bytes_(bytes) {
  if (device == Device::kCPU) {
    data_ = device_alloc(bytes, Device::kCPU);
    return;
  }
#ifdef DELTATRON_HAVE_CUDA
  DT_CUDA_CHECK(cudaMallocHost(&data_, bytes == 0 ? 1 : bytes));
#else
  DT_FAIL("this build has no CUDA backend");
#endif
}

PinnedBuffer::~PinnedBuffer() {
  if (!data_) return;
  if (device_ == Device::kCPU) {
    device_free(data_, Device::kCPU);
    return;
  }
#ifdef DELTATRON_HAVE_CUDA
  cudaFreeHost(data_);
#endif
}

StreamEvent::StreamEvent(Device device) {
  if (device == Device::kCPU) return;
#ifdef DELTATRON_HAVE_CUDA
  cudaEvent_t e = nullptr;
  DT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  event_ = e;
#else
  DT_FAIL("this build has no CUDA backend");
#endif
}

StreamEvent::~StreamEvent() {
#ifdef DELTATRON_HAVE_CUDA
  if (event_) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
#endif
}

void StreamEvent::record(void* stream) {
#ifdef DELTATRON_HAVE_CUDA
  if (event_) DT_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event_), static_cast<cudaStream_t>(stream)));
#else
  (void)stream;
#endif
}

void StreamEvent::synchronize() {
#ifdef DELTATRON_HAVE_CUDA
  if (event_) DT_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)));
#endif
}

}  // namespace dt
