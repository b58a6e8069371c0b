// fill on the GPU: one grid-stride kernel per element size (the bit pattern is
// computed on the host, so every dtype is a plain store of 1, 2, 4 or 8 bytes). The kernel and its
// launcher live in dt::cuda; dt::fill_cuda (kernels/fill.h) is the entry point.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

#include "core/cuda_check.h"
#include "core/fp8.h"
#include "kernels/fill.h"

namespace dt {

namespace cuda {
namespace {

template <class Word>
__global__ void fill_kernel(Word* p, int64_t n, Word value) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    p[i] = value;
}

template <class Word>
void launch(void* p, int64_t n, Word value, cudaStream_t stream) {
  if (n == 0) return;
  int threads = 256;
  int blocks = static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, 65535));
  fill_kernel<Word><<<blocks, threads, 0, stream>>>(static_cast<Word*>(p), n, value);
  DT_CUDA_OK(cudaGetLastError(), "fill");
}

}  // namespace
}  // namespace cuda

void fill_cuda(const Tensor& t, double value, void* stream) {
  using cuda::launch;
  auto s = static_cast<cudaStream_t>(stream);
  int64_t n = t.numel();
  switch (t.dtype) {
    case DType::kF32: {
      float f = static_cast<float>(value);
      uint32_t w;
      std::memcpy(&w, &f, 4);
      return launch<uint32_t>(t.data, n, w, s);
    }
    case DType::kF64: {
      uint64_t w;
      std::memcpy(&w, &value, 8);
      return launch<unsigned long long>(t.data, n, w, s);
    }
    case DType::kBF16: return launch<uint16_t>(t.data, n, f32_to_bf16(static_cast<float>(value)), s);
    case DType::kI32: {
      int32_t v = static_cast<int32_t>(value);
      uint32_t w;
      std::memcpy(&w, &v, 4);
      return launch<uint32_t>(t.data, n, w, s);
    }
    case DType::kU16: return launch<uint16_t>(t.data, n, static_cast<uint16_t>(value), s);
    case DType::kF8E4M3: return launch<uint8_t>(t.data, n, f32_to_e4m3(static_cast<float>(value)), s);
  }
}

}  // namespace dt
