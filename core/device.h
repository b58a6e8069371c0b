// Device memory and discovery. CPU memory is 256-byte aligned host memory;
// CUDA memory comes from cudaMalloc when the CUDA backend is built.
#pragma once

#include <cstddef>
#include <string>

#include "core/tensor.h"

namespace dt {

// Number of usable CUDA devices (0 when the backend is not built or no GPU is present).
int cuda_device_count();
std::string cuda_device_name(int index);

void* device_alloc(size_t bytes, Device device);
void device_free(void* p, Device device);
void device_memset(void* p, int value, size_t bytes, Device device);
// Copy between any two devices (host<->device included).
void device_copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes);
// The same copy queued on `stream` (a cudaStream_t; null: the legacy default stream): it returns at
// once where host memory is page-locked (PinnedBuffer); between CPU buffers it copies now.
void device_copy_async(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes, void* stream);

// Host memory that a GPU copies into without the host waiting: page-locked for Device::kCUDA,
// plain 256-byte aligned memory for Device::kCPU.
class PinnedBuffer {
 public:
  PinnedBuffer(size_t bytes, Device device);
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  Device device_;
  size_t bytes_;
  void* data_ = nullptr;
};

// A point in a stream's queued work that the host can wait for: a CUDA event for Device::kCUDA;
// for Device::kCPU, whose work is done when it is queued, record and synchronize do nothing.
class StreamEvent {
 public:
  explicit StreamEvent(Device device);
  ~StreamEvent();
  StreamEvent(const StreamEvent&) = delete;
  StreamEvent& operator=(const StreamEvent&) = delete;
  void record(void* stream);  // marks the work queued on `stream` so far
  void synchronize();         // waits until that work is done

 private:
  void* event_ = nullptr;
};

// Waits for all work on the current GPU (no-op without CUDA).
void device_synchronize();
// Bytes of the current GPU's memory in use (total - free, all processes and the CUDA context
// included; 0 without CUDA). Sample it at the high points of a step to measure peak memory.
size_t device_memory_used();
// Bytes of the current GPU's memory free now (0 without CUDA).
size_t device_memory_free();

}  // namespace dt
