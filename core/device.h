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
// Waits for all work on the current GPU (no-op without CUDA).
void device_synchronize();
// Bytes of the current GPU's memory in use (total - free, all processes and the CUDA context
// included; 0 without CUDA). Sample it at the high points of a step to measure peak memory.
size_t device_memory_used();
// Bytes of the current GPU's memory free now (0 without CUDA).
size_t device_memory_free();

}  // namespace dt
