// Emulation shim: the half type as far as infer/cuda/fp8.cuh uses it (a value holder; every e4m3
// value is exact in it), host-only.
#pragma once
#include "cuda_runtime.h"
struct __half_raw {
  float f;
};
struct __half {
  float f;
  explicit __half(__half_raw r) : f(r.f) {}
};
inline float __half2float(__half h) { return h.f; }
