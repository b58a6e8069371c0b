// Host-side declarations of the cross-entropy CUDA launchers (kernels/cuda/cross_entropy.cu).
// Compiled by g++ (C++20) and nvcc (C++17) alike: plain pointers and sizes, no CUDA types (STYLE 6).
// kernels/cuda/cross_entropy_ops.cpp checks the Tensors and fills these.
#pragma once

#include <cstdint>

namespace dt {
namespace dense_mm_cuda {

// Logits are bf16 (raw uint16_t bits) [n, vocab], row-major with no padding; every sum in fp32.
struct CrossEntropyParams {
  int64_t n = 0, vocab = 0;
  const uint16_t* logits = nullptr;
  const int32_t* targets = nullptr;  // [n]
  float* losses = nullptr;           // [n]: forward / fused write
  float* lse = nullptr;              // [n]: forward / fused write, backward reads
  uint16_t* dlogits = nullptr;       // [n, vocab]: backward / fused write (may alias logits)
  float grad_scale = 1.f;
  // Device int: each row whose target is outside [0, vocab) lowers it to its row index (atomicMin);
  // the caller sets it to kNoBadRow first. Such a row's loss is NaN and its dlogits omit the one-hot.
  int* bad_row = nullptr;
};

inline constexpr int kNoBadRow = 0x7f7f7f7f;  // what cudaMemset(p, 0x7f, 4) writes; > any row index used

// losses, lse written: one CTA per row, fp32 online max/sum over the row in one read.
void cross_entropy_forward_launch(const CrossEntropyParams& p, void* stream);
// dlogits = grad_scale (exp(logits - lse) - onehot(target)), from the saved lse.
void cross_entropy_backward_launch(const CrossEntropyParams& p, void* stream);
// Both, one CTA per row: the row is read once into shared memory when it fits (vocab <= 56K), its
// max/sum taken, then dlogits written over the logits (dlogits == logits is the intended use).
void cross_entropy_fused_launch(const CrossEntropyParams& p, void* stream);

}  // namespace dense_mm_cuda
}  // namespace dt
