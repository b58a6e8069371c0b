// The input x' of the decode GEMV as its kernel takes it (infer/cuda/decode_fused.cu, gemv_input.h):
// from x, x2 [N, C] (bf16 values) and the norm weight nw [C], in double, with the kernel's bf16
// rounding of x' (the sums and the activations themselves exact). One reference for both tests of
// the kernel: the GPU's (tests/gpu/test_infer_cuda.cpp) and the emulator's (tools/gdn_emu/decode_main.cpp).
//
// Plain C++ (no CUDA, no GoogleTest): the emulator's build has neither a GPU nor nvcc.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "infer/gemv_input.h"

namespace dt {

// x2 is read for SwiGLU and the gate, nw for the norm (eps, and 1 + nw when zero-centred).
inline std::vector<double> gemv_input_rounded(GemvInput kind, const std::vector<double>& x,
                                              const std::vector<double>& x2, const std::vector<double>& nw,
                                              bool zero_centered, double eps, int64_t N, int64_t C) {
  std::vector<double> in(static_cast<size_t>(N * C));
  for (int64_t n = 0; n < N; ++n) {
    double ss = 0;
    for (int64_t c = 0; c < C; ++c) ss += x[n * C + c] * x[n * C + c];
    const double rs = 1 / std::sqrt(ss / C + eps);
    for (int64_t c = 0; c < C; ++c) {
      const int64_t i = n * C + c;
      const double xi = x[i];
      switch (kind) {
        case GemvInput::kPlain: in[i] = xi; break;
        case GemvInput::kSwiGLU: in[i] = round_bf16(static_cast<float>(xi / (1 + std::exp(-xi)) * x2[i])); break;
        case GemvInput::kGate: in[i] = round_bf16(static_cast<float>(xi / (1 + std::exp(-x2[i])))); break;
        case GemvInput::kRmsNorm:
          in[i] = round_bf16(static_cast<float>(xi * rs * ((zero_centered ? 1 : 0) + nw[c])));
          break;
      }
    }
  }
  return in;
}

}  // namespace dt
