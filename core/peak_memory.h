// Peak memory of a run, for the metrics of training and for the benchmarks.
//   GPU: the largest device_memory_used() (core/device.h: the device's used memory, every process
//        and the CUDA context included) seen by sample(), which the caller places at the high points
//        of a step (after the backward, when activations and gradients are both alive).
//   CPU: the process's peak resident set (VmHWM), which the kernel keeps; sample() has nothing to do.
#pragma once

#include <cstddef>

#include "core/tensor.h"

namespace dt {

class PeakMemory {
 public:
  explicit PeakMemory(Device device) : device_(device) {}
  void sample();
  size_t bytes() const;  // the peak so far
  double gib() const { return static_cast<double>(bytes()) / (size_t{1} << 30); }

 private:
  Device device_;
  size_t device_peak_ = 0;
};

// The process's peak resident set in bytes (VmHWM of /proc/self/status); 0 where it cannot be read.
size_t host_peak_resident_bytes();

}  // namespace dt
