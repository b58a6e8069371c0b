// Host-side declarations of the cross-entropy CUDA launchers (kernels/cuda/cross_entropy.cu).
// Compiled by g++ (C++20) and nvcc (C++17) alike: plain pointers and sizes, no CUDA types
// (docs/architecture.md).
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

// Which kernels forward and fused run (kernels/cuda/cross_entropy.cu's header has the designs):
//   kStream  online pass, then (fused) the row re-read from L2 for dlogits; any vocab;
//   kRegs    the row held in registers (vocab <= 57344, else kStream): read once, written once;
//   kTma     as kRegs, persistent, the next rows fetched by cp.async.bulk meanwhile (sm_90; else kRegs).
// forward and fused give the same lse / losses bits within one variant, not across variants; the
// backward does not depend on it. The default: DT_CE_VARIANT=stream|regs|tma if set, else kTma. Set by
// bench_dense_ops and the GPU tests to compare them; a process should not switch between a forward and
// the backward that uses its lse (the gradient would still be right, only not bitwise the fused one).
enum class CrossEntropyVariant : int { kStream = 0, kRegs = 1, kTma = 2 };
inline constexpr CrossEntropyVariant kCrossEntropyVariants[] = {
    CrossEntropyVariant::kStream, CrossEntropyVariant::kRegs, CrossEntropyVariant::kTma};
const char* cross_entropy_variant_name(CrossEntropyVariant v);  // "stream", "regs", "tma"
CrossEntropyVariant cross_entropy_variant();                     // throws for an unknown DT_CE_VARIANT
void set_cross_entropy_variant(CrossEntropyVariant v);

// losses, lse written: fp32 max/sum over each row in one read.
void cross_entropy_forward_launch(const CrossEntropyParams& p, void* stream);
// dlogits = grad_scale (exp(logits - lse) - onehot(target)), from the saved lse.
void cross_entropy_backward_launch(const CrossEntropyParams& p, void* stream);
// Both: lse / losses as the forward's, then dlogits written over the logits (dlogits == logits is the
// intended use), the same bits as the backward's from that lse.
void cross_entropy_fused_launch(const CrossEntropyParams& p, void* stream);

}  // namespace dense_mm_cuda
}  // namespace dt
